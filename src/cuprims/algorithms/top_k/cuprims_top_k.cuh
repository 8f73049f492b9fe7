// cuprims top-k: a radix select over "ordered words", then an optional block sort.
//
// Each key becomes an unsigned word of its size whose order is the selection's: the larger
// word is taken first (for the k smallest the word is inverted). Floating-point NaNs of
// either sign become the largest word before the inversion, so NaNs order after +inf as in
// numpy. The words are picked 8 bits at a time from the top:
//
//   pass j < P: a digit histogram of the candidates (the items whose top 8j bits equal the
//               prefix chosen so far); choose_kernel then finds the digit holding the k-th
//               word and extends the prefix.
//   pass P:     the final filter: every word above the k-th is written, then as many words
//               equal to it as k still needs.
//   sorted:     tiles of the k results sorted by blocks, then merged in pairs of runs.
//
// Every decision stays on the device (state_t), so the host never waits. An item whose
// prefix is above the chosen one is written out by the pass after the choice that decided
// it. From pass 1 on, the candidates are also appended to a buffer (keys and, for pairs,
// indices); the next pass reads the buffer instead of the whole input when it held them
// all, so later passes touch few items. Outputs are taken by atomic counters: their order
// is unspecified, and among keys equal to the k-th any may be chosen.
#pragma once

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include <cuda/std/bit>

namespace cuprims
{
namespace top_k
{

constexpr int radix_bits = 8;
constexpr int bins       = 1 << radix_bits;

struct state_t
{
  unsigned long long prefix; // the words' top bits chosen so far
  unsigned long long prev_prefix; // the prefix before the last choice
  unsigned long long k_left; // items still needed among those matching prefix
  unsigned long long greater; // items written above the k-th word
  unsigned long long equal; // items equal to the k-th word seen by the final filter
  unsigned long long candidates[2]; // items appended to each buffer (by pass parity)
  unsigned long long hist[bins];
};

template <int Size>
struct word_of_size;
template <>
struct word_of_size<1>
{
  using type = unsigned char;
};
template <>
struct word_of_size<2>
{
  using type = unsigned short;
};
template <>
struct word_of_size<4>
{
  using type = unsigned int;
};
template <>
struct word_of_size<8>
{
  using type = unsigned long long;
};

// Kind: 0 unsigned or bool, 1 signed integer, 2 floating point.
template <class Key, int Kind, bool Descending>
struct ordered_word
{
  using word_t                  = typename word_of_size<sizeof(Key)>::type;
  static constexpr word_t high  = word_t(word_t(1) << (8 * sizeof(Key) - 1));
  static constexpr word_t ones  = word_t(~word_t(0));
  // the bits of +inf: above them (sign bit cleared) is a NaN
  static constexpr word_t inf = sizeof(Key) == 2 ? word_t(0x7c00u)
                              : sizeof(Key) == 4 ? word_t(0x7f800000u)
                                                 : word_t(0x7ff0000000000000ull);

  // the word of a key's bits (constexpr: the CPU tests check it against numpy's order)
  static constexpr __host__ __device__ word_t from_bits(word_t b)
  {
    if constexpr (Kind == 1)
    {
      b = word_t(b ^ high);
    }
    else if constexpr (Kind == 2)
    {
      b = word_t(b & word_t(~high)) > inf ? ones : (b & high) ? word_t(~b) : word_t(b ^ high);
    }
    return Descending ? b : word_t(~b);
  }

  __device__ __forceinline__ word_t operator()(const Key& key) const
  {
    return from_bits(::cuda::std::bit_cast<word_t>(key));
  }
};

// Slots for one tile of a block: each thread asks for `a` slots of counter `ca` and `c` of
// `cc`, and gets the first of each. One global atomic per counter and tile: the counters
// are single words every block shares, which per-item or per-warp atomics would queue on.
template <int Threads>
struct block_slots
{
  static constexpr int warps = Threads / 32;
  struct storage_t
  {
    unsigned int warp_a[warps];
    unsigned int warp_c[warps];
    unsigned long long base_a, base_c;
  };

  __device__ __forceinline__ static void
  take(storage_t& smem, unsigned int a, unsigned int c, unsigned long long* ca, unsigned long long* cc,
       unsigned long long& first_a, unsigned long long& first_c)
  {
    const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
    unsigned int sa = a, sc = c; // inclusive sums within the warp
#pragma unroll
    for (int off = 1; off < 32; off <<= 1)
    {
      const unsigned int ya = __shfl_up_sync(0xffffffffu, sa, off), yc = __shfl_up_sync(0xffffffffu, sc, off);
      if (lane >= off)
      {
        sa += ya;
        sc += yc;
      }
    }
    if (lane == 31)
    {
      smem.warp_a[warp] = sa;
      smem.warp_c[warp] = sc;
    }
    __syncthreads();
    if (threadIdx.x == 0)
    {
      unsigned long long ta = 0, tc = 0; // the warps' sums turned exclusive
      for (int w = 0; w < warps; ++w)
      {
        const unsigned int xa = smem.warp_a[w], xc = smem.warp_c[w];
        smem.warp_a[w] = static_cast<unsigned int>(ta);
        smem.warp_c[w] = static_cast<unsigned int>(tc);
        ta += xa;
        tc += xc;
      }
      smem.base_a = ta ? atomicAdd(ca, ta) : 0ull;
      smem.base_c = tc ? atomicAdd(cc, tc) : 0ull;
    }
    __syncthreads();
    first_a = smem.base_a + smem.warp_a[warp] + (sa - a);
    first_c = smem.base_c + smem.warp_c[warp] + (sc - c);
  }
};

template <int Threads>
__global__ __launch_bounds__(Threads) void init_kernel(state_t* st, long long k)
{
  if (threadIdx.x == 0)
  {
    st->prefix = st->prev_prefix = st->greater = st->equal = 0;
    st->candidates[0] = st->candidates[1] = 0;
    st->k_left = static_cast<unsigned long long>(k);
  }
  for (int b = threadIdx.x; b < bins; b += Threads)
  {
    st->hist[b] = 0;
  }
}

// Pass `pass` of `passes` (pass == passes: the final filter). Reads the buffer `in_*` when
// the previous pass appended every candidate to it (within `cap`), else the whole input;
// appends this pass's candidates to `out_*` when a later pass reads them.
template <int Threads, int Items, class KeyIt, class ValueIt, class Key, class Value, class ToWord, bool Pairs>
__global__ __launch_bounds__(Threads) void pass_kernel(
  KeyIt keys,
  ValueIt values,
  Key* out_keys,
  Value* out_values,
  state_t* st,
  const Key* in_keys,
  const unsigned long long* in_index,
  Key* buf_keys,
  unsigned long long* buf_index,
  long long num_items,
  long long cap,
  long long k,
  int pass,
  int passes)
{
  using word_t                   = typename ToWord::word_t;
  constexpr int word_bits        = 8 * sizeof(word_t);
  constexpr unsigned long long all = static_cast<unsigned long long>(word_t(~word_t(0)));
  using slots_t = block_slots<Threads>;
  __shared__ unsigned int hist[bins];
  __shared__ typename slots_t::storage_t slots;

  const bool last = pass == passes;
  // bits chosen before this pass (the candidates' mask) and before the last choice (the
  // source's mask: the items the previous pass kept)
  const unsigned long long mask     = pass == 0 ? 0ull : (all << (word_bits - radix_bits * pass)) & all;
  const unsigned long long src_mask = pass <= 1 ? 0ull : (all << (word_bits - radix_bits * (pass - 1))) & all;
  const unsigned long long prefix   = st->prefix;
  const unsigned long long src_prefix = st->prev_prefix;
  const int shift                   = last ? 0 : word_bits - radix_bits * (pass + 1);
  const unsigned long long k_left   = st->k_left;

  long long count          = num_items;
  bool from_buffer         = false;
  if (pass >= 2)
  {
    const unsigned long long kept = st->candidates[(pass - 1) & 1];
    if (kept <= static_cast<unsigned long long>(cap))
    {
      from_buffer = true;
      count       = static_cast<long long>(kept);
    }
  }
  const bool append = pass >= 1 && !last;
  unsigned long long* appended = &st->candidates[pass & 1];

  if (!last)
  {
    for (int b = threadIdx.x; b < bins; b += Threads)
    {
      hist[b] = 0;
    }
    __syncthreads();
  }

  constexpr long long tile = static_cast<long long>(Threads) * Items;
  for (long long base = static_cast<long long>(blockIdx.x) * tile; base < count;
       base += static_cast<long long>(gridDim.x) * tile)
  {
    Key key[Items];
    unsigned long long index[Items];
#pragma unroll
    for (int r = 0; r < Items; ++r)
    {
      const long long i = base + r * Threads + threadIdx.x;
      index[r]          = static_cast<unsigned long long>(i);
      if (i < count)
      {
        if (from_buffer)
        {
          key[r] = in_keys[i];
          if constexpr (Pairs)
          {
            index[r] = in_index[i];
          }
        }
        else
        {
          key[r] = keys[i];
        }
      }
    }
    bool above[Items], candidate[Items];
    unsigned int n_above = 0, n_candidates = 0;
#pragma unroll
    for (int r = 0; r < Items; ++r)
    {
      const bool valid           = base + r * Threads + threadIdx.x < count;
      const unsigned long long w = valid ? static_cast<unsigned long long>(ToWord{}(key[r])) : 0ull;
      const bool source          = valid && (w & src_mask) == src_prefix;
      const unsigned long long top = last ? w : (w & mask);
      above[r]                   = source && top > prefix;
      candidate[r]               = source && top == prefix;
      n_above += above[r];
      n_candidates += candidate[r];
      if (!last && candidate[r])
      {
        atomicAdd(&hist[(w >> shift) & (bins - 1)], 1u);
      }
    }
    // pass 0 writes nothing; later passes only for tiles holding something to write
    if (pass == 0 || !__syncthreads_or(n_above + (last || append ? n_candidates : 0u)))
    {
      continue;
    }
    unsigned long long at_above, at_candidate;
    slots_t::take(slots, n_above, n_candidates, &st->greater, last ? &st->equal : appended, at_above, at_candidate);
#pragma unroll
    for (int r = 0; r < Items; ++r)
    {
      if (above[r])
      {
        out_keys[at_above] = key[r];
        if constexpr (Pairs)
        {
          out_values[at_above] = values[index[r]];
        }
        ++at_above;
      }
      if (candidate[r])
      {
        if (last)
        {
          if (at_candidate < k_left)
          {
            const unsigned long long at = static_cast<unsigned long long>(k) - k_left + at_candidate;
            out_keys[at]                = key[r];
            if constexpr (Pairs)
            {
              out_values[at] = values[index[r]];
            }
          }
        }
        else if (append && at_candidate < static_cast<unsigned long long>(cap))
        {
          buf_keys[at_candidate] = key[r];
          if constexpr (Pairs)
          {
            buf_index[at_candidate] = index[r];
          }
        }
        ++at_candidate;
      }
    }
  }

  if (!last)
  {
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += Threads)
    {
      if (hist[b])
      {
        atomicAdd(&st->hist[b], static_cast<unsigned long long>(hist[b]));
      }
    }
  }
}

// After pass `pass`: the digit d holding the k-th word (the candidates with a digit above d
// are fewer than k_left, those with d or above are not), the prefix extended by it, and the
// histogram and the next pass's append counter cleared. One block of `bins` threads.
template <class Word>
__global__ __launch_bounds__(bins) void choose_kernel(state_t* st, int pass)
{
  using scan_t = CUB_NS_QUALIFIER::BlockScan<unsigned long long, bins>;
  __shared__ typename scan_t::TempStorage scan;
  constexpr int word_bits = 8 * sizeof(Word);
  const int shift         = word_bits - radix_bits * (pass + 1);
  const int digit         = bins - 1 - static_cast<int>(threadIdx.x); // thread 0 holds the top digit
  const unsigned long long count = st->hist[digit];
  const unsigned long long k_left = st->k_left;
  unsigned long long above; // candidates with a digit above this one
  scan_t(scan).ExclusiveSum(count, above);
  __syncthreads(); // every thread has read the histogram and k_left
  if (above < k_left && above + count >= k_left)
  {
    st->prev_prefix = st->prefix;
    st->prefix |= static_cast<unsigned long long>(digit) << shift;
    st->k_left = k_left - above;
  }
  st->hist[digit] = 0;
  if (threadIdx.x == 0)
  {
    st->candidates[(pass + 1) & 1] = 0;
  }
}

// Sorted results: each block sorts its tile of Threads * Items outputs in place, the best
// first (the words sorted descending, stably; keys and values then gathered); merge_kernel
// then merges pairs of sorted runs until one run holds all k.
template <int Threads, int Items, class Key, class Value, class ToWord, bool Pairs>
__global__ __launch_bounds__(Threads) void sort_kernel(Key* out_keys, Value* out_values, long long k)
{
  using word_t = typename ToWord::word_t;
  using sort_t = CUB_NS_QUALIFIER::BlockRadixSort<word_t, Threads, Items, int>;
  __shared__ typename sort_t::TempStorage temp;
  const long long base = static_cast<long long>(blockIdx.x) * Threads * Items;
  const int count      = static_cast<int>(::cuda::std::min<long long>(Threads * Items, k - base));
  out_keys += base;
  if constexpr (Pairs)
  {
    out_values += base;
  }
  word_t w[Items];
  int from[Items];
#pragma unroll
  for (int r = 0; r < Items; ++r)
  {
    const int i = static_cast<int>(threadIdx.x) * Items + r;
    from[r]     = i;
    w[r]        = i < count ? ToWord{}(out_keys[i]) : word_t(0); // padding after every real word: stable
  }
  sort_t(temp).SortDescending(w, from);
  Key key[Items];
  Value value[Items];
#pragma unroll
  for (int r = 0; r < Items; ++r)
  {
    if (from[r] < count)
    {
      key[r] = out_keys[from[r]];
      if constexpr (Pairs)
      {
        value[r] = out_values[from[r]];
      }
    }
  }
  __syncthreads(); // every item of the tile read before any is written
#pragma unroll
  for (int r = 0; r < Items; ++r)
  {
    const int i = static_cast<int>(threadIdx.x) * Items + r;
    if (i < count)
    {
      out_keys[i] = key[r];
      if constexpr (Pairs)
      {
        out_values[i] = value[r];
      }
    }
  }
}

// Runs of `run` sorted items (the last one shorter) merged in pairs into `out_*`; each
// thread finds where its Items outputs start on the merge path of its pair (the first run
// wins ties), then merges them. A run of at least k copies.
template <int Threads, int Items, class Key, class Value, class ToWord, bool Pairs>
__global__ __launch_bounds__(Threads) void merge_kernel(
  const Key* in_keys, const Value* in_values, Key* out_keys, Value* out_values, long long k, long long run)
{
  const long long o0 = (static_cast<long long>(blockIdx.x) * Threads + threadIdx.x) * Items;
  if (o0 >= k)
  {
    return;
  }
  const ToWord word{};
  const long long a0 = o0 / (2 * run) * (2 * run);
  const long long la = ::cuda::std::min(run, k - a0);
  const long long b0 = a0 + la;
  const long long lb = ::cuda::std::min(run, k - b0);
  const long long d  = o0 - a0;
  long long lo = ::cuda::std::max(0ll, d - lb), hi = ::cuda::std::min(d, la);
  while (lo < hi)
  {
    const long long mid = (lo + hi) / 2;
    if (word(in_keys[a0 + mid]) >= word(in_keys[b0 + d - mid - 1]))
    {
      lo = mid + 1;
    }
    else
    {
      hi = mid;
    }
  }
  long long ia = lo, ib = d - lo;
#pragma unroll
  for (int r = 0; r < Items; ++r)
  {
    const long long o = o0 + r;
    if (o >= a0 + la + lb)
    {
      break;
    }
    const bool take_a = ib >= lb || (ia < la && word(in_keys[a0 + ia]) >= word(in_keys[b0 + ib]));
    const long long from = take_a ? a0 + ia++ : b0 + ib++;
    out_keys[o]          = in_keys[from];
    if constexpr (Pairs)
    {
      out_values[o] = in_values[from];
    }
  }
}

} // namespace top_k
} // namespace cuprims
