"""coop.block primitives in real kernels on the GPU, against numpy.

Block shapes (128,), (32, 4) and (64, 2, 2); 1 to 16 items per thread; partial last
tiles (``num_valid``); every int and float type for the sum; Python operators; the
caller's own temporary storage; two calls of one primitive (its storage reused).
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

from cuprims import coop  # noqa: E402
from twins import PAIR, SHAPES, bigger, block_scan_kernel, dims_of, struct_argmax_kernel, threads_of  # noqa: E402

RNG = np.random.default_rng(11)


def _values(n, dtype, lo=-50, hi=50):
    dtype = np.dtype(dtype)
    if dtype.kind == "u":
        lo = 0
    if dtype.kind == "f":
        return RNG.uniform(lo, hi, n).astype(dtype)
    return RNG.integers(lo, hi, n).astype(dtype)


def _tiles(x, tile, fill):
    """x split into tiles of ``tile`` items, the last padded with ``fill``."""
    tiles = -(-x.size // tile)
    padded = np.full(tiles * tile, fill, dtype=x.dtype)
    padded[:x.size] = x
    return padded.reshape(tiles, tile)


def _sum_kernel(shape, items, dtype, load, block_sum):
    dx, dy, _ = dims_of(shape)
    tile = threads_of(shape) * items
    nb = numba.from_dtype(np.dtype(dtype))
    if items == 1:
        @cuda.jit(link=load.files + block_sum.files)
        def kernel(x, out, n):
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            base = cuda.blockIdx.x * tile
            buf = cuda.local.array(1, nb)
            load(x[base:], buf, min(tile, n - base), 0)
            s = block_sum(buf[0])
            if t == 0:
                out[cuda.blockIdx.x] = s
    else:
        @cuda.jit(link=load.files + block_sum.files)
        def kernel(x, out, n):
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            base = cuda.blockIdx.x * tile
            buf = cuda.local.array(items, nb)
            load(x[base:], buf, min(tile, n - base), 0)
            s = block_sum(buf)
            if t == 0:
                out[cuda.blockIdx.x] = s
    return kernel, tile


def _run_sum(shape, items, dtype, n):
    load = coop.block.make_load(dtype, shape, items)
    block_sum = coop.block.make_sum(dtype, shape, items)
    kernel, tile = _sum_kernel(shape, items, dtype, load, block_sum)
    x = _values(n, dtype)
    tiles = -(-n // tile)
    out = cuda.device_array(tiles, dtype=dtype)
    kernel[tiles, shape](cuda.to_device(x), out, n)
    expected = _tiles(x, tile, 0).sum(axis=1, dtype=dtype)
    got = out.copy_to_host()
    if np.dtype(dtype).kind == "f":
        single = np.dtype(dtype).itemsize == 4   # sums of a few hundred values in [-50, 50): absolute errors
        np.testing.assert_allclose(got, expected, rtol=1e-5 if single else 1e-12, atol=1e-2 if single else 1e-9)
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("items", range(1, 17))
@pytest.mark.parametrize("shape", SHAPES)
def test_load_and_sum_partial_tiles(shape, items):
    tile = threads_of(shape) * items
    _run_sum(shape, items, np.int32, 5 * tile - 7)   # four full tiles and one partial


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                                   np.uint64, np.float32, np.float64])
def test_sum_every_int_and_float(dtype):
    _run_sum((32, 4), 4, dtype, 3 * 512 + 100)   # integer sums wrap as numpy's do


def _run_scan(shape, items, scan, expected_fn, dtype=np.int32, n=None):
    load = coop.block.make_load(dtype, shape, items)
    store = coop.block.make_store(dtype, shape, items)
    kernel, tile = block_scan_kernel(shape, items, dtype, load, scan, store)
    n = 3 * tile - 5 if n is None else n
    x = _values(n, dtype)
    y = cuda.device_array(n, dtype=dtype)
    kernel[-(-n // tile), shape](cuda.to_device(x), y, n)
    expected = np.concatenate([expected_fn(t) for t in np.split(x, range(tile, n, tile))])
    np.testing.assert_array_equal(y.copy_to_host(), expected)


@pytest.mark.parametrize("items", range(1, 17))
@pytest.mark.parametrize("shape", SHAPES)
def test_inclusive_sum(shape, items):
    scan = coop.block.make_inclusive_sum(np.int32, shape, items)
    _run_scan(shape, items, scan, lambda t: np.cumsum(t, dtype=np.int32))


@pytest.mark.parametrize("items", [1, 2, 5, 16])
@pytest.mark.parametrize("shape", SHAPES)
def test_exclusive_sum(shape, items):
    scan = coop.block.make_exclusive_sum(np.int32, shape, items)
    _run_scan(shape, items, scan, lambda t: np.concatenate([[0], np.cumsum(t, dtype=np.int32)[:-1]]))


@pytest.mark.parametrize("items", [1, 4, 9])
def test_exclusive_max_scan_with_initial_value(items):
    scan = coop.block.make_exclusive_scan(np.int32, (32, 4), "max", items, initial_value=-1000)
    _run_scan((32, 4), items, scan,
              lambda t: np.concatenate([[-1000], np.maximum.accumulate(np.maximum(t, -1000))[:-1]]))


@pytest.mark.parametrize("items", [1, 3, 8])
def test_inclusive_scan_python_operator(items):
    def smaller(a, b):
        return a if a < b else b

    scan = coop.block.make_inclusive_scan(np.int32, (64, 2, 2), smaller, items)
    _run_scan((64, 2, 2), items, scan, np.minimum.accumulate)


@pytest.mark.parametrize("shape", SHAPES)
def test_reduce_python_operator_num_valid_and_own_storage(shape):
    dx, dy, _ = dims_of(shape)
    threads = threads_of(shape)
    red = coop.block.make_reduce(np.float32, shape, bigger)
    nbytes, align = red.temp_storage_bytes, red.temp_storage_alignment

    @cuda.jit(link=red.files)
    def kernel(x, valid, out):
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
        v = x[cuda.blockIdx.x * threads + t]
        a = red(v)                        # whole block
        b = red(v, valid)                 # first `valid` threads only
        c = red(v, temp_storage=temp)     # caller's storage
        if t == 0:
            out[cuda.blockIdx.x, 0] = a
            out[cuda.blockIdx.x, 1] = b
            out[cuda.blockIdx.x, 2] = c

    blocks, valid = 3, threads // 2 + 3
    x = _values(blocks * threads, np.float32)
    out = cuda.device_array((blocks, 3), dtype=np.float32)
    kernel[blocks, shape](cuda.to_device(x), valid, out)
    tiles = x.reshape(blocks, threads)
    expected = np.stack([tiles.max(1), tiles[:, :valid].max(1), tiles.max(1)], axis=1)
    np.testing.assert_array_equal(out.copy_to_host(), expected)


@pytest.mark.parametrize("algorithm", ["direct", "striped", "vectorize", "transpose", "warp_transpose",
                                       "warp_transpose_timesliced"])
@pytest.mark.parametrize("items", [1, 4, 7])
def test_load_store_round_trip(algorithm, items):
    shape = (32, 4)
    load = coop.block.make_load(np.float64, shape, items, algorithm=algorithm)
    store = coop.block.make_store(np.float64, shape, items, algorithm=algorithm)
    tile = 128 * items

    @cuda.jit(link=load.files + store.files)
    def kernel(x, y, n):
        base = cuda.blockIdx.x * tile
        valid = min(tile, n - base)
        buf = cuda.local.array(items, numba.float64)
        if valid == tile:
            load(x[base:], buf)
            store(y[base:], buf)
        else:
            load(x[base:], buf, valid, -1.0)
            store(y[base:], buf, valid)

    n = 4 * tile - 3
    x = _values(n, np.float64)
    y = cuda.to_device(np.full(n + 8, 7.0))     # past n must stay untouched
    kernel[4, shape](cuda.to_device(x), y, n)
    got = y.copy_to_host()
    np.testing.assert_array_equal(got[:n], x)
    np.testing.assert_array_equal(got[n:], 7.0)


def test_same_primitive_twice_in_one_kernel():
    block_sum = coop.block.make_sum(np.int64, 128)

    @cuda.jit(link=block_sum.files)
    def kernel(x, out):
        t = cuda.threadIdx.x
        a = block_sum(x[t])
        b = block_sum(x[t] * 2)
        c = block_sum(x[t] + 1)    # each call reads this call's inputs, not the last call's
        if t == 0:
            out[0] = a
            out[1] = b
            out[2] = c

    x = _values(128, np.int64)
    out = cuda.device_array(3, dtype=np.int64)
    kernel[1, 128](cuda.to_device(x), out)
    a = x.sum()
    np.testing.assert_array_equal(out.copy_to_host(), [a, 2 * a, a + 128])


def test_struct_argmax_reduce_and_scan():
    _, _, kernel = struct_argmax_kernel()      # PAIR by argmax: test_coop_block links it with no GPU
    x = np.zeros(256, dtype=PAIR)
    x["v"] = RNG.permutation(256).astype(np.float32)     # distinct: one argmax
    x["i"] = np.arange(256)
    y = cuda.device_array(256, dtype=PAIR)
    out = cuda.device_array(1, dtype=PAIR)
    kernel[1, (32, 4)](cuda.to_device(x), y, out)
    evens = x[::2]
    assert out.copy_to_host()[0]["i"] == evens["i"][np.argmax(evens["v"])]
    got = y.copy_to_host()
    running = np.maximum.accumulate(x["v"])
    np.testing.assert_array_equal(got["v"], running)
    np.testing.assert_array_equal(got["i"], x["i"][[int(np.argmax(x["v"][:k + 1])) for k in range(256)]])
