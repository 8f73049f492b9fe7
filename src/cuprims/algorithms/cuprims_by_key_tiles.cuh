// The tile states of the by-key look-backs (reduce-by-key, scan-by-key): CUB's
// ReduceByKeyScanTileState over (run offset, value) pairs, laid out in cuprims' temporary
// storage as CUB lays it out (one array of status-and-pair words where a pair fits one
// atomic word with its status; else status words, partial pairs and inclusive pairs, each
// array starting at a 256-byte boundary), but set up here: CUB's Init checks the
// storage's size on the device, which reports a failure through the device runtime.
#pragma once

#include <cub/agent/single_pass_scan_operators.cuh>

#include <cuda/std/type_traits>

namespace cuprims
{
namespace by_key
{

// The tile states of one look-back over (OffsetT run offset or flag, AccumT) pairs.
// `tiles` of them take tiles * bytes_per_tile + fixed_bytes (the look-back padding and
// each array's alignment) from a 256-aligned start.
template <class AccumT, class OffsetT = int>
struct tile_storage
{
  using state_t      = CUB_NS_QUALIFIER::ReduceByKeyScanTileState<AccumT, OffsetT>;
  using pair_t       = CUB_NS_QUALIFIER::KeyValuePair<OffsetT, AccumT>;
  using pair_state_t = CUB_NS_QUALIFIER::ScanTileState<pair_t>;

  // one atomic word per tile, or CUB's three arrays (status words, partial and inclusive pairs)
  static constexpr bool one_word     = !::cuda::std::is_base_of_v<pair_state_t, state_t>;
  static constexpr long long padding = state_t::TILE_STATUS_PADDING;
  static constexpr long long align   = 256;

  __host__ __device__ static constexpr long long status_bytes()
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
  __host__ __device__ static constexpr long long payload_bytes()
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

} // namespace by_key
} // namespace cuprims
