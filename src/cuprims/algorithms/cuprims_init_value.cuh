// How an initial value reaches a scan's kernels (the plain scan, the scans by key, the
// segmented scans): none (an inclusive scan without one), a value passed at launch (of the
// accumulator's type or one converting to it), or a one-element device array read when the
// kernel runs, so a value computed on the device by earlier work is used without a round trip.
#pragma once

#include <cub/util_type.cuh>

namespace cuprims
{

struct no_init
{};

template <class T>
struct device_init
{
  const T* ptr;
};

template <class AccumT, class InitT>
__device__ __forceinline__ AccumT resolve_init(const InitT& init)
{
  return init;
}

// (the value may be of the accumulator's type or convert to it: a struct read into its
// word form, see cuprims/_codegen/accumulators.py)
template <class AccumT, class T>
__device__ __forceinline__ AccumT resolve_init(const device_init<T>& init)
{
  return *init.ptr;
}

template <class AccumT>
__device__ __forceinline__ CUB_NS_QUALIFIER::NullType resolve_init(const no_init&)
{
  return {};
}

} // namespace cuprims
