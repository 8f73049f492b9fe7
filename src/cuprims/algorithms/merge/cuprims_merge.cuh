// cuprims merge: two sequences sorted by one comparator merged into one, stably (an item of
// the first sequence goes before an equal item of the second), on CUB's merge agent
// (cub/agent/agent_merge.cuh, CUB's DeviceMerge).
//
// CUB keeps its two kernels in its dispatch header, which NVRTC does not take; these are
// the same two kernels, written here over CUB's agent and policy:
//
//   partition_kernel: one thread per merge-path diagonal (every tile's start, and the end),
//                     a binary search for how many items of the first sequence come before
//                     it, written to `key1_beg` (num_tiles + 1 offsets);
//   merge_kernel:     one tile per block: the two ranges its diagonals bound are loaded to
//                     shared memory, merged per thread along the merge path, and stored.
//
// The agent is chosen as CUB's dispatch chooses it (choose_agent below mirrors its
// choose_merge_agent): the policy's tile, with bulk copies into shared memory where the
// policy asks for them, if its shared memory fits a block; else a 64 x 1 tile if that fits;
// else the policy's tile without bulk copies, its shared memory in global memory
// (virtual shared memory, `vsmem`, vsmem_per_block bytes per tile).
#pragma once

#include <cub/agent/agent_merge.cuh>
#include <cub/block/block_merge_sort.cuh>
#include <cub/detail/cc_dispatch.cuh>
#include <cub/device/dispatch/tuning/tuning_merge.cuh>
#include <cub/util_arch.cuh>
#include <cub/util_vsmem.cuh>

namespace cuprims
{
namespace merge
{

constexpr int partition_threads = 256;

template <class PolicyGetter, class... Args>
struct choose_agent
{
  static constexpr CUB_NS_QUALIFIER::MergePolicy policy = PolicyGetter{}();

  template <int Threads, int Items, bool BulkKeys, bool BulkValues>
  using agent = CUB_NS_QUALIFIER::detail::merge::agent_t<
    Threads, Items, policy.load_modifier, policy.store_algorithm, BulkKeys, BulkValues, policy.unroll, Args...>;

  using bulk_t     = agent<policy.threads_per_block, policy.items_per_thread, policy.use_bulk_copy_for_keys,
                           policy.use_bulk_copy_for_values>;
  using plain_t    = agent<policy.threads_per_block, policy.items_per_thread, false, false>;
  using fallback_t = agent<64, 1, false, false>;

  static constexpr bool use_bulk     = sizeof(typename bulk_t::TempStorage) <= CUB_NS_QUALIFIER::detail::max_smem_per_block;
  static constexpr bool use_fallback = sizeof(typename fallback_t::TempStorage) <= CUB_NS_QUALIFIER::detail::max_smem_per_block;

  using type = ::cuda::std::conditional_t<use_bulk, bulk_t, ::cuda::std::conditional_t<use_fallback, fallback_t, plain_t>>;
};

// key1_beg[d] = how many items of keys1 go before diagonal d (d * TileItems, at most n1 + n2).
template <int TileItems, class KeysIt1, class KeysIt2, class Offset, class Compare>
__global__ __launch_bounds__(partition_threads) void partition_kernel(
  KeysIt1 keys1, Offset n1, KeysIt2 keys2, Offset n2, Offset num_diagonals, Offset* key1_beg, Compare compare)
{
  const long long d = static_cast<long long>(blockIdx.x) * partition_threads + threadIdx.x;
  if (d < static_cast<long long>(num_diagonals))
  {
    // in 64 bits: the last diagonal's d * TileItems may pass the offset type
    const long long total = static_cast<long long>(n1) + static_cast<long long>(n2);
    const long long diag  = ::cuda::std::min(d * TileItems, total);
    key1_beg[d]           = CUB_NS_QUALIFIER::MergePath(keys1, keys2, n1, n2, static_cast<Offset>(diag), compare);
  }
}

template <class Agent,
          class KeysIt1,
          class ValuesIt1,
          class KeysIt2,
          class ValuesIt2,
          class KeysOut,
          class ValuesOut,
          class Offset,
          class Compare>
__global__ __launch_bounds__(Agent::threads_per_block) void merge_kernel(
  KeysIt1 keys1,
  ValuesIt1 values1,
  Offset n1,
  KeysIt2 keys2,
  ValuesIt2 values2,
  Offset n2,
  KeysOut keys_out,
  ValuesOut values_out,
  Compare compare,
  Offset* key1_beg,
  CUB_NS_QUALIFIER::detail::vsmem_t vsmem)
{
  using vsmem_helper_t = CUB_NS_QUALIFIER::detail::vsmem_helper_impl<Agent>;
  __shared__ typename vsmem_helper_t::static_temp_storage_t shared_temp_storage;
  auto& temp_storage = vsmem_helper_t::get_temp_storage(shared_temp_storage, vsmem);
  Agent{temp_storage.Alias(), keys1, values1, n1, keys2, values2, n2, keys_out, values_out, compare, key1_beg}();
  vsmem_helper_t::discard_temp_storage(temp_storage);
}

} // namespace merge
} // namespace cuprims
