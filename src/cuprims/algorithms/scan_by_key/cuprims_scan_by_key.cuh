// cuprims scan-by-key: a prefix scan that restarts at every run of equal consecutive keys,
// on CUB's AgentScanByKey.
//
// CUB's own kernels live in a dispatch header NVRTC cannot compile, so these are ours:
//   * init_kernel readies the tile states (cuprims::by_key::tile_storage, shared with
//     reduce-by-key) and copies, for every tile after the first, the last key of the tile
//     before it (the agent compares a tile's first key with it: a run may cross tiles);
//   * sweep_kernel scans one tile per block, chaining (run flag, partial) pairs through the
//     tile states with decoupled look-back.
// A single tile needs neither: its block never touches the tile states or the keys before.
// OffsetT is the agent's offset type: int, or long long past 2^31 - 1 items (the tile states
// hold int flags either way, as CUB's do).
#pragma once

#include <cub/agent/agent_scan_by_key.cuh>
#include <cub/device/dispatch/tuning/tuning_scan_by_key.cuh>

#include <cuprims_by_key_tiles.cuh>
#include <cuprims_init_value.cuh>

namespace cuprims
{
namespace scan_by_key
{

constexpr int init_threads = 128;  // init_kernel's block (one thread per tile)

// Readies `tiles` tile states; keys_before[t] = the last key of tile t - 1 (t >= 1).
template <class AccumT, class KeysInT, class KeyT>
__global__ __launch_bounds__(init_threads) void init_kernel(
  void* storage, KeysInT d_keys_in, KeyT* keys_before, int tile_items, int tiles)
{
  by_key::tile_storage<AccumT>::make(storage, tiles).InitializeStatus(tiles);
  const int tile = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (tile > 0 && tile < tiles)
  {
    keys_before[tile] = d_keys_in[static_cast<long long>(tile) * tile_items - 1];
  }
}

template <class Selector>
struct policies
{
  static constexpr auto lookback = CUB_NS_QUALIFIER::detail::current_policy<Selector>().lookback;
  using agent_policy             = CUB_NS_QUALIFIER::detail::agent_scan_by_key_policy<
    lookback.threads_per_block,
    lookback.items_per_thread,
    lookback.load_algorithm,
    lookback.load_modifier,
    lookback.scan_algorithm,
    lookback.store_algorithm,
    CUB_NS_QUALIFIER::detail::delay_constructor_t<lookback.lookback_delay.kind,
                                                  lookback.lookback_delay.delay,
                                                  lookback.lookback_delay.l2_write_latency>>;
};

// One tile per block: the tile's runs scanned, each continuing the scan of the run that
// the tiles before it left open.
template <class Selector, class KeysInT, class KeyT, class ValuesInT, class ValuesOutT, class EqualityT, class ScanT,
          class AccumT, class InitT, class OffsetT>
__global__ __launch_bounds__(int(policies<Selector>::lookback.threads_per_block)) void sweep_kernel(
  KeysInT d_keys_in,
  KeyT* keys_before,
  ValuesInT d_values_in,
  ValuesOutT d_values_out,
  void* storage,
  EqualityT equality_op,
  ScanT scan_op,
  InitT init,
  OffsetT num_items,
  int tiles)
{
  using init_t  = decltype(resolve_init<AccumT>(init));
  using agent_t = CUB_NS_QUALIFIER::detail::scan_by_key::AgentScanByKey<
    typename policies<Selector>::agent_policy,
    KeysInT,
    ValuesInT,
    ValuesOutT,
    EqualityT,
    ScanT,
    init_t,
    OffsetT,
    AccumT>;
  __shared__ typename agent_t::TempStorage temp_storage;
  auto state = by_key::tile_storage<AccumT>::make(storage, tiles);
  agent_t(temp_storage, d_keys_in, keys_before, d_values_in, d_values_out, equality_op, scan_op,
          resolve_init<AccumT>(init))
    .ConsumeRange(num_items, state, 0);
}

} // namespace scan_by_key
} // namespace cuprims
