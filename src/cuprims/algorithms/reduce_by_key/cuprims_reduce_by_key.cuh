// cuprims reduce-by-key: each run of equal consecutive keys reduced to one aggregate, on
// CUB's AgentReduceByKey.
//
// CUB's own sweep kernel lives in a dispatch header NVRTC cannot compile, so this is ours:
// one tile per block, decoupled look-back through CUB's ReduceByKeyScanTileState over the
// temporary storage (readied by init_kernel, which also zeroes the run count), for at most
// 2^31 - 1 items (int offsets). The run count goes to d_num_runs[0] when the last tile is
// done. `tile_storage` lays out the tile states and gives the host their size.
#pragma once

#include <cub/agent/agent_reduce_by_key.cuh>
#include <cub/agent/single_pass_scan_operators.cuh>
#include <cub/device/dispatch/tuning/tuning_reduce_by_key.cuh>

#include <cuda/std/type_traits>

namespace cuprims
{
namespace reduce_by_key
{

constexpr int init_threads = 128;  // init_kernel's block (one thread per tile state)

// The tile states of CUB's look-back over (run offset, aggregate) pairs in the temporary
// storage, laid out as CUB lays them out (one array of status-and-pair words where a pair
// fits one atomic word with its status; else status words, partial pairs and inclusive
// pairs, each array starting at a 256-byte boundary), but set up here: CUB's Init checks
// the storage's size on the device, which reports a failure through the device runtime.
// `tiles` of them take tiles * bytes_per_tile + fixed_bytes (the look-back padding and
// each array's alignment) from a 256-aligned start.
template <class AccumT>
struct tile_storage
{
  using state_t      = CUB_NS_QUALIFIER::ReduceByKeyScanTileState<AccumT, int>;
  using pair_t       = CUB_NS_QUALIFIER::KeyValuePair<int, AccumT>;
  using pair_state_t = CUB_NS_QUALIFIER::ScanTileState<pair_t>;

  // one atomic word per tile, or CUB's three arrays (status words, partial and inclusive pairs)
  static constexpr bool one_word     = !::cuda::std::is_base_of_v<pair_state_t, state_t>;
  static constexpr long long padding = state_t::TILE_STATUS_PADDING;
  static constexpr long long align   = 256;

  static constexpr long long status_bytes()
  {
    if constexpr (one_word)
    {
      return sizeof(typename state_t::TxnWord);
    }
    else
    {
      return pair_state_t::description_bytes_per_tile;
    }
  }
  static constexpr long long payload_bytes()
  {
    if constexpr (one_word)
    {
      return 0;
    }
    else
    {
      return pair_state_t::payload_bytes_per_tile;
    }
  }

  static constexpr long long bytes_per_tile = status_bytes() + 2 * payload_bytes();
  static constexpr long long fixed_bytes    = padding * bytes_per_tile + (one_word ? 1 : 3) * align;

  static __device__ __forceinline__ char* after(char* p, long long bytes)
  {
    return p + (bytes + align - 1) / align * align;
  }

  // the tile states over `storage` (256-aligned)
  static __device__ __forceinline__ state_t make(void* storage, int tiles)
  {
    state_t state;
    char* p = static_cast<char*>(storage);
    if constexpr (one_word)
    {
      state.d_tile_descriptors = reinterpret_cast<typename state_t::TxnWord*>(p);
    }
    else
    {
      const long long entries = padding + tiles;
      state.d_tile_status     = reinterpret_cast<typename pair_state_t::StatusWord*>(p);
      p                       = after(p, entries * status_bytes());
      state.d_tile_partial    = reinterpret_cast<pair_t*>(p);
      p                       = after(p, entries * payload_bytes());
      state.d_tile_inclusive  = reinterpret_cast<pair_t*>(p);
    }
    return state;
  }
};

// Readies `tiles` tile states and zeroes the run count.
template <class AccumT, class NumRunsT>
__global__ __launch_bounds__(init_threads) void init_kernel(void* storage, int tiles, NumRunsT* d_num_runs)
{
  auto state = tile_storage<AccumT>::make(storage, tiles);
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
          class EqualityT, class ReductionT, class AccumT>
__global__ __launch_bounds__(int(policies<Selector>::lookback.threads_per_block)) void sweep_kernel(
  KeysInT d_keys_in,
  UniqueOutT d_unique_out,
  ValuesInT d_values_in,
  AggregatesOutT d_aggregates_out,
  NumRunsT* d_num_runs,
  void* storage,
  EqualityT equality_op,
  ReductionT reduction_op,
  int num_items,
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
    int,
    AccumT,
    CUB_NS_QUALIFIER::NullType>;
  __shared__ typename agent_t::TempStorage temp_storage;
  auto state = tile_storage<AccumT>::make(storage, tiles);
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

} // namespace reduce_by_key
} // namespace cuprims
