"""Block radix sort of keys: each block sorts its tile of 128 threads x 4 float32 keys,
ascending and descending.

``coop.block.make_radix_sort_keys`` / ``make_radix_sort_keys_descending`` sort the tile
held in the threads' local arrays in place (blocked: thread ``t`` holds positions
``4t .. 4t + 3`` before and after), in the order ``np.sort`` gives.
"""

import numpy as np
from numba import cuda, float32

from cuprims import coop

THREADS, ITEMS = 128, 4
TILE = THREADS * ITEMS


def main():
    sort_up = coop.block.make_radix_sort_keys(float32, THREADS, ITEMS)
    sort_down = coop.block.make_radix_sort_keys_descending(float32, THREADS, ITEMS)

    @cuda.jit(link=sort_up.files + sort_down.files)
    def sort_tiles(x, up, down):
        base = cuda.blockIdx.x * TILE + cuda.threadIdx.x * ITEMS
        a = cuda.local.array(ITEMS, float32)
        b = cuda.local.array(ITEMS, float32)
        for i in range(ITEMS):
            a[i] = x[base + i]
            b[i] = a[i]
        sort_up(a)
        sort_down(b)
        for i in range(ITEMS):
            up[base + i] = a[i]
            down[base + i] = b[i]

    blocks = 8
    x = np.random.default_rng(6).normal(0, 100, blocks * TILE).astype(np.float32)
    d_up, d_down = cuda.device_array(x.size, dtype=np.float32), cuda.device_array(x.size, dtype=np.float32)
    sort_tiles[blocks, THREADS](cuda.to_device(x), d_up, d_down)

    expected = np.sort(x.reshape(blocks, TILE), axis=1)
    assert np.array_equal(d_up.copy_to_host().reshape(blocks, TILE), expected)
    assert np.array_equal(d_down.copy_to_host().reshape(blocks, TILE), expected[:, ::-1])
    print("block_radix_sort: ok")


if __name__ == "__main__":
    main()
