// cuprims segmented reduction.
//
// Without a max_segment_size hint, adaptive_kernel reduces every segment, whatever its
// length, in one launch and without reading anything back: a block of eight warps takes
// eight consecutive segments at a time; a warp reduces a segment of at most CUB's warp
// tile, and the whole block the longer ones of the group, one after another.
// With a hint, CUB's DeviceSegmentedReduceKernel runs as it is (a thread or a block per
// segment, chosen inside the kernel by the hint; the host sizes the grid by the same rule),
// except for hints within CUB's warp tile: warp_kernel gives each segment a warp. CUB's
// warp agent reads a segment shorter than its tile one item per lane per load, and only
// after the offsets have arrived; cuprims' warps read an array in 16-byte vectors from the
// segment's first aligned item, and fetch the offsets of their next segment while they
// reduce this one.
// Few segments (fewer than the GPU has block slots) would leave most of the GPU idle, so
// they run in two kernels instead:
//   * slice_kernel: `slices` blocks per segment; block j of segment s reduces slice j of it
//     (slices are whole tiles, sized on the device from the segment's own length, so the
//     non-empty slices of a segment are its first ones) into partials[s * slices + j];
//   * combine_kernel: one block per segment combines its non-empty partials and the
//     initial value into d_out[s] (the initial value alone for an empty segment).
// adaptive_kernel and warp_kernel read the offsets in their own type, once per segment, and
// widen them to 64 bits; adaptive_kernel's warps count a segment's items in 32 bits (it is
// at most a warp tile), its block and warp_kernel (whose hint is only a promise) in 64.
#pragma once

#include <cub/agent/agent_reduce.cuh>
#include <cub/device/dispatch/kernels/kernel_segmented_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>

#include <cuda/std/cstdint>
#include <cuda/std/cstring>
#include <cuda/std/functional>
#include <cuda/std/type_traits>

namespace cuprims
{
namespace segmented_reduce
{

template <class Selector>
struct large_policy
{
  static constexpr auto value = CUB_NS_QUALIFIER::detail::current_policy<Selector>().large_reduce;
  static constexpr int tile_items = value.threads_per_block * value.items_per_thread;
};

template <class Selector, class AccumT>
using large_agent_policy = CUB_NS_QUALIFIER::detail::agent_reduce_policy<
  0, 0, AccumT, large_policy<Selector>::value.vec_size, large_policy<Selector>::value.reduce_algorithm,
  large_policy<Selector>::value.load_modifier,
  CUB_NS_QUALIFIER::detail::NoScaling<large_policy<Selector>::value.threads_per_block,
                                      large_policy<Selector>::value.items_per_thread, AccumT>>;

// Slice length of a segment of `length` items cut into at most `slices` whole-tile slices.
__device__ __forceinline__ long long slice_length(long long length, int slices, int tile_items)
{
  const long long per_slice = (length + slices - 1) / slices;
  return ((per_slice + tile_items - 1) / tile_items) * tile_items;
}

template <class Selector, class InputT, class BeginT, class EndT, class AccumT, class OpT>
__global__ __launch_bounds__(int(large_policy<Selector>::value.threads_per_block))
void slice_kernel(InputT d_in, BeginT d_begin, EndT d_end, int slices, OpT op, AccumT* partials)
{
  using agent_t = CUB_NS_QUALIFIER::detail::reduce::
    AgentReduce<large_agent_policy<Selector, AccumT>, InputT, long long, OpT, AccumT, ::cuda::std::identity>;
  __shared__ typename agent_t::TempStorage temp_storage;

  const int segment = int(blockIdx.x) / slices;
  const int slice   = int(blockIdx.x) % slices;
  const long long begin = static_cast<long long>(d_begin[segment]);
  const long long end   = static_cast<long long>(d_end[segment]);
  const long long step  = slice_length(end - begin, slices, large_policy<Selector>::tile_items);
  const long long lo    = begin + slice * step;
  if (end <= begin || lo >= end)
  {
    return;  // this slice is empty, and so are the ones after it: the combine counts them out
  }
  const long long hi = lo + step < end ? lo + step : end;
  AccumT aggregate = agent_t(temp_storage, d_in, op, ::cuda::std::identity{}).ConsumeRange(lo, hi);
  if (threadIdx.x == 0)
  {
    partials[static_cast<long long>(segment) * slices + slice] = aggregate;
  }
}

template <class Selector, class OutputIt, class BeginT, class EndT, class AccumT, class OpT>
__global__ __launch_bounds__(int(large_policy<Selector>::value.threads_per_block))
void combine_kernel(const AccumT* partials, OutputIt d_out, BeginT d_begin, EndT d_end, int slices, OpT op,
                    AccumT init)
{
  using agent_t = CUB_NS_QUALIFIER::detail::reduce::
    AgentReduce<large_agent_policy<Selector, AccumT>, const AccumT*, long long, OpT, AccumT, ::cuda::std::identity>;
  __shared__ typename agent_t::TempStorage temp_storage;

  const int segment     = int(blockIdx.x);
  const long long begin = static_cast<long long>(d_begin[segment]);
  const long long end   = static_cast<long long>(d_end[segment]);
  if (end <= begin)
  {
    if (threadIdx.x == 0)
    {
      d_out[segment] = init;
    }
    return;
  }
  const long long step  = slice_length(end - begin, slices, large_policy<Selector>::tile_items);
  const long long count = (end - begin + step - 1) / step;
  const AccumT* mine    = partials + static_cast<long long>(segment) * slices;
  AccumT aggregate = agent_t(temp_storage, mine, op, ::cuda::std::identity{}).ConsumeRange(0ll, count);
  if (threadIdx.x == 0)
  {
    d_out[segment] = op(init, aggregate);
  }
}

constexpr int warp_threads = 256;  // warp_kernel's and adaptive_kernel's block: eight warps
constexpr int loads_ahead  = 4;    // vector loads a thread issues before it combines their items

// One thread's share of a segment: the first item it sees starts the partial (there is no
// identity for a user's operator).
template <class AccumT, class OpT>
struct lane_partial
{
  OpT& op;
  AccumT value;
  bool any;

  __device__ __forceinline__ void add(const AccumT& item)
  {
    value = any ? op(value, item) : item;
    any   = true;
  }
};

// Items [0, n) of `items` into thread `rank`'s partial of a team of Team threads, in
// 16-byte vectors from the first aligned item (`items` is aligned to its item size): the
// items before the first 16-byte boundary, then whole vectors, then the rest. Returns how
// many threads (a prefix of the team) hold a partial.
template <int Team, class SizeT, class AccumT, class OpT>
__device__ __forceinline__ int consume_vectors(lane_partial<AccumT, OpT>& partial, const AccumT* items, SizeT n,
                                               int rank)
{
  constexpr int per_vector = 16 / int(sizeof(AccumT));
  const int misaligned     = int(reinterpret_cast<::cuda::std::uintptr_t>(items) % 16) / int(sizeof(AccumT));
  const SizeT head         = misaligned ? (per_vector - misaligned < n ? per_vector - misaligned : n) : 0;
  const SizeT body         = (n - head) / per_vector;
  const SizeT tail         = n - head - body * per_vector;
  if (rank < head)
  {
    partial.add(items[rank]);
  }
  const uint4* vecs = reinterpret_cast<const uint4*>(items + head);
  for (SizeT v = rank; v < body; v += Team * loads_ahead)
  {
    uint4 loaded[loads_ahead];
    _CCCL_PRAGMA_UNROLL_FULL()
    for (int k = 0; k < loads_ahead; ++k)
    {
      if (v + Team * k < body)
      {
        loaded[k] = vecs[v + Team * k];
      }
    }
    _CCCL_PRAGMA_UNROLL_FULL()
    for (int k = 0; k < loads_ahead; ++k)
    {
      if (v + Team * k < body)
      {
        AccumT unpacked[per_vector];
        ::cuda::std::memcpy(unpacked, &loaded[k], sizeof(unpacked));
        _CCCL_PRAGMA_UNROLL_FULL()
        for (int j = 0; j < per_vector; ++j)
        {
          partial.add(unpacked[j]);
        }
      }
    }
  }
  if (rank < tail)
  {
    partial.add(items[head + body * per_vector + rank]);
  }
  const SizeT edges = head > tail ? head : tail;
  return int(body >= Team ? Team : (body > edges ? body : edges));
}

// Items [0, n) of `items` (a pointer or an iterator advanced to the segment), one at a time
// (Ahead loads issued before their items are combined), into thread `rank`'s partial (the
// threads holding one are the first min(n, Team)).
template <int Team, int Ahead, class SizeT, class InputT, class AccumT, class OpT>
__device__ __forceinline__ int consume_items(lane_partial<AccumT, OpT>& partial, InputT items, SizeT n, int rank)
{
  for (SizeT i = rank; i < n; i += Team * Ahead)
  {
    AccumT loaded[Ahead];
    _CCCL_PRAGMA_UNROLL_FULL()
    for (int k = 0; k < Ahead; ++k)
    {
      if (i + Team * k < n)
      {
        loaded[k] = items[i + Team * k];
      }
    }
    _CCCL_PRAGMA_UNROLL_FULL()
    for (int k = 0; k < Ahead; ++k)
    {
      if (i + Team * k < n)
      {
        partial.add(loaded[k]);
      }
    }
  }
  return int(n >= Team ? Team : n);
}

// Items [begin, end) of d_in (begin < end) into thread `rank`'s partial of a team of Team
// threads, counted in SizeT (which holds end - begin); returns how many threads (a prefix
// of the team) hold a partial. An array of the accumulator's type (smaller than a vector, a
// divisor of it, and addressed at multiples of its size) is read in vectors, anything else
// item by item, Ahead at a time. A thread combines its items in their order whatever Ahead
// and SizeT are: only the loads in flight and the index arithmetic differ.
template <int Team, int Ahead, class SizeT, class InputT, class AccumT, class OpT>
__device__ __forceinline__ int
consume_segment(lane_partial<AccumT, OpT>& partial, InputT d_in, long long begin, long long end, int rank)
{
  using item_t = CUB_NS_QUALIFIER::detail::it_value_t<InputT>;
  constexpr bool vectors = ::cuda::std::is_pointer_v<InputT> && ::cuda::std::is_same_v<item_t, AccumT>
                        && 16 % sizeof(AccumT) == 0 && sizeof(AccumT) < 16;
  const SizeT n    = static_cast<SizeT>(end - begin);
  const auto items = d_in + begin;
  if constexpr (vectors && alignof(AccumT) >= sizeof(AccumT))
  {
    return consume_vectors<Team>(partial, items, n, rank);
  }
  else if constexpr (vectors)
  {
    // a struct aligned to less than its size: vectors only where its items fall on them
    return reinterpret_cast<::cuda::std::uintptr_t>(items) % sizeof(AccumT) == 0
           ? consume_vectors<Team>(partial, items, n, rank)
           : consume_items<Team, Ahead>(partial, items, n, rank);
  }
  else
  {
    return consume_items<Team, Ahead>(partial, items, n, rank);
  }
}

template <class BeginT, class EndT>
__device__ __forceinline__ void
read_offsets(BeginT d_begin, EndT d_end, long long segment, int num_segments, long long& begin, long long& end)
{
  begin = 0;
  end   = 0;
  if (segment < num_segments)
  {
    begin = static_cast<long long>(d_begin[segment]);
    end   = static_cast<long long>(d_end[segment]);
  }
}

// Segment `segment` = [begin, end) by one warp into d_out[segment] (init alone if empty).
template <int Ahead, class SizeT, class InputT, class OutputIt, class AccumT, class OpT, class Storage>
__device__ __forceinline__ void reduce_by_warp(
  InputT d_in, OutputIt d_out, long long segment, long long begin, long long end, OpT& op, const AccumT& init,
  Storage& storage, int lane)
{
  if (end <= begin)
  {
    if (lane == 0)
    {
      d_out[segment] = init;
    }
    return;
  }
  lane_partial<AccumT, OpT> partial{op, init, false};
  const int lanes = consume_segment<32, Ahead, SizeT>(partial, d_in, begin, end, lane);
  CUB_NS_QUALIFIER::WarpReduce<AccumT> reducer(storage);
  const AccumT total = lanes == 32 ? reducer.Reduce(partial.value, op) : reducer.Reduce(partial.value, op, lanes);
  if (lane == 0)
  {
    d_out[segment] = op(init, total);
  }
}

// A warp per segment, the warps striding over the segments (the grid is sized to the GPU);
// each fetches the offsets of its next segment while it reduces this one.
template <class InputT, class OutputIt, class BeginT, class EndT, class AccumT, class OpT>
__global__ __launch_bounds__(warp_threads)
void warp_kernel(InputT d_in, OutputIt d_out, BeginT d_begin, EndT d_end, int num_segments, OpT op, AccumT init)
{
  constexpr int warps = warp_threads / 32;
  __shared__ typename CUB_NS_QUALIFIER::WarpReduce<AccumT>::TempStorage storage[warps];

  const int lane         = int(threadIdx.x) % 32;
  const int warp         = int(threadIdx.x) / 32;
  const long long stride = static_cast<long long>(gridDim.x) * warps;
  long long segment      = static_cast<long long>(blockIdx.x) * warps + warp;
  long long begin, end;
  read_offsets(d_begin, d_end, segment, num_segments, begin, end);
  for (; segment < num_segments; segment += stride)
  {
    long long next_begin, next_end;
    read_offsets(d_begin, d_end, segment + stride, num_segments, next_begin, next_end);
    reduce_by_warp<loads_ahead, long long>(d_in, d_out, segment, begin, end, op, init, storage[warp], lane);
    __syncwarp();  // the reducer's storage is the next segment's
    begin = next_begin;
    end   = next_end;
  }
}

// Segment [begin, end) (begin < end) by the whole block into d_out[segment]: each warp
// combines its threads' partials, thread 0 the warps' totals in warp order.
template <int Ahead, class InputT, class OutputIt, class AccumT, class OpT, class Storage>
__device__ __forceinline__ void reduce_by_block(
  InputT d_in, OutputIt d_out, long long segment, long long begin, long long end, OpT& op, const AccumT& init,
  Storage* storage, CUB_NS_QUALIFIER::Uninitialized<AccumT>* warp_totals)
{
  const int lane = int(threadIdx.x) % 32;
  const int warp = int(threadIdx.x) / 32;
  lane_partial<AccumT, OpT> partial{op, init, false};
  const int holders = consume_segment<warp_threads, Ahead, long long>(partial, d_in, begin, end, int(threadIdx.x));
  const int mine    = holders - 32 * warp;
  if (mine > 0)
  {
    CUB_NS_QUALIFIER::WarpReduce<AccumT> reducer(storage[warp]);
    const AccumT total = mine >= 32 ? reducer.Reduce(partial.value, op) : reducer.Reduce(partial.value, op, mine);
    if (lane == 0)
    {
      warp_totals[warp].Alias() = total;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0)
  {
    AccumT total = warp_totals[0].Alias();
    for (int w = 1; w * 32 < holders; ++w)
    {
      total = op(total, warp_totals[w].Alias());
    }
    d_out[segment] = op(init, total);
  }
  __syncthreads();  // warp_totals is the next segment's
}

// The offsets of segments [first, first + 8) spread over a warp: lane l < 8 gets the start
// of segment first + l, lane 8 + l its end (0 and 0 past the last segment: empty).
template <class BeginT, class EndT>
__device__ __forceinline__ long long read_group(BeginT d_begin, EndT d_end, long long first, int num_segments, int lane)
{
  const long long segment = first + (lane & 7);
  if (lane >= 16 || segment >= num_segments)
  {
    return 0;
  }
  return lane < 8 ? static_cast<long long>(d_begin[segment]) : static_cast<long long>(d_end[segment]);
}

// Segments of any length, without a hint: a block takes eight consecutive segments at a
// time (the blocks stride over these groups). Warp w reads segment w's offsets and reduces
// it if it is short, as warp_kernel does: its loads wait for nothing but those offsets.
// Every warp also reads the whole group's offsets and so knows which segments are longer
// than CUB's warp tile: the same answer in every warp, so the block agrees on it without a
// barrier (both sets of offsets for the next group are fetched while this one is reduced).
// Then, if the group has long segments, the whole block reduces them one after another (as
// CUB's block per segment would, in 16-byte vectors from the first aligned item). A
// group of short segments costs no barrier: the warps run as independently as in
// warp_kernel. When there are few groups for the GPU, `parts` consecutive blocks share
// each group (the grid is then exactly groups * parts blocks): block j takes the group's
// segments w with w % parts == j, so long segments spread over up to a block each.
// Four blocks an SM (up to 64 registers a thread), the warp kernel's occupancy: left free,
// ptxas chose fewer registers and parked the prefetched offsets in local memory, a store
// that waits for them as soon as they are asked for.
template <class Selector, class InputT, class OutputIt, class BeginT, class EndT, class AccumT, class OpT>
__global__ __launch_bounds__(warp_threads, 4)
void adaptive_kernel(InputT d_in, OutputIt d_out, BeginT d_begin, EndT d_end, int num_segments, int parts, OpT op,
                     AccumT init)
{
  constexpr int warps           = warp_threads / 32;
  constexpr unsigned all_lanes  = 0xffffffffu;
  constexpr long long warp_tile = CUB_NS_QUALIFIER::detail::current_policy<Selector>().medium_reduce.items_per_tile();
  constexpr int ahead           = large_policy<Selector>::value.items_per_thread;  // CUB's, for item-by-item reads
  static_assert(warps == 8, "a group is one segment per warp, its offsets in lanes 0..15");
  __shared__ typename CUB_NS_QUALIFIER::WarpReduce<AccumT>::TempStorage storage[warps];
  __shared__ CUB_NS_QUALIFIER::Uninitialized<AccumT> warp_totals[warps];

  const int lane         = int(threadIdx.x) % 32;
  const int warp         = int(threadIdx.x) / 32;
  const long long groups = (static_cast<long long>(num_segments) + warps - 1) / warps;
  const long long step   = gridDim.x / parts;  // groups from one of a block's turns to the next
  const int part         = int(blockIdx.x % parts);
  unsigned mine          = 0;  // the group's segments this block reduces: part, part + parts, ...
  _CCCL_PRAGMA_UNROLL_FULL()
  for (int k = 0; k < warps; ++k)
  {
    const int w = part + k * parts;
    mine |= w < warps ? 1u << w : 0u;
  }
  long long group   = blockIdx.x / parts;
  long long offsets = read_group(d_begin, d_end, group * warps, num_segments, lane);
  long long begin, end;  // this warp's segment of the group
  read_offsets(d_begin, d_end, group * warps + warp, num_segments, begin, end);
  for (; group < groups; group += step)
  {
    const long long first = group * warps;
    const long long next  = read_group(d_begin, d_end, first + step * warps, num_segments, lane);
    long long next_begin, next_end;
    read_offsets(d_begin, d_end, first + step * warps + warp, num_segments, next_begin, next_end);
    // A short segment of this warp's is told from its own offsets, so that its loads wait
    // for no shuffle; the group's long ones, after it, from the same offsets in every warp.
    if ((mine >> warp & 1u) && end - begin <= warp_tile && first + warp < num_segments)
    {
      reduce_by_warp<ahead, int>(d_in, d_out, first + warp, begin, end, op, init, storage[warp], lane);
      __syncwarp();  // the reducer's storage is the block phase's and the next group's
    }
    const long long ends = __shfl_down_sync(all_lanes, offsets, 8);  // lane l < 8: segment l's end
    const unsigned longs = __ballot_sync(all_lanes, lane < 8 && ends - offsets > warp_tile) & mine;
    // the same in every warp of the block: all of them take part, in segment order
    for (unsigned rest = longs; rest != 0u; rest &= rest - 1u)
    {
      const int w             = __ffs(int(rest)) - 1;
      const long long b       = __shfl_sync(all_lanes, offsets, w);
      const long long e       = __shfl_sync(all_lanes, offsets, w + 8);
      reduce_by_block<ahead>(d_in, d_out, first + w, b, e, op, init, storage, warp_totals);
    }
    offsets = next;
    begin   = next_begin;
    end     = next_end;
  }
}

} // namespace segmented_reduce
} // namespace cuprims
