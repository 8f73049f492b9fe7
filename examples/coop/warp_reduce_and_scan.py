"""Warp reduce, sum and exclusive sum on logical warps of 8 lanes.

``coop.warp.make_reduce`` / ``make_sum`` / ``make_exclusive_sum`` with
``threads_in_warp=8`` treat every 8 consecutive threads of the block as one warp. A
reduction's result is valid in the warp's first lane; ``num_valid`` limits it to the
warp's first lanes. The exclusive sum gives every lane the sum of the lanes before it.
"""

import numpy as np
from numba import cuda, int32

from cuprims import coop

THREADS, LANES = 128, 8
VALID = 5                                 # lanes counted by the partial sum


def main():
    warp_max = coop.warp.make_reduce(int32, lambda a, b: a if a > b else b, threads_in_warp=LANES)
    warp_sum = coop.warp.make_sum(int32, threads_in_warp=LANES)
    warp_offsets = coop.warp.make_exclusive_sum(int32, threads_in_warp=LANES)

    @cuda.jit(link=warp_max.files + warp_sum.files + warp_offsets.files)
    def per_warp(x, maxima, sums, partial_sums, offsets):
        t = cuda.blockIdx.x * THREADS + cuda.threadIdx.x
        m = warp_max(x[t])
        s = warp_sum(x[t])
        p = warp_sum(x[t], num_valid=VALID)
        offsets[t] = warp_offsets(x[t])
        if t % LANES == 0:                # the logical warp's first lane
            maxima[t // LANES] = m
            sums[t // LANES] = s
            partial_sums[t // LANES] = p

    blocks = 4
    x = np.random.default_rng(8).integers(-100, 100, blocks * THREADS).astype(np.int32)
    warps = x.size // LANES
    d_max, d_sum, d_partial = (cuda.device_array(warps, dtype=np.int32) for _ in range(3))
    d_offsets = cuda.device_array(x.size, dtype=np.int32)
    per_warp[blocks, THREADS](cuda.to_device(x), d_max, d_sum, d_partial, d_offsets)

    groups = x.reshape(warps, LANES)
    assert np.array_equal(d_max.copy_to_host(), groups.max(axis=1))
    assert np.array_equal(d_sum.copy_to_host(), groups.sum(axis=1))
    assert np.array_equal(d_partial.copy_to_host(), groups[:, :VALID].sum(axis=1))
    assert np.array_equal(d_offsets.copy_to_host(), (np.cumsum(groups, axis=1) - groups).ravel())
    print("warp_reduce_and_scan: ok")


if __name__ == "__main__":
    main()
