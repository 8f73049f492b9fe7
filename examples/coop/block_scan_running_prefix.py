"""A block prefix callback: one block scans a whole array, tile after tile.

``prefix_op=`` (CUB's ``BlockPrefixCallbackOp``) is a Python function
``prefix(state, block_aggregate) -> prefix``. Each scan call hands it the block's sum of
the call's tile; what it returns is added in front of the tile's scan. Returning the
running total *before* adding the aggregate, and keeping the total in ``state`` (a
thread-local array the kernel owns and passes to every call), makes the tiles one long
scan. CUB calls it in the block's first warp only and uses thread 0's result, so thread 0
holds the grand total at the end.
"""

import numpy as np
from numba import cuda, int32

from cuprims import coop

THREADS, ITEMS = 128, 4
TILE = THREADS * ITEMS


def running_total(state, block_aggregate):
    prefix = state[0]
    state[0] = prefix + block_aggregate
    return prefix


def main():
    scan = coop.block.make_inclusive_sum(int32, THREADS, ITEMS, prefix_op=running_total)
    load = coop.block.make_load(int32, THREADS, ITEMS, algorithm="warp_transpose")
    store = coop.block.make_store(int32, THREADS, ITEMS, algorithm="warp_transpose")

    @cuda.jit(link=scan.files + load.files + store.files)
    def running_scan(x, y, n, total):
        running = cuda.local.array(1, int32)       # the callback's state, thread-local
        running[0] = 0
        items = cuda.local.array(ITEMS, int32)
        for base in range(0, n, TILE):
            valid = min(TILE, n - base)
            load(x[base:], items, valid, 0)        # the last tile padded with 0
            scan(items, items, running)
            store(y[base:], items, valid)
        if cuda.threadIdx.x == 0:
            total[0] = running[0]

    n = 20 * TILE - 77
    x = np.random.default_rng(7).integers(-100, 100, n).astype(np.int32)
    d_y = cuda.device_array(n, dtype=np.int32)
    d_total = cuda.device_array(1, dtype=np.int32)
    running_scan[1, THREADS](cuda.to_device(x), d_y, n, d_total)

    assert np.array_equal(d_y.copy_to_host(), np.cumsum(x, dtype=np.int32))
    assert d_total.copy_to_host()[0] == x.sum(dtype=np.int32)
    print("block_scan_running_prefix: ok")


if __name__ == "__main__":
    main()
