"""Warp merge sort of keys: every logical warp of 16 lanes sorts its own tile of
16 lanes x 4 keys, largest first.

``coop.warp.make_merge_sort_keys(dtype, items, compare_op, threads_in_warp=16)`` sorts
the keys held in the warp's local arrays in place, blocked (lane ``l`` holds its tile's
positions ``4l .. 4l + 3``), by ``compare_op`` (here a Python function; OpKind.LESS and
OpKind.GREATER work too).
"""

import numpy as np
from numba import cuda, float64

from cuprims import coop

THREADS, LANES, ITEMS = 128, 16, 4
WARP_TILE = LANES * ITEMS


def main():
    sort = coop.warp.make_merge_sort_keys(float64, ITEMS, lambda a, b: a > b, threads_in_warp=LANES)

    @cuda.jit(link=sort.files)
    def sort_warp_tiles(x):
        # logical warp w of the grid owns x[w * WARP_TILE:(w + 1) * WARP_TILE]
        base = (cuda.blockIdx.x * THREADS + cuda.threadIdx.x) * ITEMS
        keys = cuda.local.array(ITEMS, float64)
        for i in range(ITEMS):
            keys[i] = x[base + i]
        sort(keys)
        for i in range(ITEMS):
            x[base + i] = keys[i]

    blocks = 4
    x = np.random.default_rng(9).uniform(-1, 1, blocks * THREADS * ITEMS)
    d_x = cuda.to_device(x)
    sort_warp_tiles[blocks, THREADS](d_x)

    expected = -np.sort(-x.reshape(-1, WARP_TILE), axis=1)
    assert np.array_equal(d_x.copy_to_host().reshape(-1, WARP_TILE), expected)
    print("warp_merge_sort: ok")


if __name__ == "__main__":
    main()
