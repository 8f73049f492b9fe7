// cuprims device-wide transform: CUB's own transform kernel, plus the compile-time facts
// the Python host dispatch needs to launch it the way CUB's dispatch_transform.cuh would.
//
// CUB's kernel (cub/device/dispatch/kernels/kernel_transform.cuh) compiles under NVRTC
// and takes only plain launch arguments:
//
//   transform_kernel<Selector, int64_t, always_true, F, Out*, const In*...>(
//       int64_t num_items, int items_per_thread, bool can_vectorize,
//       always_true pred, F f, Out* out, kernel_arg<const In*>... ins)
//
// where kernel_arg<const T*> is a 16-byte union of {const char* aligned_base; int
// head_padding} (bulk-copy / LDGSTS algorithms) and the plain pointer (prefetch /
// vectorized algorithms). The algorithm is chosen at compile time by the policy selector;
// everything the host needs to size the launch (block size, items-per-thread bounds,
// bytes in flight, dynamic shared memory per tile, copy alignment) is exported through
// `facts` below, so no device constant is restated in Python.
#pragma once

#include <cub/device/dispatch/kernels/kernel_transform.cuh>
#include <cub/util_arch.cuh>

#include <cuda/std/array>
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>

namespace cuprims
{
namespace transform
{
namespace cub_transform = CUB_NS_QUALIFIER::detail::transform;

// The host encodes algorithms by these numbers (algorithms/transform.py).
static_assert(int(CUB_NS_QUALIFIER::TransformAlgorithm::prefetch) == 0, "cuprims: algorithm numbering changed");
static_assert(int(CUB_NS_QUALIFIER::TransformAlgorithm::vectorized) == 1, "cuprims: algorithm numbering changed");
static_assert(int(CUB_NS_QUALIFIER::TransformAlgorithm::ldgsts) == 2, "cuprims: algorithm numbering changed");
static_assert(int(CUB_NS_QUALIFIER::TransformAlgorithm::ublkcp) == 3, "cuprims: algorithm numbering changed");

// The host packs each input as 16 bytes: {pointer (aligned down for the async
// algorithms), int head padding, 4 bytes of padding}.
template <class T>
struct kernel_arg_layout
{
  using arg_t = cub_transform::kernel_arg<const T*>;
  static_assert(sizeof(arg_t) == 16 && alignof(arg_t) == 8, "cuprims: unexpected kernel_arg layout");
  // a standard-layout {const char*, int}: the pointer at offset 0, the int at offset 8
  using base_t = cub_transform::aligned_base_ptr<T>;
  static_assert(::cuda::std::is_standard_layout_v<base_t> && sizeof(base_t) == 16
                  && ::cuda::std::is_same_v<decltype(base_t::ptr), const char*>
                  && ::cuda::std::is_same_v<decltype(base_t::head_padding), int>,
                "cuprims: unexpected aligned_base_ptr layout");
  static constexpr bool ok = true;
};

template <class Selector, int Major, int Minor, class Out, class... Ins>
struct facts
{
  static constexpr ::cuda::compute_capability cc{Major, Minor};
  static constexpr CUB_NS_QUALIFIER::TransformPolicy policy = Selector{}(cc);
  static constexpr int algorithm = int(policy.algorithm);
  static constexpr bool is_async = policy.algorithm == CUB_NS_QUALIFIER::TransformAlgorithm::ublkcp
                                || policy.algorithm == CUB_NS_QUALIFIER::TransformAlgorithm::ldgsts;
  static constexpr bool is_ublkcp = policy.algorithm == CUB_NS_QUALIFIER::TransformAlgorithm::ublkcp;

  // the block size the kernel is compiled for (its __launch_bounds__)
  static constexpr int threads =
    policy.algorithm == CUB_NS_QUALIFIER::TransformAlgorithm::prefetch ? policy.prefetch.threads_per_block
    : policy.algorithm == CUB_NS_QUALIFIER::TransformAlgorithm::vectorized
      ? policy.vectorized.threads_per_block
      : policy.async_copy.threads_per_block;

  static constexpr int min_ipt = is_async ? policy.async_copy.min_items_per_thread : policy.prefetch.min_items_per_thread;
  static constexpr int max_ipt = is_async ? policy.async_copy.max_items_per_thread : policy.prefetch.max_items_per_thread;
  static constexpr int ipt_no_input = policy.prefetch.items_per_thread_no_input;
  static constexpr int vec_ipt      = policy.vectorized.items_per_thread;
  static constexpr int vec_size     = policy.vectorized.vec_size;
  static constexpr int min_bytes_in_flight = policy.min_bytes_in_flight;
  static constexpr int loaded_bytes = cub_transform::loaded_bytes_per_iteration<const Ins*...>();

  static constexpr int copy_align =
    is_ublkcp ? cub_transform::bulk_copy_alignment(cc) : (is_async ? cub_transform::ldgsts_size_and_align : 0);

  static constexpr ::cuda::std::array<CUB_NS_QUALIFIER::detail::iterator_info, sizeof...(Ins)> infos{
    CUB_NS_QUALIFIER::detail::make_iterator_info<const Ins*>()...};

  // dynamic shared memory of one block for a tile of `tile` items (async algorithms only)
  _CCCL_HOST_DEVICE_API static constexpr int smem(int tile)
  {
    if constexpr (sizeof...(Ins) == 0)
    {
      return 0;
    }
    else
    {
      return !is_async ? 0
           : is_ublkcp ? cub_transform::bulk_copy_dyn_smem_for_tile_size<int(sizeof...(Ins))>(infos, tile, copy_align)
                       : cub_transform::memcpy_async_dyn_smem_for_tile_size<int(sizeof...(Ins))>(infos, tile, copy_align);
    }
  }
  // The host computes smem(threads * ipt) = smem_1 + (ipt - 1) * (smem_2 - smem_1).
  static constexpr int smem_1 = smem(threads);
  static constexpr int smem_2 = smem(2 * threads);
  static_assert(smem(3 * threads) == smem_1 + 2 * (smem_2 - smem_1), "cuprims: shared memory is not linear in the tile");
  static_assert(smem(32 * threads) == smem_1 + 31 * (smem_2 - smem_1), "cuprims: shared memory is not linear in the tile");
  // the dynamic shared memory a block may use without opting in (CUB's policy respects it too)
  static constexpr int smem_cap = int(CUB_NS_QUALIFIER::detail::max_smem_per_block);

  static constexpr bool args_ok = (kernel_arg_layout<Ins>::ok && ... && true);
};

} // namespace transform
} // namespace cuprims
