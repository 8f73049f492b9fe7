"""Block load and store: each block copies its tile of 128 threads x 4 items through
registers, doubling every value on the way.

Shows ``coop.block.make_load`` / ``make_store`` with a CUB algorithm
("warp_transpose": coalesced global accesses, rearranged to the blocked order in shared
memory) and a partial last tile: ``num_valid`` limits the load and the store to the
tile's first items, and the load fills the rest of ``items`` with ``oob_default``.
"""

import numpy as np
from numba import cuda, float32

from cuprims import coop

THREADS, ITEMS = 128, 4
TILE = THREADS * ITEMS


def main():
    load = coop.block.make_load(float32, THREADS, ITEMS, algorithm="warp_transpose")
    store = coop.block.make_store(float32, THREADS, ITEMS, algorithm="warp_transpose")

    @cuda.jit(link=load.files + store.files)
    def double(x, y, n):
        base = cuda.blockIdx.x * TILE
        valid = min(TILE, n - base)
        items = cuda.local.array(ITEMS, float32)
        if valid == TILE:                       # a full tile: no bounds checks
            load(x[base:], items)
        else:                                   # the last tile: only `valid` items exist
            load(x[base:], items, num_valid=valid, oob_default=0.0)
        for i in range(ITEMS):
            items[i] *= 2
        if valid == TILE:
            store(y[base:], items)
        else:
            store(y[base:], items, num_valid=valid)

    n = 5 * TILE - 37                           # four full tiles and a partial one
    x = np.random.default_rng(0).uniform(-10, 10, n).astype(np.float32)
    d_x, d_y = cuda.to_device(x), cuda.to_device(np.full(n, np.nan, np.float32))
    double[-(-n // TILE), THREADS](d_x, d_y, n)

    assert np.array_equal(d_y.copy_to_host(), 2 * x)
    print("block_load_store: ok")


if __name__ == "__main__":
    main()
