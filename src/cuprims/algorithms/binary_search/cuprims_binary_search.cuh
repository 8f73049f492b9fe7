// cuprims vectorised binary search: for each of num_values values, the index of the first
// element of the sorted range d_data[0, num_items) that is not less than the value
// (lower bound) or greater than it (upper bound), under a strict weak order `comp`.
//
// One thread per value. The search is branch-free with a fixed trip count for a given
// num_items (every thread of a warp runs the same iterations):
//
//     base = data; len = num_items
//     while (len > 1) { half = len / 2; if (goes_right(base[half])) base += half; len -= half; }
//     index = (base - data) + (len == 1 && goes_right(*base))
//
// where goes_right(x) is comp(x, value) for a lower bound and !comp(value, x) for an
// upper bound. The probes of the first levels are the same few elements for every
// value, so they stay in cache; the deep levels touch a new sector almost every time.
// The host passes `hot_levels` (from the device's L2 size): levels below it load through
// the read-only path, deeper ones with the evict-first (streaming) policy so that their
// one-off sectors do not push the shared top of the search tree out of L2. Values are
// read, and indices written, with streaming hints too. Once the range left is at most
// `window` items (a line or two), its lines are prefetched into L2 together, so the last
// few levels cost one memory round trip rather than one each (window 0: no prefetch).
// Offsets are 64-bit.
#pragma once

#include <cub/thread/thread_load.cuh>
#include <cub/thread/thread_store.cuh>
#include <cuda/std/type_traits>

namespace cuprims
{
namespace binary_search
{

struct policy
{
  static constexpr int threads_per_block = 256;
};

template <bool Upper, class T, class Comp>
__device__ __forceinline__ bool goes_right(const T& probe, const T& value, const Comp& comp)
{
  if constexpr (Upper)
  {
    return !comp(value, probe);
  }
  else
  {
    return comp(probe, value);
  }
}

// Ask L2 for the 128-byte lines holding [first, last) without waiting for them.
__device__ __forceinline__ void prefetch_lines(const void* first, const void* last)
{
  const char* p = reinterpret_cast<const char*>(reinterpret_cast<unsigned long long>(first) & ~127ull);
  for (; p < static_cast<const char*>(last); p += 128)
  {
    asm volatile("prefetch.global.L2 [%0];" : : "l"(__cvta_generic_to_global(p)) : "memory");
  }
}

template <bool Upper, class T, class OutT, class Comp>
__device__ __forceinline__ void search_one(
  const T* data, long long num_items, const T& value, OutT* out, const Comp& comp, int hot_levels, long long window)
{
  const T* base = data;
  long long len = num_items;
  // levels whose probes are shared by many values: keep them cached
  for (; len > 1 && hot_levels > 0; --hot_levels)
  {
    const long long half = len >> 1;
    const T probe        = CUB_NS_QUALIFIER::ThreadLoad<CUB_NS_QUALIFIER::LOAD_LDG>(base + half);
    base                 = goes_right<Upper>(probe, value, comp) ? base + half : base;
    len -= half;
  }
  // deep levels: one-off sectors, loaded evict-first
  while (len > 1 && len > window)
  {
    const long long half = len >> 1;
    const T probe        = CUB_NS_QUALIFIER::ThreadLoad<CUB_NS_QUALIFIER::LOAD_CS>(base + half);
    base                 = goes_right<Upper>(probe, value, comp) ? base + half : base;
    len -= half;
  }
  // the last levels stay within `window` items: fetch their lines in one go, so the
  // remaining dependent probes wait for one memory round trip instead of one each
  if (len > 1)
  {
    prefetch_lines(base, base + len);
    while (len > 1)
    {
      const long long half = len >> 1;
      const T probe        = CUB_NS_QUALIFIER::ThreadLoad<CUB_NS_QUALIFIER::LOAD_CS>(base + half);
      base                 = goes_right<Upper>(probe, value, comp) ? base + half : base;
      len -= half;
    }
  }
  long long index = base - data;
  if (len == 1)
  {
    const T probe = CUB_NS_QUALIFIER::ThreadLoad<CUB_NS_QUALIFIER::LOAD_CS>(base);
    index += goes_right<Upper>(probe, value, comp) ? 1 : 0;
  }
  CUB_NS_QUALIFIER::ThreadStore<CUB_NS_QUALIFIER::STORE_CS>(out, static_cast<OutT>(index));
}

// Item i of the values: a plain array is read evict-first (each value is read once); an
// iterator (a struct with operator[]) computes or gathers it.
template <class T, class ValuesIt>
__device__ __forceinline__ T load_value(const ValuesIt& values, long long i)
{
  if constexpr (::cuda::std::is_pointer_v<ValuesIt>)
  {
    return CUB_NS_QUALIFIER::ThreadLoad<CUB_NS_QUALIFIER::LOAD_CS>(values + i);
  }
  else
  {
    return static_cast<T>(values[i]);
  }
}

// One kernel serves lower and upper bounds (`upper` is uniform across the grid), so
// make_lower_bound and make_upper_bound over the same types share one build.
template <class T, class OutT, class Comp, class ValuesIt>
__global__ __launch_bounds__(policy::threads_per_block) void binary_search_kernel(
  const T* data,
  long long num_items,
  ValuesIt values,
  long long num_values,
  OutT* out,
  Comp comp,
  int hot_levels,
  long long window,
  int upper)
{
  const long long i = static_cast<long long>(blockIdx.x) * policy::threads_per_block + threadIdx.x;
  if (i >= num_values)
  {
    return;
  }
  const T value = load_value<T>(values, i);
  if (upper)
  {
    search_one<true>(data, num_items, value, out + i, comp, hot_levels, window);
  }
  else
  {
    search_one<false>(data, num_items, value, out + i, comp, hot_levels, window);
  }
}

} // namespace binary_search
} // namespace cuprims
