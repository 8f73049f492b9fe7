"""Block prefix sums: the running totals of each block's tile, exclusive and inclusive.

``coop.block.make_exclusive_sum`` / ``make_inclusive_sum`` scan the tile held by the
block's threads in the blocked order (thread ``t`` holds positions ``4t .. 4t + 3``),
from a local array into another (or the same) one. The exclusive sum of a tile starts
at 0: the offsets a block would write its items to when compacting them.
"""

import numpy as np
from numba import cuda, int32

from cuprims import coop

THREADS, ITEMS = 128, 4
TILE = THREADS * ITEMS


def main():
    exclusive_sum = coop.block.make_exclusive_sum(int32, THREADS, ITEMS)
    inclusive_sum = coop.block.make_inclusive_sum(int32, THREADS, ITEMS)

    @cuda.jit(link=exclusive_sum.files + inclusive_sum.files)
    def prefix_sums(x, excl, incl):
        base = cuda.blockIdx.x * TILE + cuda.threadIdx.x * ITEMS
        items = cuda.local.array(ITEMS, int32)
        sums = cuda.local.array(ITEMS, int32)
        for i in range(ITEMS):
            items[i] = x[base + i]
        exclusive_sum(items, sums)
        for i in range(ITEMS):
            excl[base + i] = sums[i]
        inclusive_sum(items, items)                  # in place
        for i in range(ITEMS):
            incl[base + i] = items[i]

    blocks = 4
    x = np.random.default_rng(4).integers(0, 10, blocks * TILE).astype(np.int32)
    d_excl = cuda.device_array(x.size, dtype=np.int32)
    d_incl = cuda.device_array(x.size, dtype=np.int32)
    prefix_sums[blocks, THREADS](cuda.to_device(x), d_excl, d_incl)

    inclusive = np.cumsum(x.reshape(blocks, TILE), axis=1, dtype=np.int32)
    assert np.array_equal(d_incl.copy_to_host(), inclusive.ravel())
    assert np.array_equal(d_excl.copy_to_host(), (inclusive - x.reshape(blocks, TILE)).ravel())
    print("block_prefix_sums: ok")


if __name__ == "__main__":
    main()
