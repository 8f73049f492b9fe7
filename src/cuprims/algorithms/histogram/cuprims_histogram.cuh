// cuprims even-bin histogram: CUB's kernels (DeviceHistogramInitKernel and
// DeviceHistogramSweepDeviceInitKernel, instantiated by name from the generated unit)
// with decode operators of ours.
//
// exact_scale bins integer samples between integer levels exactly, whatever the levels'
// type: (sample - lower) * bins / (upper - lower) in 32-bit unsigned arithmetic where every
// product fits it, else in 64-bit (the host refuses levels whose product does not fit 64
// bits), with the comparisons done without conversion surprises. CUB's ScaleTransform
// computes in the common type of level and sample types, which made a 64-bit division per
// sample out of int32 levels over 16-bit samples and different kernels out of equal levels
// of different types.
//
// byte_bits privatizes one counter per bit pattern of an 8-bit sample (CUB's byte path,
// for int8 too: CUB's pass-through gives a negative int8 a negative bin); the output
// operator then bins each of the 256 values once per block.
//
// one_block_kernel counts few samples (the host's choice: at most a few tiles, at most 256
// bins) in one block, in shared memory, and stores every output bin, zero or not: the
// call is one launch, with no init kernel to zero the histogram first.
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
#include <cuda/std/limits>
#include <cuda/std/type_traits>
#include <cuda/std/utility>

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
constexpr int one_block_threads    = 256; // one_block_kernel's block

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

template <class LevelT, class SampleT>
struct exact_scale
{
  static_assert(::cuda::std::is_integral_v<LevelT> && ::cuda::std::is_integral_v<SampleT>,
                "exact_scale bins integer samples between integer levels");
  using u32 = unsigned int;
  using u64 = unsigned long long;
  // Samples narrower than 8 bytes are compared in a wider signed type, against levels
  // clamped to it (which keeps every comparison's result: the type holds every sample);
  // 8-byte samples are compared with the mixed-sign-safe cmp_less.
  using compare_t = ::cuda::std::conditional_t<
    (sizeof(SampleT) <= 2),
    int,
    ::cuda::std::conditional_t<(sizeof(SampleT) == 4), long long, LevelT>>;

  compare_t m_lower;
  compare_t m_upper;
  u64 m_lower_bits; // the lower level modulo 2^64: sample - lower is exact in unsigned arithmetic below
  u64 m_bins;
  u64 m_range; // upper - lower (the host passes ordered levels)
  bool m_narrow; // every (sample - lower) * bins fits 32 bits

  static _CCCL_HOST_DEVICE _CCCL_FORCEINLINE compare_t clamped(LevelT v)
  {
    if constexpr (::cuda::std::is_same_v<compare_t, LevelT>)
    {
      return v;
    }
    else
    {
      constexpr compare_t lo = ::cuda::std::numeric_limits<compare_t>::min();
      constexpr compare_t hi = ::cuda::std::numeric_limits<compare_t>::max();
      return ::cuda::std::cmp_less(v, lo) ? lo : ::cuda::std::cmp_greater(v, hi) ? hi : static_cast<compare_t>(v);
    }
  }

  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE void Init(int num_levels, LevelT max_level, LevelT min_level)
  {
    m_lower      = clamped(min_level);
    m_upper      = clamped(max_level);
    m_lower_bits = static_cast<u64>(min_level);
    m_bins       = static_cast<u64>(num_levels - 1);
    m_range      = static_cast<u64>(max_level) - m_lower_bits;
    m_narrow     = m_range <= 0xffffffffull && (m_range - 1) * m_bins <= 0xffffffffull;
  }

  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE bool in_range(SampleT sample) const
  {
    if constexpr (sizeof(SampleT) == 8)
    {
      return !::cuda::std::cmp_less(sample, m_lower) && ::cuda::std::cmp_less(sample, m_upper);
    }
    else
    {
      const compare_t s = static_cast<compare_t>(sample);
      return s >= m_lower && s < m_upper;
    }
  }

  template <CUB_NS_QUALIFIER::CacheLoadModifier LoadModifier>
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE void BinSelect(SampleT sample, int& bin, bool valid) const
  {
    if (valid && in_range(sample))
    {
      if (m_narrow)
      {
        const u32 offset = static_cast<u32>(sample) - static_cast<u32>(m_lower_bits);
        bin              = static_cast<int>(offset * static_cast<u32>(m_bins) / static_cast<u32>(m_range));
      }
      else
      {
        const u64 offset = static_cast<u64>(sample) - m_lower_bits;
        bin              = static_cast<int>(offset * m_bins / m_range);
      }
    }
  }
};

// The privatized transform of the byte path: a counter per bit pattern of an 8-bit sample.
// The sweep hands each counter's index to the output transform cast back to the sample
// type, so the output transform sees the sample's value (an int8 -56 from counter 200).
struct byte_bits
{
  template <typename T>
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE void Init(int, T, T)
  {}

  template <CUB_NS_QUALIFIER::CacheLoadModifier LoadModifier, typename SampleT>
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE void BinSelect(SampleT sample, int& bin, bool valid) const
  {
    static_assert(sizeof(SampleT) == 1, "the byte path privatizes 8-bit samples");
    if (valid)
    {
      bin = static_cast<int>(static_cast<unsigned char>(sample));
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

// The samples of a small call, counted by one block: `Scale` bins a sample (the byte path:
// each bit pattern is counted first, then each pattern that occurs is binned once, as the
// sweep's output transform does), counters in shared memory (at most 256 bins; no count can
// overflow 32 bits: the host sends at most a few tiles here), then every one of the
// `num_output_bins` bins stored into d_histogram.
template <int Threads, bool BytePath, class SampleT, class SamplesT, class CounterT, class ScaleT, class LevelT,
          class OffsetT>
__global__ __launch_bounds__(Threads) void one_block_kernel(
  SamplesT d_samples, int num_output_bins, CounterT* d_histogram, LevelT upper, LevelT lower, OffsetT num_samples)
{
  constexpr int bins_max = privatized_smem_bins;
  __shared__ unsigned int counts[bins_max];
  __shared__ unsigned int out[BytePath ? bins_max : 1];
  ScaleT scale;
  scale.Init(num_output_bins + 1, upper, lower);
  for (int b = threadIdx.x; b < bins_max; b += Threads)
  {
    counts[b] = 0u;
    if constexpr (BytePath)
    {
      out[b] = 0u;
    }
  }
  __syncthreads();
  for (OffsetT i = threadIdx.x; i < num_samples; i += Threads)
  {
    const SampleT sample = d_samples[i];
    int bin              = -1;
    if constexpr (BytePath)
    {
      bin = static_cast<int>(static_cast<unsigned char>(sample));
    }
    else
    {
      scale.template BinSelect<CUB_NS_QUALIFIER::LOAD_DEFAULT>(sample, bin, true);
    }
    if (bin >= 0)
    {
      atomicAdd(counts + bin, 1u);
    }
  }
  __syncthreads();
  if constexpr (BytePath)
  {
    for (int pattern = threadIdx.x; pattern < bins_max; pattern += Threads)
    {
      const unsigned int count = counts[pattern];
      int bin                  = -1;
      if (count)
      {
        scale.template BinSelect<CUB_NS_QUALIFIER::LOAD_DEFAULT>(static_cast<SampleT>(pattern), bin, true);
      }
      if (bin >= 0 && bin < num_output_bins)
      {
        atomicAdd(out + bin, count);
      }
    }
    __syncthreads();
  }
  for (int b = threadIdx.x; b < num_output_bins; b += Threads)
  {
    d_histogram[b] = static_cast<CounterT>(BytePath ? out[b] : counts[b]);
  }
}

} // namespace histogram
} // namespace cuprims
