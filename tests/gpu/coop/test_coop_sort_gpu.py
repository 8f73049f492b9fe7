"""coop.block radix sort of keys and exchanges in real kernels on the GPU, against numpy.

Tiles of ``threads * items`` keys sorted per block and compared with ``np.sort`` per
tile (every int and float type; descending; a bit range; NaN and infinities; the
caller's storage); each exchange compared with the index permutation it stands for.
Block shapes (128,) and (32, 4).
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

from cuprims import coop  # noqa: E402
from twins import dims_of, threads_of  # noqa: E402

SHAPES = [(128,), (32, 4)]
RNG = np.random.default_rng(23)
KEY_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float16,
             np.float32, np.float64]


def _keys(n, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return RNG.uniform(-1000, 1000, n).astype(dtype)
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, n, endpoint=True, dtype=dtype)   # the whole range: sign bits


def _sort_kernel(sort, shape, items, dtype, begin_bit=0, end_bit=-1, own_storage=False):
    dx, dy, _ = dims_of(shape)
    tile = threads_of(shape) * items
    nb = numba.from_dtype(np.dtype(dtype))
    nbytes, align = sort.temp_storage_bytes, sort.temp_storage_alignment

    @cuda.jit(link=sort.files)
    def kernel(x):
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        base = cuda.blockIdx.x * tile + t * items          # blocked: thread t holds t*items...
        temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
        keys = cuda.local.array(items, nb)
        for i in range(items):
            keys[i] = x[base + i]
        if own_storage:
            sort(keys, begin_bit, end_bit, temp)
        else:
            sort(keys, begin_bit, end_bit)
        for i in range(items):
            x[base + i] = keys[i]

    return kernel, tile


def _run_sort(sort, shape, items, x, **kw):
    kernel, tile = _sort_kernel(sort, shape, items, x.dtype, **kw)
    assert x.size % tile == 0
    d = cuda.to_device(x)
    kernel[x.size // tile, shape](d)
    return d.copy_to_host().reshape(-1, tile)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", KEY_TYPES)
def test_radix_sort_keys_every_type(shape, dtype):
    items = 4
    tile = threads_of(shape) * items
    sort = coop.block.make_radix_sort_keys(dtype, shape, items)
    x = _keys(5 * tile, dtype)
    got = _run_sort(sort, shape, items, x)
    np.testing.assert_array_equal(got, np.sort(x.reshape(-1, tile), axis=1))


@pytest.mark.parametrize("items", [1, 3, 4, 8])
def test_radix_sort_1024_key_tiles_256_threads_and_items(items):
    sort = coop.block.make_radix_sort_keys(np.float32, 256, items)
    x = _keys(4 * 256 * items, np.float32)
    got = _run_sort(sort, (256,), items, x)
    np.testing.assert_array_equal(got, np.sort(x.reshape(-1, 256 * items), axis=1))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.int16, np.uint32, np.int64, np.float64])
def test_radix_sort_keys_descending(shape, dtype):
    sort = coop.block.make_radix_sort_keys_descending(dtype, shape, 4)
    tile = threads_of(shape) * 4
    x = _keys(3 * tile, dtype)
    got = _run_sort(sort, shape, 4, x)
    np.testing.assert_array_equal(got, np.sort(x.reshape(-1, tile), axis=1)[:, ::-1])


def test_radix_sort_nan_infinities_and_zeros():
    # numpy's NaN has the sign bit clear: CUB puts it after +inf, as np.sort does (and first
    # when descending); -0.0 and +0.0 are one key to CUB and equal to numpy's comparison
    tile = 128 * 4
    x = _keys(2 * tile, np.float32)
    x[RNG.choice(x.size, 40, replace=False)] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0] * 8, np.float32)
    up = _run_sort(coop.block.make_radix_sort_keys(np.float32, (32, 4), 4), (32, 4), 4, x)
    down = _run_sort(coop.block.make_radix_sort_keys_descending(np.float32, (32, 4), 4), (32, 4), 4, x)
    expected = np.sort(x.reshape(-1, tile), axis=1)
    np.testing.assert_array_equal(up, expected)
    np.testing.assert_array_equal(down, expected[:, ::-1])


def test_radix_sort_bit_range_is_stable():
    # bits [4, 8) only: keys ordered by that digit, equal digits in their original order
    tile = 128 * 4
    x = RNG.integers(0, 1 << 16, 2 * tile).astype(np.uint32)
    got = _run_sort(coop.block.make_radix_sort_keys(np.uint32, 128, 4), (128,), 4, x, begin_bit=4, end_bit=8)
    tiles = x.reshape(-1, tile)
    digit = (tiles >> 4) & 0xF
    expected = np.take_along_axis(tiles, np.argsort(digit, axis=1, kind="stable"), axis=1)
    np.testing.assert_array_equal(got, expected)


def test_radix_sort_callers_storage():
    sort = coop.block.make_radix_sort_keys(np.int32, (32, 4), 8)
    x = _keys(3 * 1024, np.int32)
    got = _run_sort(sort, (32, 4), 8, x, own_storage=True)
    np.testing.assert_array_equal(got, np.sort(x.reshape(-1, 1024), axis=1))


def _positions(kind, threads, items):
    """pos[t, i]: the tile position that thread t's item i holds in the source arrangement
    of ``kind`` (the destination's is the other one)."""
    t = np.arange(threads)[:, None]
    i = np.arange(items)[None, :]
    blocked = t * items + i
    striped = i * threads + t
    warp, lane = t // 32, t % 32
    warp_striped = warp * 32 * items + i * 32 + lane
    return {"StripedToBlocked": (striped, blocked), "BlockedToStriped": (blocked, striped),
            "WarpStripedToBlocked": (warp_striped, blocked), "BlockedToWarpStriped": (blocked, warp_striped)}[kind]


@pytest.mark.parametrize("sliced", [False, True])
@pytest.mark.parametrize("kind", ["StripedToBlocked", "BlockedToStriped", "WarpStripedToBlocked",
                                  "BlockedToWarpStriped"])
@pytest.mark.parametrize("shape", SHAPES)
def test_exchange(shape, kind, sliced):
    dx, dy, _ = dims_of(shape)
    threads, items = threads_of(shape), 5
    ex = coop.block.make_exchange(getattr(coop.block.BlockExchangeType, kind), np.int32, shape, items,
                                  warp_time_slicing=sliced)

    @cuda.jit(link=ex.files)
    def kernel(x, y):
        # each thread holds the tile positions of the source arrangement as its items, so
        # afterwards it must hold the positions of the destination arrangement
        t = cuda.threadIdx.x + dx * cuda.threadIdx.y
        a = cuda.local.array(items, numba.int32)
        b = cuda.local.array(items, numba.int32)
        for i in range(items):
            a[i] = x[t, i]
        ex(a, b)         # into another array
        ex(a, a)         # in place
        for i in range(items):
            y[0, t, i] = b[i]
            y[1, t, i] = a[i]

    src, dst = _positions(kind, threads, items)
    y = cuda.device_array((2, threads, items), dtype=np.int32)
    kernel[1, shape](cuda.to_device(np.ascontiguousarray(src, dtype=np.int32)), y)
    got = y.copy_to_host()
    np.testing.assert_array_equal(got[0], dst)
    np.testing.assert_array_equal(got[1], dst)


@pytest.mark.parametrize("dtype", [np.int8, np.uint64, np.float16, np.float64, np.complex128])
def test_exchange_types_round_trip(dtype):
    # complex128: cuda::std::complex<double> is aligned to 16 bytes, numba's local arrays
    # of complex128 perhaps only to 8; a misaligned-address fault here would show it
    to_striped = coop.block.make_exchange(coop.block.BlockExchangeType.BlockedToStriped, dtype, (32, 4), 3)
    to_blocked = coop.block.make_exchange(coop.block.BlockExchangeType.StripedToBlocked, dtype, (32, 4), 3)
    nb = numba.from_dtype(np.dtype(dtype))

    @cuda.jit(link=to_striped.files + to_blocked.files)
    def kernel(x, s, b):
        t = cuda.threadIdx.x + 32 * cuda.threadIdx.y
        a = cuda.local.array(3, nb)
        for i in range(3):
            a[i] = x[3 * t + i]            # blocked
        to_striped(a, a)
        for i in range(3):
            s[t + 128 * i] = a[i]          # striped: the tile in order again
        to_blocked(a, a)
        for i in range(3):
            b[3 * t + i] = a[i]

    x = (RNG.integers(0, 100, 384) * (1 + 1j if np.dtype(dtype).kind == "c" else 1)).astype(dtype)
    s = cuda.device_array(384, dtype=dtype)
    b = cuda.device_array(384, dtype=dtype)
    kernel[1, (32, 4)](cuda.to_device(x), s, b)
    np.testing.assert_array_equal(s.copy_to_host(), x)
    np.testing.assert_array_equal(b.copy_to_host(), x)
