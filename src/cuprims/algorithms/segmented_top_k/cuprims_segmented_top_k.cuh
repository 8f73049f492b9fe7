// cuprims segmented top-k: the k largest (or smallest) keys of each row, a block or a warp
// (a group) per row.
//
// Each key is mapped to an unsigned "rank" word of its width whose unsigned order is the
// order wanted (the k largest ranks are the answer): integers by their sign bit, floats
// by their sign-magnitude bits with every NaN above +inf (numpy's order) and -0.0 tied
// with +0.0; ascending order takes the complement. A group then finds the k-th largest
// rank by a radix select, 8 bits a pass from the top:
//
//   * a 256-bin histogram in shared memory of the digit under the prefix found so far
//     (an atomic per candidate),
//     then a group scan over the bins from the top finds the bin that holds the k-th
//     rank; the select stops early when that bin holds exactly the ranks still needed;
//   * a last pass keeps every rank above the prefix and the first of those on it (by
//     position in the row) up to k: their slots come from one group scan of per-warp
//     ballot counts, in row order, so the choice among equal keys is deterministic;
//   * the kept ranks (in row order in shared memory) are ordered by counting, for each,
//     the kept ranks that come before it: larger ones, and equal ones earlier in the row.
//     The output holds the keys themselves (their own bits, read again from the row).
//
// A row of at most one tile (group x Items) is read once into registers (striped: item
// i of thread t is row item i * group + t, so loads coalesce); a longer one is read
// again, a tile at a time, for each pass. A block fetches its next row's first tile into
// L2 as it starts a row: a block tier holds one block an SM, whose loads would otherwise
// wait on memory with nothing else in flight. The host launches a kernel per tier of row
// length; each kernel takes the rows whose length lies in (lo, hi] and leaves the others.
// Short rows take a warp each (`Warp`: the block's warps on rows of their own, with warp
// barriers and scans), which spares them the block-wide barriers of every pass.
#pragma once

#include <cub/block/block_scan.cuh>
#include <cub/warp/warp_scan.cuh>

#include <cuda/std/type_traits>

namespace cuprims
{
namespace segmented_top_k
{

// Kind: 0 unsigned (or bool), 1 signed integer, 2 floating point (InfBits: +inf's bits)
template <int Kind, bool Descending, class Bits, unsigned long long InfBits>
__device__ __forceinline__ Bits rank_of(Bits b)
{
  constexpr Bits high = static_cast<Bits>(Bits(1) << (sizeof(Bits) * 8 - 1));
  constexpr Bits ones = static_cast<Bits>(~Bits(0));
  Bits r              = b;
  if constexpr (Kind == 1)
  {
    r = static_cast<Bits>(b ^ high);
  }
  else if constexpr (Kind == 2)
  {
    const Bits mag = static_cast<Bits>(b & static_cast<Bits>(~high));
    if (mag > static_cast<Bits>(InfBits))
    {
      r = ones; // every NaN, of either sign, above +inf
    }
    else if (mag == 0)
    {
      r = high; // -0.0 ties with +0.0
    }
    else
    {
      r = (b & high) ? static_cast<Bits>(~b) : static_cast<Bits>(b | high);
    }
  }
  return Descending ? r : static_cast<Bits>(~r);
}

// Fixed rows: row i is [i * size, (i + 1) * size); `End` selects the end offsets.
template <bool End>
struct fixed_rows
{
  long long size;

  __device__ __forceinline__ long long operator[](long long i) const
  {
    return (End ? i + 1 : i) * size;
  }
};

// Largest k the kernels take (their shared-memory slots for the kept items)
constexpr int max_k = 1024;

// A group takes a row: the whole block, or (`Warp`) each warp of the block its own row.
template <int Threads, int Items, bool Bounded, bool Warp>
struct shape
{
  static constexpr int group = Warp ? 32 : Threads;
  static constexpr int rows  = Threads / group; // rows a block takes at once
  static constexpr int tile  = group * Items;
  static constexpr int warps = group / 32;
  // per-thread bins of the 256-bin scan
  static constexpr int bins = (256 + group - 1) / group;
  // per-thread (column, warp) counts of the selecting scan
  static constexpr int cells = (Items * warps + group - 1) / group;
  // a bounded tier holds rows of at most one tile: fewer than k kept
  static constexpr int slots = Bounded && tile < max_k ? tile : max_k;
  static_assert(Threads % group == 0 && group % 32 == 0 && tile < 65536, "counts are packed in 16 bits");
};

// The group's barrier and exclusive sum: a block's, or a warp's.
template <int Threads, bool Warp>
struct group_ops
{
  using block_scan_t = CUB_NS_QUALIFIER::BlockScan<unsigned, Threads>;
  using warp_scan_t  = CUB_NS_QUALIFIER::WarpScan<unsigned>;
  using storage_t    = ::cuda::std::conditional_t<Warp, typename warp_scan_t::TempStorage,
                                                  typename block_scan_t::TempStorage>;

  static __device__ __forceinline__ void sync()
  {
    if constexpr (Warp)
    {
      __syncwarp();
    }
    else
    {
      __syncthreads();
    }
  }

  template <int N>
  static __device__ __forceinline__ void
  exclusive_sum(storage_t& storage, unsigned (&in)[N], unsigned (&out)[N], unsigned& total)
  {
    if constexpr (Warp)
    {
      unsigned mine = 0;
#pragma unroll
      for (int j = 0; j < N; ++j)
      {
        out[j] = mine;
        mine += in[j];
      }
      unsigned before;
      warp_scan_t(storage).ExclusiveSum(mine, before, total);
#pragma unroll
      for (int j = 0; j < N; ++j)
      {
        out[j] += before;
      }
    }
    else
    {
      block_scan_t(storage).ExclusiveSum(in, out, total);
    }
  }
};

// The warp tier is held to 48 registers (five blocks of 256 an SM; sm_90 gives it 64
// otherwise, four blocks): its rows are short, so more of them in flight hide their loads'
// latency. 40 (six blocks) spilled the bins of every pass; 48 spills only across rows.
// A block tier asks for 1024 threads an SM at least (the middle tier took 72 registers,
// three blocks of 256, unbounded; it fits 48 without a spill).
template <int Threads, int Items, bool Bounded, bool Warp, int Kind, bool Descending, class Bits,
          unsigned long long InfBits, class ValueT, class BeginT, class EndT>
__global__ __launch_bounds__(Threads, Warp ? 1280 / Threads : 1024 / Threads) void top_k_kernel(
  const Bits* keys_in,
  Bits* keys_out,
  const ValueT* values_in,
  ValueT* values_out,
  BeginT begins,
  EndT ends,
  int k,
  int segments,
  long long lo,
  long long hi)
{
  using sh               = shape<Threads, Items, Bounded, Warp>;
  using ops              = group_ops<Threads, Warp>;
  constexpr int key_bits = int(sizeof(Bits)) * 8;
  constexpr bool values  = !::cuda::std::is_same_v<ValueT, CUB_NS_QUALIFIER::NullType>;

  __shared__ typename ops::storage_t scan_storage_of[sh::rows];
  __shared__ unsigned hist_of[sh::rows][256];
  __shared__ unsigned cells_of[sh::rows][Items * sh::warps];
  __shared__ Bits kept_rank_of[sh::rows][sh::slots];
  __shared__ int kept_index_of[sh::rows][sh::slots];
  __shared__ Bits found_digit_of[sh::rows];
  __shared__ int found_need_of[sh::rows];
  __shared__ int found_exact_of[sh::rows];
  __shared__ int list[Warp ? 1 : sh::group]; // a block's rows of its tier in the batch
  __shared__ int listed;

  // this group's shared memory (a block has one group unless `Warp`)
  const int g        = Warp ? static_cast<int>(threadIdx.x) / 32 : 0;
  auto& scan_storage = scan_storage_of[g];
  auto& hist         = hist_of[g];
  auto& cells        = cells_of[g];
  auto& kept_rank    = kept_rank_of[g];
  auto& kept_index   = kept_index_of[g];
  auto& found_digit  = found_digit_of[g];
  auto& found_need   = found_need_of[g];
  auto& found_exact  = found_exact_of[g];
  const int t        = static_cast<int>(threadIdx.x) % sh::group;
  const int lane     = t & 31;
  const int warp     = t >> 5;

  // Group i of the grid's G takes rows i, i + G, i + 2G, ...: a batch of them at a time,
  // each thread reading one row's offsets, so that a tier's group passes over the rows of
  // the other tiers (rows by offsets) without a wait for each.
  const long long groups = static_cast<long long>(gridDim.x) * sh::rows;
  const long long first  = static_cast<long long>(blockIdx.x) * sh::rows + g;
  for (long long batch = first; batch < segments; batch += groups * sh::group)
  {
    bool mine = false;
    {
      const long long row = batch + t * groups;
      if (row < segments)
      {
        const long long b = static_cast<long long>(begins[row]);
        const long long e = static_cast<long long>(ends[row]);
        mine              = e > b && lo < e - b && e - b <= hi && k > 0;
      }
    }
    unsigned todo = 0; // Warp: the lanes whose rows are the tier's
    if constexpr (Warp)
    {
      todo = __ballot_sync(0xffffffffu, mine);
    }
    else
    {
      if (t == 0)
      {
        listed = 0;
      }
      __syncthreads();
      if (mine)
      {
        list[atomicAdd(&listed, 1)] = t; // the order of the rows does not matter
      }
      __syncthreads();
    }
    const int count = Warp ? __popc(todo) : listed;
    for (int j = 0; j < count; ++j)
    {
      // a listed row's offsets are read again (from cache) rather than held in registers
      // through the selection, which has none to spare
      int pick;
      if constexpr (Warp)
      {
        pick = __ffs(todo) - 1;
        todo &= todo - 1;
      }
      else
      {
        pick = list[j];
      }
      const long long row   = batch + pick * groups;
      const long long begin = static_cast<long long>(begins[row]);
      const long long span  = static_cast<long long>(ends[row]) - begin;

      // the top `take` keys of the row of `span` keys from `begin`, into row `row` of the output
      // positions within a row are int: a row holds at most 2^30 keys (a longer one is cut
      // there rather than read out of bounds), so a position past its last tile fits too
      constexpr long long max_row = 1ll << 30;
      const int n          = static_cast<int>(span < max_row ? span : max_row);
      const int take       = n < k ? n : k;
      const Bits* row_keys = keys_in + begin;
      const int chunks     = static_cast<int>((static_cast<long long>(n) + sh::tile - 1) / sh::tile);

      Bits r[Items];
      auto load = [&](int base) {
#pragma unroll
        for (int i = 0; i < Items; ++i)
        {
          const int idx = base + i * sh::group + t;
          r[i]          = idx < n ? rank_of<Kind, Descending, Bits, InfBits>(row_keys[idx]) : Bits(0);
        }
      };
      if (chunks == 1)
      {
        load(0);
      }
      // the next row of this block's list is fetched into L2 while this one is selected
      if constexpr (!Warp)
      {
        if (j + 1 < count)
        {
          const long long next       = batch + list[j + 1] * groups;
          const long long next_begin = static_cast<long long>(begins[next]);
          long long next_n           = static_cast<long long>(ends[next]) - next_begin;
          next_n                     = next_n < sh::tile ? next_n : sh::tile;
          constexpr int line         = 128 / int(sizeof(Bits));
          for (long long at = static_cast<long long>(t) * line; at < next_n; at += static_cast<long long>(sh::group) * line)
          {
            asm volatile("prefetch.global.L2 [%0];" ::"l"(keys_in + next_begin + at));
          }
        }
      }

      // the radix select: ranks under `mask` equal to `prefix` are the candidates, `need` of
      // them still to take; a row of at most k keys takes every key (the prefix 0 under no mask)
      Bits prefix = 0;
      Bits mask   = 0;
      int need    = take;
      if (n > k)
      {
        for (int shift = key_bits - 8; shift >= 0; shift -= 8)
        {
          for (int b = t; b < 256; b += sh::group)
          {
            hist[b] = 0;
          }
          ops::sync();
          for (int c = 0; c < chunks; ++c)
          {
            if (chunks > 1)
            {
              load(c * sh::tile);
            }
#pragma unroll
            for (int i = 0; i < Items; ++i)
            {
              const int idx   = c * sh::tile + i * sh::group + t;
              const bool cand = idx < n && (r[i] & mask) == prefix;
              // each lane its own atomic: the hardware merges a warp's atomics on one counter,
              // where a match of the lanes' bins first (MATCH.ANY) cost more than it saved,
              // on keys of real data and on rows of equal keys alike
              if (cand)
              {
                atomicAdd(&hist[unsigned((r[i] >> shift) & Bits(255))], 1u);
              }
            }
          }
          ops::sync();
          // bins from the top digit down: thread t holds bins 255 - (t * sh::bins + j)
          unsigned counts[sh::bins];
          unsigned before[sh::bins];
#pragma unroll
          for (int j = 0; j < sh::bins; ++j)
          {
            const int slot = t * sh::bins + j;
            counts[j]      = slot < 256 ? hist[255 - slot] : 0u;
          }
          unsigned total;
          ops::exclusive_sum(scan_storage, counts, before, total);
          const unsigned u = static_cast<unsigned>(need);
#pragma unroll
          for (int j = 0; j < sh::bins; ++j)
          {
            if (counts[j] && before[j] < u && before[j] + counts[j] >= u)
            {
              found_digit = static_cast<Bits>(255 - (t * sh::bins + j));
              found_need  = need - static_cast<int>(before[j]);
              found_exact = before[j] + counts[j] == u;
            }
          }
          ops::sync();
          prefix           = static_cast<Bits>(prefix | static_cast<Bits>(found_digit << shift));
          mask             = static_cast<Bits>(mask | static_cast<Bits>(Bits(255) << shift));
          need             = found_need;
          const bool exact = found_exact;
          ops::sync(); // every thread has read the found values before the next pass writes them
          if (exact)
          {
            break; // every candidate left is taken
          }
        }
      }

      // keep the ranks above the prefix and the first `need` on it, in row order: item i of
      // thread t is row item i * group + t, counted per (column i, warp) and scanned
      unsigned above_seen = 0;
      unsigned on_seen    = 0;
      for (int c = 0; c < chunks; ++c)
      {
        if (chunks > 1)
        {
          load(c * sh::tile);
        }
        // the ballots are taken again below rather than held: registers are the tile's
#pragma unroll
        for (int i = 0; i < Items; ++i)
        {
          const int idx        = c * sh::tile + i * sh::group + t;
          const Bits m         = static_cast<Bits>(r[i] & mask);
          const unsigned above = __ballot_sync(0xffffffffu, idx < n && m > prefix);
          const unsigned on    = __ballot_sync(0xffffffffu, idx < n && m == prefix);
          if (lane == 0)
          {
            cells[i * sh::warps + warp] = (unsigned(__popc(on)) << 16) | unsigned(__popc(above));
          }
        }
        ops::sync();
        unsigned mine[sh::cells];
        unsigned prior[sh::cells];
#pragma unroll
        for (int j = 0; j < sh::cells; ++j)
        {
          const int cell = t * sh::cells + j;
          mine[j]        = cell < Items * sh::warps ? cells[cell] : 0u;
        }
        unsigned total;
        ops::exclusive_sum(scan_storage, mine, prior, total);
        ops::sync(); // every count is read before the prefixes overwrite them
#pragma unroll
        for (int j = 0; j < sh::cells; ++j)
        {
          const int cell = t * sh::cells + j;
          if (cell < Items * sh::warps)
          {
            cells[cell] = prior[j];
          }
        }
        ops::sync();
        const unsigned below  = (1u << lane) - 1u;
        const unsigned need_u = static_cast<unsigned>(need);
#pragma unroll
        for (int i = 0; i < Items; ++i)
        {
          const int idx               = c * sh::tile + i * sh::group + t;
          const Bits m                = static_cast<Bits>(r[i] & mask);
          const bool is_above         = idx < n && m > prefix;
          const bool is_on            = idx < n && m == prefix;
          const unsigned above_ballot = __ballot_sync(0xffffffffu, is_above);
          const unsigned on_ballot    = __ballot_sync(0xffffffffu, is_on);
          const unsigned p            = cells[i * sh::warps + warp];
          const unsigned above        = above_seen + (p & 0xffffu) + unsigned(__popc(above_ballot & below));
          const unsigned on           = on_seen + (p >> 16) + unsigned(__popc(on_ballot & below));
          if (is_above || (is_on && on < need_u))
          {
            const unsigned slot = above + (on < need_u ? on : need_u);
            kept_rank[slot]     = r[i];
            kept_index[slot]    = idx;
          }
        }
        above_seen += total & 0xffffu;
        on_seen += total >> 16;
        ops::sync(); // the cells and the scan's storage are reused by the next tile
      }

      // order the kept items: larger ranks first, equal ones in row order
      const long long out = row * static_cast<long long>(k);
      for (int s = t; s < take; s += sh::group)
      {
        const Bits mine = kept_rank[s];
        int pos         = 0;
        for (int j = 0; j < take; ++j)
        {
          const Bits other = kept_rank[j];
          pos += (other > mine) || (other == mine && j < s);
        }
        const long long src = begin + kept_index[s];
        keys_out[out + pos] = keys_in[src];
        if constexpr (values)
        {
          values_out[out + pos] = values_in[src];
        }
      }
    }
    if constexpr (!Warp)
    {
      __syncthreads(); // every thread has read the list before the next batch writes it
    }
  }
}

} // namespace segmented_top_k
} // namespace cuprims
