"""Block merge sort of keys by a Python comparator: each block sorts its tile of
128 threads x 4 int32 keys by absolute value, stably; the last tile is partial.

``coop.block.make_merge_sort_keys(dtype, threads, items, compare_op)`` takes any strict
weak order ``compare_op(a, b) -> bool`` (true when ``a`` goes first). Keys that compare
equal (here 5 and -5) keep their order. With ``num_valid`` only the tile's first keys
are sorted, and ``oob_default`` (a key ordered after every valid one) fills the rest.
"""

import numpy as np
from numba import cuda, int32

from cuprims import coop

THREADS, ITEMS = 128, 4
TILE = THREADS * ITEMS
LAST = 2**31 - 1                       # ordered after every key below by absolute value


def by_magnitude(a, b):
    return abs(a) < abs(b)


def main():
    sort = coop.block.make_merge_sort_keys(int32, THREADS, ITEMS, by_magnitude)

    @cuda.jit(link=sort.files)
    def sort_tiles(x, n):
        base = cuda.blockIdx.x * TILE
        mine = base + cuda.threadIdx.x * ITEMS
        keys = cuda.local.array(ITEMS, int32)
        for i in range(ITEMS):
            keys[i] = x[mine + i]
        if n - base >= TILE:
            sort(keys)
        else:
            sort(keys, num_valid=n - base, oob_default=LAST)
        for i in range(ITEMS):
            x[mine + i] = keys[i]

    blocks, n = 5, 5 * TILE - 100
    x = np.zeros(blocks * TILE, np.int32)      # room for the whole last tile
    x[:n] = np.random.default_rng(7).integers(-50, 50, n)
    d_x = cuda.to_device(x)
    sort_tiles[blocks, THREADS](d_x, n)

    got = d_x.copy_to_host()
    for start in range(0, n, TILE):
        tile = x[start:min(start + TILE, n)]
        assert np.array_equal(got[start:start + tile.size], tile[np.argsort(np.abs(tile), kind="stable")])
    assert (got[n:] == LAST).all()
    print("block_merge_sort: ok")


if __name__ == "__main__":
    main()
