"""Segmented reduction: ``make_segmented_reduce``, the reducer object, and ``segmented_reduce``.

Segment ``i`` is ``d_in[start_offsets_in[i]:end_offsets_in[i]]``; ``d_out[i]`` receives
``h_init`` combined with its items (``h_init`` alone for an empty segment), in the type
of ``d_out``. Offsets are arrays or iterators of one integer type, for example fixed-size
segments as ``TransformIterator(CountingIterator(0), lambda i: i * size)``.

Host dispatch (ours; kernels in ``algorithms/segmented_reduce/cuprims_segmented_reduce.cuh``),
one launch or two, nothing read back from the device:

* fewer segments than half the GPU's block slots (and no hint, or a hint over four of
  CUB's block tiles): each segment is cut into whole-tile slices reduced by several blocks,
  whose partials a second kernel combines with ``h_init``: one huge segment uses the whole GPU;
* no ``max_segment_size`` hint: cuprims' adaptive kernel, which learns each segment's
  length on the device. A block of eight warps takes eight consecutive segments at a time;
  a warp reduces each segment of at most CUB's warp tile (512 float32 items) as the warp
  kernel below does, and the whole block the group's longer segments one after another
  (16-byte vector loads from each segment's first aligned item), so short segments cost a
  warp and long ones get a block, as CUB gives every segment. Every warp reads the whole
  group's offsets, so the warps agree on the long segments without a barrier: a group of
  short segments costs none. Its grid is one block per group, capped at
  :data:`ADAPTIVE_WAVES` waves of its block slots (the blocks then stride over the groups,
  fetching the next group's offsets while they reduce); with few groups, up to eight
  blocks share each one (:data:`ADAPTIVE_SPREAD_WAVES`), so that a few thousand long
  segments still get a block each;
* a hint within CUB's thread tile: CUB's kernel, a thread per segment;
* a hint within CUB's warp tile: cuprims' warp kernel, a warp per segment (vector loads,
  the next offsets read ahead; the warps stride over the segments, one wave of blocks);
* a longer hint: CUB's kernel, a block per segment.

Offsets of any of the four integer types are read once per segment and widened to 64
bits, so int64 offset arrays (CuPy's default) cost their 4 extra bytes an offset and
nothing else: the loops are the same as for int32. The adaptive kernel's warps count a
segment's items in 32 bits (it is at most a warp tile); its block path counts in 64 bits,
as CUB's kernels do for 64-bit offsets (a few integer instructions per 16-byte load of a
memory-bound loop).

Results: each path combines ``h_init`` on the left of its segment's total, and a segment's
items in an order of its own (CUB takes the operator to be commutative, as every path here
does); an empty segment gives ``h_init``.
"""

from __future__ import annotations

from typing import Any

from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims._value_types import host_bytes
from cuprims.algorithms.arguments import ArgKind, describe, keyword_checked, segment_offsets
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.operators import combined_input
from cuprims.algorithms.segmented_reduce.source import segmented_reduce_source
from cuprims.algorithms.skeleton import (Algorithm, CombinerDescription, Plan, combiner_spec, description, functor_size,
                                         functor_state)
from cuprims.algorithms.values import checked_host_value, scalar_init_type
from cuprims.errors import ArgumentError
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ComputeCapabilityLike, DeviceArrayLike, HostValue,
                            HostValueOrProxy, OperatorLike, StreamLike)

__all__ = ["SegmentedReduce", "make_segmented_reduce", "segmented_reduce"]

_MAX_SEGMENTS = (1 << 31) - 1       # CUB's kernel counts segments in an int
_SLICED_BELOW = 2                   # sliced dispatch while segments * this <= block slots
_MIN_SLICE_TILES = 4                # ... and a hinted segment spans more tiles than this
# The adaptive kernel's grid, in waves of its block slots. A group of long segments is a
# long block's work (up to eight of them), so the grid is made of many blocks, which the
# hardware schedules dynamically, keeping the GPU evenly busy where lengths vary:
# * with fewer groups than ADAPTIVE_SPREAD_WAVES waves, up to eight blocks share each group
#   (a segment each at most), as many as it takes to reach that many blocks (1000 segments
#   of a million items each get 1000 blocks, not 125);
# * with more, a block per group (2^16 segments of 1..8192 items: 8192 blocks, one group
#   each, at four blocks an SM), up to ADAPTIVE_WAVES waves; past that cap each block
#   strides over several groups and fetches the next group's offsets while it reduces.
ADAPTIVE_SPREAD_WAVES = 8
ADAPTIVE_WAVES = 16


@description
class SegmentedReduceDescription(CombinerDescription):
    """A segmented reduction: input, output (its type is the one computed in), the start
    and end offsets' kinds, and the operator."""

    begin: ArgKind
    end: ArgKind

    def source(self, arch: int) -> Source:
        return segmented_reduce_source(d_in=self.d_in, d_out=self.d_out, begin=self.begin, end=self.end,
                                       accum=self.d_out.value, op=self.op, arch=arch)

    def _link(self) -> tuple:
        return super()._link() + self.begin.linked_ops() + self.end.linked_ops()

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        f, a = functor_size(self.op), self.d_out.value.size
        offsets = (self.begin.param, self.end.param)
        return (
            # CUB: d_in, d_out, begin, end, num_segments, op, init, max_segment_size
            (self.d_in.param, self.d_out.param, *offsets, "i32", f, a, "i64"),
            # slice: d_in, begin, end, slices, op, partials
            (self.d_in.param, *offsets, "i32", f, "ptr"),
            # combine: partials, d_out, begin, end, slices, op, init
            ("ptr", self.d_out.param, *offsets, "i32", f, a),
            # warp: d_in, d_out, begin, end, num_segments, op, init
            (self.d_in.param, self.d_out.param, *offsets, "i32", f, a),
            # adaptive: d_in, d_out, begin, end, num_segments, parts, op, init
            (self.d_in.param, self.d_out.param, *offsets, "i32", "i32", f, a),
        )


class _Plan(Plan):
    """Kernel handles, block size, tile sizes of the three per-segment mappings, and the
    block slots of the GPU for the sliced, warp and adaptive dispatches."""

    __slots__ = ("cub", "slice", "combine", "warp", "adaptive", "threads", "tile_items", "medium_tile",
                 "medium_segments", "small_tile", "small_segments", "block_slots", "warp_threads", "warp_blocks",
                 "adaptive_slots", "accum_size", "temp_align", "device")

    def __init__(self, loaded: Loaded):
        meta = loaded.meta
        self.cub, self.slice, self.combine, self.warp, self.adaptive = loaded.handles
        self.threads = meta["threads"]
        self.tile_items = self.threads * meta["items"]
        self.medium_tile, self.medium_segments = meta["medium_items_per_tile"], meta["medium_segments_per_block"]
        self.small_tile, self.small_segments = meta["small_items_per_tile"], meta["small_segments_per_block"]
        occupancy = loaded.module.max_active_blocks(loaded.names[1], self.threads)
        self.block_slots = max(1, occupancy) * driver.sm_count(loaded.device)
        self.warp_threads = meta["warp_threads"]
        warp_occupancy = loaded.module.max_active_blocks(loaded.names[3], self.warp_threads)
        self.warp_blocks = max(1, warp_occupancy) * driver.sm_count(loaded.device)  # a full GPU of warp blocks
        adaptive_occupancy = loaded.module.max_active_blocks(loaded.names[4], self.warp_threads)
        self.adaptive_slots = max(1, adaptive_occupancy) * driver.sm_count(loaded.device)
        self.accum_size, self.temp_align = meta["accum_size"], meta["accum_align"]


def slices_for(plan: Any, num_segments: int, hint: int) -> int:
    """How many blocks reduce each segment (1: CUB's kernel, one thread/warp/block each)."""
    if num_segments == 0 or num_segments * _SLICED_BELOW > plan.block_slots:
        return 1
    if hint and hint <= _MIN_SLICE_TILES * plan.tile_items:
        return 1
    slices = plan.block_slots // num_segments
    if hint:
        slices = min(slices, -(-hint // plan.tile_items))
    return max(1, slices)


def warp_grid(plan: Any, num_segments: int, hint: int) -> int:
    """Blocks of cuprims' warp kernel for ``num_segments`` (0: the hint does not fit a warp's
    tile, CUB's kernel runs): one warp per segment, at most a full GPU of blocks."""
    if not plan.small_tile < hint <= plan.medium_tile:
        return 0
    return min(-(-num_segments // (plan.warp_threads // 32)), plan.warp_blocks)


def adaptive_grid(plan: Any, num_segments: int) -> tuple[int, int]:
    """(blocks, parts) of cuprims' adaptive kernel (no hint), whose groups are a block's
    warps' worth of segments: ``parts`` blocks share each group when there are fewer than
    :data:`ADAPTIVE_SPREAD_WAVES` waves of groups, else a block per group up to
    :data:`ADAPTIVE_WAVES` waves of its block slots."""
    per_group = plan.warp_threads // 32
    groups = -(-num_segments // per_group)
    parts = min(per_group, max(1, -(-ADAPTIVE_SPREAD_WAVES * plan.adaptive_slots // groups)))
    if parts > 1:
        return groups * parts, parts
    return min(groups, ADAPTIVE_WAVES * plan.adaptive_slots), 1


def cub_grid(plan: Any, num_segments: int, hint: int) -> int:
    """CUB's grid for ``num_segments``: the kernel picks the same mapping from the hint."""
    if 0 < hint <= plan.small_tile:
        return -(-num_segments // plan.small_segments)
    if 0 < hint <= plan.medium_tile:
        return -(-num_segments // plan.medium_segments)
    return num_segments


def _describe(d_in: Any, d_out: Any, start_offsets_in: Any, end_offsets_in: Any, op: Any,
              h_init: Any) -> SegmentedReduceDescription:
    in_arg = describe(d_in, "d_in", iterators=True)
    out_arg = describe(d_out, "d_out", iterators=True, output=True)
    begin, end = segment_offsets(start_offsets_in, end_offsets_in)
    accum = out_arg.value
    if h_init is None:
        raise ArgumentError("h_init", f"a {accum.dtype} value (the result of an empty segment)", None)
    checked_host_value(h_init, accum, "h_init")
    in_arg = combined_input(in_arg, out_arg)
    return SegmentedReduceDescription(in_arg, out_arg, combiner_spec(op, accum), begin, end)


class SegmentedReduce(Algorithm):
    """One reduction per segment, built for fixed types and operator by
    :func:`make_segmented_reduce`: ``d_out[s]`` receives the fold of
    ``d_in[start_offsets_in[s]:end_offsets_in[s]]`` and ``h_init``. As every object
    here, a call with ``temp_storage=None`` returns the bytes it needs instead.
    """

    desc: SegmentedReduceDescription

    def _setup(self) -> None:
        (self._cub_params, self._slice_params, self._combine_params, self._warp_params,
         self._adaptive_params) = self._packs
        self._accum = self.desc.d_out.value
        self._init_type = scalar_init_type(self._accum, True)
        self._stateful = bool(self.desc.op.state_size)

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded)

    # args: (p_in, p_out, p_begin, p_end, num_segments, state, init, hint)
    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        slices = slices_for(plan, args[4], args[7])
        return 0 if slices == 1 else args[4] * slices * plan.accum_size

    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        p_in, p_out, p_begin, p_end, ns, state, init, hint = args
        if ns == 0:
            return
        slices = slices_for(plan, ns, hint)
        if slices == 1 and not hint:
            blocks, parts = adaptive_grid(plan, ns)
            driver.launch(plan.adaptive, blocks, plan.warp_threads, stream,
                          self._adaptive_params.pack(p_in, p_out, p_begin, p_end, ns, parts, state, init))
            return
        warp_blocks = warp_grid(plan, ns, hint) if slices == 1 else 0
        if warp_blocks:
            driver.launch(plan.warp, warp_blocks, plan.warp_threads, stream,
                          self._warp_params.pack(p_in, p_out, p_begin, p_end, ns, state, init))
            return
        if slices == 1:
            driver.launch(plan.cub, cub_grid(plan, ns, hint), plan.threads, stream,
                          self._cub_params.pack(p_in, p_out, p_begin, p_end, ns, state, init, hint))
            return
        driver.launch(plan.slice, ns * slices, plan.threads, stream,
                      self._slice_params.pack(p_in, p_begin, p_end, slices, state, temp))
        driver.launch(plan.combine, ns, plan.threads, stream,
                      self._combine_params.pack(temp, p_out, p_begin, p_end, slices, state, init))

    def _run(self, temp_storage: Any, d_in: Any, d_out: Any, num_segments: Any, start_offsets_in: Any,
             end_offsets_in: Any, op: Any, h_init: Any, max_segment_size: Any, stream: Any,
             one_shot: bool) -> int | None:
        desc = self.desc
        arrays, counts = (d_in, d_out, start_offsets_in, end_offsets_in), (num_segments, max_segment_size)
        bound = self._recall(arrays, counts)
        memo = None
        if bound is None:
            ns = check_num_items(num_segments, "num_segments")
            if ns > _MAX_SEGMENTS:
                raise ArgumentError("num_segments", f"at most {_MAX_SEGMENTS} segments", ns)
            hint = 0 if max_segment_size is None else check_num_items(max_segment_size, "max_segment_size")
            # d_in is read where the offsets say: only its dtype, device and alignment are checked
            bound = (desc.d_in.bind(d_in, 0), desc.d_out.bind(d_out, ns, "num_segments"),
                     desc.begin.bind(start_offsets_in, ns, "num_segments"),
                     desc.end.bind(end_offsets_in, ns, "num_segments"), ns)
            memo = (arrays, counts, bound)
        else:
            hint = max_segment_size or 0
        # read every call: h_init (a mutable host array) and the operator's state
        args = (*bound, functor_state(desc.op, op) if self._stateful else self._state,
                h_init.tobytes() if type(h_init) is self._init_type else host_bytes(h_init, self._accum,
                                                                                   argument="h_init"),
                hint)
        return self._execute(temp_storage, stream, one_shot, args, (op, d_in, d_out, start_offsets_in, end_offsets_in),
                             memo=memo)

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in: ArrayOrIterator, d_out: ArrayOrIterator,
                 num_segments: int, start_offsets_in: ArrayOrIterator, end_offsets_in: ArrayOrIterator,
                 op: OperatorLike | None = None, h_init: HostValue, max_segment_size: int | None = None,
                 stream: StreamLike | None = None) -> int | None:
        """Run the segmented reduction (or, with ``temp_storage=None``, return the temporary
        bytes needed). ``max_segment_size``: no segment is longer (a promise: segments
        within CUB's thread tile then go to a thread each, within its warp tile to a warp
        each; without it the kernel tells short segments from long ones itself)."""
        return self._run(temp_storage, d_in, d_out, num_segments, start_offsets_in, end_offsets_in, op, h_init,
                         max_segment_size, stream, False)


@keyword_checked
def make_segmented_reduce(*, d_in: ArrayIteratorOrProxy, d_out: ArrayIteratorOrProxy,
                          start_offsets_in: ArrayIteratorOrProxy, end_offsets_in: ArrayIteratorOrProxy,
                          op: OperatorLike, h_init: HostValueOrProxy,
                          compute_capability: ComputeCapabilityLike | None = None) -> SegmentedReduce:
    """Build (or fetch from cache) a reduction of each segment of ``d_in`` into ``d_out``.

    Args:
        d_in: device array or iterator of items.
        d_out: device array or output iterator, one value per segment; its dtype is the
            type the reduction computes in.
        start_offsets_in, end_offsets_in: device arrays or iterators of int32/int64 (or
            uint32/uint64) offsets into ``d_in``, one pair per segment.
        op: an ``OpKind``, a Python callable ``f(a, b) -> value`` or a ``RawOp``.
        h_init: the initial value (a numpy scalar or one-element array, a gpu_struct value
            or its field values as a dict or tuple, or a ``ProxyValue``): combined into
            every segment, the result of an empty one.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(12, dtype=np.float32); out = cp.empty(3, np.float32)
        starts, ends = cp.asarray([0, 4, 8]), cp.asarray([4, 8, 12])
        r = cuprims.make_segmented_reduce(d_in=x, d_out=out, start_offsets_in=starts, end_offsets_in=ends,
                                          op=cuprims.OpKind.PLUS, h_init=np.float32(0))
        tmp = cp.empty(r(temp_storage=None, d_in=x, d_out=out, num_segments=3, start_offsets_in=starts,
                         end_offsets_in=ends, h_init=np.float32(0)), np.uint8)
        r(temp_storage=tmp, d_in=x, d_out=out, num_segments=3, start_offsets_in=starts, end_offsets_in=ends,
          h_init=np.float32(0))      # out == [6, 22, 38]
    """
    desc = SegmentedReduce._described(_describe, d_in, d_out, start_offsets_in, end_offsets_in, op, h_init)
    return SegmentedReduce._make(desc, compute_capability, (op, d_in, d_out, start_offsets_in, end_offsets_in))


@keyword_checked
def segmented_reduce(*, d_in: ArrayOrIterator, d_out: ArrayOrIterator, num_segments: int,
                     start_offsets_in: ArrayOrIterator, end_offsets_in: ArrayOrIterator, op: OperatorLike,
                     h_init: HostValue, max_segment_size: int | None = None, stream: StreamLike | None = None) -> None:
    """Reduce ``num_segments`` segments of ``d_in`` into ``d_out``, in one call (temporary
    storage is allocated and freed on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.ones(1000, np.int32); out = cp.empty(10, np.int32)
        offsets = cp.arange(0, 1001, 100)
        cuprims.segmented_reduce(d_in=x, d_out=out, num_segments=10, start_offsets_in=offsets[:-1],
                                 end_offsets_in=offsets[1:], op=cuprims.OpKind.PLUS, h_init=np.int32(0))
        assert out.get().tolist() == [100] * 10
    """
    obj = make_segmented_reduce.__wrapped__(d_in=d_in, d_out=d_out, start_offsets_in=start_offsets_in,
                                            end_offsets_in=end_offsets_in, op=op, h_init=h_init)
    obj._run(None, d_in, d_out, num_segments, start_offsets_in, end_offsets_in, op, h_init, max_segment_size,
             stream, True)

