"""Warp merge sort of key-value pairs: every logical warp of 8 lanes sorts its own tile
of 8 lanes x 4 (uint8 key, float64 value) pairs, ascending by key, stably.

``coop.warp.make_merge_sort_pairs(key_dtype, value_dtype, items, compare_op,
threads_in_warp=8)`` sorts the keys held in the warp's local arrays and moves the values
with them (blocked: lane ``l`` holds its tile's positions ``4l .. 4l + 3``).
"""

import numpy as np
from numba import cuda, float64, uint8

from cuprims import coop

THREADS, LANES, ITEMS = 64, 8, 4
WARP_TILE = LANES * ITEMS


def main():
    sort = coop.warp.make_merge_sort_pairs(uint8, float64, ITEMS, "<", threads_in_warp=LANES)

    @cuda.jit(link=sort.files)
    def sort_warp_tiles(k, v):
        # logical warp w of the grid owns positions w * WARP_TILE ... (w + 1) * WARP_TILE - 1
        base = (cuda.blockIdx.x * THREADS + cuda.threadIdx.x) * ITEMS
        keys = cuda.local.array(ITEMS, uint8)
        values = cuda.local.array(ITEMS, float64)
        for i in range(ITEMS):
            keys[i] = k[base + i]
            values[i] = v[base + i]
        sort(keys, values)
        for i in range(ITEMS):
            k[base + i] = keys[i]
            v[base + i] = values[i]

    blocks = 3
    rng = np.random.default_rng(10)
    k = rng.integers(0, 6, blocks * THREADS * ITEMS).astype(np.uint8)      # many equal keys
    v = rng.uniform(-1, 1, k.size)
    d_k, d_v = cuda.to_device(k), cuda.to_device(v)
    sort_warp_tiles[blocks, THREADS](d_k, d_v)

    order = np.argsort(k.reshape(-1, WARP_TILE), axis=1, kind="stable")
    assert np.array_equal(d_k.copy_to_host().reshape(-1, WARP_TILE),
                          np.take_along_axis(k.reshape(-1, WARP_TILE), order, 1))
    assert np.array_equal(d_v.copy_to_host().reshape(-1, WARP_TILE),
                          np.take_along_axis(v.reshape(-1, WARP_TILE), order, 1))
    print("warp_merge_sort_pairs: ok")


if __name__ == "__main__":
    main()
