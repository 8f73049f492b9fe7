"""For-each: ``make_for_each``, the object, and ``for_each``.

``op`` is called once on every item of ``d_in`` for its side effects: it writes through the
device arrays it captures (a scatter, a histogram of one's own with atomics, a flag set),
and whatever it returns is dropped. The calls run in parallel in no particular order, so
two calls that write the same place must do so atomically (``numba.cuda.atomic``).

Host dispatch (ours; kernel in ``algorithms/for_each/cuprims_for_each.cuh``): one launch,
one tile per block. No temporary storage.
"""

from __future__ import annotations

from typing import Any

from cuprims._build.results import OpInput
from cuprims._codegen.common import op_symbol
from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims.algorithms.arguments import ArgKind, describe, keyword_checked
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.for_each.source import for_each_source
from cuprims.algorithms.skeleton import Algorithm, Description, Plan, description, functor_size, functor_state
from cuprims.errors import ArgumentError
from cuprims.op import OpSpec, op_spec
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ComputeCapabilityLike, DeviceArrayLike,
                            OperatorLike, StreamLike)

__all__ = ["ForEach", "make_for_each", "for_each"]

_MAX_GRID = (1 << 31) - 1
_OP_EXPECTED = "a Python callable f(x) (it may capture device arrays and write to them) or a RawOp"


@description
class ForEachDescription(Description):
    """The input and the operator."""

    d_in: ArgKind
    op: OpSpec

    def source(self, arch: int) -> Source:
        return for_each_source(d_in=self.d_in, op=self.op, arch=arch)

    def _link(self) -> tuple[OpInput, ...]:
        return (OpInput(op_symbol(self.op, "cuprims_op_0"), self.op, (self.d_in.value,), None, ignores_result=True),
                ) + self.d_in.linked_ops()

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        return ((self.d_in.param, functor_size(self.op), "i64", "i64"),)   # input, operator, items, tiles


class _Plan(Plan):
    """The kernel and the tile shape."""

    __slots__ = ("kernel", "threads", "tile_items", "device")

    def __init__(self, loaded: Loaded):
        (self.kernel,) = loaded.handles
        self.threads = loaded.meta["threads"]
        self.tile_items = self.threads * loaded.meta["items"]


def _describe(d_in: Any, op: Any) -> ForEachDescription:
    d_in_kind = describe(d_in, "d_in", iterators=True)
    if op is None:
        raise ArgumentError("op", _OP_EXPECTED, None)
    spec = op_spec(op, bind_captures=True)
    if spec.kind == "builtin":   # a built-in has no side effect: calling it would do nothing
        raise ArgumentError("op", _OP_EXPECTED + " (a built-in OpKind has no side effect)", op)
    return ForEachDescription(d_in_kind, spec)


class ForEach(Algorithm):
    """Calls an operator on every item for its side effects; built for a fixed item type and
    operator by :func:`make_for_each`. It needs no temporary storage (the query reports 1
    byte, the least any query reports)."""

    desc: ForEachDescription

    def _setup(self) -> None:
        self._stateful = bool(self.desc.op.state_size)

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded)

    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        return 0

    # args: (p_in, op state, n)
    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        p_in, state, n = args
        if not n:
            return
        tiles = -(-n // plan.tile_items)
        (params,) = self._packs_of(0)
        driver.launch(plan.kernel, min(tiles, _MAX_GRID), plan.threads, stream, params.pack(p_in, state, n, tiles))

    def _run(self, temp_storage: Any, d_in: Any, op: Any, num_items: Any, stream: Any, one_shot: bool) -> int | None:
        n = check_num_items(num_items)
        d = self.desc
        args = (d.d_in.bind(d_in, n), functor_state(d.op, op) if self._stateful else self._state, n)
        return self._execute(temp_storage, stream, one_shot, args, (op, d_in), 0)

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in: ArrayOrIterator, num_items: int,
                 op: OperatorLike | None = None, stream: StreamLike | None = None) -> int | None:
        """Run (or, with ``temp_storage=None``, return the temporary bytes needed). An operator
        that captures device arrays must be passed again, with the arrays of this call."""
        return self._run(temp_storage, d_in, op, num_items, stream, False)


@keyword_checked
def make_for_each(*, d_in: ArrayIteratorOrProxy, op: OperatorLike,
                  compute_capability: ComputeCapabilityLike | None = None) -> ForEach:
    """Build (or fetch from cache) a for-each.

    Args:
        d_in: device array or iterator of items (a ``CountingIterator`` gives each call its
            index).
        op: a Python callable ``f(x)`` called on every item for its side effects: it may
            capture device arrays and write to them; what it returns is dropped. Or a RawOp
            (``void f(void* x, void* ignored)``).
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray([5, 6, 7, 8], np.int32); perm = cp.asarray([2, 0, 3, 1], np.int32)
        y = cp.zeros(4, np.int32)

        def scatter(i):
            y[perm[i]] = x[i]

        index = cuprims.CountingIterator(np.int32(0))
        f = cuprims.make_for_each(d_in=index, op=scatter)
        tmp = cp.empty(f(temp_storage=None, d_in=index, num_items=4, op=scatter), np.uint8)
        f(temp_storage=tmp, d_in=index, num_items=4, op=scatter)   # the operator again: its arrays
        assert y.get().tolist() == [6, 8, 5, 7]
    """
    desc = ForEach._described(_describe, d_in, op)
    return ForEach._make(desc, compute_capability, (op, d_in))


@keyword_checked
def for_each(*, d_in: ArrayOrIterator, op: OperatorLike, num_items: int, stream: StreamLike | None = None) -> None:
    """For-each in one call.

    Example::

        import cupy as cp, numpy as np, numba.cuda, cuprims
        x = cp.asarray([0, 3, 3, 1, 3], np.int32); counts = cp.zeros(4, np.int32)

        def count(v):
            numba.cuda.atomic.add(counts, v, 1)

        cuprims.for_each(d_in=x, op=count, num_items=5)
        assert counts.get().tolist() == [1, 1, 0, 3]
    """
    obj = make_for_each.__wrapped__(d_in=d_in, op=op)
    obj._run(None, d_in, op, num_items, stream, True)
