// cuprims segmented reduction.
//
// Most problems run CUB's DeviceSegmentedReduceKernel as it is: a thread, a warp or a block
// per segment, chosen inside the kernel by the max_segment_size hint (the host sizes the
// grid by the same rule). Few segments (fewer than the GPU has block slots) would leave
// most of the GPU idle with one block each, so they run here instead, in two kernels:
//   * slice_kernel: `slices` blocks per segment; block j of segment s reduces slice j of it
//     (slices are whole tiles, sized on the device from the segment's own length, so the
//     non-empty slices of a segment are its first ones) into partials[s * slices + j];
//   * combine_kernel: one block per segment combines its non-empty partials and the
//     initial value into d_out[s] (the initial value alone for an empty segment).
// Segments that a warp reduces (the max_segment_size hint within CUB's medium tile) run in
// warp_kernel: CUB's warp agent reads a segment shorter than its tile one item per lane
// per load, and only after the offsets have arrived; warp_kernel reads an array in 16-byte
// vectors from the segment's first aligned item, and fetches the offsets of its next
// segment while it reduces this one.
#pragma once

#include <cub/agent/agent_reduce.cuh>
#include <cub/device/dispatch/kernels/kernel_segmented_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>

#include <cuda/std/cstdint>
#include <cuda/std/cstring>
#include <cuda/std/functional>
#include <cuda/std/type_traits>

namespace cuprims
{
namespace segmented_reduce
{

template <class Selector>
struct large_policy
{
  static constexpr auto value = CUB_NS_QUALIFIER::detail::current_policy<Selector>().large_reduce;
  static constexpr int tile_items = value.threads_per_block * value.items_per_thread;
};

template <class Selector, class AccumT>
using large_agent_policy = CUB_NS_QUALIFIER::detail::agent_reduce_policy<
  0, 0, AccumT, large_policy<Selector>::value.vec_size, large_policy<Selector>::value.reduce_algorithm,
  large_policy<Selector>::value.load_modifier,
  CUB_NS_QUALIFIER::detail::NoScaling<large_policy<Selector>::value.threads_per_block,
                                      large_policy<Selector>::value.items_per_thread, AccumT>>;

// Slice length of a segment of `length` items cut into at most `slices` whole-tile slices.
__device__ __forceinline__ long long slice_length(long long length, int slices, int tile_items)
{
  const long long per_slice = (length + slices - 1) / slices;
  return ((per_slice + tile_items - 1) / tile_items) * tile_items;
}

template <class Selector, class InputT, class BeginT, class EndT, class AccumT, class OpT>
__global__ __launch_bounds__(int(large_policy<Selector>::value.threads_per_block))
void slice_kernel(InputT d_in, BeginT d_begin, EndT d_end, int slices, OpT op, AccumT* partials)
{
  using agent_t = CUB_NS_QUALIFIER::detail::reduce::
    AgentReduce<large_agent_policy<Selector, AccumT>, InputT, long long, OpT, AccumT, ::cuda::std::identity>;
  __shared__ typename agent_t::TempStorage temp_storage;

  const int segment = int(blockIdx.x) / slices;
  const int slice   = int(blockIdx.x) % slices;
  const long long begin = static_cast<long long>(d_begin[segment]);
  const long long end   = static_cast<long long>(d_end[segment]);
  const long long step  = slice_length(end - begin, slices, large_policy<Selector>::tile_items);
  const long long lo    = begin + slice * step;
  if (end <= begin || lo >= end)
  {
    return;  // this slice is empty, and so are the ones after it: the combine counts them out
  }
  const long long hi = lo + step < end ? lo + step : end;
  AccumT aggregate = agent_t(temp_storage, d_in, op, ::cuda::std::identity{}).ConsumeRange(lo, hi);
  if (threadIdx.x == 0)
  {
    partials[static_cast<long long>(segment) * slices + slice] = aggregate;
  }
}

template <class Selector, class OutputIt, class BeginT, class EndT, class AccumT, class OpT>
__global__ __launch_bounds__(int(large_policy<Selector>::value.threads_per_block))
void combine_kernel(const AccumT* partials, OutputIt d_out, BeginT d_begin, EndT d_end, int slices, OpT op,
                    AccumT init)
{
  using agent_t = CUB_NS_QUALIFIER::detail::reduce::
    AgentReduce<large_agent_policy<Selector, AccumT>, const AccumT*, long long, OpT, AccumT, ::cuda::std::identity>;
  __shared__ typename agent_t::TempStorage temp_storage;

  const int segment     = int(blockIdx.x);
  const long long begin = static_cast<long long>(d_begin[segment]);
  const long long end   = static_cast<long long>(d_end[segment]);
  if (end <= begin)
  {
    if (threadIdx.x == 0)
    {
      d_out[segment] = init;
    }
    return;
  }
  const long long step  = slice_length(end - begin, slices, large_policy<Selector>::tile_items);
  const long long count = (end - begin + step - 1) / step;
  const AccumT* mine    = partials + static_cast<long long>(segment) * slices;
  AccumT aggregate = agent_t(temp_storage, mine, op, ::cuda::std::identity{}).ConsumeRange(0ll, count);
  if (threadIdx.x == 0)
  {
    d_out[segment] = op(init, aggregate);
  }
}

constexpr int warp_threads      = 256;  // warp_kernel's block: eight segments at a time
constexpr int warp_loads_ahead  = 4;    // loads a lane issues before it combines their items

// One lane's share of a segment: the first item it sees starts the partial (there is no
// identity for a user's operator).
template <class AccumT, class OpT>
struct lane_partial
{
  OpT& op;
  AccumT value;
  bool any;

  __device__ __forceinline__ void add(const AccumT& item)
  {
    value = any ? op(value, item) : item;
    any   = true;
  }
};

// Items [begin, end) of d_in into lane `lane`'s partial; returns how many lanes (a prefix
// of the warp) hold one.
template <class InputT, class AccumT, class OpT>
__device__ __forceinline__ int consume_segment(lane_partial<AccumT, OpT>& partial, InputT d_in, long long begin,
                                               long long end, int lane)
{
  using item_t = CUB_NS_QUALIFIER::detail::it_value_t<InputT>;
  constexpr bool vectors = ::cuda::std::is_pointer_v<InputT> && ::cuda::std::is_same_v<item_t, AccumT>
                        && 16 % sizeof(AccumT) == 0 && sizeof(AccumT) < 16;
  const long long n = end - begin;
  if constexpr (vectors)
  {
    constexpr int per_vector = 16 / sizeof(AccumT);
    const AccumT* items      = d_in + begin;
    // the items before the first 16-byte boundary, then whole vectors, then the rest
    const int misaligned = int(reinterpret_cast<::cuda::std::uintptr_t>(items) % 16) / int(sizeof(AccumT));
    const long long head = misaligned ? (per_vector - misaligned < n ? per_vector - misaligned : n) : 0;
    const long long body = (n - head) / per_vector;
    const long long tail = n - head - body * per_vector;
    if (lane < head)
    {
      partial.add(items[lane]);
    }
    const uint4* vecs = reinterpret_cast<const uint4*>(items + head);
    for (long long v = lane; v < body; v += 32 * warp_loads_ahead)
    {
      uint4 loaded[warp_loads_ahead];
      _CCCL_PRAGMA_UNROLL_FULL()
      for (int k = 0; k < warp_loads_ahead; ++k)
      {
        if (v + 32 * k < body)
        {
          loaded[k] = vecs[v + 32 * k];
        }
      }
      _CCCL_PRAGMA_UNROLL_FULL()
      for (int k = 0; k < warp_loads_ahead; ++k)
      {
        if (v + 32 * k < body)
        {
          AccumT unpacked[per_vector];
          ::cuda::std::memcpy(unpacked, &loaded[k], sizeof(unpacked));
          _CCCL_PRAGMA_UNROLL_FULL()
          for (int j = 0; j < per_vector; ++j)
          {
            partial.add(unpacked[j]);
          }
        }
      }
    }
    if (lane < tail)
    {
      partial.add(items[head + body * per_vector + lane]);
    }
    const long long lanes = head > tail ? head : tail;
    return int(body >= 32 ? 32 : (body > lanes ? body : lanes));
  }
  else
  {
    for (long long i = begin + lane; i < end; i += 32 * warp_loads_ahead)
    {
      AccumT loaded[warp_loads_ahead];
      _CCCL_PRAGMA_UNROLL_FULL()
      for (int k = 0; k < warp_loads_ahead; ++k)
      {
        if (i + 32 * k < end)
        {
          loaded[k] = d_in[i + 32 * k];
        }
      }
      _CCCL_PRAGMA_UNROLL_FULL()
      for (int k = 0; k < warp_loads_ahead; ++k)
      {
        if (i + 32 * k < end)
        {
          partial.add(loaded[k]);
        }
      }
    }
    return int(n >= 32 ? 32 : n);
  }
}

// A warp per segment, the warps striding over the segments (the grid is sized to the GPU).
template <class InputT, class OutputIt, class BeginT, class EndT, class AccumT, class OpT>
__global__ __launch_bounds__(warp_threads)
void warp_kernel(InputT d_in, OutputIt d_out, BeginT d_begin, EndT d_end, int num_segments, OpT op, AccumT init)
{
  constexpr int warps = warp_threads / 32;
  using warp_reduce_t = CUB_NS_QUALIFIER::WarpReduce<AccumT>;
  __shared__ typename warp_reduce_t::TempStorage storage[warps];

  const int lane         = int(threadIdx.x) % 32;
  const int warp         = int(threadIdx.x) / 32;
  const long long stride = static_cast<long long>(gridDim.x) * warps;
  long long segment      = static_cast<long long>(blockIdx.x) * warps + warp;
  long long begin = 0, end = 0;
  if (segment < num_segments)
  {
    begin = static_cast<long long>(d_begin[segment]);
    end   = static_cast<long long>(d_end[segment]);
  }
  for (; segment < num_segments; segment += stride)
  {
    const long long next = segment + stride;
    long long next_begin = 0, next_end = 0;
    if (next < num_segments)
    {
      next_begin = static_cast<long long>(d_begin[next]);
      next_end   = static_cast<long long>(d_end[next]);
    }
    if (end <= begin)
    {
      if (lane == 0)
      {
        d_out[segment] = init;
      }
    }
    else
    {
      lane_partial<AccumT, OpT> partial{op, init, false};
      const int lanes = consume_segment(partial, d_in, begin, end, lane);
      warp_reduce_t reducer(storage[warp]);
      const AccumT total = lanes == 32 ? reducer.Reduce(partial.value, op) : reducer.Reduce(partial.value, op, lanes);
      if (lane == 0)
      {
        d_out[segment] = op(init, total);
      }
      __syncwarp();  // the reducer's storage is the next segment's
    }
    begin = next_begin;
    end   = next_end;
  }
}

} // namespace segmented_reduce
} // namespace cuprims
