// cuprims segmented reduction.
//
// Most problems run CUB's DeviceSegmentedReduceKernel as it is: a thread, a warp or a block
// per segment, chosen inside the kernel by the max_segment_size hint (the host sizes the
// grid by the same rule). Few segments (fewer than the GPU has block slots) would leave
// most of the GPU idle with one block each, so they run here instead, in two kernels:
//   * slice_kernel: `slices` blocks per segment; block j of segment s reduces slice j of it
//     (slices are whole tiles, sized on the device from the segment's own length, so the
//     non-empty slices of a segment are its first ones) into partials[s * slices + j];
//   * combine_kernel: one block per segment combines its non-empty partials and the
//     initial value into d_out[s] (the initial value alone for an empty segment).
#pragma once

#include <cub/agent/agent_reduce.cuh>
#include <cub/device/dispatch/kernels/kernel_segmented_reduce.cuh>

#include <cuda/std/functional>

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

} // namespace segmented_reduce
} // namespace cuprims
