"""Warp exchange: each logical warp of 16 lanes reads its tile striped (coalesced: lane
``l`` reads items ``l, l + 16, ...``) and turns it blocked (lane ``l`` holds the tile's
consecutive items ``4 * l ... 4 * l + 3``), in place, then writes each lane's running sum
over its own four items.

Shows ``coop.warp.make_exchange(WarpExchangeType.StripedToBlocked, ...)`` on logical
warps smaller than the hardware's.
"""

import numpy as np
from numba import cuda, int32

from cuprims import coop

LANES, ITEMS = 16, 4
TILE = LANES * ITEMS


def main():
    to_blocked = coop.warp.make_exchange(coop.warp.WarpExchangeType.StripedToBlocked, int32, ITEMS,
                                         threads_in_warp=LANES)

    @cuda.jit(link=to_blocked.files)
    def running_sums(x, y):
        t = cuda.threadIdx.x
        base = (t // LANES) * TILE
        lane = t % LANES
        items = cuda.local.array(ITEMS, int32)
        for i in range(ITEMS):                  # striped: coalesced reads
            items[i] = x[base + lane + i * LANES]
        to_blocked(items, items)                # now lane l holds tile[4l .. 4l + 3]
        total = 0
        for i in range(ITEMS):
            total += items[i]
            y[base + lane * ITEMS + i] = total

    threads = 128
    x = np.random.default_rng(3).integers(-50, 50, threads * ITEMS).astype(np.int32)
    d_y = cuda.device_array(x.size, np.int32)
    running_sums[1, threads](cuda.to_device(x), d_y)

    expected = np.cumsum(x.reshape(-1, ITEMS), axis=1).reshape(-1)
    assert np.array_equal(d_y.copy_to_host(), expected)
    print("warp_exchange: ok")


if __name__ == "__main__":
    main()
