"""Segmented sort's host dispatch: CUB's ``dispatch_segmented_sort.cuh`` redone in Python,
without its synchronisation.

CUB partitions the segments by length on the device, copies the two group sizes back to
the host (a stream synchronisation on every call) and then launches grids of exactly the
groups' sizes. Here nothing is read back: the grids are sized from ``num_segments`` (what
the host knows) and capped at a few waves of the GPU's block slots; the kernels read the
group sizes from device memory and stride over them (``algorithms/segmented_sort/cuprims_segmented_sort.cuh``),
so a call is a fixed sequence of launches and never waits.

* no items or no segments: nothing is launched;
* at most CUB's partitioning threshold of segments: CUB's fallback kernel, a block per
  segment, no classification (as CUB: too few segments to pay for classifying them);
* otherwise our clear and classify kernels list the large / small / medium segments
  (in segment order within each block's span, the spans in any order: each segment is
  sorted alone), then the large kernels (CUB's tile, and the middle tier where the build
  has one) and the medium-and-small kernel.

Buffers, as CUB's dispatch orders them: the key width takes ``passes`` radix passes when
a segment is sorted through global memory. With separate input and output those passes
ping-pong between the output and a scratch copy (ordered so the last lands in the
output); with a DoubleBuffer between its two buffers, and the result is in the current
one after an even number of passes, in the alternate after an odd one (the caller flips
the selector then). Segments sorted in one go write the final buffer directly.

Temporary storage (CUB's five slots, 256-aligned): keys scratch, values scratch, the
large-and-medium index list (large from the front, medium written backwards from the
end), the small index list, the three group sizes (large, small, medium).
"""

from __future__ import annotations

import struct
from typing import Any

from cuprims._runtime import driver
from cuprims.algorithms.common import Loaded
from cuprims.algorithms.sort_base import SortCall, SortPlan
from cuprims.algorithms.sort_common import align_base, temp_layout

# The clear kernel's block: a warp, of which the first three threads zero the group sizes.
CLEAR_THREADS = 32
# The large grids are capped at this many waves of the GPU's block slots: a call whose
# segments are all short pays for that many idle blocks (read a count and the offsets of
# their share, exit), not for num_segments of them, while blocks that find work keep the
# hardware's dynamic scheduling over this many waves (large segments vary in cost by far).
WAVES = 8
# The medium-and-small grid's cap. Its grid covers the segments at the medium tier's
# segments per block (the host does not know how many are small, which pack more to a
# block), so a call of tiny segments would launch several times the blocks it has work
# for: 32 waves keep the hardware's dynamic scheduling for medium segments (2^20 x 64 keys:
# 0.641 ms at 32 waves, 0.695 at 2) and cap the idle blocks of tiny ones (2^22 x 16 keys:
# 0.348 ms at 32, 0.387 at 128, 0.483 uncapped; H100).
SMALL_WAVES = 32
_INDEX_BYTES = 4        # CUB's local_segment_index_t (uint32), pinned in the generated unit
_GROUP_SIZES = 3        # large, small, medium: the classify kernel's counters
_DOUBLE = struct.Struct("<QQ")  # CUB's device_double_buffer: current, alternate


class SegmentedSortPlan(SortPlan):
    """The six kernels of one build on one device, their blocks and tiles, and the
    block slots that cap the large and small grids."""

    __slots__ = ("fallback", "clear", "classify", "big", "small", "mid", "large_threads", "small_threads",
                 "passes", "threshold", "medium_per_block", "classify_threads", "classify_segments", "mid_items",
                 "big_slots", "mid_slots", "small_slots")

    def __init__(self, loaded: Loaded, kernel_params: tuple[tuple[Any, ...], ...]):
        super().__init__(loaded, kernel_params)
        meta = loaded.meta
        self.fallback, self.clear, self.classify, self.big, self.small, self.mid = loaded.handles
        self.large_threads, self.small_threads = meta["large_threads"], meta["small_threads"]
        self.passes = -(-meta["key_bits"] // meta["radix_bits"])
        self.threshold = meta["partitioning_threshold"]
        self.medium_per_block = meta["medium_threads"] // meta["medium_warp"]
        self.classify_threads = meta["classify_threads"]
        self.classify_segments = meta["classify_threads"] * meta["classify_items"]  # a classify block's
        self.mid_items = meta["mid_items"]
        sms = driver.sm_count(loaded.device)
        occupancy = loaded.module.max_active_blocks
        names = loaded.names
        self.big_slots = max(1, occupancy(names[3], self.large_threads)) * sms
        self.small_slots = max(1, occupancy(names[4], self.small_threads)) * sms
        self.mid_slots = max(1, occupancy(names[5], self.large_threads)) * sms if self.mid_items else 0


def partitioned(plan: Any, segments: int) -> bool:
    """Whether CUB would sort ``segments`` segments by group (else: its fallback kernel)."""
    return segments > plan.threshold


def grids(plan: Any, segments: int) -> tuple[int, int, int]:
    """(large beyond the middle tier, middle tier, medium and small) grids for
    ``segments`` segments, whatever their lengths: as many blocks as there could be work
    for, at most WAVES (SMALL_WAVES) waves of block slots. The medium-and-small grid covers any split
    (ceil(m / per_block) + ceil(s / small_per_block) <= ceil(segments / per_block) + 1,
    small sub-warps being no wider than medium ones)."""
    big = min(segments, plan.big_slots * WAVES)
    mid = min(segments, plan.mid_slots * WAVES) if plan.mid_items else 0
    small = min(-(-segments // plan.medium_per_block) + 1, plan.small_slots * SMALL_WAVES)
    return big, mid, small


def temp_bytes(plan: Any, call: SortCall, key_size: int, value_size: int) -> int:
    """Bytes of temporary storage (with CUB's alignment slack); records the layout."""
    n, segments = call.n, call.segments
    if n == 0 or segments == 0:
        return 0
    scratch = not call.overwrite
    split = partitioned(plan, segments)
    indices = segments * _INDEX_BYTES if split else 0
    sizes = (
        n * key_size if scratch else 0,                       # keys scratch
        n * value_size if scratch else 0,                     # values scratch
        indices,                                              # large (front) and medium (back) indices
        indices,                                              # small indices
        _GROUP_SIZES * _INDEX_BYTES if split else 0,          # group sizes
    )
    offsets, total = temp_layout(sizes)
    call.layout = (offsets, split)
    return total if any(sizes) else 0  # the fallback on a DoubleBuffer needs none


def buffers(plan: Any, call: SortCall, scratch_keys: int, scratch_values: int) -> tuple[int, int, bytes, bytes]:
    """(final keys, final values, keys' and values' double buffers) as CUB's dispatch sets
    them up; sets ``call.flips`` (DoubleBuffer: the passes; the result changes sides when odd)."""
    odd = plan.passes & 1
    if call.overwrite:
        call.flips = plan.passes
        out_k, out_v = (call.k_out, call.v_out) if odd else (call.k_in, call.v_in)
        return out_k, out_v, _DOUBLE.pack(call.k_out, call.k_in), _DOUBLE.pack(call.v_out, call.v_in)
    out_k, out_v = call.k_out, call.v_out
    scratch_values = scratch_values if out_v else 0
    if odd:  # pass 1 writes the output, the last (odd) one too
        return out_k, out_v, _DOUBLE.pack(out_k, scratch_keys), _DOUBLE.pack(out_v, scratch_values)
    return out_k, out_v, _DOUBLE.pack(scratch_keys, out_k), _DOUBLE.pack(scratch_values, out_v)


def dispatch(plan: Any, call: SortCall, temp: int, stream: int) -> None:
    """Launch the sort of ``call`` on ``stream``."""
    launch, packs, segments = driver.launch, plan.packs, call.segments
    offsets, split = call.layout
    scratch_k, scratch_v, indices, small_indices, group_sizes = [align_base(temp) + o for o in offsets]
    out_k, out_v, db_k, db_v = buffers(plan, call, scratch_k, scratch_v)
    k_in, v_in, begin, end = call.k_in, call.v_in, call.begin, call.end
    if not split:
        launch(plan.fallback, segments, plan.large_threads, stream,
               packs[0].pack(k_in, out_k, db_k, v_in, out_v, db_v, begin, end))
        return
    launch(plan.clear, 1, CLEAR_THREADS, stream, packs[1].pack(group_sizes))
    medium_end = indices + segments * _INDEX_BYTES  # the medium list runs backwards from here
    launch(plan.classify, -(-segments // plan.classify_segments), plan.classify_threads, stream,
           packs[2].pack(group_sizes, segments, indices, small_indices, medium_end, begin, end))
    big, mid, small = grids(plan, segments)
    large_args = (group_sizes, indices, k_in, out_k, db_k, v_in, out_v, db_v, begin, end)
    launch(plan.big, big, plan.large_threads, stream, packs[3].pack(*large_args))
    if mid:
        launch(plan.mid, mid, plan.large_threads, stream, packs[5].pack(*large_args))
    launch(plan.small, small, plan.small_threads, stream,
           packs[4].pack(group_sizes, segments, small_indices, medium_end, k_in, out_k, v_in, out_v, begin, end))
