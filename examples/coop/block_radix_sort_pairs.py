"""Block radix sort of key-value pairs: each block argsorts its tile of 128 threads x 4
float32 scores, highest first, carrying each score's index along.

``coop.block.make_radix_sort_pairs_descending(key_dtype, value_dtype, threads, items)``
(and ``make_radix_sort_pairs`` for ascending) sorts the keys held in the threads' local
arrays and moves the values with them, blocked (thread ``t`` holds positions
``4t .. 4t + 3``). The sort is stable: equal scores keep their index order.
"""

import numpy as np
from numba import cuda, float32, int32

from cuprims import coop

THREADS, ITEMS = 128, 4
TILE = THREADS * ITEMS


def main():
    sort = coop.block.make_radix_sort_pairs_descending(float32, int32, THREADS, ITEMS)

    @cuda.jit(link=sort.files)
    def rank_tiles(scores, order):
        base = cuda.blockIdx.x * TILE
        mine = base + cuda.threadIdx.x * ITEMS
        keys = cuda.local.array(ITEMS, float32)
        index = cuda.local.array(ITEMS, int32)
        for i in range(ITEMS):
            keys[i] = scores[mine + i]
            index[i] = mine + i - base           # the position in the tile
        sort(keys, index)
        for i in range(ITEMS):
            scores[mine + i] = keys[i]
            order[mine + i] = index[i]

    blocks = 6
    scores = np.round(np.random.default_rng(12).normal(0, 4, blocks * TILE)).astype(np.float32)   # many ties
    d_scores, d_order = cuda.to_device(scores), cuda.device_array(scores.size, dtype=np.int32)
    rank_tiles[blocks, THREADS](d_scores, d_order)

    tiles = scores.reshape(blocks, TILE)
    # highest first, ties in index order: a stable argsort of the negated scores
    expected = np.argsort(-tiles, axis=1, kind="stable")
    assert np.array_equal(d_order.copy_to_host().reshape(blocks, TILE), expected)
    assert np.array_equal(d_scores.copy_to_host().reshape(blocks, TILE), np.take_along_axis(tiles, expected, 1))
    print("block_radix_sort_pairs: ok")


if __name__ == "__main__":
    main()
