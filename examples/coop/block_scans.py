"""Block scans by other operators than ``+``: running maxima and minima of each block's tile.

* ``coop.block.make_scan(..., mode="inclusive", scan_op=...)``: the general factory; with
  one item per thread the call takes and returns a value.
* ``make_exclusive_scan(dtype, threads, "max", items, initial_value=...)``: a built-in
  operator seeded with an initial value (the first output of the tile).
* ``make_inclusive_scan(dtype, threads, python_function, items)``: a Python operator.
"""

import numpy as np
from numba import cuda, int32

from cuprims import coop

THREADS, ITEMS = 128, 4
TILE = THREADS * ITEMS
LOWEST = -1000


def smaller(a, b):
    return a if a < b else b


def main():
    running_max_1 = coop.block.make_scan(int32, THREADS, 1, mode="inclusive", scan_op="max")
    running_max = coop.block.make_exclusive_scan(int32, THREADS, "max", ITEMS, initial_value=LOWEST)
    running_min = coop.block.make_inclusive_scan(int32, THREADS, smaller, ITEMS)

    @cuda.jit(link=running_max_1.files + running_max.files + running_min.files)
    def scans(x, max_1, max_excl, min_incl):
        t = cuda.threadIdx.x
        max_1[cuda.blockIdx.x * THREADS + t] = running_max_1(x[cuda.blockIdx.x * TILE + t])  # one item each
        base = cuda.blockIdx.x * TILE + t * ITEMS
        items = cuda.local.array(ITEMS, int32)
        out = cuda.local.array(ITEMS, int32)
        for i in range(ITEMS):
            items[i] = x[base + i]
        running_max(items, out)
        running_min(items, items)
        for i in range(ITEMS):
            max_excl[base + i] = out[i]
            min_incl[base + i] = items[i]

    blocks = 4
    x = np.random.default_rng(5).integers(-500, 500, blocks * TILE).astype(np.int32)
    d_max_1 = cuda.device_array(blocks * THREADS, dtype=np.int32)
    d_max_excl, d_min_incl = (cuda.device_array(x.size, dtype=np.int32) for _ in range(2))
    scans[blocks, THREADS](cuda.to_device(x), d_max_1, d_max_excl, d_min_incl)

    tiles = x.reshape(blocks, TILE)
    seeded = np.concatenate([np.full((blocks, 1), LOWEST, np.int32), tiles[:, :-1]], axis=1)
    assert np.array_equal(d_max_1.copy_to_host(), np.maximum.accumulate(tiles[:, :THREADS], axis=1).ravel())
    assert np.array_equal(d_max_excl.copy_to_host(), np.maximum.accumulate(seeded, axis=1).ravel())
    assert np.array_equal(d_min_incl.copy_to_host(), np.minimum.accumulate(tiles, axis=1).ravel())
    print("block_scans: ok")


if __name__ == "__main__":
    main()
