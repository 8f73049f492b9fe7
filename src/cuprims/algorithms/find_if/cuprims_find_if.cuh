// cuprims find_if: the index of the first item for which a predicate holds.
//
// The answer is kept in the caller's index array itself: init_kernel sets it to num_items
// (nothing found), and every tile with a match lowers it with an atomic minimum. The
// search grid is persistent and each block takes its tiles in increasing order, so a block
// stops at its first match, and every block stops at the first tile that starts at or
// after the smallest match found so far: a match near the front ends the search after
// about one wave of tiles.
#pragma once

#include <cuda/std/type_traits>

namespace cuprims
{
namespace find_if
{

// The atomic minimum's operand type for an index of IndexT's size and signedness.
template <class IndexT>
using atomic_index_t = ::cuda::std::conditional_t<
  sizeof(IndexT) == 8,
  ::cuda::std::conditional_t<::cuda::std::is_signed_v<IndexT>, long long, unsigned long long>,
  ::cuda::std::conditional_t<::cuda::std::is_signed_v<IndexT>, int, unsigned int>>;

template <class IndexT>
__global__ void init_kernel(IndexT* d_out, long long num_items)
{
  *d_out = static_cast<IndexT>(num_items);
}

template <int Threads, int Items, class InputIt, class T, class IndexT, class Cond>
__global__ __launch_bounds__(Threads) void search_kernel(
  InputIt d_in, IndexT* d_out, Cond cond, long long num_items, long long tiles)
{
  using atomic_t                     = atomic_index_t<IndexT>;
  constexpr long long tile_items     = static_cast<long long>(Threads) * Items;
  __shared__ long long tile_first; // the first match in this tile (num_items: none)
  __shared__ bool passed;          // a match at or before this tile is already known

  for (long long t = blockIdx.x; t < tiles; t += gridDim.x)
  {
    const long long t0 = t * tile_items;
    if (threadIdx.x == 0)
    {
      tile_first = num_items;
      passed     = static_cast<long long>(*reinterpret_cast<volatile atomic_t*>(d_out)) <= t0;
    }
    __syncthreads();
    if (passed)
    {
      return;
    }

    // striped: each warp reads consecutive items, and all of a thread's loads are in
    // flight before the first predicate
    T items[Items];
    long long mine = num_items;
    if (t0 + tile_items <= num_items)
    {
#pragma unroll
      for (int j = 0; j < Items; ++j)
      {
        items[j] = d_in[t0 + j * Threads + threadIdx.x];
      }
#pragma unroll
      for (int j = Items - 1; j >= 0; --j)
      {
        if (cond(items[j]))
        {
          mine = t0 + j * Threads + threadIdx.x;
        }
      }
    }
    else
    {
      const int valid = static_cast<int>(num_items - t0);
#pragma unroll
      for (int j = 0; j < Items; ++j)
      {
        if (j * Threads + static_cast<int>(threadIdx.x) < valid)
        {
          items[j] = d_in[t0 + j * Threads + threadIdx.x];
        }
      }
#pragma unroll
      for (int j = Items - 1; j >= 0; --j)
      {
        if (j * Threads + static_cast<int>(threadIdx.x) < valid && cond(items[j]))
        {
          mine = t0 + j * Threads + threadIdx.x;
        }
      }
    }
    if (mine < num_items)
    {
      atomicMin(&tile_first, mine);
    }
    __syncthreads();
    const long long first = tile_first;
    if (first < num_items)
    {
      if (threadIdx.x == 0)
      {
        atomicMin(reinterpret_cast<atomic_t*>(d_out), static_cast<atomic_t>(first));
      }
      return; // this block's later tiles start after its match
    }
    __syncthreads(); // every thread has read tile_first before thread 0 resets it
  }
}

} // namespace find_if
} // namespace cuprims
