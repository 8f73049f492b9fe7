// cuprims device-wide reduction kernel, built on CUB's AgentReduce.
//
// One kernel template serves every pass, so a build instantiates (and NVRTC compiles)
// as little as possible:
//   * finalize == 0: each block reduces an even share of tiles (the mapping is computed
//     from gridDim.x exactly as CUB's host dispatch would) into d_partials[blockIdx.x];
//   * finalize == 1: one block reduces all num_items items, combines init, and writes
//     d_out[0] (small problems, and the second pass over the per-block partials).
// A struct held in word form reaches the agent through one call for both passes (see
// the kernel), so CUB's block reduction is inlined once.
// Every launch argument is a pointer or iterator, an integer, the operator or the init value.
// The result goes to d_out[0] (a pointer or a cuprims output iterator), partials to
// d_partials[blockIdx.x], stored as PartialT: the accumulator itself, or the item type
// when the accumulator is a struct's word form (cuprims/_codegen/accumulators.py), so that the
// second pass reads partials exactly as the first reads items and is the same kernel.
#pragma once

#include <cub/agent/agent_reduce.cuh>
#include <cub/device/dispatch/tuning/tuning_reduce.cuh>
#include <cub/grid/grid_even_share.cuh>
#include <cub/util_arch.cuh>

#include <cuda/std/functional>
#include <cuda/std/type_traits>

namespace cuprims
{
namespace reduce
{

// Marks a reduction without an initial value: an empty input leaves the output alone.
struct no_init
{};

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

template <class Selector,
          class InputT,
          class AccumT,
          class OpT,
          class InitT,
          class OutputIt = AccumT*,
          class PartialT = AccumT>
__global__ __launch_bounds__(int(CUB_NS_QUALIFIER::detail::current_policy<Selector>().multi_tile.threads_per_block))
void reduce_kernel(
  InputT d_in, OutputIt d_out, PartialT* d_partials, long long num_items, OpT op, InitT init, int finalize)
{
  constexpr auto policy = CUB_NS_QUALIFIER::detail::current_policy<Selector>().multi_tile;
  // The host launches this one kernel for both passes, at one block size.
  static_assert(policy == CUB_NS_QUALIFIER::detail::current_policy<Selector>().single_tile,
                "cuprims assumes CUB's single-tile and multi-tile reduce policies agree");
  using agent_policy_t = CUB_NS_QUALIFIER::detail::agent_reduce_policy<
    0, 0, AccumT, policy.vec_size, policy.reduce_algorithm, policy.load_modifier,
    CUB_NS_QUALIFIER::detail::NoScaling<policy.threads_per_block, policy.items_per_thread, AccumT>>;
  using agent_t = CUB_NS_QUALIFIER::detail::reduce::
    AgentReduce<agent_policy_t, InputT, long long, OpT, AccumT, ::cuda::std::identity>;
  __shared__ typename agent_t::TempStorage temp_storage;

  // A struct held in word form (PartialT differs from AccumT) reaches the agent through
  // one call for both passes: each call site inlines CUB's whole block reduction (every
  // operator call, every word of every shuffle), and for such values a second one doubles
  // what NVVM and ptxas compile. The finalizing pass is then the even share of a one-block
  // grid, whose strip-mined mapping is the whole range tile by tile, what ConsumeRange(0,
  // num_items) reduces. Every other accumulator keeps the two call sites, whose machine
  // code was measured on the H200 (one call site moved misaligned-input throughput).
  constexpr bool one_agent_call = !::cuda::std::is_same_v<PartialT, AccumT>;
  if (finalize)
  {
    if (num_items == 0)
    {
      if constexpr (!::cuda::std::is_same_v<InitT, no_init>)
      {
        if (threadIdx.x == 0)
        {
          d_out[0] = init;
        }
      }
      return;
    }
    if constexpr (!one_agent_call)
    {
      AccumT aggregate = agent_t(temp_storage, d_in, op, ::cuda::std::identity{}).ConsumeRange(0ll, num_items);
      if (threadIdx.x == 0)
      {
        if constexpr (::cuda::std::is_same_v<InitT, no_init>)
        {
          d_out[0] = aggregate;
        }
        else
        {
          d_out[0] = op(init, aggregate);
        }
      }
      return;
    }
  }

  CUB_NS_QUALIFIER::GridEvenShare<long long> even_share;
  even_share.DispatchInit(
    num_items, one_agent_call && finalize ? 1 : int(gridDim.x), policy.threads_per_block * policy.items_per_thread);
  if (int(blockIdx.x) >= even_share.grid_size)
  {
    return;
  }
  AccumT aggregate = agent_t(temp_storage, d_in, op, ::cuda::std::identity{}).ConsumeTiles(even_share);
  if (threadIdx.x == 0)
  {
    if constexpr (one_agent_call)
    {
      if (finalize)
      {
        if constexpr (::cuda::std::is_same_v<InitT, no_init>)
        {
          d_out[0] = aggregate;
        }
        else
        {
          d_out[0] = op(init, aggregate);
        }
        return;
      }
    }
    d_partials[blockIdx.x] = aggregate;
  }
}

} // namespace reduce
} // namespace cuprims
