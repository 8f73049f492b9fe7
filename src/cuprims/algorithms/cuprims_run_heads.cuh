// The heads of runs of equal consecutive items in one tile, for the kernels that find runs
// (unique-by-key, run-length encoding): the tile loaded, then each item flagged where it
// differs from the item before it (the tile's first item compared with the last item of
// the tile before; the first tile's first item is always a head).
#pragma once

#include <cub/block/block_discontinuity.cuh>
#include <cub/block/block_load.cuh>

namespace cuprims
{
namespace run_heads
{

// True where item b (at index b_index of the tile) starts a run. Guarded: an index at or
// past `valid` is never a head, and the equality operator never sees such an item.
template <class Item, class Equality, bool Guarded>
struct head_flag
{
  Equality eq;
  int valid;

  __device__ __forceinline__ bool operator()(const Item& a, const Item& b, int b_index) const
  {
    if constexpr (Guarded)
    {
      return b_index < valid && !eq(a, b);
    }
    else
    {
      return !eq(a, b);
    }
  }
};

// Loads tile `tile` (its first `valid` items where Last) with LoadT and flags its heads with
// HeadsT. The two storages may share shared memory: a barrier separates their uses.
template <bool Last, class LoadT, class HeadsT, class InputIt, class Item, int Items, class Equality, class OffsetT>
__device__ __forceinline__ void load_and_flag(
  typename LoadT::TempStorage& load_storage,
  typename HeadsT::TempStorage& heads_storage,
  InputIt d_in,
  int tile,
  OffsetT tile_offset,
  int valid,
  Equality eq,
  Item (&items)[Items],
  int (&flags)[Items])
{
  if constexpr (Last)
  {
    LoadT(load_storage).Load(d_in + tile_offset, items, valid);
  }
  else
  {
    LoadT(load_storage).Load(d_in + tile_offset, items);
  }
  Item predecessor;
  if (tile > 0 && threadIdx.x == 0)
  {
    predecessor = d_in[tile_offset - 1];
  }
  __syncthreads(); // the load's shared memory is the discontinuity's

  const head_flag<Item, Equality, Last> is_head{eq, valid};
  if (tile == 0)
  {
    HeadsT(heads_storage).FlagHeads(flags, items, is_head); // the first item is a head
  }
  else
  {
    HeadsT(heads_storage).FlagHeads(flags, items, is_head, predecessor);
  }
}

} // namespace run_heads
} // namespace cuprims
