"""Find-if: ``make_find_if``, the object, and ``find_if``.

The index of the first item of ``d_in`` for which ``cond`` holds is written to
``d_out_index[0]``; ``num_items`` when there is none (as ``numpy.argmax`` of the
predicate's flags would be, except for that case). The search stops reading early: tiles
that start after a match already found are not read.

Host dispatch (ours; kernels in ``algorithms/find_if/cuprims_find_if.cuh``): an init kernel
sets the index to ``num_items``; a persistent search grid (as many blocks as fit on the
device at once) takes tiles in increasing order per block and lowers the index with an
atomic minimum at each match. No temporary storage.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cuprims._build.results import OpInput
from cuprims._codegen.common import op_symbol
from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims.algorithms.arguments import ArgKind, describe, keyword_checked
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.find_if.source import find_if_source
from cuprims.algorithms.lookback import count_output, predicate
from cuprims.algorithms.skeleton import Algorithm, Description, Plan, description, functor_size, functor_state
from cuprims.errors import ArgumentError
from cuprims.op import OpSpec
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ComputeCapabilityLike, DeviceArrayLike,
                            OperatorLike, StreamLike)

__all__ = ["FindIf", "make_find_if", "find_if"]

_INDEX_EXPECTED = "a device array of a 32- or 64-bit integer type (int32, uint32, int64 or uint64)"


@description
class FindIfDescription(Description):
    """The input, the index output and the predicate."""

    d_in: ArgKind
    d_out_index: ArgKind
    op: OpSpec

    def source(self, arch: int) -> Source:
        return find_if_source(d_in=self.d_in, d_out_index=self.d_out_index, op=self.op, arch=arch)

    def _link(self) -> tuple[OpInput, ...]:
        # a built-in predicate (OpKind.IDENTITY) is C++ in the unit: nothing to link
        own = (OpInput(op_symbol(self.op, "cuprims_op_0"), self.op, (self.d_in.value,), None),) \
            if self.op.kind != "builtin" else ()
        return own + self.d_in.linked_ops()

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        return (
            ("ptr", "i64"),   # init: index, items
            # search: input, index, predicate, items, tiles
            (self.d_in.param, "ptr", functor_size(self.op), "i64", "i64"),
        )


class _Plan(Plan):
    """The two kernels, the tile and the persistent grid."""

    __slots__ = ("init", "search", "threads", "tile_items", "grid", "device")

    def __init__(self, loaded: Loaded):
        self.init, self.search = loaded.handles
        self.threads = loaded.meta["threads"]
        self.tile_items = self.threads * loaded.meta["items"]
        occupancy = loaded.module.max_active_blocks(loaded.names[1], self.threads)
        self.grid = max(1, occupancy) * driver.sm_count(loaded.device)


def _describe(d_in: Any, d_out_index: Any, cond: Any) -> FindIfDescription:
    return FindIfDescription(describe(d_in, "d_in", iterators=True),
                             count_output(d_out_index, "d_out_index", _INDEX_EXPECTED), predicate(cond, "cond"))


class FindIf(Algorithm):
    """Finds the first item for which a predicate holds; built for fixed types and predicate
    by :func:`make_find_if`. It needs no temporary storage (the query reports 1 byte, the
    least any query reports)."""

    desc: FindIfDescription

    def _setup(self) -> None:
        self._stateful = bool(self.desc.op.state_size)
        index = self.desc.d_out_index.value.dtype
        self._index_max = int(np.iinfo(index).max)

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded)

    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        return 0

    # args: (p_in, p_index, cond state, n)
    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        p_in, p_index, state, n = args
        init_params, search_params = self._packs_of(0)
        driver.launch(plan.init, 1, 1, stream, init_params.pack(p_index, n))
        if n:
            tiles = -(-n // plan.tile_items)
            driver.launch(plan.search, min(plan.grid, tiles), plan.threads, stream,
                          search_params.pack(p_in, p_index, state, n, tiles))

    def _run(self, temp_storage: Any, d_in: Any, d_out_index: Any, cond: Any, num_items: Any, stream: Any,
             one_shot: bool) -> int | None:
        n = check_num_items(num_items)
        d = self.desc
        if n > self._index_max:
            raise ArgumentError("d_out_index", f"an index type that holds num_items = {n} (the answer when no item "
                                "matches)", d.d_out_index.value.dtype)
        args = (d.d_in.bind(d_in, n), d.d_out_index.bind(d_out_index, 1),
                functor_state(d.op, cond, "cond") if self._stateful else self._state, n)
        return self._execute(temp_storage, stream, one_shot, args, (cond, d_in), 0)

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in: ArrayOrIterator, d_out_index: DeviceArrayLike,
                 num_items: int, cond: OperatorLike | None = None, stream: StreamLike | None = None) -> int | None:
        """Run (or, with ``temp_storage=None``, return the temporary bytes needed). A predicate
        that captures device arrays must be passed again, with the arrays of this call."""
        return self._run(temp_storage, d_in, d_out_index, cond, num_items, stream, False)


@keyword_checked
def make_find_if(*, d_in: ArrayIteratorOrProxy, d_out_index: ArrayIteratorOrProxy, cond: OperatorLike,
                 compute_capability: ComputeCapabilityLike | None = None) -> FindIf:
    """Build (or fetch from cache) a find-if.

    Args:
        d_in: device array or iterator of items.
        d_out_index: device array of int32, uint32, int64 or uint64 whose first element
            receives the index of the first item for which ``cond`` holds, or ``num_items``
            when there is none (the type must hold ``num_items``).
        cond: a Python callable ``f(x) -> bool`` (it may capture device arrays), a RawOp,
            or ``OpKind.IDENTITY`` (an item's own truth value).
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(1000, dtype=np.int32); where = cp.empty(1, np.int64)
        f = cuprims.make_find_if(d_in=x, d_out_index=where, cond=lambda v: v * v > 500)
        tmp = cp.empty(f(temp_storage=None, d_in=x, d_out_index=where, num_items=1000), np.uint8)
        f(temp_storage=tmp, d_in=x, d_out_index=where, num_items=1000)
        assert int(where[0]) == 23
    """
    desc = FindIf._described(_describe, d_in, d_out_index, cond)
    return FindIf._make(desc, compute_capability, (cond, d_in))


@keyword_checked
def find_if(*, d_in: ArrayOrIterator, d_out_index: DeviceArrayLike, cond: OperatorLike, num_items: int,
            stream: StreamLike | None = None) -> None:
    """Find-if in one call.

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray([3.0, np.nan, 1.0], np.float32); where = cp.empty(1, np.int32)
        cuprims.find_if(d_in=x, d_out_index=where, cond=lambda v: v != v, num_items=3)   # the first NaN
        assert int(where[0]) == 1
    """
    obj = make_find_if.__wrapped__(d_in=d_in, d_out_index=d_out_index, cond=cond)
    obj._run(None, d_in, d_out_index, cond, num_items, stream, True)
