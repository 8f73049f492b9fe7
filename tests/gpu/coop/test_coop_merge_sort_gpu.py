"""coop block and warp merge sorts of keys on the GPU: each block's (logical warp's) tile,
blocked, against ``np.sort``. Block shapes (128,), (32, 4), (64, 2, 2); 1 to 16 items per
thread; every int and float type, float16, bool, complex64; descending by ``a > b``;
LESS and GREATER on NaN, infinities and zeros; partial tiles (a count per block, the tail
then ``oob_default``); stability on struct keys; the caller's storage; 32 to 1 lanes.
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

from cuprims import OpKind, coop  # noqa: E402
from twins import SHAPES, _by_k, _greater, _less, dims_of, threads_of  # noqa: E402

ITEM_CASES = [((128,), n) for n in range(1, 17)] + [(s, n) for s in SHAPES[1:] for n in (1, 2, 5, 8, 16)]
RNG = np.random.default_rng(31)
KEY_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float16,
             np.float32, np.float64, np.bool_, np.complex64]
PAIR = np.dtype([("k", np.int8), ("i", np.int32)], align=True)


def _complex_less(a, b):
    # numpy's order of complex numbers: by real part, then imaginary part
    return a.real < b.real or (a.real == b.real and a.imag < b.imag)


def _keys(n, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return RNG.integers(0, 2, n).astype(bool)
    if dtype.kind == "c":
        # few distinct real parts: ties that the imaginary part must break
        return (RNG.integers(-4, 4, n) + 1j * RNG.integers(-50, 50, n)).astype(dtype)
    if dtype.kind == "f":
        return RNG.uniform(-1000, 1000, n).astype(dtype)
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, n, endpoint=True, dtype=dtype)


def _last_key(dtype, descending=False):
    """A key ordered after every key of :func:`_keys` (the ``oob_default`` of a partial sort)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.array(not descending, dtype)
    if dtype.kind == "c":
        return np.array(-1e6 if descending else 1e6, dtype)
    if dtype.kind == "f":
        return np.array(-np.inf if descending else np.inf, dtype)
    info = np.iinfo(dtype)
    return np.array(info.min if descending else info.max, dtype)


def _block_kernel(sort, shape, items, nb, own_storage=True):
    """Each block ``b`` sorts the first ``n[b]`` keys of its tile of ``x`` in place, with
    ``oob[0]`` after them (``n[b] < 0``: the whole tile)."""
    dx, dy, _ = dims_of(shape)
    tile = threads_of(shape) * items
    nbytes, align = sort.temp_storage_bytes, sort.temp_storage_alignment

    @cuda.jit(link=sort.files)
    def kernel(x, n, oob):
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        base = cuda.blockIdx.x * tile + t * items          # blocked: thread t holds t*items...
        temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
        keys = cuda.local.array(items, nb)
        for i in range(items):
            keys[i] = x[base + i]
        if own_storage:
            sort(keys, n[cuda.blockIdx.x], oob[0])
        else:
            sort(keys, n[cuda.blockIdx.x], oob[0], temp)
        for i in range(items):
            x[base + i] = keys[i]

    return kernel, tile


def _run_block(sort, shape, items, x, counts=None, oob=None, own_storage=True):
    kernel, tile = _block_kernel(sort, shape, items, numba.from_dtype(x.dtype), own_storage)
    blocks = x.size // tile
    n = np.full(blocks, -1, np.int32) if counts is None else np.asarray(counts, np.int32)
    o = np.zeros(1, x.dtype) if oob is None else np.full(1, oob, x.dtype)
    d = cuda.to_device(x)
    kernel[blocks, shape](d, cuda.to_device(n), cuda.to_device(o))
    return d.copy_to_host().reshape(blocks, tile)


def _check_partial(got, tiles, counts, oob, order=np.sort):
    for g, tile, n in zip(got, tiles, counts):
        n = min(n, tile.size)
        np.testing.assert_array_equal(g[:n], order(tile[:n]))
        np.testing.assert_array_equal(g[n:], np.full(tile.size - n, oob, tile.dtype))


@pytest.mark.parametrize("shape,items", ITEM_CASES)
def test_block_merge_sort_shapes_and_items(shape, items):
    sort = coop.block.make_merge_sort_keys(np.int32, shape, items, _less)
    tile = threads_of(shape) * items
    x = _keys(4 * tile, np.int32)
    got = _run_block(sort, shape, items, x)
    np.testing.assert_array_equal(got, np.sort(x.reshape(-1, tile), axis=1))


@pytest.mark.parametrize("dtype", KEY_TYPES)
def test_block_merge_sort_every_type_full_and_partial(dtype):
    op = _complex_less if np.dtype(dtype).kind == "c" else _less
    sort = coop.block.make_merge_sort_keys(dtype, (32, 4), 4, op)
    x = _keys(4 * 512, dtype)
    tiles = x.reshape(-1, 512)
    np.testing.assert_array_equal(_run_block(sort, (32, 4), 4, x), np.sort(tiles, axis=1))
    counts, oob = [0, 1, 300, 511], _last_key(dtype)
    _check_partial(_run_block(sort, (32, 4), 4, x, counts, oob), tiles, counts, oob)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.int16, np.float64])
def test_block_merge_sort_descending(shape, dtype):
    sort = coop.block.make_merge_sort_keys(dtype, shape, 3, _greater)
    tile = threads_of(shape) * 3
    x = _keys(3 * tile, dtype)
    tiles = x.reshape(-1, tile)
    np.testing.assert_array_equal(_run_block(sort, shape, 3, x), np.sort(tiles, axis=1)[:, ::-1])
    counts, oob = [5, tile - 3, tile + 7], _last_key(dtype, descending=True)
    _check_partial(_run_block(sort, shape, 3, x, counts, oob), tiles, counts, oob,
                   order=lambda t: np.sort(t)[::-1])


@pytest.mark.parametrize("op", [OpKind.LESS, OpKind.GREATER])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_block_merge_sort_builtin_nan_infinities_and_zeros(dtype, op):
    # LESS orders NaN after every number (np.sort's order), GREATER before; -0.0 and +0.0
    # are equivalent (numpy's comparison calls them equal too)
    sort = coop.block.make_merge_sort_keys(dtype, (64, 2, 2), 4, op)
    x = _keys(2 * 1024, dtype)
    x[RNG.choice(x.size, 60, replace=False)] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0] * 12, dtype)
    expected = np.sort(x.reshape(-1, 1024), axis=1)
    got = _run_block(sort, (64, 2, 2), 4, x)
    np.testing.assert_array_equal(got, expected if op is OpKind.LESS else expected[:, ::-1])


@pytest.mark.parametrize("shape", SHAPES)
def test_block_merge_sort_partial_tiles_and_callers_storage(shape):
    sort = coop.block.make_merge_sort_keys(np.uint32, shape, 5, "<")
    tile = threads_of(shape) * 5
    counts = [0, 1, 2, 5, 6, 100, tile // 2 + 3, tile - 1, tile, tile + 1, 1 << 30]
    x = _keys(len(counts) * tile, np.uint32)
    tiles = x.reshape(-1, tile)
    oob = np.uint32(0xFFFFFFFF)
    _check_partial(_run_block(sort, shape, 5, x, counts, oob), tiles, counts, oob)
    _check_partial(_run_block(sort, shape, 5, x, counts, oob, own_storage=False), tiles, counts, oob)
    np.testing.assert_array_equal(_run_block(sort, shape, 5, x, own_storage=False), np.sort(tiles, axis=1))


def _stable(tiles):
    # what a stable sort by the field k gives (sorted() with a key is stable as well)
    order = np.argsort(tiles["k"], axis=1, kind="stable")
    return np.take_along_axis(tiles, order, axis=1)


def _pairs(n):
    x = np.zeros(n, PAIR)
    x["k"] = RNG.integers(0, 8, n)          # many equal keys: their order shows stability
    x["i"] = np.arange(n)
    return x


def test_block_merge_sort_struct_keys_are_stable():
    sort = coop.block.make_merge_sort_keys(PAIR, (32, 4), 6, _by_k)
    x = _pairs(3 * 768)
    tiles = x.reshape(-1, 768)
    counts = [0, 100, 767]
    oob = np.array((127, -1), PAIR)
    got = _run_block(sort, (32, 4), 6, x)
    part = _run_block(sort, (32, 4), 6, x, counts, oob)
    np.testing.assert_array_equal(got, _stable(tiles))
    assert [int(v["i"]) for v in got[0]] == [int(v["i"]) for v in sorted(tiles[0], key=lambda v: v["k"])]
    for g, tile, n in zip(part, tiles, counts):
        np.testing.assert_array_equal(g[:n], _stable(tile[None, :n])[0])
        assert (g[n:] == oob).all()


def test_block_merge_sort_twice_in_one_kernel():
    # the second call reuses the provider's storage right after the first (no barrier of
    # ours in between: each of CUB's merge passes starts with one)
    sort = coop.block.make_merge_sort_keys(np.int64, 128, 4, _less)

    @cuda.jit(link=sort.files)
    def kernel(x, y):
        t = cuda.threadIdx.x
        keys = cuda.local.array(4, numba.int64)
        for i in range(4):
            keys[i] = x[4 * t + i]
        sort(keys)
        for i in range(4):
            y[4 * t + i] = keys[i]
            keys[i] = -x[4 * t + i] * 3
        sort(keys)
        for i in range(4):
            x[4 * t + i] = keys[i]

    x = _keys(512, np.int64) // 4
    d, y = cuda.to_device(x), cuda.device_array(512, dtype=np.int64)
    kernel[1, 128](d, y)
    np.testing.assert_array_equal(y.copy_to_host(), np.sort(x))
    np.testing.assert_array_equal(d.copy_to_host(), np.sort(-x * 3))


def _warp_kernel(sort, lanes, shape, items, nb, own_storage=True):
    """Each logical warp sorts its tile of ``x`` fully into ``x`` and its first ``n[w]``
    keys (``oob[0]`` after them) into ``y``."""
    dx, dy, _ = dims_of(shape)
    tile = lanes * items
    warps = threads_of(shape) // lanes
    nbytes, align = sort.temp_storage_bytes, sort.temp_storage_alignment
    total = warps * nbytes                          # a constant for the shared array's size

    @cuda.jit(link=sort.files)
    def kernel(x, y, n, oob):
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        w = t // lanes
        temp = cuda.shared.array(total, numba.uint8, alignment=align)
        mine = temp[w * nbytes:(w + 1) * nbytes]    # each logical warp its own storage
        a = cuda.local.array(items, nb)
        b = cuda.local.array(items, nb)
        for i in range(items):
            a[i] = x[t * items + i]                 # warp w's tile starts at w * tile
            b[i] = a[i]
        if own_storage:
            sort(a)
            sort(b, n[w], oob[0])
        else:
            sort(a, temp_storage=mine)
            sort(b, n[w], oob[0], mine)
        for i in range(items):
            x[t * items + i] = a[i]
            y[t * items + i] = b[i]

    return kernel, tile, warps


def _run_warp(sort, lanes, shape, items, x, counts, oob, own_storage=True):
    kernel, tile, warps = _warp_kernel(sort, lanes, shape, items, numba.from_dtype(x.dtype), own_storage)
    d, y = cuda.to_device(x), cuda.device_array(x.size, dtype=x.dtype)
    kernel[1, shape](d, y, cuda.to_device(np.asarray(counts, np.int32)), cuda.to_device(np.full(1, oob, x.dtype)))
    return d.copy_to_host().reshape(warps, tile), y.copy_to_host().reshape(warps, tile)


@pytest.mark.parametrize("lanes", [32, 16, 8, 4, 2, 1])
@pytest.mark.parametrize("shape", SHAPES)
def test_warp_merge_sort_full_and_partial(lanes, shape):
    sort = coop.warp.make_merge_sort_keys(np.int32, 3, _less, threads_in_warp=lanes)
    warps, tile = threads_of(shape) // lanes, lanes * 3
    assert sort.own_storage_warps >= warps
    x = _keys(warps * tile, np.int32)
    counts = [w % (tile + 2) for w in range(warps)]     # 0 .. tile + 1
    oob = np.int32(2**31 - 1)
    full, part = _run_warp(sort, lanes, shape, 3, x, counts, oob)
    tiles = x.reshape(warps, tile)
    np.testing.assert_array_equal(full, np.sort(tiles, axis=1))
    _check_partial(part, tiles, counts, oob)


@pytest.mark.parametrize("lanes", [32, 8])
def test_warp_merge_sort_struct_keys_stable_callers_storage(lanes):
    sort = coop.warp.make_merge_sort_keys(PAIR, 5, _by_k, threads_in_warp=lanes)
    warps, tile = 128 // lanes, lanes * 5
    x = _pairs(warps * tile)
    counts = [(7 * w) % tile for w in range(warps)]
    oob = np.array((127, -1), PAIR)
    full, part = _run_warp(sort, lanes, (32, 4), 5, x, counts, oob, own_storage=False)
    tiles = x.reshape(warps, tile)
    np.testing.assert_array_equal(full, _stable(tiles))
    for g, t, n in zip(part, tiles, counts):
        np.testing.assert_array_equal(g[:n], _stable(t[None, :n])[0])
        assert (g[n:] == oob).all()


@pytest.mark.parametrize("dtype", [np.int8, np.uint64, np.float16, np.float64, np.bool_])
def test_warp_merge_sort_types_descending(dtype):
    sort = coop.warp.make_merge_sort_keys(dtype, 4, _greater, threads_in_warp=16)
    x = _keys(8 * 64, dtype)
    counts, oob = [0, 1, 2, 17, 30, 63, 64, 65], _last_key(dtype, descending=True)
    full, part = _run_warp(sort, 16, (128,), 4, x, counts, oob)
    tiles = x.reshape(8, 64)
    np.testing.assert_array_equal(full, np.sort(tiles, axis=1)[:, ::-1])
    _check_partial(part, tiles, counts, oob, order=lambda t: np.sort(t)[::-1])
