// cuprims device-wide reduction kernels, built on CUB's AgentReduce.
//
// The first pass is our own thin kernel so that every launch argument is a plain
// pointer or integer (CUB's own multi-block kernel takes a GridEvenShare struct whose
// layout the host would otherwise have to restate); the tile mapping is computed in the
// kernel from gridDim.x exactly as CUB's host dispatch would. The second pass is CUB's
// DeviceReduceSingleTileKernel, instantiated directly.
#pragma once

#include <cub/device/dispatch/kernels/kernel_reduce.cuh>
#include <cuda/std/functional>

namespace cuprims
{
namespace reduce
{

// Evaluate a CUB reduce policy selector for one fixed compute capability. Used to make
// GPU-to-GPU deterministic builds tile the same way on every architecture.
template <class Selector, int Major, int Minor>
struct fixed_arch_selector
{
  _CCCL_HOST_DEVICE_API constexpr auto operator()(::cuda::compute_capability) const
  {
    return Selector{}(::cuda::compute_capability{Major, Minor});
  }
};

template <class Selector, class InputT, class AccumT, class OpT>
__global__ __launch_bounds__(int(CUB_NS_QUALIFIER::detail::current_policy<Selector>().multi_tile.threads_per_block))
void tiles_kernel(InputT d_in, AccumT* d_partials, long long num_items, OpT op)
{
  constexpr auto policy = CUB_NS_QUALIFIER::detail::current_policy<Selector>().multi_tile;
  using agent_policy_t = CUB_NS_QUALIFIER::detail::agent_reduce_policy<
    0, 0, AccumT, policy.vec_size, policy.reduce_algorithm, policy.load_modifier,
    CUB_NS_QUALIFIER::detail::NoScaling<policy.threads_per_block, policy.items_per_thread, AccumT>>;
  using agent_t = CUB_NS_QUALIFIER::detail::reduce::
    AgentReduce<agent_policy_t, InputT, long long, OpT, AccumT, ::cuda::std::identity>;
  __shared__ typename agent_t::TempStorage temp_storage;

  CUB_NS_QUALIFIER::GridEvenShare<long long> even_share;
  even_share.DispatchInit(num_items, int(gridDim.x), policy.threads_per_block * policy.items_per_thread);
  if (int(blockIdx.x) >= even_share.grid_size)
  {
    return;
  }
  AccumT block_aggregate = agent_t(temp_storage, d_in, op, ::cuda::std::identity{}).ConsumeTiles(even_share);
  if (threadIdx.x == 0)
  {
    d_partials[blockIdx.x] = block_aggregate;
  }
}

} // namespace reduce
} // namespace cuprims
