"""Warp load and store: every warp of 32 lanes reads its own tile of 32 x 4 float32
values (coalesced, through shared memory: 'transpose'), scales it and writes it back;
the last tile is partial.

``coop.warp.make_load(dtype, items, algorithm)`` / ``make_store`` are CUB's WarpLoad /
WarpStore ('direct', 'striped', 'vectorize', 'transpose'); each warp passes the array
starting at its tile. With ``num_valid`` only the tile's first items are read (the
rest of the lane's items are ``oob_default``) or written.
"""

import numpy as np
from numba import cuda, float32

from cuprims import coop

THREADS, ITEMS = 128, 4
WARP_TILE = 32 * ITEMS


def main():
    load = coop.warp.make_load(float32, ITEMS, "transpose")
    store = coop.warp.make_store(float32, ITEMS, "transpose")

    @cuda.jit(link=load.files + store.files)
    def scale(x, y, n, factor):
        warp = (cuda.blockIdx.x * THREADS + cuda.threadIdx.x) // 32
        base = warp * WARP_TILE
        items = cuda.local.array(ITEMS, float32)
        if n - base >= WARP_TILE:
            load(x[base:], items)
        else:
            load(x[base:], items, num_valid=max(0, n - base), oob_default=0)
        for i in range(ITEMS):                 # lane l holds positions 4l .. 4l + 3 of its tile
            items[i] *= factor
        if n - base >= WARP_TILE:
            store(y[base:], items)
        else:
            store(y[base:], items, num_valid=max(0, n - base))

    blocks = 5
    n = blocks * THREADS * ITEMS - 200
    x = np.zeros(blocks * THREADS * ITEMS, np.float32)      # whole tiles to read from
    x[:n] = np.random.default_rng(11).uniform(-1, 1, n)
    d_y = cuda.to_device(np.full(x.size, -7, np.float32))
    scale[blocks, THREADS](cuda.to_device(x), d_y, n, np.float32(3))

    y = d_y.copy_to_host()
    assert np.array_equal(y[:n], x[:n] * np.float32(3))
    assert (y[n:] == -7).all()                  # past n: not written
    print("warp_load_store: ok")


if __name__ == "__main__":
    main()
