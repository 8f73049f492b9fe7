"""Select (stream compaction): ``make_select``, the object, and ``select``.

The items of ``d_in`` for which ``cond`` holds are written to ``d_out`` in input order;
their number goes to ``d_num_selected_out[0]``, on the device (nothing synchronises).
``cond`` is a Python callable ``f(x) -> bool`` or a RawOp; it may capture device arrays,
read at each call, and write to them (as a side effect: each item is tested once).
``OpKind.IDENTITY`` selects each item by its own truth value (nonzero, as numpy's
``bool``: a NaN is true). The
input may be an iterator; ``d_out`` an array or an output iterator, disjoint from the
input's memory.

Host dispatch (ours, mirroring CUB's): CUB's init kernel readies the tile states and
zeroes the count, then our select kernel (``algorithms/select/cuprims_select.cuh``, on CUB's
AgentSelectIf) handles one tile per block with decoupled look-back, for one partition of
up to 2^31 - 1 items. A longer input runs partition by partition in a build variant whose
kernel offsets each partition by the items and the selections before it; the running
count passes between partitions in two int64 words of temporary storage, taking turns.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cuprims._build.results import OpInput
from cuprims._codegen.common import op_symbol
from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims.algorithms.arguments import ArgKind, describe, keyword_checked
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.lookback import (LookbackAlgorithm, LookbackPlan, count_output, output_like,
                                         partitioned_temp_bytes, partitions, predicate, ready_tiles, tile_storage)
from cuprims.algorithms.select.source import PARTITION_CONTEXT, select_source
from cuprims.algorithms.skeleton import Description, description, functor_size, functor_state
from cuprims.op import OpSpec
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ArrayOrProxy, ComputeCapabilityLike, DeviceArrayLike,
                            OperatorLike, StreamLike)

__all__ = ["Select", "make_select", "select"]

_INIT_THREADS = 128
_PARTITION_ITEMS = (1 << 31) - 1  # the agent counts within a partition in int
_COUNTER_BYTES = 2 * 8            # the running count's two int64 buffers


@description
class SelectDescription(Description):
    """Input, output, the count's type, and the predicate."""

    d_in: ArgKind
    d_out: ArgKind
    num_selected: ArgKind
    op: OpSpec
    partitioned: bool = False   # the kernel for one partition of several

    def source(self, arch: int) -> Source:
        return select_source(d_in=self.d_in, d_out=self.d_out, num_selected=self.num_selected, op=self.op, arch=arch,
                             partitioned=self.partitioned)

    def variant(self, index: int) -> "SelectDescription":
        return dataclasses.replace(self, partitioned=not self.partitioned) if index else self

    def _link(self) -> tuple[OpInput, ...]:
        # a built-in predicate (OpKind.IDENTITY) is C++ in the unit: nothing to link
        own = (OpInput(op_symbol(self.op, "cuprims_op_0"), self.op, (self.d_in.value,), None),) \
            if self.op.kind != "builtin" else ()
        return own + self.d_in.linked_ops() + self.d_out.linked_ops()

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        return (
            ("ptr", "i32", "ptr"),     # init: tile state, tiles, count
            # select: input, output, count, tile state, predicate, items, tiles (, partition context)
            (self.d_in.param, self.d_out.param, "ptr", "ptr", functor_size(self.op), "i32", "i32")
            + ((PARTITION_CONTEXT.size,) if self.partitioned else ()),
        )


def _describe(d_in: Any, d_out: Any, d_num_selected_out: Any, cond: Any) -> SelectDescription:
    in_arg = describe(d_in, "d_in", iterators=True)
    return SelectDescription(in_arg, output_like(d_out, "d_out", in_arg),
                             count_output(d_num_selected_out, "d_num_selected_out"), predicate(cond, "cond"))


class Select(LookbackAlgorithm):
    """A select built for fixed types and predicate (what :func:`make_select` returns).
    Called with ``temp_storage=None`` it returns the temporary bytes it needs; with a
    buffer it compacts on ``stream``."""

    desc: SelectDescription

    def _make_plan(self, loaded: Loaded, variant: int) -> LookbackPlan:
        plan = LookbackPlan(loaded)
        if variant:
            plan.partition_params = driver.ParamPack(self.desc.variant(variant).kernel_params()[1])
        return plan

    # args: (p_in, p_out, p_count, state, n)
    def _temp_bytes(self, plan: LookbackPlan, args: tuple) -> int:
        return partitioned_temp_bytes(plan, args[4], _PARTITION_ITEMS, _COUNTER_BYTES)

    def _dispatch(self, plan: LookbackPlan, args: tuple, temp: int, stream: int) -> None:
        p_in, p_out, p_count, state, n = args
        if n <= _PARTITION_ITEMS:
            tiles, _ = tile_storage(plan, n)
            tile_state = ready_tiles(plan, self._init_params, temp, tiles, p_count, stream, _INIT_THREADS)
            if n:
                driver.launch(plan.sweep, tiles, plan.threads, stream,
                              self._sweep_params.pack(p_in, p_out, p_count, tile_state, state, n, tiles))
            return
        for part in partitions(plan, n, temp, _PARTITION_ITEMS, _COUNTER_BYTES):
            tile_state = ready_tiles(plan, self._init_params, temp, part.tiles, p_count, stream, _INIT_THREADS)
            context = PARTITION_CONTEXT.pack(part.offset, part.counts_in, part.counts_out, part.first, part.last)
            driver.launch(plan.sweep, part.tiles, plan.threads, stream, plan.partition_params.pack(
                p_in, p_out, p_count, tile_state, state, part.size, part.tiles, context))

    def _run(self, temp_storage: Any, d_in: Any, d_out: Any, d_num_selected_out: Any, cond: Any, num_items: Any,
             stream: Any, one_shot: bool) -> int | None:
        d = self.desc
        arrays, counts = (d_in, d_out, d_num_selected_out), (num_items,)
        bound = self._recall(arrays, counts)
        memo = None
        if bound is None:
            n = check_num_items(num_items)
            bound = (d.d_in.bind(d_in, n), d.d_out.bind(d_out, n), d.num_selected.bind(d_num_selected_out, 1, None))
            memo = (arrays, counts, bound)
        else:
            n = num_items
        args = (*bound, functor_state(d.op, cond, "cond"), n)  # the condition's state: read every call
        return self._execute(temp_storage, stream, one_shot, args, (cond, d_in, d_out), int(n > _PARTITION_ITEMS),
                             memo)

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in: ArrayOrIterator, d_out: ArrayOrIterator,
                 d_num_selected_out: DeviceArrayLike, cond: OperatorLike | None = None, num_items: int,
                 stream: StreamLike | None = None) -> int | None:
        """Run (or, with ``temp_storage=None``, return the temporary bytes needed)."""
        return self._run(temp_storage, d_in, d_out, d_num_selected_out, cond, num_items, stream, False)


@keyword_checked
def make_select(*, d_in: ArrayIteratorOrProxy, d_out: ArrayIteratorOrProxy, d_num_selected_out: ArrayOrProxy,
                cond: OperatorLike, compute_capability: ComputeCapabilityLike | None = None) -> Select:
    """Build (or fetch from cache) a select.

    Args:
        d_in: device array or iterator of items.
        d_out: device array (room for ``num_items``) or output iterator, of the input's type
            or of one numpy's ``same_kind`` rule casts it to (an int64 TransformIterator into
            an int32 array: each item converted at the store, as C++ converts it).
        d_num_selected_out: a one-element device array of int32/int64 (or unsigned).
        cond: a Python callable ``f(x) -> bool`` or a RawOp.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(10, dtype=np.int32); y = cp.empty(10, np.int32); count = cp.empty(1, np.int64)
        s = cuprims.make_select(d_in=x, d_out=y, d_num_selected_out=count, cond=lambda v: v % 2 == 0)
        tmp = cp.empty(s(temp_storage=None, d_in=x, d_out=y, d_num_selected_out=count, num_items=10), np.uint8)
        s(temp_storage=tmp, d_in=x, d_out=y, d_num_selected_out=count, num_items=10)  # y[:5] == [0, 2, 4, 6, 8]
    """
    desc = Select._described(_describe, d_in, d_out, d_num_selected_out, cond)
    return Select._make(desc, compute_capability, (cond, d_in, d_out))


@keyword_checked
def select(*, d_in: ArrayOrIterator, d_out: ArrayOrIterator, d_num_selected_out: DeviceArrayLike, cond: OperatorLike,
           num_items: int, stream: StreamLike | None = None) -> None:
    """Select in one call (temporary storage allocated and freed on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(100, dtype=np.int64); y = cp.empty(100, np.int64); count = cp.empty(1, np.int32)
        cuprims.select(d_in=x, d_out=y, d_num_selected_out=count, cond=lambda v: v > 90, num_items=100)
        assert int(count[0]) == 9
    """
    obj = make_select.__wrapped__(d_in=d_in, d_out=d_out, d_num_selected_out=d_num_selected_out, cond=cond)
    obj._run(None, d_in, d_out, d_num_selected_out, cond, num_items, stream, True)
