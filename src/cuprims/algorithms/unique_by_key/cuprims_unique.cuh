// cuprims unique-by-key for up to 2^31 - 1 items: the keys decide, the items are gathered.
//
// CUB's unique-by-key agent loads every tile of keys *and* items, although only the
// first item of each run is kept (1/256 of them for runs of 256). This kernel loads the
// keys alone (through the pointer where the keys are an array, so CUB's load path for
// that type is kept), flags the heads of runs with BlockDiscontinuity, counts them with
// a block scan and decoupled look-back over CUB's ScanTileState<int> (readied by CUB's
// DeviceCompactInitKernel, which also zeroes the count), and reads the item of a head
// only: after a block load the thread's items sit at known positions, so the position of
// each selected key is plain arithmetic. One tile per block; the count goes to
// d_num_selected[0] when the last tile is done. The tile shape is CUB's select policy
// for the key type (what CUB's DeviceSelect::Unique runs), see cuprims_select.cuh.
//
// Why not CUB's AgentSelectIf in its unique mode: its scatter hands the output only the
// key and its output index, never the input position. Carrying the position in the items
// ({key, position} pairs through an iterator) would make them a struct, which takes CUB's
// generic 128 x 5 policy instead of its tuning for the key, and doubles the tile exchange
// in shared memory (8-byte pairs at CUB's int32 tile of 384 x 17: 52 KB, past the 48 KB a
// static allocation may have).
#pragma once

#include <cub/agent/single_pass_scan_operators.cuh>
#include <cub/block/block_discontinuity.cuh>
#include <cub/block/block_load.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/iterator/cache_modified_input_iterator.cuh>
#include <cub/util_type.cuh>

#include <cuda/std/__functional/operations.h>
#include <cuda/std/type_traits>

#include <cuprims_run_heads.cuh>
#include <select/cuprims_select.cuh>

namespace cuprims
{
namespace unique
{

template <class Policy, class KeyIn, class ItemIn, class KeyOut, class ItemOut, class CountT, class Equality>
struct agent
{
  static constexpr int threads    = Policy::BLOCK_THREADS;
  static constexpr int items      = Policy::ITEMS_PER_THREAD;
  static constexpr int tile_items = threads * items;

  using key_t = CUB_NS_QUALIFIER::detail::it_value_t<KeyIn>;
  // An array of keys is read through CUB's cache-modified pointer, as CUB's agents do.
  using keys_t = ::cuda::std::_If<::cuda::std::is_pointer_v<KeyIn>,
                                  CUB_NS_QUALIFIER::CacheModifiedInputIterator<Policy::LOAD_MODIFIER, key_t, int>,
                                  KeyIn>;
  // A head's position within its tile: 16 bits hold every tile CUB's select policies make,
  // which keeps the exchange of a dense tile small.
  using local_t      = ::cuda::std::_If<(tile_items <= 65536), unsigned short, int>;
  using tile_state_t = CUB_NS_QUALIFIER::ScanTileState<int>;
  using load_t       = CUB_NS_QUALIFIER::BlockLoad<key_t, threads, items, Policy::LOAD_ALGORITHM>;
  using heads_t      = CUB_NS_QUALIFIER::BlockDiscontinuity<key_t, threads>;
  using scan_t       = CUB_NS_QUALIFIER::BlockScan<int, threads, Policy::SCAN_ALGORITHM>;
  using prefix_t     = CUB_NS_QUALIFIER::TilePrefixCallbackOp<int, ::cuda::std::plus<>, tile_state_t,
                                                              typename Policy::detail::delay_constructor_t>;

  union storage_t
  {
    // the discontinuity, scan and look-back live together: they run back to back
    struct
    {
      typename heads_t::TempStorage heads;
      typename scan_t::TempStorage scan;
      typename prefix_t::TempStorage prefix;
    } flags;
    typename load_t::TempStorage load;
    // a tile with more heads than threads is compacted here, then written in order
    struct
    {
      CUB_NS_QUALIFIER::Uninitialized<key_t[tile_items]> keys;
      local_t positions[tile_items];
    } exchange;
  };
  using TempStorage = CUB_NS_QUALIFIER::Uninitialized<storage_t>;

  storage_t& storage;
  keys_t d_keys;
  ItemIn d_items;
  KeyOut d_out_keys;
  ItemOut d_out_items;
  Equality eq;

  template <bool Last>
  __device__ __forceinline__ void
  consume(int tile, int tile_offset, int valid, tile_state_t& tile_state, CountT d_num_selected)
  {
    key_t keys[items];
    int flags[items];
    run_heads::load_and_flag<Last, load_t, heads_t>(
      storage.load, storage.flags.heads, d_keys, tile, tile_offset, valid, eq, keys, flags);

    int indices[items]; // output index of each head (the prefix of earlier tiles included)
    int tile_heads, prefix;
    if (tile == 0)
    {
      scan_t(storage.flags.scan).ExclusiveSum(flags, indices, tile_heads);
      prefix = 0;
      if (!Last && threadIdx.x == 0)
      {
        tile_state.SetInclusive(0, tile_heads);
      }
    }
    else
    {
      prefix_t prefix_op(tile_state, storage.flags.prefix, ::cuda::std::plus<>{}, tile);
      scan_t(storage.flags.scan).ExclusiveSum(flags, indices, prefix_op);
      tile_heads = prefix_op.GetBlockAggregate();
      prefix     = prefix_op.GetExclusivePrefix();
    }

    scatter(keys, flags, indices, tile_offset, tile_heads, prefix);

    if (Last && threadIdx.x == 0)
    {
      *d_num_selected = static_cast<CUB_NS_QUALIFIER::detail::it_value_t<CountT>>(prefix + tile_heads);
    }
  }

  __device__ __forceinline__ void scatter(
    key_t (&keys)[items], int (&flags)[items], int (&indices)[items], int tile_offset, int tile_heads, int prefix)
  {
    const int first = static_cast<int>(threadIdx.x) * items; // this thread's items start here in the tile
    if (items > 1 && tile_heads > threads)
    {
      // Many heads: compact them in shared memory so that the writes (and, for dense runs,
      // the item reads) of neighbouring threads are neighbours.
      __syncthreads(); // every thread has read the scan's results out of the storage reused here
      _CCCL_PRAGMA_UNROLL_FULL()
      for (int i = 0; i < items; ++i)
      {
        if (flags[i])
        {
          storage.exchange.keys.Alias()[indices[i] - prefix]   = keys[i];
          storage.exchange.positions[indices[i] - prefix] = static_cast<local_t>(first + i);
        }
      }
      __syncthreads();
      for (int j = static_cast<int>(threadIdx.x); j < tile_heads; j += threads)
      {
        d_out_keys[prefix + j]  = storage.exchange.keys.Alias()[j];
        d_out_items[prefix + j] = d_items[tile_offset + static_cast<int>(storage.exchange.positions[j])];
      }
    }
    else
    {
      _CCCL_PRAGMA_UNROLL_FULL()
      for (int i = 0; i < items; ++i)
      {
        if (flags[i])
        {
          d_out_keys[indices[i]]  = keys[i];
          d_out_items[indices[i]] = d_items[tile_offset + first + i];
        }
      }
    }
  }
};

template <class Selector, class KeyIn, class ItemIn, class KeyOut, class ItemOut, class CountT, class Equality>
__global__ __launch_bounds__(int(CUB_NS_QUALIFIER::detail::current_policy<Selector>().lookback.threads_per_block))
void unique_kernel(KeyIn d_keys, ItemIn d_items, KeyOut d_out_keys, ItemOut d_out_items, CountT d_num_selected,
                   void* tile_storage, Equality eq, int num_items, int num_tiles)
{
  using agent_t = agent<typename select::policy<Selector>::agent_policy, KeyIn, ItemIn, KeyOut, ItemOut, CountT,
                        Equality>;
  __shared__ typename agent_t::TempStorage temp_storage;
  typename agent_t::tile_state_t tile_state;
  tile_state.d_tile_descriptors = static_cast<typename agent_t::tile_state_t::TxnWord*>(tile_storage);
  agent_t agent{temp_storage.Alias(), typename agent_t::keys_t(d_keys), d_items, d_out_keys, d_out_items, eq};
  const int tile        = static_cast<int>(blockIdx.x);
  const int tile_offset = tile * agent_t::tile_items;
  if (tile < num_tiles - 1)
  {
    agent.template consume<false>(tile, tile_offset, agent_t::tile_items, tile_state, d_num_selected);
  }
  else
  {
    agent.template consume<true>(tile, tile_offset, num_items - tile_offset, tile_state, d_num_selected);
  }
}

} // namespace unique
} // namespace cuprims
