"""Discontinuity flags and adjacent differences over a long sorted array, one block
walking it tile by tile: each run of equal values is flagged at its head, and each value's
gap to the one before it computed, across tile boundaries.

``coop.block.make_discontinuity(dtype, threads, items)`` flags ``items[i]`` where it differs
from the item before it (``!=`` unless ``flag_op=`` is given); the tile's first item is a
head unless the call passes ``tile_predecessor_item``, the last item of the previous tile.
``coop.block.make_adjacent_difference`` writes ``item - previous item`` (``SubtractLeft``),
keeping the tile's first item unless given its predecessor too.
"""

import numpy as np
from numba import cuda, int32

from cuprims import coop

THREADS, ITEMS = 128, 4
TILE = THREADS * ITEMS


def main():
    heads = coop.block.make_discontinuity(int32, THREADS, ITEMS, flag_dtype=int32)
    gaps = coop.block.make_adjacent_difference(int32, THREADS, ITEMS)

    @cuda.jit(link=heads.files + gaps.files)
    def heads_and_gaps(x, flags_out, gaps_out):
        items = cuda.local.array(ITEMS, int32)
        flags = cuda.local.array(ITEMS, int32)
        deltas = cuda.local.array(ITEMS, int32)
        for start in range(0, x.size, TILE):
            mine = start + cuda.threadIdx.x * ITEMS
            for i in range(ITEMS):
                items[i] = x[mine + i]
            if start == 0:
                heads(items, flags)
                gaps(items, deltas)
            else:
                heads(items, flags, x[start - 1])
                gaps(items, deltas, tile_predecessor_item=x[start - 1])
            for i in range(ITEMS):
                flags_out[mine + i] = flags[i]
                gaps_out[mine + i] = deltas[i]

    x = np.sort(np.random.default_rng(3).integers(0, 1000, 8 * TILE)).astype(np.int32)
    d_flags = cuda.device_array(x.size, np.int32)
    d_gaps = cuda.device_array(x.size, np.int32)
    heads_and_gaps[1, THREADS](cuda.to_device(x), d_flags, d_gaps)

    want_flags = np.concatenate([[1], x[1:] != x[:-1]]).astype(np.int32)
    want_gaps = np.concatenate([x[:1], np.diff(x)]).astype(np.int32)
    assert np.array_equal(d_flags.copy_to_host(), want_flags)
    assert np.array_equal(d_gaps.copy_to_host(), want_gaps)
    print(f"block_run_heads_and_gaps: ok ({want_flags.sum()} runs)")


if __name__ == "__main__":
    main()
