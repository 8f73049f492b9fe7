// cuprims segmented scans: a prefix scan of each segment [begin[s], end[s]) of the input,
// written at the same positions of the output.
//
// Two ways through one kernel, chosen on the device (nothing is read back to the host):
//   * ordered segments (each starting at or after the end and the start of the one before,
//     all within the first `extent` items: what offset arrays give): one pass over the
//     positions [0, extent) in tiles, one tile per block, (head flag, value) pairs scanned
//     with decoupled look-back through the by-key tile states (cuprims_by_key_tiles.cuh), so
//     a segment longer than a tile is spread over the whole GPU and a tile holds as many
//     short segments as fit; positions outside every segment are read but not written;
//   * any other segments (unordered, overlapping, or past the extent): each block scans
//     whole segments, striding over them, tile by tile with a running prefix.
// init_kernel readies the tile states and checks the order; a segment out of order writes
// the call's epoch to `order_flag`, which scan_kernel compares with its own (a flag left by
// an earlier call holds another epoch, so nothing has to be zeroed first).
#pragma once

#include <cub/agent/single_pass_scan_operators.cuh>
#include <cub/block/block_exchange.cuh>
#include <cub/block/block_load.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/block/block_store.cuh>
#include <cub/thread/thread_operators.cuh>

#include <cuda/std/type_traits>

#include <cuprims_by_key_tiles.cuh>
#include <cuprims_init_value.cuh>

namespace cuprims
{
namespace segmented_scan
{

constexpr int init_threads = 256;  // init_kernel's block

// Readies `tiles` tile states (when there is more than one tile) and checks that the
// segments are ordered and within [0, extent): where one is not, writes `epoch` to the flag.
template <class AccumT, class BeginIt, class EndIt>
__global__ __launch_bounds__(init_threads) void init_kernel(
  void* storage, int tiles, BeginIt d_begin, EndIt d_end, int num_segments, long long extent, unsigned* order_flag,
  unsigned epoch)
{
  if (tiles > 1)
  {
    by_key::tile_storage<AccumT>::make(storage, tiles).InitializeStatus(tiles);
  }
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  bool out_of_order      = false;
  for (long long s = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; s < num_segments; s += stride)
  {
    const long long b = static_cast<long long>(d_begin[s]);
    const long long e = static_cast<long long>(d_end[s]);
    out_of_order |= b < 0 || (e > b && e > extent);
    if (s > 0)
    {
      const long long pb = static_cast<long long>(d_begin[s - 1]);
      const long long pe = static_cast<long long>(d_end[s - 1]);
      out_of_order |= b < pb || b < pe;
    }
  }
  if (out_of_order)
  {
    *order_flag = epoch;
  }
}

// The tile shape and the block-wide collectives for one accumulator type.
template <int Threads, int Items, class AccumT>
struct tile_kit
{
  static constexpr int threads = Threads;
  static constexpr int items   = Items;
  static constexpr int tile    = Threads * Items;
  // the most segments of one tile whose bounds are staged in shared memory (more: read
  // from global memory as they are walked)
  static constexpr int staged = Threads * 4;

  using pair_t       = CUB_NS_QUALIFIER::KeyValuePair<int, AccumT>;
  using state_t      = typename by_key::tile_storage<AccumT>::state_t;
  using load_t       = CUB_NS_QUALIFIER::BlockLoad<AccumT, Threads, Items, CUB_NS_QUALIFIER::BLOCK_LOAD_WARP_TRANSPOSE>;
  using store_t      = CUB_NS_QUALIFIER::BlockStore<AccumT, Threads, Items, CUB_NS_QUALIFIER::BLOCK_STORE_WARP_TRANSPOSE>;
  using exchange_t   = CUB_NS_QUALIFIER::BlockExchange<AccumT, Threads, Items>;
  using mask_xchg_t  = CUB_NS_QUALIFIER::BlockExchange<unsigned char, Threads, Items>;
  using pair_scan_t  = CUB_NS_QUALIFIER::BlockScan<pair_t, Threads, CUB_NS_QUALIFIER::BLOCK_SCAN_WARP_SCANS>;
  using value_scan_t = CUB_NS_QUALIFIER::BlockScan<AccumT, Threads, CUB_NS_QUALIFIER::BLOCK_SCAN_WARP_SCANS>;

  template <class ScanOpT>
  using prefix_t = CUB_NS_QUALIFIER::TilePrefixCallbackOp<pair_t,
                                                          CUB_NS_QUALIFIER::detail::ScanBySegmentOp<ScanOpT>,
                                                          state_t,
                                                          CUB_NS_QUALIFIER::detail::fixed_delay_constructor_t<350, 450>>;

  template <class ScanOpT>
  union storage_t
  {
    typename load_t::TempStorage load;
    typename store_t::TempStorage store;
    typename exchange_t::TempStorage exchange;
    typename mask_xchg_t::TempStorage mask;
    typename value_scan_t::TempStorage value_scan;
    struct
    {
      long long begin[staged + 1];   // the tile's segments' starts, and the next one's
      long long end[staged];
    } bounds;
    struct
    {
      typename pair_scan_t::TempStorage scan;
      typename tile_kit::template prefix_t<ScanOpT>::TempStorage prefix;
    } pair_scan;
    struct
    {
      typename value_scan_t::TempStorage scan;
      typename tile_kit::template prefix_t<ScanOpT>::TempStorage prefix;
    } value_lookback;
  };
};

// A tile without a segment head scans its values alone; its look-back still combines
// (head count, value) pairs, the tile's being (0, its values' aggregate).
template <class PrefixT, class PairT, class AccumT>
struct values_through_pairs
{
  PrefixT& pairs;

  __device__ __forceinline__ AccumT operator()(const AccumT& block_aggregate)
  {
    PairT aggregate;
    aggregate.key   = 0;
    aggregate.value = block_aggregate;
    return pairs(aggregate).value;
  }
};

// The running prefix of a segment scanned tile by tile by one block.
template <class AccumT, class ScanOpT>
struct running_prefix
{
  AccumT running;
  ScanOpT op;

  __device__ __forceinline__ AccumT operator()(const AccumT& block_aggregate)
  {
    const AccumT prefix = running;
    running             = op(running, block_aggregate);
    return prefix;
  }
};

// The last segment whose start is at most p (-1 if none), found by a whole warp in log32
// rounds (a round: 32 probes and a ballot) instead of log2 dependent loads: the search for a
// tile's first and last segments sits on its critical path. Every lane returns the answer.
template <class BeginIt>
__device__ __forceinline__ int warp_last_segment_starting_by(BeginIt d_begin, int num_segments, long long p)
{
  const int lane = static_cast<int>(threadIdx.x % 32);
  // every segment below lo starts at or before p; every one from hi on starts after it
  long long lo = 0, hi = num_segments;
  while (hi - lo > 32)
  {
    const long long step  = (hi - lo + 31) / 32;
    const long long probe = lo + lane * step;
    const bool before     = probe < hi && static_cast<long long>(d_begin[probe]) <= p;
    const int count       = __popc(__ballot_sync(0xffffffffu, before));
    if (count == 0)
    {
      return static_cast<int>(lo) - 1;
    }
    const long long next_hi = lo + count * step;
    lo                      = lo + (count - 1) * step + 1;
    hi                      = next_hi < hi ? next_hi : hi;
  }
  const long long probe = lo + lane;
  const bool before     = probe < hi && static_cast<long long>(d_begin[probe]) <= p;
  return static_cast<int>(lo) + __popc(__ballot_sync(0xffffffffu, before)) - 1;
}

// One tile of ordered segments: positions [t * tile, t * tile + tile) within the extent.
template <class Kit, bool Inclusive, bool HasInit, class InputIt, class OutputIt, class BeginIt, class EndIt,
          class AccumT, class ScanOpT>
__device__ __forceinline__ void scan_ordered_tile(
  typename Kit::template storage_t<ScanOpT>& smem,
  int* segment_range,
  InputIt d_in,
  OutputIt d_out,
  BeginIt d_begin,
  EndIt d_end,
  int num_segments,
  int extent,
  void* storage,
  int tiles,
  ScanOpT op,
  AccumT init)
{
  using pair_t         = typename Kit::pair_t;
  constexpr int items  = Kit::items;
  const int t          = static_cast<int>(blockIdx.x);
  const long long t0   = static_cast<long long>(t) * Kit::tile;
  const int valid      = static_cast<int>(::cuda::std::min<long long>(Kit::tile, extent - t0));
  const bool full_tile = valid == Kit::tile;

  // Striped loads (coalesced, straight to registers) stay in flight while warps 0 and 1
  // search for the tile's segments; the values are put in blocked order after.
  AccumT values[items];
  if (full_tile)
  {
    CUB_NS_QUALIFIER::LoadDirectStriped<Kit::threads>(static_cast<int>(threadIdx.x), d_in + t0, values);
  }
  else
  {
    CUB_NS_QUALIFIER::LoadDirectStriped<Kit::threads>(static_cast<int>(threadIdx.x), d_in + t0, values, valid);
  }
  // warp 0 finds the tile's first segment, warp 1 its last (Threads >= 64)
  const int warp = static_cast<int>(threadIdx.x / 32);
  if (warp < 2)
  {
    const int found = warp_last_segment_starting_by(d_begin, num_segments, warp == 0 ? t0 : t0 + valid - 1);
    if (threadIdx.x % 32 == 0)
    {
      segment_range[warp] = found;
    }
  }
  typename Kit::exchange_t(smem.exchange).StripedToBlocked(values);
  __syncthreads();

  // each thread's items are consecutive positions: find the first one's segment, then walk.
  // The bounds of the tile's segments come from shared memory where they fit.
  const int s_first = ::cuda::std::max(segment_range[0], 0);
  const int s_last  = segment_range[1];
  const int count   = s_last - s_first + 1;
  const bool staged = count <= Kit::staged;
  if (staged)
  {
    for (int k = static_cast<int>(threadIdx.x); k <= count; k += Kit::threads)
    {
      const int seg = s_first + k;
      smem.bounds.begin[k] = seg < num_segments ? static_cast<long long>(d_begin[seg])
                                                : (::cuda::std::numeric_limits<long long>::max)();
      if (k < count)
      {
        smem.bounds.end[k] = static_cast<long long>(d_end[seg]);
      }
    }
  }
  __syncthreads();
  auto begin_of = [&](int seg) -> long long {
    return staged ? smem.bounds.begin[seg - s_first] : static_cast<long long>(d_begin[seg]);
  };
  auto end_of = [&](int seg) -> long long {
    return staged ? smem.bounds.end[seg - s_first] : static_cast<long long>(d_end[seg]);
  };
  const long long p0 = t0 + static_cast<long long>(threadIdx.x) * items;
  // the last segment in [s_first, s_last] starting at or before p0 (s_first - 1: none)
  int s = s_first - 1;
  for (int lo = s_first, hi = s_last; lo <= hi;)
  {
    const int mid = lo + (hi - lo) / 2;
    if (begin_of(mid) <= p0)
    {
      s  = mid;
      lo = mid + 1;
    }
    else
    {
      hi = mid - 1;
    }
  }
  constexpr long long never = (::cuda::std::numeric_limits<long long>::max)();
  long long seg_begin  = s >= 0 ? begin_of(s) : 0;
  long long seg_end    = s >= 0 ? end_of(s) : 0;
  long long next_begin = s < s_last ? begin_of(s + 1) : never;

  pair_t pairs[items];
  unsigned char inside[items];
  bool heads[items];
  bool all_inside = true;
  bool any_head   = false;
  _CCCL_PRAGMA_UNROLL_FULL()
  for (int i = 0; i < items; ++i)
  {
    const long long p = p0 + i;
    while (next_begin <= p)
    {
      ++s;
      seg_begin  = next_begin;
      seg_end    = end_of(s);
      next_begin = s < s_last ? begin_of(s + 1) : never;
    }
    const bool in_range   = p < t0 + valid;
    const bool in_segment = s >= 0 && in_range && p >= seg_begin && p < seg_end;
    all_inside &= in_segment || !in_range;
    inside[i] = in_segment;
    heads[i]  = p == seg_begin;
    // a position outside every segment is a head too: nothing it holds reaches a written item
    pairs[i].key   = !in_segment || heads[i];
    pairs[i].value = values[i];
    any_head |= pairs[i].key;
  }
  // a uniform choice (and the barrier before the scans reuse the bounds' shared memory)
  const bool tile_has_head = __syncthreads_or(any_head);

  const CUB_NS_QUALIFIER::detail::ScanBySegmentOp<ScanOpT> pair_op(op);
  typename Kit::state_t state = by_key::tile_storage<AccumT>::make(storage, tiles);
  if (t == 0)
  {
    pair_t aggregate;
    if constexpr (Inclusive)
    {
      typename Kit::pair_scan_t(smem.pair_scan.scan).InclusiveScan(pairs, pairs, pair_op, aggregate);
    }
    else
    {
      typename Kit::pair_scan_t(smem.pair_scan.scan).ExclusiveScan(pairs, pairs, pair_op, aggregate);
    }
    if (threadIdx.x == 0 && tiles > 1)
    {
      state.SetInclusive(0, aggregate);
    }
  }
  else if (tile_has_head)
  {
    typename Kit::template prefix_t<ScanOpT> prefix(state, smem.pair_scan.prefix, pair_op, t);
    if constexpr (Inclusive)
    {
      typename Kit::pair_scan_t(smem.pair_scan.scan).InclusiveScan(pairs, pairs, pair_op, prefix);
    }
    else
    {
      typename Kit::pair_scan_t(smem.pair_scan.scan).ExclusiveScan(pairs, pairs, pair_op, prefix);
    }
  }
  else
  {
    using prefix_t = typename Kit::template prefix_t<ScanOpT>;
    prefix_t prefix(state, smem.value_lookback.prefix, pair_op, t);
    values_through_pairs<prefix_t, pair_t, AccumT> through{prefix};
    // `values` still holds what the pairs were given; the scanned values go back into the
    // pairs, which the code below reads for every tile
    if constexpr (Inclusive)
    {
      typename Kit::value_scan_t(smem.value_lookback.scan).InclusiveScan(values, values, op, through);
    }
    else
    {
      typename Kit::value_scan_t(smem.value_lookback.scan).ExclusiveScan(values, values, op, through);
    }
    _CCCL_PRAGMA_UNROLL_FULL()
    for (int i = 0; i < items; ++i)
    {
      pairs[i].value = values[i];
    }
  }
  _CCCL_PRAGMA_UNROLL_FULL()
  for (int i = 0; i < items; ++i)
  {
    if constexpr (Inclusive)
    {
      values[i] = HasInit ? op(init, pairs[i].value) : pairs[i].value;
    }
    else
    {
      // a segment's first item is the initial value, a later one the initial value and
      // the segment's items before it
      values[i] = heads[i] ? init : op(init, pairs[i].value);
    }
  }
  // every position of the tile inside a segment (the common case): one transposed store
  if (__syncthreads_and(all_inside))
  {
    if (full_tile)
    {
      typename Kit::store_t(smem.store).Store(d_out + t0, values);
    }
    else
    {
      typename Kit::store_t(smem.store).Store(d_out + t0, values, valid);
    }
    return;
  }

  // blocked -> striped, so that consecutive threads write consecutive positions; only
  // positions inside a segment are written
  typename Kit::exchange_t(smem.exchange).BlockedToStriped(values);
  __syncthreads();
  typename Kit::mask_xchg_t(smem.mask).BlockedToStriped(inside);
  _CCCL_PRAGMA_UNROLL_FULL()
  for (int i = 0; i < items; ++i)
  {
    if (inside[i])
    {
      d_out[t0 + i * Kit::threads + static_cast<int>(threadIdx.x)] = values[i];
    }
  }
}

// Whole segments, one block each, striding over them: each scanned tile by tile with the
// block's running prefix (any segments: unordered, overlapping, past the extent).
template <class Kit, bool Inclusive, bool HasInit, class InputIt, class OutputIt, class BeginIt, class EndIt,
          class AccumT, class ScanOpT>
__device__ __forceinline__ void scan_whole_segments(
  typename Kit::template storage_t<ScanOpT>& smem,
  InputIt d_in,
  OutputIt d_out,
  BeginIt d_begin,
  EndIt d_end,
  int num_segments,
  ScanOpT op,
  AccumT init)
{
  constexpr int items = Kit::items;
  for (int s = static_cast<int>(blockIdx.x); s < num_segments; s += static_cast<int>(gridDim.x))
  {
    const long long b = static_cast<long long>(d_begin[s]);
    const long long e = static_cast<long long>(d_end[s]);
    running_prefix<AccumT, ScanOpT> prefix{AccumT{}, op};
    for (long long c = b; c < e; c += Kit::tile)
    {
      const int valid = static_cast<int>(::cuda::std::min<long long>(Kit::tile, e - c));
      AccumT values[items];
      typename Kit::load_t(smem.load).Load(d_in + c, values, valid);
      __syncthreads();
      if (c == b)
      {
        AccumT aggregate;
        if constexpr (Inclusive)
        {
          typename Kit::value_scan_t(smem.value_scan).InclusiveScan(values, values, op, aggregate);
        }
        else
        {
          typename Kit::value_scan_t(smem.value_scan).ExclusiveScan(values, values, op, aggregate);
        }
        prefix.running = aggregate;
      }
      else if constexpr (Inclusive)
      {
        typename Kit::value_scan_t(smem.value_scan).InclusiveScan(values, values, op, prefix);
      }
      else
      {
        typename Kit::value_scan_t(smem.value_scan).ExclusiveScan(values, values, op, prefix);
      }
      _CCCL_PRAGMA_UNROLL_FULL()
      for (int i = 0; i < items; ++i)
      {
        if constexpr (Inclusive)
        {
          if constexpr (HasInit)
          {
            values[i] = op(init, values[i]);
          }
        }
        else
        {
          const bool first = c == b && threadIdx.x == 0 && i == 0;
          values[i]        = first ? init : op(init, values[i]);
        }
      }
      __syncthreads();
      typename Kit::store_t(smem.store).Store(d_out + c, values, valid);
      __syncthreads();
    }
  }
}

// The segmented scan: ordered segments by tiles of positions (blocks past the last tile
// return), any others by whole segments.
template <int Threads, int Items, class InputIt, class OutputIt, class BeginIt, class EndIt, class AccumT,
          class ScanOpT, class InitT, bool Inclusive>
__global__ __launch_bounds__(Threads) void scan_kernel(
  InputIt d_in,
  OutputIt d_out,
  BeginIt d_begin,
  EndIt d_end,
  int num_segments,
  int extent,
  void* storage,
  int tiles,
  const unsigned* order_flag,
  unsigned epoch,
  ScanOpT op,
  InitT init)
{
  using kit_t                = tile_kit<Threads, Items, AccumT>;
  constexpr bool has_init    = !::cuda::std::is_same_v<InitT, no_init>;
  static_assert(has_init || Inclusive, "an exclusive scan needs an initial value");
  __shared__ typename kit_t::template storage_t<ScanOpT> smem;
  __shared__ int segment_range[2];
  AccumT initial{};
  if constexpr (has_init)
  {
    initial = resolve_init<AccumT>(init);
  }
  if (extent > 0 && *order_flag != epoch)
  {
    if (static_cast<int>(blockIdx.x) < tiles)
    {
      scan_ordered_tile<kit_t, Inclusive, has_init>(
        smem, segment_range, d_in, d_out, d_begin, d_end, num_segments, extent, storage, tiles, op, initial);
    }
  }
  else
  {
    scan_whole_segments<kit_t, Inclusive, has_init>(smem, d_in, d_out, d_begin, d_end, num_segments, op, initial);
  }
}

} // namespace segmented_scan
} // namespace cuprims
