"""Block sum: the total of each block's tile of 256 threads x 8 items.

``coop.block.make_sum`` with ``items_per_thread > 1`` takes each thread's local array
and returns the block's total, valid in thread 0 (CUB's ``BlockReduce::Sum``).
"""

import numpy as np
from numba import cuda, int64

from cuprims import coop

THREADS, ITEMS = 256, 8
TILE = THREADS * ITEMS


def main():
    block_sum = coop.block.make_sum(int64, THREADS, items_per_thread=ITEMS)

    @cuda.jit(link=block_sum.files)
    def tile_sums(x, out):
        base = cuda.blockIdx.x * TILE + cuda.threadIdx.x * ITEMS
        items = cuda.local.array(ITEMS, int64)
        for i in range(ITEMS):
            items[i] = x[base + i]
        total = block_sum(items)
        if cuda.threadIdx.x == 0:
            out[cuda.blockIdx.x] = total

    blocks = 10
    x = np.random.default_rng(3).integers(-10**6, 10**6, blocks * TILE, dtype=np.int64)
    d_out = cuda.device_array(blocks, dtype=np.int64)
    tile_sums[blocks, THREADS](cuda.to_device(x), d_out)

    assert np.array_equal(d_out.copy_to_host(), x.reshape(blocks, TILE).sum(axis=1))
    print("block_sum: ok")


if __name__ == "__main__":
    main()
