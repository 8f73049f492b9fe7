"""coop Style 2 (single-phase calls in plain @cuda.jit kernels) on the GPU, against numpy.

Block shapes (128,), (32, 4), (64, 2, 2) taken from the launch; 1 to 16 items per thread;
partial last tiles (``valid_items``); int, float, float16, complex and bool sums; scans
with operators and initial values; a struct with a Python operator; exchanges; radix
sort; merge sort (block and warp). Warps, relaunches with another block shape and out-of-range counts (which must
trap) are in test_coop_style2_launch_gpu.py.
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

from cuprims import coop  # noqa: E402
from twins import PAIR, SHAPES, argmax, style2_sum_scan_kernel, threads_of  # noqa: E402

RNG = np.random.default_rng(21)


def _values(n, dtype, lo=-50, hi=50):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return RNG.random(n) < 0.02
    if dtype.kind == "u":
        lo = 0
    if dtype.kind == "c":
        return (RNG.uniform(lo, hi, n) + 1j * RNG.uniform(lo, hi, n)).astype(dtype)
    if dtype.kind == "f":
        return RNG.integers(-3, 4, n).astype(dtype) if dtype.itemsize == 2 else RNG.uniform(lo, hi, n).astype(dtype)
    return RNG.integers(lo, hi, n).astype(dtype)


def _tiles(x, tile, fill):
    padded = np.full(-(-x.size // tile) * tile, fill, dtype=x.dtype)
    padded[:x.size] = x
    return padded.reshape(-1, tile)


@pytest.mark.parametrize("items", [1, 2, 3, 4, 7, 8, 16])
@pytest.mark.parametrize("shape", SHAPES)
def test_load_sum_scan_store_partial_tiles(shape, items):
    tile = threads_of(shape) * items
    n = 5 * tile - 7                                      # four full tiles and one partial
    x = _values(n, np.int32)
    y = cuda.to_device(np.full(n + 8, 7, dtype=np.int32))   # past n must stay untouched
    totals = cuda.device_array(5, dtype=np.int32)
    style2_sum_scan_kernel(items)[5, shape](cuda.to_device(x), y, totals, n)
    tiles = _tiles(x, tile, 0)
    np.testing.assert_array_equal(totals.copy_to_host(), tiles.sum(axis=1, dtype=np.int32))
    got = y.copy_to_host()
    np.testing.assert_array_equal(got[:n], np.cumsum(tiles, axis=1, dtype=np.int32).ravel()[:n])
    np.testing.assert_array_equal(got[n:], 7)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                                   np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128,
                                   np.bool_])
def test_sum_every_type(dtype):
    items, shape = 4, (32, 4)

    @cuda.jit
    def kernel(x, totals):
        block = coop.this_block()
        data = coop.ThreadData(items)
        base = cuda.blockIdx.x * 512
        coop.load(block, x[base:], data)
        total = coop.sum(block, data)
        if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
            totals[cuda.blockIdx.x] = total

    x = _values(3 * 512, dtype)
    totals = cuda.device_array(3, dtype=dtype)
    kernel[3, shape](cuda.to_device(x), totals)
    tiles, got = x.reshape(3, 512), totals.copy_to_host()
    if np.dtype(dtype).kind == "b":
        np.testing.assert_array_equal(got, tiles.any(axis=1))          # CUB's Sum of bools: |
    elif np.dtype(dtype).kind in "fc" and np.dtype(dtype).itemsize > 2:
        np.testing.assert_allclose(got, tiles.sum(axis=1, dtype=dtype), rtol=1e-4, atol=1e-2)
    else:
        np.testing.assert_array_equal(got, tiles.sum(axis=1, dtype=dtype))   # wraps as numpy's


@pytest.mark.parametrize("items", [None, 1, 3, 8])   # None: one scalar per thread, the scan returned
@pytest.mark.parametrize("which", ["exclusive_sum", "inclusive_max_init", "exclusive_python_min_init"])
def test_scans(which, items):
    shape = (64, 2, 2)
    scalar, k = items is None, items or 1
    mode = ["exclusive_sum", "inclusive_max_init", "exclusive_python_min_init"].index(which)   # an int: folded
    tile = 256 * k

    def smaller(a, b):
        return a if a < b else b

    @cuda.jit
    def kernel(x, y):
        block = coop.this_block()
        base = cuda.blockIdx.x * tile
        t = cuda.threadIdx.x + 64 * (cuda.threadIdx.y + 2 * cuda.threadIdx.z)
        if scalar:
            v = x[base + t]
            if mode == 0:
                v = coop.exclusive_sum(block, v)
            elif mode == 1:
                v = coop.inclusive_scan(block, v, scan_op="max", initial_value=-20)
            else:
                v = coop.exclusive_scan(block, v, scan_op=smaller, initial_value=10)
            y[base + t] = v
        else:
            data = coop.ThreadData(k)
            coop.load(block, x[base:], data)
            if mode == 0:
                coop.exclusive_sum(block, data)
            elif mode == 1:
                coop.inclusive_scan(block, data, scan_op="max", initial_value=-20)
            else:
                coop.exclusive_scan(block, data, scan_op=smaller, initial_value=10)
            coop.store(block, y[base:], data)

    x = _values(3 * tile, np.int32)
    y = cuda.device_array(3 * tile, dtype=np.int32)
    kernel[3, shape](cuda.to_device(x), y)
    expected = []
    for t in x.reshape(3, tile):
        if mode == 0:
            expected.append(np.concatenate([[0], np.cumsum(t, dtype=np.int32)[:-1]]))
        elif mode == 1:
            expected.append(np.maximum.accumulate(np.maximum(t, -20)))
        else:
            expected.append(np.concatenate([[10], np.minimum.accumulate(np.minimum(t, 10))[:-1]]))
    np.testing.assert_array_equal(y.copy_to_host(), np.concatenate(expected))


def test_struct_argmax_python_operator():
    @cuda.jit
    def kernel(x, y, out):
        block = coop.this_block()
        items = coop.ThreadData(2)                        # the record type, from x
        coop.load(block, x, items)
        best = coop.reduce(block, items, binary_op=argmax)
        coop.inclusive_scan(block, items, scan_op=argmax)
        coop.store(block, y, items)
        if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
            out[0] = best

    x = np.zeros(256, dtype=PAIR)
    x["v"] = RNG.permutation(256).astype(np.float32)
    x["i"] = np.arange(256)
    y, out = cuda.device_array(256, dtype=PAIR), cuda.device_array(1, dtype=PAIR)
    kernel[1, (32, 4)](cuda.to_device(x), y, out)
    assert out.copy_to_host()[0]["i"] == np.argmax(x["v"])
    got = y.copy_to_host()
    np.testing.assert_array_equal(got["v"], np.maximum.accumulate(x["v"]))
    np.testing.assert_array_equal(got["i"], [int(np.argmax(x["v"][:k + 1])) for k in range(256)])


@pytest.mark.parametrize("shape", SHAPES)
def test_exchange_and_reduce_operator(shape):
    items = 4
    tile = threads_of(shape) * items

    @cuda.jit
    def kernel(x, y, peaks):
        block = coop.this_block()
        base = cuda.blockIdx.x * tile
        striped = coop.ThreadData(items)
        coop.load(block, x[base:], striped, algorithm="striped")
        blocked = coop.ThreadData(items)
        coop.exchange(block, striped, blocked, block_exchange_type="StripedToBlocked")
        coop.exchange(block, blocked, block_exchange_type="BlockedToWarpStriped", warp_time_slicing=True)
        coop.exchange(block, blocked, block_exchange_type=coop.block.BlockExchangeType.WarpStripedToBlocked)
        peak = coop.reduce(block, blocked, binary_op="max")
        coop.store(block, y[base:], blocked)              # blocked: the tile in order again
        if cuda.threadIdx.x + cuda.threadIdx.y + cuda.threadIdx.z == 0:
            peaks[cuda.blockIdx.x] = peak

    x = _values(2 * tile, np.float64)
    y, peaks = cuda.device_array(2 * tile, dtype=np.float64), cuda.device_array(2, dtype=np.float64)
    kernel[2, shape](cuda.to_device(x), y, peaks)
    np.testing.assert_array_equal(y.copy_to_host(), x)
    np.testing.assert_array_equal(peaks.copy_to_host(), x.reshape(2, tile).max(axis=1))


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("descending", [False, True])
def test_radix_sort_keys(dtype, descending):
    items, shape = 5, (32, 4)
    tile = 128 * items

    @cuda.jit
    def kernel(x):
        block = coop.this_block()
        keys = coop.ThreadData(items)
        base = cuda.blockIdx.x * tile
        coop.load(block, x[base:], keys)
        coop.radix_sort_keys(block, keys, descending=descending)
        coop.store(block, x[base:], keys)

    x = _values(3 * tile, dtype)
    d = cuda.to_device(x)
    kernel[3, shape](d)
    expected = np.sort(x.reshape(3, tile), axis=1)
    np.testing.assert_array_equal(d.copy_to_host().reshape(3, tile), expected[:, ::-1] if descending else expected)


@pytest.mark.parametrize("group", ["block", "warp"])
def test_merge_sort_keys(group):
    items, shape = 3, (64, 2)
    tile = items * (128 if group == "block" else 32)
    warp = group == "warp"

    def later(a, b):
        return a > b                                      # descending

    @cuda.jit
    def kernel(x, y, n):
        g = coop.this_warp() if warp else coop.this_block()
        keys = coop.ThreadData(items)
        coop.load(coop.this_block(), x, keys)             # blocked: thread t holds 3t .. 3t + 2
        coop.merge_sort_keys(g, keys, compare_op=later)
        coop.store(coop.this_block(), x, keys)
        coop.load(coop.this_block(), y, keys)
        coop.merge_sort_keys(g, keys, compare_op="<", valid_items=n, oob_default=1e9)   # the first n per tile
        coop.store(coop.this_block(), y, keys)

    x, y = RNG.uniform(-50, 50, 384).astype(np.float32), RNG.uniform(-50, 50, 384).astype(np.float32)
    dx, dy, n = cuda.to_device(x), cuda.to_device(y), tile - 5
    kernel[1, shape](dx, dy, n)
    tiles_x, tiles_y = x.reshape(-1, tile), y.reshape(-1, tile)
    np.testing.assert_array_equal(dx.copy_to_host().reshape(-1, tile), -np.sort(-tiles_x, axis=1))
    expected = np.full_like(tiles_y, 1e9)
    expected[:, :n] = np.sort(tiles_y[:, :n], axis=1)
    np.testing.assert_array_equal(dy.copy_to_host().reshape(-1, tile), expected)
