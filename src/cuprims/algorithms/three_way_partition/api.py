"""Three-way partition: ``make_three_way_partition``, the object, and ``three_way_partition``.

Each item of ``d_in`` goes to one of three outputs, in CUB's order: the items for which
``select_first_part_op`` holds go to ``d_first_part_out`` (in input order); of the rest,
those for which ``select_second_part_op`` holds go to ``d_second_part_out`` (in input
order); the others go to ``d_unselected_out``, in input order too.
``d_num_selected_out[0]`` and ``[1]`` receive the first two counts, on the device. Predicates are Python callables ``f(x) -> bool`` or RawOps; they may capture
device arrays (read at each call). ``OpKind.IDENTITY`` tests each item's own truth value.

Host dispatch (ours, mirroring CUB's): the input is cut into partitions of up to 2^31 - 1
items (CUB's kernel counts within one in int32); for each, an init kernel readies the tile
states and zeroes the counts, then CUB's kernel handles one tile per block with decoupled
look-back. Partitions after the first read the running counts the previous one left in
temporary storage (two buffers of three counters, taking turns); the last writes
``d_num_selected_out``.
"""

from __future__ import annotations

from typing import Any

from cuprims._build.results import OpInput
from cuprims._codegen.common import op_symbol
from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims.algorithms.arguments import ArgKind, describe, keyword_checked, linked_objects
from cuprims.algorithms.common import check_num_items
from cuprims.algorithms.lookback import (CONTEXT_SIZE, LookbackAlgorithm, LookbackPlan, context_bytes, count_output,
                                         output_like, partitioned_temp_bytes, partitions, predicate, ready_tiles)
from cuprims.algorithms.skeleton import Description, description, functor_size, functor_state
from cuprims.algorithms.three_way_partition.source import three_way_partition_source
from cuprims.op import OpSpec
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ArrayOrProxy, ComputeCapabilityLike, DeviceArrayLike,
                            OperatorLike, StreamLike)

__all__ = ["ThreeWayPartition", "make_three_way_partition", "three_way_partition"]

_INIT_THREADS = 256          # CUB's init block for this algorithm
_PARTITION_ITEMS = (1 << 31) - 1   # CUB's per-partition offsets are int32
_COUNTER_BYTES = 2 * 3 * 8         # two buffers of (first, second, rejected) running int64 counts
_OUTPUTS = ("d_first_part_out", "d_second_part_out", "d_unselected_out")


@description
class ThreeWayPartitionDescription(Description):
    """Input, the three outputs, the counts' type, and the two predicates."""

    d_in: ArgKind
    first: ArgKind
    second: ArgKind
    unselected: ArgKind
    num_selected: ArgKind
    first_op: OpSpec
    second_op: OpSpec

    @property
    def operator(self) -> None:
        return None  # two operators, both listed by _link (see ThreeWayPartition._objects)

    def source(self, arch: int) -> Source:
        return three_way_partition_source(d_in=self.d_in, first=self.first, second=self.second,
                                          unselected=self.unselected, num_selected=self.num_selected,
                                          first_op=self.first_op, second_op=self.second_op, arch=arch)

    def _link(self) -> tuple[OpInput, ...]:
        own = tuple(OpInput(op_symbol(op, f"cuprims_op_{k}"), op, (self.d_in.value,), None)
                    for k, op in enumerate((self.first_op, self.second_op)) if op.kind != "builtin")
        return own + tuple(o for a in (self.d_in, self.first, self.second, self.unselected) for o in a.linked_ops())

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        return (
            ("ptr", "i32", "ptr"),     # init: tile state, tiles, counts
            # sweep: input, three outputs, counts, tile state, two predicates, items, tiles, context
            (self.d_in.param, self.first.param, self.second.param, self.unselected.param, "ptr", "ptr",
             functor_size(self.first_op), functor_size(self.second_op), "i32", "i32", CONTEXT_SIZE),
        )


def _describe(d_in: Any, first: Any, second: Any, unselected: Any, num_selected: Any, first_op: Any,
              second_op: Any) -> ThreeWayPartitionDescription:
    in_arg = describe(d_in, "d_in", iterators=True)
    first_out, second_out, unselected_out = (output_like(x, name, in_arg)
                                             for x, name in zip((first, second, unselected), _OUTPUTS))
    count = count_output(num_selected, "d_num_selected_out", "a device array of two 32- or 64-bit integers")
    return ThreeWayPartitionDescription(in_arg, first_out, second_out, unselected_out, count,
                                        predicate(first_op, "select_first_part_op"),
                                        predicate(second_op, "select_second_part_op"))


class ThreeWayPartition(LookbackAlgorithm):
    """A three-way partition for fixed item types and predicates (what
    :func:`make_three_way_partition` returns): ``temp_storage=None`` asks for the bytes it
    needs, a buffer runs it on ``stream``."""

    desc: ThreeWayPartitionDescription

    def _objects(self, first_op: Any = None, second_op: Any = None, *iterators: Any) -> list[Any]:
        # as _link lists them: a built-in predicate (OpKind.IDENTITY) is not linked
        ops = zip((first_op, second_op), (self.desc.first_op, self.desc.second_op))
        return [obj for obj, spec in ops if spec.kind != "builtin"] + linked_objects(*iterators)

    # args: (p_in, p_first, p_second, p_unselected, p_counts, state1, state2, n)
    def _temp_bytes(self, plan: LookbackPlan, args: tuple) -> int:
        return partitioned_temp_bytes(plan, args[7], _PARTITION_ITEMS, _COUNTER_BYTES)

    def _dispatch(self, plan: LookbackPlan, args: tuple, temp: int, stream: int) -> None:
        p_in, p_first, p_second, p_unsel, p_counts, s1, s2, n = args
        for part in partitions(plan, n, temp, _PARTITION_ITEMS, _COUNTER_BYTES):
            tile_state = ready_tiles(plan, self._init_params, temp, part.tiles, p_counts, stream, _INIT_THREADS)
            if not part.size:
                return
            context = context_bytes(part.first, part.last, part.offset, part.counts_in, part.counts_out)
            driver.launch(plan.sweep, part.tiles, plan.threads, stream,
                          self._sweep_params.pack(p_in, p_first, p_second, p_unsel, p_counts, tile_state, s1, s2,
                                                  part.size, part.tiles, context))

    def _run(self, temp_storage: Any, d_in: Any, first: Any, second: Any, unselected: Any, num_selected: Any,
             first_op: Any, second_op: Any, num_items: Any, stream: Any, one_shot: bool) -> int | None:
        n = check_num_items(num_items)
        d = self.desc
        args = (d.d_in.bind(d_in, n), d.first.bind(first, n), d.second.bind(second, n),
                d.unselected.bind(unselected, n), d.num_selected.bind(num_selected, 2, None),
                functor_state(d.first_op, first_op, "select_first_part_op"),
                functor_state(d.second_op, second_op, "select_second_part_op"), n)
        return self._execute(temp_storage, stream, one_shot, args, (first_op, second_op, d_in, first, second,
                                                                    unselected))

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in: ArrayOrIterator,
                 d_first_part_out: ArrayOrIterator, d_second_part_out: ArrayOrIterator,
                 d_unselected_out: ArrayOrIterator, d_num_selected_out: DeviceArrayLike,
                 select_first_part_op: OperatorLike | None = None, select_second_part_op: OperatorLike | None = None,
                 num_items: int, stream: StreamLike | None = None) -> int | None:
        """Run (or, with ``temp_storage=None``, return the temporary bytes needed)."""
        return self._run(temp_storage, d_in, d_first_part_out, d_second_part_out, d_unselected_out,
                         d_num_selected_out, select_first_part_op, select_second_part_op, num_items, stream, False)


@keyword_checked
def make_three_way_partition(*, d_in: ArrayIteratorOrProxy, d_first_part_out: ArrayIteratorOrProxy,
                             d_second_part_out: ArrayIteratorOrProxy, d_unselected_out: ArrayIteratorOrProxy,
                             d_num_selected_out: ArrayOrProxy, select_first_part_op: OperatorLike,
                             select_second_part_op: OperatorLike,
                             compute_capability: ComputeCapabilityLike | None = None) -> ThreeWayPartition:
    """Build (or fetch from cache) a three-way partition.

    Args:
        d_in: device array or iterator of items.
        d_first_part_out, d_second_part_out, d_unselected_out: device arrays (room for
            ``num_items``) or output iterators, of the input's type or of one numpy's
            ``same_kind`` rule casts it to (converted at the store, as C++ converts).
        d_num_selected_out: a device array of two int32/int64 (or unsigned) counters.
        select_first_part_op, select_second_part_op: Python callables ``f(x) -> bool`` or
            RawOps.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(10, dtype=np.int32)
        a, b, c = (cp.empty(10, np.int32) for _ in range(3))
        counts = cp.empty(2, np.int64)
        kw = dict(d_in=x, d_first_part_out=a, d_second_part_out=b, d_unselected_out=c, d_num_selected_out=counts,
                  select_first_part_op=lambda v: v < 3, select_second_part_op=lambda v: v > 6)
        p = cuprims.make_three_way_partition(**kw)
        tmp = cp.empty(p(temp_storage=None, num_items=10, **kw), np.uint8)
        p(temp_storage=tmp, num_items=10, **kw)      # counts == [3, 3]
    """
    desc = ThreeWayPartition._described(_describe, d_in, d_first_part_out, d_second_part_out, d_unselected_out,
                                        d_num_selected_out, select_first_part_op, select_second_part_op)
    return ThreeWayPartition._make(desc, compute_capability, (select_first_part_op, select_second_part_op, d_in,
                                                              d_first_part_out, d_second_part_out, d_unselected_out))


@keyword_checked
def three_way_partition(*, d_in: ArrayOrIterator, d_first_part_out: ArrayOrIterator,
                        d_second_part_out: ArrayOrIterator, d_unselected_out: ArrayOrIterator,
                        d_num_selected_out: DeviceArrayLike, select_first_part_op: OperatorLike,
                        select_second_part_op: OperatorLike, num_items: int, stream: StreamLike | None = None) -> None:
    """Three-way partition in one call (temporary storage allocated and freed on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(10, dtype=np.int32)
        a, b, c, counts = cp.empty(10, np.int32), cp.empty(10, np.int32), cp.empty(10, np.int32), \\
            cp.empty(2, np.int64)
        cuprims.three_way_partition(d_in=x, d_first_part_out=a, d_second_part_out=b, d_unselected_out=c,
                                    d_num_selected_out=counts, select_first_part_op=lambda v: v < 3,
                                    select_second_part_op=lambda v: v > 6, num_items=10)
        # counts == [3, 3]; a[:3] == [0, 1, 2]; b[:3] == [7, 8, 9]; c[:4] == [3, 4, 5, 6]
    """
    obj = make_three_way_partition.__wrapped__(
        d_in=d_in, d_first_part_out=d_first_part_out, d_second_part_out=d_second_part_out,
        d_unselected_out=d_unselected_out, d_num_selected_out=d_num_selected_out,
        select_first_part_op=select_first_part_op, select_second_part_op=select_second_part_op)
    obj._run(None, d_in, d_first_part_out, d_second_part_out, d_unselected_out, d_num_selected_out,
             select_first_part_op, select_second_part_op, num_items, stream, True)
