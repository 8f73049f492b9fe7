"""Block merge sort of key-value pairs: each block sorts its tile of 128 threads x 4
int32 keys by absolute value, stably, carrying a struct (the key's origin and a weight)
with each key; the last tile is partial.

``coop.block.make_merge_sort_pairs(key_dtype, value_dtype, threads, items, compare_op)``
takes any strict weak order on the keys and any value type (here an aligned numpy
structured dtype). With ``num_valid`` only the tile's first pairs are sorted: the keys
after them become ``oob_default`` (ordered after every valid key), their values are
unspecified.
"""

import numpy as np
from numba import cuda, from_dtype, int32

from cuprims import coop

THREADS, ITEMS = 128, 4
TILE = THREADS * ITEMS
LAST = 2**31 - 1                       # ordered after every key below by absolute value
ORIGIN = np.dtype([("index", np.int32), ("weight", np.float32)], align=True)


def by_magnitude(a, b):
    return abs(a) < abs(b)


def main():
    sort = coop.block.make_merge_sort_pairs(int32, ORIGIN, THREADS, ITEMS, by_magnitude)
    origin = from_dtype(ORIGIN)

    @cuda.jit(link=sort.files)
    def sort_tiles(x, info, n):
        base = cuda.blockIdx.x * TILE
        mine = base + cuda.threadIdx.x * ITEMS
        keys = cuda.local.array(ITEMS, int32)
        values = cuda.local.array(ITEMS, origin)
        for i in range(ITEMS):
            keys[i] = x[mine + i]
            values[i] = info[mine + i]
        if n - base >= TILE:
            sort(keys, values)
        else:
            sort(keys, values, num_valid=n - base, oob_default=LAST)
        for i in range(ITEMS):
            x[mine + i] = keys[i]
            info[mine + i] = values[i]

    blocks, n = 4, 4 * TILE - 70
    rng = np.random.default_rng(8)
    x = np.zeros(blocks * TILE, np.int32)      # room for the whole last tile
    x[:n] = rng.integers(-50, 50, n)
    info = np.zeros(x.size, ORIGIN)
    info["index"] = np.arange(x.size)
    info["weight"] = rng.uniform(0, 1, x.size)
    d_x, d_info = cuda.to_device(x), cuda.to_device(info)
    sort_tiles[blocks, THREADS](d_x, d_info, n)

    got_x, got_info = d_x.copy_to_host(), d_info.copy_to_host()
    for start in range(0, n, TILE):
        stop = min(start + TILE, n)
        order = start + np.argsort(np.abs(x[start:stop]), kind="stable")
        assert np.array_equal(got_x[start:stop], x[order])
        assert np.array_equal(got_info[start:stop], info[order])
    assert (got_x[n:] == LAST).all()
    print("block_merge_sort_pairs: ok")


if __name__ == "__main__":
    main()
