"""Device-wide merge sort: ``make_merge_sort``, the sorter object, and ``merge_sort``.

Sorts keys (and values that travel with them) by a comparator ``op(a, b) -> bool``
meaning "a goes before b": ``OpKind.LESS`` (ascending), ``OpKind.GREATER``
(descending), a Python callable compiled for the device, or a ``RawOp`` with the
signature ``void name(void* a, void* b, unsigned char* result)``. The sort is stable:
items that compare equal keep their input order. Keys may be structs (with a Python or
raw comparator); values of any dtype are moved as opaque bytes. ``d_out_keys`` may be
``d_in_keys`` itself (and ``d_out_values`` ``d_in_values``) to sort in place.

The inputs may be iterators (``CountingIterator``, ``TransformIterator``,
``PermutationIterator``, ``ReverseIterator``, ``ZipIterator``, ...): the first kernel reads
``d_in_keys`` and ``d_in_values`` through them, so ``d_in_values=CountingIterator(np.int64(0))``
gives a stable argsort without an index array. Their items must be of the output arrays'
dtype (or, for structs, of its layout: a ZipIterator's items into an array of gpu_structs),
or numbers numpy's ``same_kind`` rule casts to it, converted as they are read (the keys are
sorted in the output's type, as CUB sorts in its output's value type).
Outputs are arrays; an iterator must not read from the outputs' memory (there is no in-place
sort of an iterator). An object built for an iterator takes, at each call, any iterator of
the same kind (its state, such as a counting start or the arrays inside, may differ).

A Python comparator that captures device arrays (a closure variable, a global or a default
argument holding a CuPy array, read inside the comparator) reads the arrays bound when each
call is made: they travel as the comparator's state in the kernel parameters, are never
compiled in, and rebinding one compiles nothing new (``op`` must then be given at each call).

Host dispatch (ours, mirroring CUB's ``dispatch_merge_sort.cuh``): one block-sort
kernel sorts each tile; then ceil(log2(tiles)) rounds of a partition kernel (merge-path
split points) and a merge kernel double the sorted run length, ping-ponging between the
output and a scratch copy in temporary storage so that the last round lands in the
output. Tile size and CUB's virtual-shared-memory needs (for large types) come from the
compiled code's exported policy; problems of more than 2^31 - 1 items use a second
build with 64-bit offsets.
"""

from __future__ import annotations

from typing import Any

from cuprims._build.results import OpInput
from cuprims._codegen.common import op_symbol
from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims.algorithms.arguments import keyword_checked
from cuprims.algorithms.common import Loaded
from cuprims.algorithms.merge_sort.source import merge_sort_source
from cuprims.algorithms.skeleton import description, functor_size, functor_state
from cuprims.algorithms.sort_base import NARROW_MAX_ITEMS, SortAlgorithm, SortCall, SortDescription, SortPlan
from cuprims.algorithms.sort_common import align_base, temp_layout
from cuprims.algorithms.sort_source import check_comparator_builtin
from cuprims.op import OpSpec, op_spec
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ArrayOrProxy, ComputeCapabilityLike, DeviceArrayLike,
                            OperatorLike, StreamLike)

_TRUE, _FALSE = b"\1", b"\0"

__all__ = ["MergeSort", "make_merge_sort", "merge_sort"]


@description
class MergeSortDescription(SortDescription):
    """A merge sort: keys (and values, or None) and the comparator."""

    op: OpSpec
    wide_offsets: bool = False

    def __post_init__(self) -> None:
        if self.op.kind == "builtin":
            check_comparator_builtin(self.op, self.key)

    def source(self, arch: int) -> Source:
        return merge_sort_source(key=self.key, value=self.value, op=self.op, wide_offsets=self.wide_offsets,
                                 arch=arch, keys_in=self.d_in_keys, values_in=self.d_in_values)

    def _link(self) -> tuple[OpInput, ...]:
        # the comparator, then the operators inside the input iterators (the order of _objects)
        own = () if self.op.kind == "builtin" else (
            OpInput(op_symbol(self.op, "cuprims_op_0"), self.op, (self.key, self.key), None),)
        values = () if self.d_in_values is None else self.d_in_values.linked_ops()
        return own + self.d_in_keys.linked_ops() + values

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        off, f = self.offset_kind, functor_size(self.op)
        values_in = "ptr" if self.d_in_values is None else self.d_in_values.param
        return (
            # block sort: ping, keys in, values in (pointers or iterator states), keys out, values
            # out, count, scratch keys, scratch values, comparator, vsmem
            (1, self.d_in_keys.param, values_in, "ptr", "ptr", off, "ptr", "ptr", f, "ptr"),
            # partition: ping, keys ping, keys pong, count, partitions, partition array,
            # comparator, merged tiles target, tile items
            (1, "ptr", "ptr", off, off, "ptr", f, off, "i32"),
            # merge: ping, keys ping, values ping, count, keys pong, values pong, comparator,
            # partition array, merged tiles target, vsmem
            (1, "ptr", "ptr", off, "ptr", "ptr", f, "ptr", off, "ptr"),
        )


class _Plan(SortPlan):
    """The three kernels, block and tile sizes, and CUB's virtual shared memory per block."""

    __slots__ = ("block_sort", "partition", "merge", "threads", "tile", "vsmem", "partition_threads")

    def __init__(self, loaded: Loaded, kernel_params: tuple[tuple[Any, ...], ...]):
        super().__init__(loaded, kernel_params)
        meta = loaded.meta
        self.block_sort, self.partition, self.merge = loaded.handles
        self.threads = meta["threads"]
        self.tile = meta["threads"] * meta["items"]
        self.vsmem = max(meta["block_sort_vsmem"], meta["merge_vsmem"])
        self.partition_threads = meta["partition_threads"]


class MergeSort(SortAlgorithm):
    """A stable merge sort by a comparator, for fixed key and value dtypes (what
    :func:`make_merge_sort` returns): ``temp_storage=None`` yields the scratch size, a
    buffer sorts ``num_items`` keys (and values) on ``stream``.
    """

    desc: MergeSortDescription
    _plan_class = _Plan
    _in_place = True
    _iterators = True

    _last_layout: tuple = (-1, None, None, 0)  # (n, plan, layout, bytes) of the last call

    def _temp_bytes(self, plan: _Plan, call: SortCall) -> int:
        n = call.n
        last = self._last_layout
        if last[0] == n and last[1] is plan:
            call.layout = last[2]
            return last[3]
        num_tiles = -(-n // plan.tile)
        offsets, needed = temp_layout(((1 + num_tiles) * plan.offset_size, n * self._key_size, n * self._value_size,
                                       num_tiles * plan.vsmem))
        call.layout = (offsets, num_tiles)
        self._last_layout = (n, plan, call.layout, needed)
        return needed

    def _dispatch(self, plan: _Plan, call: SortCall, temp: int, s: int) -> None:
        (offsets, num_tiles), n, state = call.layout, call.n, call.state
        k_in, v_in, k_out, v_out = call.k_in, call.v_in, call.k_out, call.v_out
        base = align_base(temp)
        partitions, keys_tmp, values_tmp, vsmem = [base + o for o in offsets]
        if not self._value_size:
            values_tmp = 0
        if not plan.vsmem:
            vsmem = 0
        num_passes = (num_tiles - 1).bit_length()  # ceil(log2(num_tiles))
        ping = num_passes % 2 == 0
        launch = driver.launch
        p_sort, p_part, p_merge = plan.packs
        launch(plan.block_sort, num_tiles, plan.threads, s,
               p_sort.pack(_TRUE if ping else _FALSE, k_in, v_in, k_out, v_out, n, keys_tmp, values_tmp, state, vsmem))
        num_partitions = num_tiles + 1
        part_grid = -(-num_partitions // plan.partition_threads)
        for pass_ in range(num_passes):
            target = 2 << pass_
            flag = _TRUE if ping else _FALSE
            launch(plan.partition, part_grid, plan.partition_threads, s,
                   p_part.pack(flag, k_out, keys_tmp, n, num_partitions, partitions, state, target, plan.tile))
            launch(plan.merge, num_tiles, plan.threads, s,
                   p_merge.pack(flag, k_out, v_out, n, keys_tmp, values_tmp, state, partitions, target, vsmem))
            ping = not ping

    def _run(self, temp_storage: Any, d_in_keys: Any, d_in_values: Any, d_out_keys: Any, d_out_values: Any,
             num_items: Any, op: Any, stream: Any, one_shot: bool) -> int | None:
        call, memo = self._bound_call(d_in_keys, d_out_keys, d_in_values, d_out_values, num_items)
        n = call.n
        if n == 0:
            return 1 if temp_storage is None and not one_shot else None
        spec = self.desc.op
        # a RawOp's state, or the arrays a Python comparator captures, read from it now
        call.state = functor_state(spec, op) if spec.state_size else self._state
        return self._execute(temp_storage, stream, one_shot, call, (op, d_in_keys, d_in_values),
                             1 if n > NARROW_MAX_ITEMS else 0, memo)

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in_keys: ArrayOrIterator,
                 d_in_values: ArrayOrIterator | None, d_out_keys: DeviceArrayLike, d_out_values: DeviceArrayLike | None,
                 num_items: int, op: OperatorLike, stream: StreamLike | None = None) -> int | None:
        """Sort (or, with ``temp_storage=None``, return the temporary bytes needed)."""
        return self._run(temp_storage, d_in_keys, d_in_values, d_out_keys, d_out_values, num_items, op, stream,
                         False)


# ------------------------------------------------------------------- public functions

def _describe(d_in_keys: Any, d_in_values: Any, d_out_keys: Any, d_out_values: Any, op: Any) -> MergeSortDescription:
    """Check the build arguments and describe the sort (captured arrays are comparator state)."""
    spec = op_spec(op, bind_captures=True)
    value_dt = MergeSort._dtypes(d_in_keys, d_out_keys, d_in_values, d_out_values)[1]
    kinds = MergeSort._kinds(d_in_keys, d_out_keys, d_in_values, d_out_values, value_dt)
    return MergeSortDescription(*kinds, spec)


@keyword_checked
def make_merge_sort(*, d_in_keys: ArrayIteratorOrProxy, d_in_values: ArrayIteratorOrProxy | None = None,
                    d_out_keys: ArrayOrProxy, d_out_values: ArrayOrProxy | None = None, op: OperatorLike,
                    compute_capability: ComputeCapabilityLike | None = None) -> MergeSort:
    """Build (or fetch from cache) a stable merge sort of keys (and values) by ``op``.

    Args:
        d_in_keys: device array of keys (any dtype, structs too), a ``ProxyArray``, or an
            input iterator (``TransformIterator``, ``ReverseIterator``, ``PermutationIterator``,
            ``ZipIterator``, ...) whose items are of ``d_out_keys``' dtype (or struct layout), or
            numbers numpy's ``same_kind`` rule casts to it (converted as they are read: the
            keys are sorted in ``d_out_keys``' type, as CUB sorts).
        d_in_values: device array of values of any dtype, an input iterator of
            ``d_out_values``' dtype or of numbers cast to it as the keys are
            (``CountingIterator(np.int64(0))``: the sorting permutation, an argsort), or None.
        d_out_keys: device array for the sorted keys (``d_in_keys`` itself, an array, sorts
            in place). Never an iterator.
        d_out_values: device array for the sorted values, or None. Never an iterator.
        op: ``OpKind.LESS``, ``OpKind.GREATER``, a Python callable ``op(a, b) -> bool``
            meaning a comes before b (device arrays it captures are read at each call), or a
            ``RawOp``.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray(np.random.randint(0, 100, 10000).astype(np.int32))
        sorter = cuprims.make_merge_sort(d_in_keys=keys, d_out_keys=keys, op=lambda a, b: a < b)
        nbytes = sorter(temp_storage=None, d_in_keys=keys, d_in_values=None, d_out_keys=keys,
                        d_out_values=None, num_items=keys.size, op=lambda a, b: a < b)
        tmp = cp.empty(nbytes, np.uint8)
        sorter(temp_storage=tmp, d_in_keys=keys, d_in_values=None, d_out_keys=keys,
               d_out_values=None, num_items=keys.size, op=lambda a, b: a < b)
    """
    desc = MergeSort._described(_describe, d_in_keys, d_in_values, d_out_keys, d_out_values, op)
    return MergeSort._make(desc, compute_capability, (op, d_in_keys, d_in_values))


@keyword_checked
def merge_sort(*, d_in_keys: ArrayOrIterator, d_in_values: ArrayOrIterator | None = None,
               d_out_keys: DeviceArrayLike, d_out_values: DeviceArrayLike | None = None, num_items: int,
               op: OperatorLike, stream: StreamLike | None = None) -> None:
    """Stable-sort ``num_items`` keys (and their values) by ``op``, in one call.

    Temporary storage is allocated and freed on ``stream`` (stream-ordered), so the call
    never synchronises.

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray(np.array([3, 1, 2], dtype=np.int32))
        vals = cp.asarray(np.array([30, 10, 20], dtype=np.float32))
        cuprims.merge_sort(d_in_keys=keys, d_in_values=vals, d_out_keys=keys, d_out_values=vals,
                           num_items=3, op=cuprims.OpKind.LESS)
        assert vals.tolist() == [10.0, 20.0, 30.0]
    """
    obj = MergeSort._make(MergeSort._described(_describe, d_in_keys, d_in_values, d_out_keys, d_out_values, op),
                          None, (op, d_in_keys, d_in_values))
    obj._run(None, d_in_keys, d_in_values, d_out_keys, d_out_values, num_items, op, stream, True)
