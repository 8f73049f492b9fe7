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

} // namespace histogram
} // namespace cuprims
