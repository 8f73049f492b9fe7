"""Block exchange: read a tile striped (coalesced), then turn it blocked.

Thread ``t`` of a block loads tile positions ``t, t + 128, t + 256, t + 384`` (neighbouring
threads touch neighbouring addresses), and ``coop.block.make_exchange`` with
``BlockExchangeType.StripedToBlocked`` hands it positions ``4t .. 4t + 3`` instead, so each
thread can work on consecutive items: here, the sum of each run of 4.
"""

import numpy as np
from numba import cuda, int32

from cuprims import coop

THREADS, ITEMS = 128, 4
TILE = THREADS * ITEMS


def main():
    to_blocked = coop.block.make_exchange(coop.block.BlockExchangeType.StripedToBlocked, int32, THREADS, ITEMS)

    @cuda.jit(link=to_blocked.files)
    def sum_runs(x, sums):
        t = cuda.threadIdx.x
        base = cuda.blockIdx.x * TILE
        items = cuda.local.array(ITEMS, int32)
        for i in range(ITEMS):
            items[i] = x[base + i * THREADS + t]         # striped
        to_blocked(items, items)                         # in place: now blocked
        total = 0
        for i in range(ITEMS):
            total += items[i]
        sums[cuda.blockIdx.x * THREADS + t] = total      # the sum of tile positions 4t .. 4t + 3

    blocks = 6
    x = np.random.default_rng(1).integers(-100, 100, blocks * TILE).astype(np.int32)
    d_sums = cuda.device_array(blocks * THREADS, dtype=np.int32)
    sum_runs[blocks, THREADS](cuda.to_device(x), d_sums)

    assert np.array_equal(d_sums.copy_to_host(), x.reshape(-1, ITEMS).sum(axis=1))
    print("block_exchange: ok")


if __name__ == "__main__":
    main()
