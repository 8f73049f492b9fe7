"""coop warp load/store (CUB's WarpLoad/WarpStore) and Style 2's ``temp_storage=`` on the
GPU, against numpy.

Every algorithm ('direct', 'striped', 'vectorize', 'transpose') of both, on logical warps
of 32 to 1 lanes, 1 to 7 items per lane, full and partial tiles (``num_valid`` /
``valid_items``, ``oob_default``), the arrangement each one reads and writes (striped:
lane ``l`` holds ``l, l + lanes...``), several types, the caller's storage; Style 2's
``coop.this_warp()`` loads and stores in blocks (128,), (32, 4), (64, 2, 2); Style 2 calls
given ``temp_storage=`` (block and warp). Out-of-range storage traps: see
test_coop_style2_launch_gpu.py.
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

from cuprims import coop  # noqa: E402
from twins import PAIR, SHAPES, WARP_IO_ALGORITHMS, threads_of  # noqa: E402

RNG = np.random.default_rng(43)
SENTINEL = 99


def _values(n, dtype):
    dtype = np.dtype(dtype)
    if dtype.names is not None:
        x = np.zeros(n, dtype)
        x["v"] = RNG.uniform(-10, 10, n)
        x["i"] = np.arange(n)
        return x
    if dtype.kind == "c":
        return (RNG.uniform(-10, 10, n) + 1j * RNG.uniform(-10, 10, n)).astype(dtype)
    if dtype.kind == "f":
        return RNG.integers(-1000, 1000, n).astype(dtype) / 8
    return (np.arange(n) % 97 + 1).astype(dtype)


def _blocked_from(tiles, lanes, items, algorithm):
    """What each lane holds after loading ``tiles`` (rows: a warp's tile) by ``algorithm``,
    written back in blocked order (lane ``l``'s items at ``l * items ...``)."""
    if algorithm == "striped":
        return tiles.reshape(-1, items, lanes).transpose(0, 2, 1).reshape(tiles.shape)
    return tiles


def _stored_from(tiles, lanes, items, algorithm):
    """What storing blocked items (lane ``l`` holds ``tiles[l * items ...]``) by
    ``algorithm`` writes."""
    if algorithm == "striped":
        return tiles.reshape(-1, lanes, items).transpose(0, 2, 1).reshape(tiles.shape)
    return tiles


def _partial(tiles, counts, fill):
    out = tiles.copy()
    for row, n in enumerate(counts):
        out[row, n:] = fill
    return out


# ---------------------------------------------------------------- Style 1

def _style1_kernel(load, store, lanes, items, nb, caller_storage):
    """Per logical warp: ``y`` = its tile of ``x`` loaded by ``load`` and written blocked,
    ``z`` = the blocked tile stored by ``store``; ``y2``/``z2`` the same up to ``n[w]``."""
    tile = lanes * items
    nbytes = max(load.temp_storage_bytes, store.temp_storage_bytes)
    align = max(load.temp_storage_alignment, store.temp_storage_alignment)
    total = (128 // lanes) * nbytes

    @cuda.jit(link=load.files + store.files)
    def kernel(x, y, z, y2, z2, n):
        t = cuda.threadIdx.x + 32 * cuda.threadIdx.y
        w = t // lanes + (128 // lanes) * cuda.blockIdx.x         # the grid's logical warp
        base = w * tile
        temp = cuda.shared.array(total, numba.uint8, alignment=align)
        mine = temp[(t // lanes) * nbytes:(t // lanes + 1) * nbytes]
        a = cuda.local.array(items, nb)
        b = cuda.local.array(items, nb)
        for i in range(items):
            b[i] = x[base + (t % lanes) * items + i]             # blocked, by hand
        if caller_storage:
            load(x[base:], a, temp_storage=mine)
            cuda.syncwarp()
            store(z[base:], b, temp_storage=mine)
        else:
            load(x[base:], a)
            store(z[base:], b)
        for i in range(items):
            y[base + (t % lanes) * items + i] = a[i]
        if caller_storage:
            cuda.syncwarp()
            load(x[base:], a, n[w], SENTINEL, mine)
            cuda.syncwarp()
            store(z2[base:], b, n[w], mine)
        else:
            load(x[base:], a, n[w], SENTINEL)
            store(z2[base:], b, n[w])
        for i in range(items):
            y2[base + (t % lanes) * items + i] = a[i]

    return kernel


def _run_style1(algorithm, lanes, items, dtype, caller_storage=False):
    load = coop.warp.make_load(dtype, items, algorithm, threads_in_warp=lanes)
    store = coop.warp.make_store(dtype, items, algorithm, threads_in_warp=lanes)
    kernel = _style1_kernel(load, store, lanes, items, numba.from_dtype(np.dtype(dtype)), caller_storage)
    blocks, tile = 2, lanes * items
    warps = blocks * 128 // lanes
    x = _values(warps * tile, dtype)
    counts = [w % (tile + 2) for w in range(warps)]
    outs = [cuda.to_device(np.full(x.size, SENTINEL, dtype)) for _ in range(4)]
    kernel[blocks, (32, 4)](cuda.to_device(x), *outs, cuda.to_device(np.asarray(counts, np.int32)))
    y, z, y2, z2 = (o.copy_to_host().reshape(warps, tile) for o in outs)
    tiles = x.reshape(warps, tile)
    counts = [min(c, tile) for c in counts]
    np.testing.assert_array_equal(y, _blocked_from(tiles, lanes, items, algorithm))
    np.testing.assert_array_equal(z, _stored_from(tiles, lanes, items, algorithm))
    np.testing.assert_array_equal(y2, _blocked_from(_partial(tiles, counts, SENTINEL), lanes, items, algorithm))
    np.testing.assert_array_equal(z2, _partial(_stored_from(tiles, lanes, items, algorithm), counts, SENTINEL))


@pytest.mark.parametrize("items", [1, 4, 7])
@pytest.mark.parametrize("lanes", [32, 8, 1])
@pytest.mark.parametrize("algorithm", WARP_IO_ALGORITHMS)
def test_warp_load_store_algorithms_full_and_partial(algorithm, lanes, items):
    _run_style1(algorithm, lanes, items, np.int32)


@pytest.mark.parametrize("dtype", [np.uint8, np.int64, np.float16, np.float64])
@pytest.mark.parametrize("algorithm", ["transpose", "striped"])
def test_warp_load_store_types_and_callers_storage(dtype, algorithm):
    _run_style1(algorithm, 16, 5, dtype, caller_storage=True)


# ---------------------------------------------------------------- Style 2: this_warp()

def _style2_warp_kernel(algorithm, items):
    @cuda.jit
    def kernel(x, y, z, n):
        warp = coop.this_warp()
        t = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z)
        threads = cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z
        base = (cuda.blockIdx.x * threads + (t // 32) * 32) * items      # the warp's tile
        valid = max(0, min(32 * items, n - base))
        data = coop.ThreadData(items)                 # x's element type
        coop.load(warp, x[base:], data, algorithm=algorithm, valid_items=valid)   # the rest: zeros
        coop.store(warp, y[base:], data, algorithm=algorithm, valid_items=valid)
        coop.store(warp, z[base:], data)              # direct: the arrangement the load made
    return kernel


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("algorithm", WARP_IO_ALGORITHMS)
def test_style2_warp_load_store(algorithm, shape):
    items, blocks = 4, 2
    total = blocks * threads_of(shape) * items
    n = total - 45                                    # the last warps' tiles partial or empty
    x = _values(total, np.float64)
    y, z = cuda.to_device(np.full(total, SENTINEL, np.float64)), cuda.to_device(np.full(total, SENTINEL, np.float64))
    _style2_warp_kernel(algorithm, items)[blocks, shape](cuda.to_device(x), y, z, n)
    got_y, got_z = y.copy_to_host(), z.copy_to_host()
    np.testing.assert_array_equal(got_y[:n], x[:n])
    np.testing.assert_array_equal(got_y[n:], SENTINEL)
    tiles = x.reshape(-1, 32 * items)
    counts = [max(0, min(32 * items, n - w * 32 * items)) for w in range(tiles.shape[0])]
    expected = _blocked_from(_partial(tiles, counts, 0), 32, items, algorithm)
    np.testing.assert_array_equal(got_z.reshape(tiles.shape), expected)


@pytest.mark.parametrize("dtype", [np.complex64, PAIR, np.int8])
def test_style2_warp_transpose_types(dtype):
    items, shape = 3, (64, 2)
    total = 2 * 128 * items
    x = _values(total, dtype)
    y, z = cuda.to_device(np.zeros(total, dtype)), cuda.to_device(np.zeros(total, dtype))
    _style2_warp_kernel("transpose", items)[2, shape](cuda.to_device(x), y, z, total)
    np.testing.assert_array_equal(y.copy_to_host(), x)
    np.testing.assert_array_equal(z.copy_to_host(), x)


# ---------------------------------------------------------------- Style 2: temp_storage=

@pytest.mark.parametrize("shape", SHAPES)
def test_style2_calls_with_the_callers_storage(shape):
    items = 4
    threads = threads_of(shape)
    tile = threads * items
    # the storage's size: the largest of the calls' (their Style 1 twins' temp_storage_bytes)
    twins = [coop.block.make_load(np.int32, shape, items, "transpose"),
             coop.block.make_radix_sort_keys(np.int32, shape, items),
             coop.block.make_exclusive_sum(np.int32, shape, items),
             coop.block.make_store(np.int32, shape, items, "warp_transpose")]
    warp_twin = coop.warp.make_merge_sort_keys(np.int32, items, "<")
    nbytes = max([p.temp_storage_bytes for p in twins] + [(threads // 32) * warp_twin.temp_storage_bytes])
    align = max(p.temp_storage_alignment for p in twins + [warp_twin])
    slot = warp_twin.temp_storage_bytes

    @cuda.jit
    def kernel(x, y, sums, totals):
        block, warp = coop.this_block(), coop.this_warp()
        temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
        t = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z)
        base = cuda.blockIdx.x * tile
        keys = coop.ThreadData(items)                 # int32, from x
        coop.load(block, x[base:], keys, algorithm="transpose", temp_storage=temp)
        cuda.syncthreads()
        total = coop.sum(block, keys, temp_storage=temp)
        cuda.syncthreads()
        coop.radix_sort_keys(block, keys, temp_storage=temp)         # the block's tile, sorted
        cuda.syncthreads()
        scanned = coop.ThreadData(items)
        coop.exclusive_sum(block, keys, scanned, temp_storage=temp)
        cuda.syncthreads()
        for i in range(items):
            sums[base + t * items + i] = scanned[i]
        w = t // 32
        coop.merge_sort_keys(warp, keys, compare_op=">", temp_storage=temp[w * slot:(w + 1) * slot])
        cuda.syncthreads()
        coop.store(block, y[base:], keys, algorithm="warp_transpose", temp_storage=temp)
        if t == 0:
            totals[cuda.blockIdx.x] = total

    blocks = 3
    x = RNG.integers(-1000, 1000, blocks * tile).astype(np.int32)
    y, sums = cuda.device_array(x.size, np.int32), cuda.device_array(x.size, np.int32)
    totals = cuda.device_array(blocks, np.int32)
    kernel[blocks, shape](cuda.to_device(x), y, sums, totals)
    tiles = np.sort(x.reshape(blocks, tile), axis=1)
    np.testing.assert_array_equal(totals.copy_to_host(), x.reshape(blocks, tile).sum(axis=1))
    np.testing.assert_array_equal(sums.copy_to_host().reshape(blocks, tile),
                                  np.cumsum(tiles, axis=1, dtype=np.int32) - tiles)
    per_warp = tiles.reshape(blocks, -1, 32 * items)                # each warp's part of the sorted tile
    np.testing.assert_array_equal(y.copy_to_host().reshape(per_warp.shape), -np.sort(-per_warp, axis=2))


@pytest.mark.parametrize("shape", [(48,), (24, 2)])
def test_warp_transpose_in_a_block_whose_last_warp_is_partial(shape):
    """48 threads: the second physical warp has 16 lanes (one logical warp of 16). Each
    call's barrier before reusing the provider's storage waits for the lanes that exist."""
    lanes, items = 16, 3
    load = coop.warp.make_load(np.int32, items, "transpose", threads_in_warp=lanes)
    store = coop.warp.make_store(np.int32, items, "transpose", threads_in_warp=lanes)
    tile = lanes * items

    @cuda.jit(link=load.files + store.files)
    def kernel(x, y, z):
        t = cuda.threadIdx.x + shape[0] * cuda.threadIdx.y
        base = (cuda.blockIdx.x * 3 + t // lanes) * tile
        a = cuda.local.array(items, numba.int32)
        load(x[base:], a)
        store(y[base:], a)
        load(y[base:], a)          # the second use of each provider's storage
        store(z[base:], a)

    blocks = 4
    x = _values(blocks * 48 * items, np.int32)
    y, z = cuda.device_array(x.size, np.int32), cuda.device_array(x.size, np.int32)
    kernel[blocks, shape](cuda.to_device(x), y, z)
    np.testing.assert_array_equal(y.copy_to_host(), x)
    np.testing.assert_array_equal(z.copy_to_host(), x)
