// cuprims select: stream compaction of the items a predicate keeps, on CUB's AgentSelectIf.
//
// CUB's own sweep kernel lives in a dispatch header NVRTC cannot compile, so this is ours:
// one tile per block, decoupled look-back through CUB's ScanTileState<int> over the
// temporary storage (readied by CUB's DeviceCompactInitKernel, which also zeroes the
// count), for one partition of at most 2^31 - 1 items. The count goes to
// d_num_selected[0] when the last tile is done. Longer inputs run partition by partition
// (select_partition_kernel): each partition offsets its input and output by what came
// before it and leaves its running count in temporary storage for the next.
#pragma once

#include <cub/agent/agent_select_if.cuh>
#include <cub/device/dispatch/kernels/kernel_scan.cuh>
#include <cub/device/dispatch/tuning/tuning_select_if.cuh>

#include <cuda/std/type_traits>

namespace cuprims
{
namespace select
{

// What AgentSelectIf asks of a "streaming context" when the whole input is one partition.
struct single_partition
{
  using total_num_items_t = int;

  __host__ __device__ __forceinline__ int input_offset() const
  {
    return 0;
  }
  __host__ __device__ __forceinline__ int is_first_partition() const
  {
    return 1;
  }
  __device__ __forceinline__ int num_previously_selected() const
  {
    return 0;
  }
  __device__ __forceinline__ int num_previously_rejected() const
  {
    return 0;
  }
  template <class OffsetT>
  __host__ __device__ __forceinline__ int num_total_items(OffsetT num_items) const
  {
    return static_cast<int>(num_items);
  }
  template <class CountIt, class OffsetT>
  __host__ __device__ __forceinline__ void update_num_selected(CountIt count, OffsetT num_selected) const
  {
    *count = num_selected;
  }
};

// The streaming context of one partition of several. The running counts live in device
// memory: the host cannot know how many items the earlier partitions kept.
struct streaming_partition
{
  using total_num_items_t = long long;

  long long items_before;            // input items in the earlier partitions
  const long long* selected_before;  // the running count the previous partition left (not read by the first)
  long long* selected_through;       // the running count this one leaves (not written by the last)
  int first;
  int last;

  __host__ __device__ __forceinline__ long long input_offset() const
  {
    return items_before;
  }
  __host__ __device__ __forceinline__ int is_first_partition() const
  {
    return first;
  }
  __device__ __forceinline__ long long num_previously_selected() const
  {
    return first ? 0 : *selected_before;
  }
  __device__ __forceinline__ long long num_previously_rejected() const
  {
    return items_before - num_previously_selected();
  }
  // Only CUB's partition mode reads this (its rejected items fill the output from the back);
  // select never does, and cuprims' three-way partition uses CUB's own context.
  template <class OffsetT>
  __host__ __device__ __forceinline__ long long num_total_items(OffsetT num_items) const
  {
    return items_before + static_cast<long long>(num_items);
  }
  template <class CountIt, class OffsetT>
  __device__ __forceinline__ void update_num_selected(CountIt count, OffsetT num_selected) const
  {
    const long long total = num_previously_selected() + static_cast<long long>(num_selected);
    if (last)
    {
      *count = static_cast<::cuda::std::remove_reference_t<decltype(*count)>>(total);
    }
    else
    {
      *selected_through = total;
    }
  }
};

template <class Selector>
struct policy
{
  static constexpr auto lookback = CUB_NS_QUALIFIER::detail::current_policy<Selector>().lookback;
  using agent_policy = CUB_NS_QUALIFIER::detail::agent_select_if_policy<
    lookback.threads_per_block,
    lookback.items_per_thread,
    lookback.load_algorithm,
    lookback.load_modifier,
    lookback.scan_algorithm,
    CUB_NS_QUALIFIER::detail::delay_constructor_t<lookback.lookback_delay.kind,
                                                  lookback.lookback_delay.delay,
                                                  lookback.lookback_delay.l2_write_latency>,
    lookback._load_prefetch>;
};

template <class Selector, class InputT, class OutputT, class PredicateT, class Context = single_partition>
using agent_t = CUB_NS_QUALIFIER::detail::select::AgentSelectIf<
  typename policy<Selector>::agent_policy, InputT, CUB_NS_QUALIFIER::NullType*, OutputT, PredicateT,
  CUB_NS_QUALIFIER::NullType, int, Context, CUB_NS_QUALIFIER::SelectImpl::Select>;

template <class Selector, class InputT, class OutputT, class CountT, class PredicateT>
__global__ __launch_bounds__(int(policy<Selector>::lookback.threads_per_block))
void select_kernel(InputT d_in, OutputT d_out, CountT d_num_selected, void* tile_storage, PredicateT predicate,
                   int num_items, int num_tiles)
{
  using agent = agent_t<Selector, InputT, OutputT, PredicateT>;
  __shared__ typename agent::TempStorage temp_storage;
  CUB_NS_QUALIFIER::ScanTileState<int> tile_state;
  tile_state.d_tile_descriptors =
    static_cast<typename CUB_NS_QUALIFIER::ScanTileState<int>::TxnWord*>(tile_storage);
  agent(temp_storage, d_in, nullptr, d_out, predicate, CUB_NS_QUALIFIER::NullType{}, num_items, single_partition{})
    .ConsumeRange(num_tiles, tile_state, d_num_selected);
}

template <class Selector, class InputT, class OutputT, class CountT, class PredicateT>
__global__ __launch_bounds__(int(policy<Selector>::lookback.threads_per_block))
void select_partition_kernel(InputT d_in, OutputT d_out, CountT d_num_selected, void* tile_storage,
                             PredicateT predicate, int num_items, int num_tiles, streaming_partition context)
{
  using agent = agent_t<Selector, InputT, OutputT, PredicateT, streaming_partition>;
  __shared__ typename agent::TempStorage temp_storage;
  CUB_NS_QUALIFIER::ScanTileState<int> tile_state;
  tile_state.d_tile_descriptors =
    static_cast<typename CUB_NS_QUALIFIER::ScanTileState<int>::TxnWord*>(tile_storage);
  agent(temp_storage, d_in, nullptr, d_out, predicate, CUB_NS_QUALIFIER::NullType{}, num_items, context)
    .ConsumeRange(num_tiles, tile_state, d_num_selected);
}

} // namespace select
} // namespace cuprims
