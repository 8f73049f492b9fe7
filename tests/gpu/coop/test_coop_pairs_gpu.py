"""coop sorts of key-value pairs on the GPU, against a stable numpy argsort per tile.

Block radix sort of pairs (ascending, descending, a bit range), block and warp merge sort
of pairs (Python comparators, LESS/GREATER, struct keys); block shapes (128,), (32, 4),
(64, 2, 2); 1 to 16 items per thread; keys with many ties (stability shows in the
values); int, float, float16 and bool keys; int, float and struct values; partial tiles
(merge sort: ``valid_items``/``num_valid``; radix sort in Style 2: padded by the load);
the caller's storage; 32 to 1 lanes. Style 1 factories and Style 2 calls.
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

from cuprims import OpKind, coop  # noqa: E402
from twins import SHAPES, VALUE, _by_k, _greater, _less, block_pairs_kernel, dims_of, threads_of  # noqa: E402

RNG = np.random.default_rng(41)
KEY = np.dtype([("k", np.int8), ("i", np.int32)], align=True)


def _keys(n, dtype):
    """Keys with many ties (16 distinct values at most)."""
    dtype = np.dtype(dtype)
    if dtype.names is not None:
        k = np.zeros(n, dtype)
        k["k"] = RNG.integers(-8, 8, n)
        k["i"] = RNG.integers(0, 1000, n)
        return k
    if dtype.kind == "b":
        return RNG.integers(0, 2, n).astype(bool)
    if dtype.kind == "f":
        return (RNG.integers(-8, 8, n) * 0.25).astype(dtype)
    if dtype.kind == "u":
        return RNG.integers(0, 16, n).astype(dtype) * (np.iinfo(dtype).max // 16)
    return (RNG.integers(-8, 8, n) * (np.iinfo(dtype).max // 8)).astype(dtype)


def _values(n, dtype):
    """Values that tell the pairs apart (their input positions)."""
    dtype = np.dtype(dtype)
    if dtype.names is not None:
        v = np.zeros(n, dtype)
        v["i"] = np.arange(n)
        v["w"] = np.arange(n) * 0.5
        return v
    if dtype.kind == "b":
        return np.arange(n) % 3 == 0
    return np.arange(n).astype(dtype)


def _order(keys, descending=False):
    """The stable sort's permutation of one tile's keys."""
    if not descending:
        return np.argsort(keys, kind="stable")
    return (keys.size - 1 - np.argsort(keys[::-1], kind="stable"))[::-1]


def _sort_key(keys):
    return keys["k"] if keys.dtype.names is not None else keys


def _check(got_k, got_v, keys, values, descending=False, counts=None, oob=None):
    """Each row (tile) of the results against the stable sort of that tile's first
    ``counts[row]`` pairs; keys past them must be ``oob``."""
    for row in range(keys.shape[0]):
        n = keys.shape[1] if counts is None else min(counts[row], keys.shape[1])
        order = _order(_sort_key(keys[row, :n]), descending)
        np.testing.assert_array_equal(got_k[row, :n], keys[row, :n][order])
        np.testing.assert_array_equal(got_v[row, :n], values[row, :n][order])
        if counts is not None:
            assert (got_k[row, n:] == oob).all(), row


# ---------------------------------------------------------------- Style 1: block sorts

def _run_block(sort, shape, items, keys, values, mode=0, counts=None, oob=None):
    kernel, tile = block_pairs_kernel(sort, shape, items, numba.from_dtype(keys.dtype),
                                      numba.from_dtype(values.dtype), mode)
    blocks = keys.size // tile
    n = np.full(blocks, tile, np.int32) if counts is None else np.asarray(counts, np.int32)
    o = np.zeros(1, keys.dtype) if oob is None else np.full(1, oob, keys.dtype)
    dk, dv = cuda.to_device(keys), cuda.to_device(values)
    kernel[blocks, shape](dk, dv, cuda.to_device(n), cuda.to_device(o))
    return dk.copy_to_host().reshape(blocks, tile), dv.copy_to_host().reshape(blocks, tile)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("items", [1, 3, 8])
@pytest.mark.parametrize("shape", SHAPES)
def test_block_radix_sort_pairs_shapes_and_items(shape, items, descending):
    make = coop.block.make_radix_sort_pairs_descending if descending else coop.block.make_radix_sort_pairs
    sort = make(np.int16, np.int32, shape, items)
    tile = threads_of(shape) * items
    keys, values = _keys(3 * tile, np.int16), _values(3 * tile, np.int32)
    got_k, got_v = _run_block(sort, shape, items, keys, values)
    _check(got_k, got_v, keys.reshape(3, tile), values.reshape(3, tile), descending)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("key,value", [(np.int8, np.int32), (np.uint16, np.float64), (np.int32, VALUE),
                                       (np.uint64, np.uint8), (np.float16, np.int64), (np.float32, VALUE),
                                       (np.float64, np.float32), (np.int64, np.bool_)])
def test_block_radix_sort_pairs_types(key, value, descending):
    make = coop.block.make_radix_sort_pairs_descending if descending else coop.block.make_radix_sort_pairs
    sort = make(key, value, (32, 4), 4)
    keys, values = _keys(3 * 512, key), _values(3 * 512, value)
    got_k, got_v = _run_block(sort, (32, 4), 4, keys, values)
    _check(got_k, got_v, keys.reshape(3, 512), values.reshape(3, 512), descending)


@pytest.mark.parametrize("shape", SHAPES)
def test_block_radix_sort_pairs_bit_range_and_callers_storage(shape):
    sort = coop.block.make_radix_sort_pairs(np.uint32, VALUE, shape, 5)
    tile = threads_of(shape) * 5
    keys = RNG.integers(0, 2**32, 2 * tile, dtype=np.uint32)
    values = _values(2 * tile, VALUE)
    got_k, got_v = _run_block(sort, shape, 5, keys, values, mode=1)         # bits [0, 8): stable on the rest
    for row, (k, v) in enumerate(zip(keys.reshape(2, tile), values.reshape(2, tile))):
        order = np.argsort(k & 0xFF, kind="stable")
        np.testing.assert_array_equal(got_k[row], k[order])
        np.testing.assert_array_equal(got_v[row], v[order])
    got_k, got_v = _run_block(sort, shape, 5, keys, values, mode=2)         # the caller's storage
    _check(got_k, got_v, keys.reshape(2, tile), values.reshape(2, tile))


@pytest.mark.parametrize("items", [1, 2, 5, 16])
@pytest.mark.parametrize("shape", SHAPES)
def test_block_merge_sort_pairs_shapes_and_items(shape, items):
    sort = coop.block.make_merge_sort_pairs(np.int32, np.float64, shape, items, _less)
    tile = threads_of(shape) * items
    keys, values = _keys(3 * tile, np.int32), _values(3 * tile, np.float64)
    got_k, got_v = _run_block(sort, shape, items, keys, values)
    _check(got_k, got_v, keys.reshape(3, tile), values.reshape(3, tile))


@pytest.mark.parametrize("shape", SHAPES)
def test_block_merge_sort_pairs_partial_tiles_and_callers_storage(shape):
    sort = coop.block.make_merge_sort_pairs(np.uint16, VALUE, shape, 3, "<")
    tile = threads_of(shape) * 3
    counts = [0, 1, 2, 4, tile // 2 + 3, tile - 1, tile, tile + 5]
    keys, values = _keys(len(counts) * tile, np.uint16), _values(len(counts) * tile, VALUE)
    oob = np.uint16(0xFFFF)                  # after every key of _keys (at most 15 * 4095)
    tiles_k, tiles_v = keys.reshape(-1, tile), values.reshape(-1, tile)
    for mode in (1, 3):                      # own storage, then the caller's
        got_k, got_v = _run_block(sort, shape, 3, keys, values, mode, counts, oob)
        _check(got_k, got_v, tiles_k, tiles_v, counts=counts, oob=oob)
    got_k, got_v = _run_block(sort, shape, 3, keys, values, mode=2)
    _check(got_k, got_v, tiles_k, tiles_v)


@pytest.mark.parametrize("key,value,op", [(np.float32, VALUE, _greater), (np.uint8, np.int64, OpKind.LESS),
                                          (np.float16, np.int16, _less), (np.bool_, np.int32, _less),
                                          (np.int64, np.float32, OpKind.GREATER), (KEY, VALUE, _by_k)])
def test_block_merge_sort_pairs_types_and_comparators(key, value, op):
    descending = op is _greater or op is OpKind.GREATER
    sort = coop.block.make_merge_sort_pairs(key, value, (64, 2, 2), 2, op)
    keys, values = _keys(2 * 512, key), _values(2 * 512, value)
    got_k, got_v = _run_block(sort, (64, 2, 2), 2, keys, values)
    _check(got_k, got_v, keys.reshape(2, 512), values.reshape(2, 512), descending)


# ---------------------------------------------------------------- Style 1: warp merge sort

def _warp_kernel(sort, lanes, shape, items, knb, vnb, own_storage=True):
    """Each logical warp sorts its tile of (x, v) fully and its tile of (y, w) up to n[warp]."""
    dx, dy, _ = dims_of(shape)
    warps = threads_of(shape) // lanes
    nbytes, align = sort.temp_storage_bytes, sort.temp_storage_alignment
    total = warps * nbytes

    @cuda.jit(link=sort.files)
    def kernel(x, v, y, w, n, oob):
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        warp = t // lanes
        temp = cuda.shared.array(total, numba.uint8, alignment=align)
        mine = temp[warp * nbytes:(warp + 1) * nbytes]
        a = cuda.local.array(items, knb)
        av = cuda.local.array(items, vnb)
        b = cuda.local.array(items, knb)
        bv = cuda.local.array(items, vnb)
        for i in range(items):
            a[i] = x[t * items + i]
            av[i] = v[t * items + i]
            b[i] = y[t * items + i]
            bv[i] = w[t * items + i]
        if own_storage:
            sort(a, av)
            sort(b, bv, n[warp], oob[0])
        else:
            sort(a, av, temp_storage=mine)
            cuda.syncwarp()
            sort(b, bv, n[warp], oob[0], mine)
        for i in range(items):
            x[t * items + i] = a[i]
            v[t * items + i] = av[i]
            y[t * items + i] = b[i]
            w[t * items + i] = bv[i]

    return kernel, warps


def _run_warp(sort, lanes, shape, items, keys, values, counts, oob, own_storage=True):
    kernel, warps = _warp_kernel(sort, lanes, shape, items, numba.from_dtype(keys.dtype),
                                 numba.from_dtype(values.dtype), own_storage)
    tile = lanes * items
    d = [cuda.to_device(a) for a in (keys, values, keys, values)]
    kernel[1, shape](*d, cuda.to_device(np.asarray(counts, np.int32)), cuda.to_device(np.full(1, oob, keys.dtype)))
    return [a.copy_to_host().reshape(warps, tile) for a in d]


@pytest.mark.parametrize("lanes", [32, 16, 8, 4, 2, 1])
@pytest.mark.parametrize("shape", SHAPES)
def test_warp_merge_sort_pairs_full_and_partial(lanes, shape):
    sort = coop.warp.make_merge_sort_pairs(np.int32, np.int32, 3, _less, threads_in_warp=lanes)
    warps, tile = threads_of(shape) // lanes, lanes * 3
    keys, values = _keys(warps * tile, np.int32), _values(warps * tile, np.int32)
    counts = [w % (tile + 2) for w in range(warps)]
    oob = np.int32(2**31 - 1)
    full_k, full_v, part_k, part_v = _run_warp(sort, lanes, shape, 3, keys, values, counts, oob)
    tiles_k, tiles_v = keys.reshape(warps, tile), values.reshape(warps, tile)
    _check(full_k, full_v, tiles_k, tiles_v)
    _check(part_k, part_v, tiles_k, tiles_v, counts=counts, oob=oob)


@pytest.mark.parametrize("lanes", [32, 8])
def test_warp_merge_sort_pairs_structs_descending_callers_storage(lanes):
    sort = coop.warp.make_merge_sort_pairs(np.float64, VALUE, 5, ">", threads_in_warp=lanes)
    warps, tile = 128 // lanes, lanes * 5
    keys, values = _keys(warps * tile, np.float64), _values(warps * tile, VALUE)
    counts = [(7 * w) % tile for w in range(warps)]
    oob = np.float64(-np.inf)
    full_k, full_v, part_k, part_v = _run_warp(sort, lanes, (32, 4), 5, keys, values, counts, oob, own_storage=False)
    tiles_k, tiles_v = keys.reshape(warps, tile), values.reshape(warps, tile)
    _check(full_k, full_v, tiles_k, tiles_v, descending=True)
    _check(part_k, part_v, tiles_k, tiles_v, descending=True, counts=counts, oob=oob)


# ---------------------------------------------------------------- Style 2

@pytest.mark.parametrize("caller_storage", [False, True])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_style2_radix_sort_pairs_partial_tiles(shape, descending, caller_storage):
    items = 4
    tile = threads_of(shape) * items
    pad = -np.inf if descending else np.inf          # after every valid key: the tile's tail stays last
    twin = coop.block.make_radix_sort_pairs(np.float32, np.int32, shape, items)   # the storage's size
    nbytes, align = twin.temp_storage_bytes, twin.temp_storage_alignment

    @cuda.jit
    def kernel(x, v, n):
        block = coop.this_block()
        base = cuda.blockIdx.x * tile
        valid = min(tile, n - base)
        temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
        keys = coop.ThreadData(items)                # float32, from x
        values = coop.ThreadData(items)              # int32, from v
        coop.load(block, x[base:], keys, valid_items=valid, oob_default=pad)
        coop.load(block, v[base:], values, valid_items=valid)
        if caller_storage:
            coop.radix_sort_pairs(block, keys, values, descending=descending, temp_storage=temp)
        else:
            coop.radix_sort_pairs(block, keys, values, descending=descending)
        coop.store(block, x[base:], keys, valid_items=valid)
        coop.store(block, v[base:], values, valid_items=valid)

    n = 3 * tile - 37
    keys, values = _keys(n, np.float32), _values(n, np.int32)
    dk, dv = cuda.to_device(keys), cuda.to_device(values)
    kernel[3, shape](dk, dv, n)
    got_k, got_v = dk.copy_to_host(), dv.copy_to_host()
    for start in range(0, n, tile):
        stop = min(start + tile, n)
        order = _order(keys[start:stop], descending)
        np.testing.assert_array_equal(got_k[start:stop], keys[start:stop][order])
        np.testing.assert_array_equal(got_v[start:stop], values[start:stop][order])


@pytest.mark.parametrize("group", ["block", "warp"])
@pytest.mark.parametrize("shape", SHAPES)
def test_style2_merge_sort_pairs_struct_values_partial_tiles(shape, group):
    items = 3
    warp = group == "warp"
    tile = items * (32 if warp else threads_of(shape))   # a warp's tile, or the block's
    big = np.int32(2**31 - 1)

    @cuda.jit
    def kernel(x, v, n):
        g = coop.this_warp() if warp else coop.this_block()
        t = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z)
        base = (cuda.blockIdx.x * cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z + (t // 32) * 32) * items \
            if warp else cuda.blockIdx.x * tile
        valid = max(0, min(tile, n - base))
        keys = coop.ThreadData(items)                # int32, from x
        values = coop.ThreadData(items)              # the record, from v
        coop.load(g, x[base:], keys, valid_items=valid, oob_default=big)
        coop.load(g, v[base:], values, valid_items=valid)
        coop.merge_sort_pairs(g, keys, values, compare_op="<", valid_items=valid, oob_default=big)
        coop.store(g, x[base:], keys, valid_items=valid)
        coop.store(g, v[base:], values, valid_items=valid)

    blocks = 3
    total = blocks * threads_of(shape) * items
    n = total - 50
    keys, values = np.zeros(total, np.int32), np.zeros(total, VALUE)
    keys[:n], values[:n] = _keys(n, np.int32), _values(n, VALUE)
    dk, dv = cuda.to_device(keys), cuda.to_device(values)
    kernel[blocks, shape](dk, dv, n)
    got_k, got_v = dk.copy_to_host(), dv.copy_to_host()
    for start in range(0, n, tile):
        stop = min(start + tile, n)
        order = _order(keys[start:stop])
        np.testing.assert_array_equal(got_k[start:stop], keys[start:stop][order])
        np.testing.assert_array_equal(got_v[start:stop], values[start:stop][order])
    np.testing.assert_array_equal(got_k[n:], 0)          # past n: untouched
