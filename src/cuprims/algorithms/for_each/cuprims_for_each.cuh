// cuprims for_each: an operator applied to every item for its side effects.
//
// One tile per block (a grid-stride loop over tiles only where there are more tiles than a
// grid holds). A thread loads all of its items, striped so that each warp reads
// consecutive ones, before it calls the operator on any: the loads are in flight together.
#pragma once

namespace cuprims
{
namespace for_each
{

template <int Threads, int Items, class InputIt, class T, class Op>
__global__ __launch_bounds__(Threads) void for_each_kernel(InputIt d_in, Op op, long long num_items, long long tiles)
{
  constexpr long long tile_items = static_cast<long long>(Threads) * Items;
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x)
  {
    const long long t0 = t * tile_items + threadIdx.x;
    T items[Items];
    if ((t + 1) * tile_items <= num_items)
    {
#pragma unroll
      for (int j = 0; j < Items; ++j)
      {
        items[j] = d_in[t0 + j * Threads];
      }
#pragma unroll
      for (int j = 0; j < Items; ++j)
      {
        op(items[j]);
      }
    }
    else
    {
#pragma unroll
      for (int j = 0; j < Items; ++j)
      {
        if (t0 + j * Threads < num_items)
        {
          items[j] = d_in[t0 + j * Threads];
        }
      }
#pragma unroll
      for (int j = 0; j < Items; ++j)
      {
        if (t0 + j * Threads < num_items)
        {
          op(items[j]);
        }
      }
    }
  }
}

} // namespace for_each
} // namespace cuprims
