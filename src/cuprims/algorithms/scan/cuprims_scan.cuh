// cuprims device-wide scan kernels, built on CUB's AgentScan and ScanTileState
// (single-pass scan with decoupled look-back).
//
// Two kernels, both launched by the host dispatch in cuprims/algorithms/scan.py:
//   * scan_init_kernel: marks every tile's status "not yet set" (and the look-back
//     padding "out of bounds") in the tile-state storage;
//   * scan_kernel: one tile per block; each block scans its tile and chains its prefix
//     through the tile states of the blocks before it.
// A problem of at most one tile needs neither the init kernel nor any tile storage: the
// first tile never touches the tile states when it is also the last.
//
// Unlike CUB's own DeviceScanKernel (whose tile-state argument is a union whose layout
// is host-side C++), every launch argument here is a pointer, an integer, the operator
// or the init value, and the tile-state layout inside the temporary storage is ours:
// `tile_layout` below, whose sizes the host reads back through cuprims_meta.
#pragma once

// CUB's newer "lookahead" (warpspeed) scan is chosen by its policy selector only on
// sm_100+ (and on sm_90 only for stable floating-point order); these kernels run the
// look-back algorithm, so make the selector always describe it.
#ifndef CCCL_DISABLE_WARPSPEED_SCAN
#  define CCCL_DISABLE_WARPSPEED_SCAN
#endif

#include <cub/agent/agent_scan.cuh>
#include <cub/agent/single_pass_scan_operators.cuh>
#include <cub/detail/delay_constructor.cuh>
#include <cub/device/dispatch/tuning/tuning_scan.cuh>
#include <cub/util_arch.cuh>
#include <cub/util_type.cuh>

#include <cuda/std/type_traits>

#include <cuprims_init_value.cuh>

namespace cuprims
{
namespace scan
{

// Block size of scan_init_kernel (one thread per tile state).
constexpr int init_threads = 128;

// Where CUB's ScanTileState<AccumT> lives inside the temporary storage. Regions (the
// status words, then, for values that do not fit one atomic word with their status,
// the partial and inclusive values) each start at a `region_align` boundary; the host
// sizes the storage as num_tiles * bytes_per_tile + fixed_bytes, which covers the
// look-back padding and every alignment step.
template <class AccumT>
struct tile_layout
{
  using state_t = CUB_NS_QUALIFIER::ScanTileState<AccumT>;

  static constexpr long long padding       = state_t::TILE_STATUS_PADDING;
  static constexpr long long desc_bytes    = state_t::description_bytes_per_tile;
  static constexpr long long payload_bytes = state_t::payload_bytes_per_tile;
  static constexpr long long region_align  = 128;
  static constexpr long long regions       = payload_bytes == 0 ? 1 : 3;
  static constexpr long long bytes_per_tile = desc_bytes + 2 * payload_bytes;
  // the padding entries, plus up to region_align - 1 bytes lost before each region
  static constexpr long long fixed_bytes = padding * bytes_per_tile + regions * region_align;
  // tile indices are ints in CUB's agent and tile state
  static constexpr long long max_tiles = 0x7fffffffll - padding;

  static_assert(payload_bytes == 0 || payload_bytes == sizeof(AccumT),
                "cuprims assumes ScanTileState stores AccumT payloads in plain AccumT arrays");
  static_assert(desc_bytes > 0 && region_align % alignof(AccumT) == 0, "unexpected ScanTileState layout");

  static __device__ __forceinline__ char* align_up(char* p)
  {
    const auto v = reinterpret_cast<unsigned long long>(p);
    return reinterpret_cast<char*>((v + (region_align - 1)) & ~static_cast<unsigned long long>(region_align - 1));
  }

  static __device__ __forceinline__ state_t make(void* storage, int num_tiles)
  {
    state_t state;
    char* p = align_up(static_cast<char*>(storage));
    if constexpr (payload_bytes == 0)
    {
      state.d_tile_descriptors = reinterpret_cast<typename state_t::TxnWord*>(p);
    }
    else
    {
      const long long entries = padding + num_tiles;
      state.d_tile_status     = reinterpret_cast<typename state_t::StatusWord*>(p);
      p                       = align_up(p + entries * desc_bytes);
      state.d_tile_partial    = reinterpret_cast<AccumT*>(p);
      p                       = align_up(p + entries * payload_bytes);
      state.d_tile_inclusive  = reinterpret_cast<AccumT*>(p);
    }
    return state;
  }
};

// The look-back part of a CUB scan policy (the selector's choice for this architecture).
template <class Selector>
__host__ __device__ constexpr CUB_NS_QUALIFIER::ScanLookbackPolicy lookback_policy(::cuda::compute_capability cc)
{
  return Selector{}(cc).lookback;
}

template <class Selector>
__device__ constexpr CUB_NS_QUALIFIER::ScanLookbackPolicy current_lookback_policy()
{
  constexpr auto policy = CUB_NS_QUALIFIER::detail::current_policy<Selector>();
  static_assert(policy.algorithm == CUB_NS_QUALIFIER::ScanAlgorithm::lookback,
                "cuprims scan kernels implement CUB's look-back scan only");
  return policy.lookback;
}

template <class Selector>
inline constexpr int scan_block_threads = current_lookback_policy<Selector>().threads_per_block;

template <class AccumT>
__global__ __launch_bounds__(init_threads) void scan_init_kernel(void* tile_storage, int num_tiles)
{
  _CCCL_PDL_GRID_DEPENDENCY_SYNC();
  _CCCL_PDL_TRIGGER_NEXT_LAUNCH();
  tile_layout<AccumT>::make(tile_storage, num_tiles).InitializeStatus(num_tiles);
}

// One tile per block, grid = num_tiles. ForceInclusive: an inclusive scan that has an
// init value (combined in front of the first item); exclusive scans pass false. InputIt
// and OutputIt are pointers or cuprims iterators (cuprims_iterator.cuh).
template <class Selector, class InputIt, class OutputIt, class AccumT, class OpT, class InitT, bool ForceInclusive>
__device__ __forceinline__ void scan_tiles(
  InputIt d_in, OutputIt d_out, void* tile_storage, int num_tiles, OpT op, InitT init, unsigned long long num_items)
{
  constexpr CUB_NS_QUALIFIER::ScanLookbackPolicy policy = current_lookback_policy<Selector>();
  static_assert(policy.load_modifier != CUB_NS_QUALIFIER::CacheLoadModifier::LOAD_LDG,
                "look-back scans may not read through the texture path");
  static_assert(!::cuda::std::is_same_v<InitT, no_init> || ForceInclusive,
                "an exclusive scan needs an init value");
  using agent_policy_t = CUB_NS_QUALIFIER::detail::agent_scan_policy<
    0, 0, void, policy.load_algorithm, policy.load_modifier, policy.store_algorithm, policy.scan_algorithm,
    CUB_NS_QUALIFIER::detail::NoScaling<policy.threads_per_block, policy.items_per_thread>,
    CUB_NS_QUALIFIER::detail::delay_constructor_t<policy.lookback_delay.kind, policy.lookback_delay.delay,
                                                  policy.lookback_delay.l2_write_latency>>;
  using real_init_t = decltype(resolve_init<AccumT>(init));
  using agent_t     = CUB_NS_QUALIFIER::detail::scan::AgentScan<
    agent_policy_t, InputIt, OutputIt, OpT, real_init_t, unsigned long long, AccumT, ForceInclusive,
    /* UsePDL */ true>;
  __shared__ typename agent_t::TempStorage temp_storage;

  // The tile states (and a device-side init value) may be written by the work before us.
  _CCCL_PDL_GRID_DEPENDENCY_SYNC();
  real_init_t real_init = resolve_init<AccumT>(init);
  auto tile_state       = tile_layout<AccumT>::make(tile_storage, num_tiles);
  agent_t(temp_storage, d_in, d_out, op, real_init).ConsumeRange(num_items, tile_state, 0);
}

// Over arrays: InputT and OutputT are the item types.
template <class Selector, class InputT, class OutputT, class AccumT, class OpT, class InitT, bool ForceInclusive>
__global__ __launch_bounds__(scan_block_threads<Selector>, 1) void scan_kernel(
  const InputT* d_in, OutputT* d_out, void* tile_storage, int num_tiles, OpT op, InitT init,
  unsigned long long num_items)
{
  scan_tiles<Selector, const InputT*, OutputT*, AccumT, OpT, InitT, ForceInclusive>(
    d_in, d_out, tile_storage, num_tiles, op, init, num_items);
}

// Over iterators (either side): InputIt and OutputIt are the parameter types themselves.
template <class Selector, class InputIt, class OutputIt, class AccumT, class OpT, class InitT, bool ForceInclusive>
__global__ __launch_bounds__(scan_block_threads<Selector>, 1) void scan_iterator_kernel(
  InputIt d_in, OutputIt d_out, void* tile_storage, int num_tiles, OpT op, InitT init, unsigned long long num_items)
{
  scan_tiles<Selector, InputIt, OutputIt, AccumT, OpT, InitT, ForceInclusive>(
    d_in, d_out, tile_storage, num_tiles, op, init, num_items);
}

} // namespace scan
} // namespace cuprims
