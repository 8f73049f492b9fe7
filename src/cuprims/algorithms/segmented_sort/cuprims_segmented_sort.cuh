// cuprims segmented sort: the kernels that classify the segments by length and sort them.
//
// CUB splits the segments into three groups by length (large: more items than a medium
// sub-warp tile; small: at most a small sub-warp tile; medium: the rest) with its
// three-way partition, then copies the two group sizes to the host and launches one grid
// per group of exactly that size. That copy is a stream synchronisation on every call.
// Here the host sizes every grid from num_segments alone (it knows nothing else without
// waiting), and each kernel reads the group sizes from device memory:
//
//   * clear_kernel and classify_kernel: the three groups' index lists and sizes. CUB's
//     partition orders each whole list with a decoupled look-back over tile states; the
//     sorts need no order across the list (each segment is sorted alone), so a block here
//     reserves its span of each list with one atomic per group and needs no tile states,
//     and lists its own segments in order within the span;
//   * large_kernel: large segments, a block each at a time, blocks striding over the group
//     (the grid is capped on the host, so that a call whose segments are all short does not
//     pay for num_segments idle blocks). CUB's AgentSegmentedRadixSort sorts a segment in
//     shared memory when it fits one tile, else by passes through global memory that
//     ping-pong between the two buffers of a device_double_buffer, as CUB's kernel does;
//   * small_kernel: sub-warps of CUB's AgentSubWarpSort per medium and small segment,
//     blocks numbered first over the medium group and then over the small one, the
//     split computed on the device from the group sizes. A sub-warp merge sort sorts a
//     whole tile whatever its segment's length (CUB's medium tile of 4-byte keys on sm_90
//     is 16 x 7 = 112 keys: a 64-key segment sorts 112), so, for keys alone, a medium
//     segment that fits half the items per thread is sorted by a second agent of that
//     tile (16 x 4 = 64), in the same sub-warp's shared memory.
//
// Large segments get one more tier than CUB gives them. CUB sorts every large segment below
// its tile as a whole padded tile (a segment of 4096 keys pays for 5888), in a kernel whose
// registers (~170-210 for 4-byte keys on sm_90) allow one block per SM. Here large_kernel
// comes in two instances: `Mid` sorts the segments of at most MidItems items per thread
// with an agent (and so a register count) sized for that tile, the other one the longer
// segments with CUB's tile. MidItems == 0 leaves CUB's single tier.
//
// Offsets: CUB computes them in the offsets' own type, so int64 offsets (CuPy's default)
// make every agent's index arithmetic 64-bit, and the middle tier loses its second block
// per SM. Problems of at most INT_MAX items read offsets of any other type than int
// through narrow_offsets and compute in int; only larger ones are built with 64 bits.
#pragma once

#include <cub/device/dispatch/kernels/kernel_segmented_sort.cuh>
#include <cub/block/block_scan.cuh>

#include <cuda/std/limits>
#include <cuda/std/type_traits>
#include <cuda/std/utility>

namespace cuprims
{
namespace segmented_sort
{

using index_t = CUB_NS_QUALIFIER::detail::segmented_sort::local_segment_index_t;
template <class T>
using double_buffer = CUB_NS_QUALIFIER::detail::device_double_buffer<T>;

template <class Selector>
struct policies
{
  static constexpr CUB_NS_QUALIFIER::SegmentedSortPolicy value = CUB_NS_QUALIFIER::detail::current_policy<Selector>();
  static constexpr auto large  = value.large_segment;
  static constexpr auto medium = value.medium_segment;
  static constexpr auto small  = value.small_segment;

  // the radix-sort agent's policy for `Items` items per thread (CUB's large policy otherwise)
  template <int Items>
  using radix = CUB_NS_QUALIFIER::detail::agent_radix_sort_downsweep_policy<
    0, 0, void, large.load_algorithm, large.load_modifier, large.rank_algorithm, large.scan_algorithm,
    large.radix_bits, CUB_NS_QUALIFIER::detail::NoScaling<large.threads_per_block, Items>>;

  using medium_t = CUB_NS_QUALIFIER::detail::agent_sub_warp_merge_sort_policy<
    medium.threads_per_block, medium.threads_per_warp, medium.items_per_thread, medium.load_algorithm,
    medium.load_modifier, medium.store_algorithm>;
  using small_t = CUB_NS_QUALIFIER::detail::agent_sub_warp_merge_sort_policy<
    small.threads_per_block, small.threads_per_warp, small.items_per_thread, small.load_algorithm,
    small.load_modifier, small.store_algorithm>;
  // The medium sub-warp at half its items per thread, for medium segments that fit half a
  // tile: the sub-warp merge sort sorts a whole tile whatever the segment's length, the
  // items past it padded (a 64-key segment in CUB's 16 x 7 tile sorts 112), so a segment
  // of at most half a tile sorts in the half tile. 0 items: no such tier (it would not be
  // longer than the small tile).
  static constexpr int half_items =
    (medium.items_per_thread + 1) / 2 < medium.items_per_thread
        && medium.threads_per_warp * ((medium.items_per_thread + 1) / 2)
             > small.threads_per_warp * small.items_per_thread
      ? (medium.items_per_thread + 1) / 2
      : 0;
  using half_medium_t = CUB_NS_QUALIFIER::detail::agent_sub_warp_merge_sort_policy<
    medium.threads_per_block, medium.threads_per_warp, (half_items > 0 ? half_items : 1), medium.load_algorithm,
    medium.load_modifier, medium.store_algorithm>;

  // one kernel runs both sub-warp sorts: they must agree on the block
  static_assert(medium.threads_per_block == small.threads_per_block,
                "cuprims runs medium and small segments in one kernel");
};

// The user's offsets (an array or an iterator of any other integer type) read as int, for
// the build of problems of at most INT_MAX items: the agents then do their index arithmetic
// in 32 bits whatever the offsets' type. Each offset is clamped to [0, INT_MAX], which
// changes no offset of a valid segment (those lie in [0, num_items]) and, being monotone,
// keeps every segment whose end is at or below its start empty, whatever its values. The
// wrapper has its iterator's layout, so the host packs it as it packs the iterator.
template <class It>
struct narrow_offsets
{
  It it;

  template <class Index>
  __host__ __device__ __forceinline__ constexpr int operator[](Index i) const
  {
    const auto v    = it[i];
    using V         = ::cuda::std::remove_cv_t<decltype(v)>;
    constexpr V top = V(::cuda::std::numeric_limits<int>::max());
    if constexpr (::cuda::std::is_signed_v<V>)
    {
      if (v < V(0))
      {
        return 0;
      }
    }
    return v > top ? int(top) : static_cast<int>(v);
  }
};

// The groups the segments are sorted in, by length: large beyond a medium sub-warp's tile,
// small within a small sub-warp's tile, medium between. The thresholds are CUB's policy
// constants. Offsets are converted to OffsetT before they are subtracted, so an end below
// its start is a negative length: a small segment, which the sub-warp sort leaves alone.
enum segment_group : int
{
  large_group  = 0,
  small_group  = 1,
  medium_group = 2,
  group_count  = 3
};

template <class Selector, class OffsetT>
__device__ __forceinline__ segment_group group_of(OffsetT n)
{
  using p = policies<Selector>;
  if (n > OffsetT(p::medium_t::ITEMS_PER_TILE))
  {
    return large_group;
  }
  return n <= OffsetT(p::small_t::ITEMS_PER_TILE) ? small_group : medium_group;
}

// The classify kernel's block: each thread takes classify_items segments, striped over the
// block so that a warp's loads of the offsets are contiguous.
constexpr int classify_threads = 256;
constexpr int classify_items   = 8;
constexpr int classify_warps   = classify_threads / 32;
static_assert(classify_threads % 32 == 0 && classify_items * classify_warps % 32 == 0 && classify_warps >= group_count,
              "the classify kernel ranks by whole warps and scans a group's counts in a warp");

// The group sizes the classify kernel counts up with atomics start at zero.
__global__ void clear_kernel(index_t* group_sizes)
{
  if (threadIdx.x < group_count)
  {
    group_sizes[threadIdx.x] = 0;
  }
}

// Lists each segment in its group, in the layout large_kernel and small_kernel read: large
// segments in large_indices, small ones in small_indices, medium ones backwards from
// medium_indices_end (the large list fills the same buffer from its front; the two together
// hold at most num_segments entries, so they never meet). Block b takes the segments
// [b * classify_threads * classify_items, (b + 1) * classify_threads * classify_items) and
// lists them in their order: neighbouring sub-warps of the sorting kernels then read
// neighbouring segments, which share cache lines and DRAM pages. Ranks come from warp
// ballots, per item and group, and a prefix over the block's (item, warp) counts, which is
// the segments' order as thread t's item i is segment i * classify_threads + t. A block
// reserves its places in a list with one atomic on its group's size, so the blocks' spans
// come in whatever order the blocks reach their atomics: the sorts do not care, each
// segment being sorted on its own.
template <class Selector, class BeginT, class EndT, class OffsetT>
__global__ __launch_bounds__(classify_threads) void classify_kernel(
  index_t* group_sizes, index_t num_segments, index_t* large_indices, index_t* small_indices,
  index_t* medium_indices_end, BeginT d_begin, EndT d_end)
{
  using word_t = unsigned long long;
  // each (group, item, warp)'s count, then its first place in the block's span of the list
  __shared__ index_t places[group_count][classify_items][classify_warps];
  __shared__ index_t bases[group_count];

  const int lane        = int(threadIdx.x % 32);
  const int warp        = int(threadIdx.x / 32);
  const unsigned before = (1u << lane) - 1u; // the lanes below this one
  const word_t first    = word_t(blockIdx.x) * (classify_threads * classify_items) + threadIdx.x;
  unsigned char groups[classify_items]; // group_count: past the last segment
  unsigned short ranks[classify_items]; // among the lanes of its warp in its group, for its item
#pragma unroll
  for (int i = 0; i < classify_items; ++i)
  {
    const word_t s = first + word_t(i) * classify_threads;
    groups[i]      = group_count;
    if (s < num_segments)
    {
      const index_t segment = index_t(s);
      const OffsetT n       = static_cast<OffsetT>(d_end[segment]) - static_cast<OffsetT>(d_begin[segment]);
      groups[i]             = group_of<Selector>(n);
    }
#pragma unroll
    for (int g = 0; g < group_count; ++g)
    {
      const unsigned mine = __ballot_sync(0xffffffffu, groups[i] == g);
      if (groups[i] == g)
      {
        ranks[i] = (unsigned short) __popc(mine & before);
      }
      if (lane == 0)
      {
        places[g][i][warp] = index_t(__popc(mine));
      }
    }
  }
  __syncthreads();
  if (warp < group_count)
  {
    // a warp a group: its counts, in (item, warp) order, scanned into first places
    constexpr int per_lane = classify_items * classify_warps / 32;
    index_t* counts        = &places[warp][0][0] + lane * per_lane;
    index_t own[per_lane];
    index_t sum = 0;
#pragma unroll
    for (int j = 0; j < per_lane; ++j)
    {
      own[j] = counts[j];
      sum += own[j];
    }
    index_t inclusive = sum;
#pragma unroll
    for (int d = 1; d < 32; d *= 2)
    {
      const index_t below = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d)
      {
        inclusive += below;
      }
    }
    const index_t total = __shfl_sync(0xffffffffu, inclusive, 31);
    index_t run         = inclusive - sum;
#pragma unroll
    for (int j = 0; j < per_lane; ++j)
    {
      counts[j] = run;
      run += own[j];
    }
    if (lane == 0)
    {
      bases[warp] = total ? atomicAdd(group_sizes + warp, total) : 0;
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < classify_items; ++i)
  {
    const int g = groups[i];
    if (g == group_count)
    {
      continue;
    }
    const index_t segment = index_t(first + word_t(i) * classify_threads);
    const index_t place   = bases[g] + places[g][i][warp] + ranks[i];
    if (g == large_group)
    {
      large_indices[place] = segment;
    }
    else if (g == small_group)
    {
      small_indices[place] = segment;
    }
    else
    {
      *(medium_indices_end - 1 - place) = segment;
    }
  }
}

// Items per thread of the middle tier by default: the largest power-of-two tile below CUB's
// (256 x 23 = 5888 -> 4096, so that segments of 4096 keys fit it whole), or 0 (no tier)
// when that would leave fewer than two items per thread.
constexpr int mid_tier_items(int threads, int items)
{
  int tile = 1;
  while (tile * 2 < threads * items)
  {
    tile *= 2;
  }
  return (tile % threads == 0 && tile / threads >= 2 && tile < threads * items) ? tile / threads : 0;
}

// Blocks an SM of the large kernel: two for the middle tier of 4-byte keys alone, whose
// 16 keys a thread fit 128 registers (it sorts 4096-key segments at twice the occupancy
// of CUB's tile), so that an offset iterator's 64-bit arithmetic cannot push it to one;
// one elsewhere (wider items take more registers than two blocks an SM leave them).
template <class KeyT, class ValueT>
constexpr int mid_blocks_per_sm(bool mid)
{
  return mid && ::cuda::std::is_same_v<ValueT, CUB_NS_QUALIFIER::NullType> && sizeof(KeyT) == 4 ? 2 : 1;
}

// Sorts one large segment with CUB's AgentSegmentedRadixSort at `Items` items per thread:
// in shared memory when it fits a tile, else by passes through global memory.
template <bool Descending, class Selector, class KeyT, class ValueT, class OffsetT, int Items>
struct large_sorter
{
  using p                         = policies<Selector>;
  static constexpr bool keys_only = ::cuda::std::is_same_v<ValueT, CUB_NS_QUALIFIER::NullType>;
  static constexpr int tile       = p::large.threads_per_block * Items;
  static constexpr int key_bits   = int(sizeof(KeyT)) * 8;
  static constexpr int radix_bits = p::large.radix_bits;
  using agent_t                   = CUB_NS_QUALIFIER::detail::radix_sort::
    AgentSegmentedRadixSort<Descending, typename p::template radix<Items>, KeyT, ValueT, OffsetT>;
  using storage_t = typename agent_t::TempStorage;

  // Segment [begin, begin + n) of keys_in (values_in) into keys_out (values_out); the global
  // passes ping-pong through the double buffers, which the host orders so that the last
  // pass lands in keys_out, as CUB's dispatch does.
  static __device__ __forceinline__ void sort(
    storage_t& storage, OffsetT begin, OffsetT n, const KeyT* keys_in, KeyT* keys_out, double_buffer<KeyT> keys_db,
    const ValueT* values_in, ValueT* values_out, double_buffer<ValueT> values_db)
  {
    keys_in += begin;
    keys_out += begin;
    if constexpr (!keys_only)
    {
      values_in += begin;
      values_out += begin;
    }
    agent_t agent(n, storage);
    // a segment of exactly one tile fits: the agent's loads and stores are guarded by n
    if (n <= OffsetT(tile))
    {
      agent.ProcessSinglePass(0, key_bits, keys_in, values_in, keys_out, values_out);
      return;
    }
    KeyT* k_cur   = keys_db.current() + begin;
    KeyT* k_alt   = keys_db.alternate() + begin;
    ValueT* v_cur = values_db.current();
    ValueT* v_alt = values_db.alternate();
    if constexpr (!keys_only)
    {
      v_cur += begin;
      v_alt += begin;
    }
    int bits = key_bits < radix_bits ? key_bits : radix_bits;
    agent.ProcessIterative(0, bits, keys_in, values_in, k_cur, v_cur);
    for (int bit = bits; bit < key_bits; bit += bits)
    {
      bits = key_bits - bit < radix_bits ? key_bits - bit : radix_bits;
      __syncthreads(); // the last pass is done with shared memory
      agent.ProcessIterative(bit, bits, k_cur, v_cur, k_alt, v_alt);
      ::cuda::std::swap(k_cur, k_alt);
      ::cuda::std::swap(v_cur, v_alt);
    }
  }
};

// Items per thread of the large kernel's agent: the middle tier's, or CUB's.
template <class Selector, int MidItems, bool Mid>
constexpr int large_items = Mid ? (MidItems > 0 ? MidItems : 1) : policies<Selector>::large.items_per_thread;

// The group_sizes[0] large segments listed in large_indices, in two kernels: `Mid` takes
// those of at most MidItems items per thread (its agent and so its registers sized for
// them: a kernel's register count is that of its largest path, and CUB's tile costs one
// block per SM), the other kernel the longer ones (all of them when MidItems == 0).
//
// The grid may be smaller than the group (the host caps it): block b looks at entries b,
// b + grid, b + 2 grid, ..., a thread per entry per round, keeps those of its tier
// (compacted by a block scan) and sorts them one after another.
template <CUB_NS_QUALIFIER::SortOrder Order, class Selector, class KeyT, class ValueT, class BeginT, class EndT,
          class OffsetT, int MidItems, bool Mid>
__global__ __launch_bounds__(int(policies<Selector>::large.threads_per_block),
                             mid_blocks_per_sm<KeyT, ValueT>(Mid)) void large_kernel(
  const index_t* group_sizes, const index_t* large_indices, const KeyT* keys_in, KeyT* keys_out,
  double_buffer<KeyT> keys_db, const ValueT* values_in, ValueT* values_out, double_buffer<ValueT> values_db,
  BeginT d_begin, EndT d_end)
{
  constexpr int threads  = policies<Selector>::large.threads_per_block;
  constexpr int mid_tile = threads * MidItems;
  using sorter_t         = large_sorter<Order == CUB_NS_QUALIFIER::SortOrder::Descending,
                                        Selector, KeyT, ValueT, OffsetT, large_items<Selector, MidItems, Mid>>;
  using scan_t           = CUB_NS_QUALIFIER::BlockScan<int, threads>;
  __shared__ union
  {
    typename sorter_t::storage_t sort;
    typename scan_t::TempStorage scan;
  } storage;
  __shared__ index_t picked[threads];

  const unsigned long long count  = group_sizes[0];
  const unsigned long long stride = gridDim.x;
  for (unsigned long long round = blockIdx.x; round < count; round += stride * threads)
  {
    const unsigned long long entry = round + threadIdx.x * stride;
    int mine                       = 0;
    index_t segment                = 0;
    if (entry < count)
    {
      segment         = large_indices[entry];
      const OffsetT n = static_cast<OffsetT>(d_end[segment]) - static_cast<OffsetT>(d_begin[segment]);
      mine            = Mid ? n <= OffsetT(mid_tile) : n > OffsetT(mid_tile);
    }
    int rank, total;
    __syncthreads(); // the last round's sorts are done with shared memory and `picked`
    scan_t(storage.scan).ExclusiveSum(mine, rank, total);
    if (mine)
    {
      picked[rank] = segment;
    }
    __syncthreads();
    for (int k = 0; k < total; ++k)
    {
      if (k > 0)
      {
        __syncthreads(); // the last segment's agent is done with shared memory
      }
      const index_t s     = picked[k];
      const OffsetT begin = static_cast<OffsetT>(d_begin[s]);
      const OffsetT end   = static_cast<OffsetT>(d_end[s]);
      sorter_t::sort(storage.sort, begin, end - begin, keys_in, keys_out, keys_db, values_in, values_out, values_db);
    }
  }
}

// A sub-warp's shared memory when it may sort with either of two agents: one at a time.
template <class Agent, class Half>
union sub_warp_slot
{
  typename Agent::TempStorage full;
  typename Half::TempStorage half;
};

// Sub-warp `threadIdx.x / WARP_THREADS` of the block sorts entry first + that of `list`, if
// the list (of `count` entries) has one, in its own slot of `slots` (the agent's storage, or
// a sub_warp_slot): with `Half` (a sub-warp of the same width at fewer items per thread,
// whose tile is `HalfTile` items; 0: none) where the segment fits that tile, else with `Agent`. The sub-warp's threads read the same length, so they take the
// same branch.
template <class Agent, class Half, int HalfTile, int WarpThreads, class OffsetT, class KeyT, class ValueT,
          class BeginT, class EndT, class Slot>
__device__ __forceinline__ void sort_by_sub_warp(
  Slot* slots, index_t first, index_t count, const index_t* list, const KeyT* keys_in, KeyT* keys_out,
  const ValueT* values_in, ValueT* values_out, BeginT d_begin, EndT d_end)
{
  const index_t group = threadIdx.x / WarpThreads;
  if (first + group < count)
  {
    const index_t segment = list[first + group];
    const OffsetT begin   = static_cast<OffsetT>(d_begin[segment]);
    const OffsetT n       = static_cast<OffsetT>(d_end[segment]) - begin;
    if constexpr (::cuda::std::is_same_v<Slot, typename Agent::TempStorage>)
    {
      Agent(slots[group]).ProcessSegment(int(n), keys_in + begin, keys_out + begin, values_in + begin,
                                         values_out + begin);
    }
    else if (HalfTile > 0 && n <= OffsetT(HalfTile))
    {
      Half(slots[group].half)
        .ProcessSegment(int(n), keys_in + begin, keys_out + begin, values_in + begin, values_out + begin);
    }
    else
    {
      Agent(slots[group].full)
        .ProcessSegment(int(n), keys_in + begin, keys_out + begin, values_in + begin, values_out + begin);
    }
  }
}

// Medium segments are listed backwards from medium_indices_end (classify_kernel's layout),
// small ones in small_indices; the blocks' split between them is CUB's, computed here from
// the group sizes.
template <CUB_NS_QUALIFIER::SortOrder Order, class Selector, class KeyT, class ValueT, class BeginT, class EndT,
          class OffsetT>
__global__ __launch_bounds__(int(policies<Selector>::small.threads_per_block)) void small_kernel(
  const index_t* group_sizes, index_t num_segments, const index_t* small_indices, const index_t* medium_indices_end,
  const KeyT* keys_in, KeyT* keys_out, const ValueT* values_in, ValueT* values_out, BeginT d_begin, EndT d_end)
{
  using p                   = policies<Selector>;
  constexpr bool descending = Order == CUB_NS_QUALIFIER::SortOrder::Descending;
  using medium_agent_t      = CUB_NS_QUALIFIER::detail::sub_warp_merge_sort::
    AgentSubWarpSort<descending, typename p::medium_t, KeyT, ValueT, OffsetT>;
  using small_agent_t = CUB_NS_QUALIFIER::detail::sub_warp_merge_sort::
    AgentSubWarpSort<descending, typename p::small_t, KeyT, ValueT, OffsetT>;
  using half_agent_t = CUB_NS_QUALIFIER::detail::sub_warp_merge_sort::
    AgentSubWarpSort<descending, typename p::half_medium_t, KeyT, ValueT, OffsetT>;
  // keys alone: with values the second agent took the kernel from 64 registers to 80 (three
  // blocks an SM instead of four; NVRTC 13.0, int32 pairs)
  constexpr int half_tile = p::half_items > 0 && ::cuda::std::is_same_v<ValueT, CUB_NS_QUALIFIER::NullType>
                            ? p::half_medium_t::ITEMS_PER_TILE
                            : 0;
  constexpr index_t medium_per_block = p::medium_t::SEGMENTS_PER_BLOCK;
  constexpr index_t small_per_block  = p::small_t::SEGMENTS_PER_BLOCK;
  __shared__ union
  {
    sub_warp_slot<medium_agent_t, half_agent_t> medium[medium_per_block];
    typename small_agent_t::TempStorage small[small_per_block];
  } storage;

  const index_t n_small       = group_sizes[1];
  const index_t n_medium      = num_segments - group_sizes[0] - n_small;
  const index_t medium_blocks = (n_medium + medium_per_block - 1) / medium_per_block;
  const index_t blocks        = medium_blocks + (n_small + small_per_block - 1) / small_per_block;
  for (index_t b = blockIdx.x; b < blocks; b += gridDim.x)
  {
    if (b != blockIdx.x)
    {
      __syncthreads(); // sub-warps of the last round are done with shared memory
    }
    if (b < medium_blocks)
    {
      sort_by_sub_warp<medium_agent_t, half_agent_t, half_tile, p::medium_t::WARP_THREADS, OffsetT>(
        storage.medium, b * medium_per_block, n_medium, medium_indices_end - n_medium, keys_in, keys_out,
        values_in, values_out, d_begin, d_end);
    }
    else
    {
      sort_by_sub_warp<small_agent_t, small_agent_t, 0, p::small_t::WARP_THREADS, OffsetT>(
        storage.small, (b - medium_blocks) * small_per_block, n_small, small_indices, keys_in, keys_out, values_in,
        values_out, d_begin, d_end);
    }
  }
}

} // namespace segmented_sort
} // namespace cuprims
