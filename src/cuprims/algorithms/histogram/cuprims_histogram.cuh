// cuprims even-bin histogram: CUB's kernels (DeviceHistogramInitKernel and
// DeviceHistogramSweepDeviceInitKernel, instantiated by name from the generated unit)
// with one decode operator of ours.
//
// clamped_scale is CUB's ScaleTransform (the even-bin computation, in the common type of
// the level and sample types: a reciprocal multiply for floating point, an exact
// multiply-divide in a wide unsigned type for integers), except that a sample inside
// [lower, upper) whose floating-point bin rounds up to num_bins is counted in the last
// bin. CUB's own transform hands that bin on: a privatized shared-memory histogram drops
// it in its padding word, a privatized global one adds it to the next block's first bin,
// and the byte-sample path (bins computed from the 256 privatized counters) adds it
// past the end of the output histogram.
#pragma once

#include <cub/device/dispatch/kernels/kernel_histogram.cuh>

#include <cuda/std/iterator>
#include <cuda/std/type_traits>

namespace cuprims
{
namespace histogram
{

// CUB's dispatch constants (host code in dispatch_histogram.cuh, which NVRTC cannot
// compile), exported to the host through cuprims_meta: the privatized shared-memory
// histograms hold up to this many bins (byte samples: exactly this many), and the init
// kernel runs blocks of this many threads.
constexpr int privatized_smem_bins = 256;
constexpr int init_threads         = 256;

template <class LevelT, class OffsetT, class SampleT>
struct clamped_scale
    : CUB_NS_QUALIFIER::detail::histogram::Transforms<LevelT, OffsetT, SampleT>::ScaleTransform
{
  using base_t = typename CUB_NS_QUALIFIER::detail::histogram::Transforms<LevelT, OffsetT, SampleT>::ScaleTransform;

  int num_bins;

  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE void Init(int num_levels, LevelT max_level, LevelT min_level)
  {
    base_t::Init(num_levels, max_level, min_level);
    num_bins = num_levels - 1;
  }

  template <CUB_NS_QUALIFIER::CacheLoadModifier LoadModifier>
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE void BinSelect(SampleT sample, int& bin, bool valid) const
  {
    base_t::template BinSelect<LoadModifier>(sample, bin, valid);
    if (bin >= num_bins)
    {
      bin = num_bins - 1;
    }
  }
};

// The output transform of the scale path. CUB's StoreOutput hands it each privatized bin
// index cast to the sample type (an int8 bin 200 arrives as -56); an integer's unsigned
// bits give the index back while the bins fit the type (the host widens the samples to
// int otherwise), a float16 or float32 holds it exactly up to 2^11 or 2^24 bins (the host
// refuses more).
struct bin_index_pass_thru
{
  template <typename T>
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE void Init(int, T, T)
  {}

  template <CUB_NS_QUALIFIER::CacheLoadModifier LoadModifier, typename SampleT>
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE void BinSelect(SampleT sample, int& bin, bool valid) const
  {
    if (valid)
    {
      if constexpr (::cuda::std::is_integral_v<SampleT>)
      {
        bin = static_cast<int>(static_cast<::cuda::std::make_unsigned_t<SampleT>>(sample));
      }
      else
      {
        bin = static_cast<int>(sample);
      }
    }
  }
};

// Samples read as Wide (int): an iterator over another iterator or a pointer, laid out as
// the iterator it wraps, so the kernel parameter is unchanged.
template <class It, class Wide>
struct widened_samples
{
  using value_type        = Wide;
  using reference         = Wide;
  using pointer           = void;
  using difference_type   = long long;
  using iterator_category = ::cuda::std::random_access_iterator_tag;

  It it;

  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE Wide operator*() const
  {
    return static_cast<Wide>(*it);
  }
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE Wide operator[](difference_type i) const
  {
    return static_cast<Wide>(it[i]);
  }
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE widened_samples operator+(difference_type n) const
  {
    return {it + n};
  }
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE difference_type operator-(const widened_samples& other) const
  {
    return it - other.it;
  }
};

} // namespace histogram
} // namespace cuprims
