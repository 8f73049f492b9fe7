// cuprims run-length encoding: each run of equal consecutive items gives its first item and
// its length, in one pass that reads the items once.
//
// A reduce-by-key of ones (CUB's DeviceRunLengthEncode::Encode) scans (run count, length)
// pairs item by item, in the lengths' type: 16-byte pairs for int64 lengths. Here a run's
// length is the distance between its head and the next one, so the block scan counts heads
// only (int flags), and the heads of a tile are compacted in shared memory with their
// positions. The look-back carries (heads before the tile, position of the last of them):
// the first head of a tile closes the run that an earlier tile opened. The last tile closes
// the last run at num_items and writes the run count.
//
// The tile states are cuprims::by_key::tile_storage<OffsetT, OffsetT> (one atomic word for
// 32-bit offsets), readied by reduce-by-key's init kernel, which also zeroes the count.
#pragma once

#include <cub/agent/single_pass_scan_operators.cuh>
#include <cub/block/block_discontinuity.cuh>
#include <cub/block/block_load.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/util_type.cuh>

#include <cuda/std/type_traits>

#include <cuprims_by_key_tiles.cuh>
#include <cuprims_run_heads.cuh>

namespace cuprims
{
namespace run_length
{

// The tile shape: the items each thread loads, and how. A whole tile's heads and their
// positions must fit the exchange in a block's static shared memory.
template <int Threads, int Items, CUB_NS_QUALIFIER::BlockLoadAlgorithm Load>
struct policy
{
  static constexpr int threads                            = Threads;
  static constexpr int items                              = Items;
  static constexpr int tile_items                         = Threads * Items;
  static constexpr CUB_NS_QUALIFIER::BlockLoadAlgorithm load = Load;
};

// (heads so far, position of the last of them): counts add, and the later part's last head
// wins where it has one.
template <class OffsetT>
struct last_head_op
{
  using pair_t = CUB_NS_QUALIFIER::KeyValuePair<OffsetT, OffsetT>;

  __device__ __forceinline__ pair_t operator()(const pair_t& earlier, const pair_t& later) const
  {
    pair_t both;
    both.key   = earlier.key + later.key;
    both.value = later.key ? later.value : earlier.value;
    return both;
  }
};

template <class Policy, class ItemIn, class UniqueOut, class CountsOut, class CountT, class NumRunsT, class Equality,
          class OffsetT>
struct agent
{
  static constexpr int threads    = Policy::threads;
  static constexpr int items      = Policy::items;
  static constexpr int tile_items = Policy::tile_items;

  using item_t  = CUB_NS_QUALIFIER::detail::it_value_t<ItemIn>;
  using local_t = ::cuda::std::_If<(tile_items <= 65536), unsigned short, int>; // a position within the tile
  using tiles_t = by_key::tile_storage<OffsetT, OffsetT>;
  using state_t = typename tiles_t::state_t;
  using pair_t  = CUB_NS_QUALIFIER::KeyValuePair<OffsetT, OffsetT>;
  using load_t  = CUB_NS_QUALIFIER::BlockLoad<item_t, threads, items, Policy::load>;
  using heads_t = CUB_NS_QUALIFIER::BlockDiscontinuity<item_t, threads>;
  using scan_t  = CUB_NS_QUALIFIER::BlockScan<int, threads, CUB_NS_QUALIFIER::BLOCK_SCAN_WARP_SCANS>;
  using prefix_t = CUB_NS_QUALIFIER::TilePrefixCallbackOp<pair_t, last_head_op<OffsetT>, state_t>;

  struct storage_t
  {
    union
    {
      typename load_t::TempStorage load;
      struct
      {
        typename heads_t::TempStorage heads;
        typename scan_t::TempStorage scan;
      } flags;
      // the tile's heads in order, and where each one stands in the tile
      struct
      {
        CUB_NS_QUALIFIER::Uninitialized<item_t[tile_items]> items;
        local_t positions[tile_items];
      } exchange;
    };
    typename prefix_t::TempStorage prefix; // used while the exchange is full
    pair_t before; // the tile's exclusive prefix, for every thread
  };
  using TempStorage = CUB_NS_QUALIFIER::Uninitialized<storage_t>;

  storage_t& storage;
  ItemIn d_in;
  UniqueOut d_unique;
  CountsOut d_counts;
  Equality eq;

  template <bool Last>
  __device__ __forceinline__ void
  consume(int tile, OffsetT tile_offset, int valid, state_t& tile_state, NumRunsT* d_num_runs)
  {
    item_t tile_items_in[items];
    int flags[items];
    run_heads::load_and_flag<Last, load_t, heads_t>(
      storage.load, storage.flags.heads, d_in, tile, tile_offset, valid, eq, tile_items_in, flags);
    int indices[items];
    int tile_heads;
    scan_t(storage.flags.scan).ExclusiveSum(flags, indices, tile_heads);
    __syncthreads(); // every thread has its indices: the scan's storage becomes the exchange

    const int first = static_cast<int>(threadIdx.x) * items;
    _CCCL_PRAGMA_UNROLL_FULL()
    for (int i = 0; i < items; ++i)
    {
      if (flags[i])
      {
        storage.exchange.items.Alias()[indices[i]] = tile_items_in[i];
        storage.exchange.positions[indices[i]]     = static_cast<local_t>(first + i);
      }
    }
    __syncthreads();

    // The heads before this tile and the last one's position (none: position -1).
    const local_t* positions = storage.exchange.positions;
    if (threadIdx.x < CUB_NS_QUALIFIER::detail::warp_threads)
    {
      pair_t aggregate;
      aggregate.key   = tile_heads;
      aggregate.value = tile_heads ? tile_offset + positions[tile_heads - 1] : OffsetT(-1);
      pair_t before;
      if (tile == 0)
      {
        before.key   = 0;
        before.value = -1;
        if (!Last && threadIdx.x == 0)
        {
          tile_state.SetInclusive(0, aggregate);
        }
      }
      else
      {
        before = prefix_t(tile_state, storage.prefix, last_head_op<OffsetT>{}, tile)(aggregate); // right in thread 0
      }
      if (threadIdx.x == 0)
      {
        storage.before = before;
      }
    }
    __syncthreads();
    const pair_t before = storage.before;

    for (int j = static_cast<int>(threadIdx.x); j < tile_heads; j += threads)
    {
      const OffsetT run = before.key + j;
      const OffsetT at  = tile_offset + positions[j];
      d_unique[run]     = storage.exchange.items.Alias()[j];
      if (run > 0)
      {
        const OffsetT previous = j ? tile_offset + positions[j - 1] : before.value;
        d_counts[run - 1]      = static_cast<CountT>(at - previous);
      }
    }
    if (Last && threadIdx.x == 0)
    {
      const OffsetT runs = before.key + tile_heads;
      const OffsetT last = tile_heads ? tile_offset + positions[tile_heads - 1] : before.value;
      d_counts[runs - 1] = static_cast<CountT>(tile_offset + valid - last);
      *d_num_runs        = static_cast<NumRunsT>(runs);
    }
  }
};

// One tile per block.
template <class Policy, class ItemIn, class UniqueOut, class CountsOut, class CountT, class NumRunsT, class Equality,
          class OffsetT>
__global__ __launch_bounds__(Policy::threads) void encode_kernel(
  ItemIn d_in,
  UniqueOut d_unique,
  CountsOut d_counts,
  NumRunsT* d_num_runs,
  void* storage,
  Equality eq,
  OffsetT num_items,
  int tiles)
{
  using agent_t = agent<Policy, ItemIn, UniqueOut, CountsOut, CountT, NumRunsT, Equality, OffsetT>;
  __shared__ typename agent_t::TempStorage temp_storage;
  auto tile_state = agent_t::tiles_t::make(storage, tiles);
  agent_t agent{temp_storage.Alias(), d_in, d_unique, d_counts, eq};
  const int tile            = static_cast<int>(blockIdx.x);
  const OffsetT tile_offset = static_cast<OffsetT>(tile) * agent_t::tile_items;
  if (tile < tiles - 1)
  {
    agent.template consume<false>(tile, tile_offset, agent_t::tile_items, tile_state, d_num_runs);
  }
  else
  {
    agent.template consume<true>(tile, tile_offset, static_cast<int>(num_items - tile_offset), tile_state,
                                 d_num_runs);
  }
}

} // namespace run_length
} // namespace cuprims
