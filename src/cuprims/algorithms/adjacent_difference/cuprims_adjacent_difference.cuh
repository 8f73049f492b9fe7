// cuprims adjacent difference: each item combined with its neighbour, on CUB's
// BlockAdjacentDifference.
//
//   left:  out[0] = in[0],         out[i] = op(in[i], in[i - 1])
//   right: out[n - 1] = in[n - 1], out[i] = op(in[i], in[i + 1])
//
// One tile per block: the tile is loaded whole before any of it is written, so an output
// that is the input itself is safe within a tile. Across a tile's edge the neighbour belongs
// to another block, which may already have overwritten it; for an in-place call save_kernel
// first copies each tile's neighbour to `saved`, and the tile reads it there.
#pragma once

#include <cub/block/block_adjacent_difference.cuh>
#include <cub/block/block_load.cuh>
#include <cub/block/block_store.cuh>

namespace cuprims
{
namespace adjacent_difference
{

// The item across each tile's edge (the one before it for `Left`, the one after it
// otherwise), copied before any tile is written: saved[t] for tile t.
template <int Threads, int Items, bool Left, class InputIt, class T>
__global__ __launch_bounds__(Threads) void save_kernel(InputIt d_in, T* saved, long long num_items, int tiles)
{
  constexpr long long tile_items = static_cast<long long>(Threads) * Items;
  for (long long t = static_cast<long long>(blockIdx.x) * Threads + threadIdx.x; t < tiles;
       t += static_cast<long long>(gridDim.x) * Threads)
  {
    if constexpr (Left)
    {
      if (t > 0)
      {
        saved[t] = d_in[t * tile_items - 1];
      }
    }
    else if (t < tiles - 1)
    {
      saved[t] = d_in[(t + 1) * tile_items];
    }
  }
}

// One tile per block. `saved`: the neighbours save_kernel copied (in place), or null (the
// neighbour is read from the input).
template <int Threads, int Items, bool Left, class InputIt, class OutputIt, class T, class OutT, class Op>
__global__ __launch_bounds__(Threads) void difference_kernel(
  InputIt d_in, OutputIt d_out, const T* saved, Op op, long long num_items, int tiles)
{
  using load_t  = CUB_NS_QUALIFIER::BlockLoad<T, Threads, Items, CUB_NS_QUALIFIER::BLOCK_LOAD_WARP_TRANSPOSE>;
  using store_t = CUB_NS_QUALIFIER::BlockStore<OutT, Threads, Items, CUB_NS_QUALIFIER::BLOCK_STORE_WARP_TRANSPOSE>;
  using diff_t  = CUB_NS_QUALIFIER::BlockAdjacentDifference<T, Threads>;
  __shared__ union
  {
    typename load_t::TempStorage load;
    typename store_t::TempStorage store;
    typename diff_t::TempStorage diff;
  } smem;

  constexpr int tile_items = Threads * Items;
  const int t              = static_cast<int>(blockIdx.x);
  const long long t0       = static_cast<long long>(t) * tile_items;
  const int valid          = static_cast<int>(::cuda::std::min<long long>(tile_items, num_items - t0));
  const bool full          = valid == tile_items;
  const bool first         = t == 0;
  const bool last          = t == tiles - 1;

  T items[Items];
  if (full)
  {
    load_t(smem.load).Load(d_in + t0, items);
  }
  else
  {
    load_t(smem.load).Load(d_in + t0, items, valid);
  }
  T neighbour{};
  if constexpr (Left)
  {
    if (!first)
    {
      neighbour = saved ? saved[t] : d_in[t0 - 1];
    }
  }
  else if (!last)
  {
    neighbour = saved ? saved[t] : d_in[t0 + tile_items];
  }
  __syncthreads(); // the load's shared memory is the difference's

  OutT out[Items];
  diff_t diff(smem.diff);
  if constexpr (Left)
  {
    if (full)
    {
      first ? diff.SubtractLeft(items, out, op) : diff.SubtractLeft(items, out, op, neighbour);
    }
    else
    {
      first ? diff.SubtractLeftPartialTile(items, out, op, valid)
            : diff.SubtractLeftPartialTile(items, out, op, valid, neighbour);
    }
  }
  else
  {
    if (!last)
    {
      diff.SubtractRight(items, out, op, neighbour); // every tile but the last is full
    }
    else if (full)
    {
      diff.SubtractRight(items, out, op);
    }
    else
    {
      diff.SubtractRightPartialTile(items, out, op, valid);
    }
  }
  __syncthreads(); // the difference's shared memory is the store's

  if (full)
  {
    store_t(smem.store).Store(d_out + t0, out);
  }
  else
  {
    store_t(smem.store).Store(d_out + t0, out, valid);
  }
}

} // namespace adjacent_difference
} // namespace cuprims
