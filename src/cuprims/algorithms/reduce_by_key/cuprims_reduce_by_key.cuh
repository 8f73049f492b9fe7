// cuprims reduce-by-key: each run of equal consecutive keys reduced to one aggregate, on
// CUB's AgentReduceByKey.
//
// CUB's own sweep kernel lives in a dispatch header NVRTC cannot compile, so this is ours:
// one tile per block, decoupled look-back through CUB's ReduceByKeyScanTileState over the
// temporary storage (readied by init_kernel, which also zeroes the run count). OffsetT (int,
// or long long past 2^31 - 1 items) is the agents' offset type and the tile states' run
// offsets. The run count goes to d_num_runs[0] when the last tile is done.
// non_trivial_runs_kernel is the same single pass on CUB's AgentRle: each run of more than
// one item gives its offset and length (the lengths are the look-back's values, so
// init_kernel readies its tile states too). The tile states are laid out by
// `cuprims::by_key::tile_storage` (cuprims_by_key_tiles.cuh).
#pragma once

#include <cub/agent/agent_reduce_by_key.cuh>
#include <cub/agent/agent_rle.cuh>
#include <cub/device/dispatch/tuning/tuning_reduce_by_key.cuh>
#include <cub/device/dispatch/tuning/tuning_rle_non_trivial_runs.cuh>

#include <cuprims_by_key_tiles.cuh>

namespace cuprims
{
namespace reduce_by_key
{

constexpr int init_threads = 128;  // init_kernel's block (one thread per tile state)

// Readies `tiles` tile states and zeroes the run count.
template <class AccumT, class NumRunsT, class OffsetT>
__global__ __launch_bounds__(init_threads) void init_kernel(void* storage, int tiles, NumRunsT* d_num_runs)
{
  auto state = by_key::tile_storage<AccumT, OffsetT>::make(storage, tiles);
  state.InitializeStatus(tiles);
  if (blockIdx.x == 0 && threadIdx.x == 0)
  {
    *d_num_runs = 0;
  }
}

template <class Selector>
struct policies
{
  static constexpr auto lookback = CUB_NS_QUALIFIER::detail::current_policy<Selector>().lookback;
  using agent_policy             = CUB_NS_QUALIFIER::detail::agent_reduce_by_key_policy<
    lookback.threads_per_block,
    lookback.items_per_thread,
    lookback.load_algorithm,
    lookback.load_modifier,
    lookback.scan_algorithm,
    CUB_NS_QUALIFIER::detail::delay_constructor_t<lookback.lookback_delay.kind,
                                                  lookback.lookback_delay.delay,
                                                  lookback.lookback_delay.l2_write_latency>>;
};

// One tile per block: the runs it holds, reduced, their keys and aggregates written where
// the look-back places them, and the run count by the last tile.
template <class Selector, class KeysInT, class UniqueOutT, class ValuesInT, class AggregatesOutT, class NumRunsT,
          class EqualityT, class ReductionT, class AccumT, class OffsetT>
__global__ __launch_bounds__(int(policies<Selector>::lookback.threads_per_block)) void sweep_kernel(
  KeysInT d_keys_in,
  UniqueOutT d_unique_out,
  ValuesInT d_values_in,
  AggregatesOutT d_aggregates_out,
  NumRunsT* d_num_runs,
  void* storage,
  EqualityT equality_op,
  ReductionT reduction_op,
  OffsetT num_items,
  int tiles)
{
  using agent_t = CUB_NS_QUALIFIER::detail::reduce_by_key::AgentReduceByKey<
    typename policies<Selector>::agent_policy,
    KeysInT,
    UniqueOutT,
    ValuesInT,
    AggregatesOutT,
    NumRunsT*,
    EqualityT,
    ReductionT,
    OffsetT,
    AccumT,
    CUB_NS_QUALIFIER::NullType>;
  __shared__ typename agent_t::TempStorage temp_storage;
  auto state = by_key::tile_storage<AccumT, OffsetT>::make(storage, tiles);
  agent_t(temp_storage,
          d_keys_in,
          d_unique_out,
          d_values_in,
          d_aggregates_out,
          d_num_runs,
          equality_op,
          reduction_op,
          CUB_NS_QUALIFIER::NullType{})
    .ConsumeRange(num_items, state, 0);
}

template <class Selector>
struct rle_policies
{
  static constexpr auto lookback = CUB_NS_QUALIFIER::detail::current_policy<Selector>().lookback;
  using agent_policy             = CUB_NS_QUALIFIER::detail::agent_rle_policy<
    lookback.threads_per_block,
    lookback.items_per_thread,
    lookback.load_algorithm,
    lookback.load_modifier,
    lookback.store_with_time_slicing,
    lookback.scan_algorithm,
    CUB_NS_QUALIFIER::detail::delay_constructor_t<lookback.lookback_delay.kind,
                                                  lookback.lookback_delay.delay,
                                                  lookback.lookback_delay.l2_write_latency>>;
};

// One tile per block: the offsets and lengths of the tile's runs of more than one item,
// written where the look-back places them, and the run count by the last tile. LengthT is
// the lengths' type: the look-back's values (CUB's agent takes it from the lengths' output).
template <class Selector, class InputT, class OffsetsOutT, class LengthsOutT, class NumRunsT, class EqualityT,
          class LengthT, class OffsetT>
__global__ __launch_bounds__(int(rle_policies<Selector>::lookback.threads_per_block)) void non_trivial_runs_kernel(
  InputT d_in,
  OffsetsOutT d_offsets_out,
  LengthsOutT d_lengths_out,
  NumRunsT* d_num_runs,
  void* storage,
  EqualityT equality_op,
  OffsetT num_items,
  int tiles)
{
  using agent_t = CUB_NS_QUALIFIER::detail::rle::AgentRle<
    typename rle_policies<Selector>::agent_policy,
    InputT,
    OffsetsOutT,
    LengthsOutT,
    EqualityT,
    OffsetT,
    OffsetT,
    CUB_NS_QUALIFIER::NullType>;
  static_assert(::cuda::std::is_same_v<typename agent_t::LengthT, LengthT>,
                "the tile states hold the lengths' type");
  __shared__ typename agent_t::TempStorage temp_storage;
  auto state = by_key::tile_storage<LengthT, OffsetT>::make(storage, tiles);
  agent_t(temp_storage, d_in, d_offsets_out, d_lengths_out, equality_op, num_items, CUB_NS_QUALIFIER::NullType{})
    .ConsumeRange(tiles, state, d_num_runs);
}

} // namespace reduce_by_key
} // namespace cuprims
