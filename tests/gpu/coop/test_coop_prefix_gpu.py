"""Block scans with a block prefix callback on the GPU, against numpy: one block scans a
long array tile after tile, a thread-local running state carried from call to call.

Block shapes (128,) and (32, 4); 1 to 7 items per thread; a partial last tile; int32
sums, float64 max scans by a Python operator, a struct argmax scan (Python operator and
struct state), an int64 state for int32 sums (PrefixCallback), the caller's temporary
storage, Style 2; and which threads CUB calls the callback in (thread 0 in every call,
never a thread outside the first warp).
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

from cuprims import coop  # noqa: E402
from twins import PAIR, argmax, bigger, running_argmax, running_max, running_total, threads_of  # noqa: E402

SHAPES = [(128,), (32, 4)]
RNG = np.random.default_rng(21)


def counted_total(state, aggregate):
    """A running total in state[0] that also counts its calls in state[1]."""
    old = state[0]
    state[0] = old + aggregate
    state[1] += 1
    return old


def _tile_kernel(scan, load, store, nb, shape, items, state_nb=None, state_len=1):
    """One block: y = the scan of all of x, ``tile`` items per call; thread t writes its
    final state to ``states[t]`` (every element of it)."""
    dx = shape[0]
    tile = threads_of(shape) * items
    state_nb = state_nb or nb

    if items == 1:
        @cuda.jit(device=True)
        def scan_items(buf, state):
            buf[0] = scan(buf[0], state)        # one item per thread: the scan is returned
    else:
        @cuda.jit(device=True)
        def scan_items(buf, state):
            scan(buf, buf, state)

    @cuda.jit(link=scan.files + load.files + store.files)
    def kernel(x, y, n, init, states):
        t = cuda.threadIdx.x + dx * cuda.threadIdx.y
        state = cuda.local.array(state_len, state_nb)
        for k in range(state_len):
            state[k] = init[k]
        buf = cuda.local.array(items, nb)
        for base in range(0, n, tile):
            valid = min(tile, n - base)
            load(x[base:], buf, valid, init[state_len])     # the fill: scan_op's identity
            scan_items(buf, state)
            store(y[base:], buf, valid)
        for k in range(state_len):
            states[t, k] = state[k]

    return kernel, tile


def _run(scan, dtype, shape, items, x, init, fill, state_dtype=None, state_len=1):
    nb = numba.from_dtype(np.dtype(dtype))
    state_nb = numba.from_dtype(np.dtype(state_dtype)) if state_dtype is not None else None
    load = coop.block.make_load(dtype, shape, items)
    store = coop.block.make_store(dtype, shape, items)
    kernel, _ = _tile_kernel(scan, load, store, nb, shape, items, state_nb, state_len)
    sdt = np.dtype(state_dtype or dtype)
    init_arr = np.empty(state_len + 1, dtype=sdt)
    init_arr[:state_len] = init
    init_arr[state_len] = fill
    y = cuda.device_array(x.size, dtype=dtype)
    states = cuda.device_array((threads_of(shape), state_len), dtype=sdt)
    kernel[1, shape](cuda.to_device(x), y, x.size, cuda.to_device(init_arr), states)
    return y.copy_to_host(), states.copy_to_host()


@pytest.mark.parametrize("items", [1, 4, 7])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["inclusive", "exclusive"])
def test_running_sum_over_many_tiles(mode, shape, items):
    make = coop.block.make_inclusive_sum if mode == "inclusive" else coop.block.make_exclusive_sum
    scan = make(np.int32, shape, items, prefix_op=running_total)
    n = 9 * threads_of(shape) * items - 13          # eight full tiles and a partial one
    x = RNG.integers(-50, 50, n).astype(np.int32)
    y, states = _run(scan, np.int32, shape, items, x, 5, 0)
    inclusive = 5 + np.cumsum(x, dtype=np.int32)
    expected = inclusive if mode == "inclusive" else np.concatenate([[5], inclusive[:-1]]).astype(np.int32)
    np.testing.assert_array_equal(y, expected)
    assert states[0, 0] == 5 + x.sum(dtype=np.int32)     # thread 0's state: the running total


@pytest.mark.parametrize("shape", SHAPES)
def test_make_scan_block_prefix_callback_op(shape):
    scan = coop.block.make_scan(np.int32, shape, 3, mode="exclusive", block_prefix_callback_op=running_total)
    n = 4 * threads_of(shape) * 3
    x = RNG.integers(0, 9, n).astype(np.int32)
    y, _ = _run(scan, np.int32, shape, 3, x, 0, 0)
    np.testing.assert_array_equal(y, np.concatenate([[0], np.cumsum(x, dtype=np.int32)[:-1]]))


@pytest.mark.parametrize("mode", ["inclusive", "exclusive"])
def test_running_max_float64_python_operator(mode):
    make = coop.block.make_inclusive_scan if mode == "inclusive" else coop.block.make_exclusive_scan
    scan = make(np.float64, (32, 4), bigger, 4, prefix_op=running_max)
    n = 6 * 512 - 100
    x = RNG.uniform(-1e6, 1e6, n)
    y, states = _run(scan, np.float64, (32, 4), 4, x, -np.inf, -np.inf)
    inclusive = np.maximum.accumulate(x)
    expected = inclusive if mode == "inclusive" else np.concatenate([[-np.inf], inclusive[:-1]])
    np.testing.assert_array_equal(y, expected)
    assert states[0, 0] == x.max()


@pytest.mark.parametrize("shape", SHAPES)
def test_running_struct_argmax(shape):
    scan = coop.block.make_inclusive_scan(PAIR, shape, argmax, 2, prefix_op=running_argmax)
    n = 7 * threads_of(shape) * 2 - 3
    x = np.zeros(n, dtype=PAIR)
    x["v"] = RNG.permutation(n).astype(np.float32)      # distinct: one argmax per prefix
    x["i"] = np.arange(n)
    init = np.array([(-np.inf, -1)], dtype=PAIR)[0]
    y, states = _run(scan, PAIR, shape, 2, x, init, init)
    running = np.maximum.accumulate(x["v"])
    np.testing.assert_array_equal(y["v"], running)
    # distinct values: position k holds a new maximum exactly where x[k] equals the running one
    np.testing.assert_array_equal(y["i"], np.maximum.accumulate(np.where(x["v"] == running, np.arange(n), 0)))
    assert states[0, 0]["i"] == int(np.argmax(x["v"]))


def test_int64_state_for_int32_prefixes():
    scan = coop.block.make_exclusive_sum(np.int32, (32, 4), 4,
                                         prefix_op=coop.block.PrefixCallback(running_total, np.int64))
    n = 5 * 512
    x = RNG.integers(0, 2**20, n).astype(np.int32)
    y, states = _run(scan, np.int32, (32, 4), 4, x, 0, 0, state_dtype=np.int64)
    inclusive = np.cumsum(x.astype(np.int64))
    np.testing.assert_array_equal(y, np.concatenate([[0], inclusive[:-1]]).astype(np.int32))
    assert states[0, 0] == inclusive[-1]        # the int64 total (past int32's range)


@pytest.mark.parametrize("shape", SHAPES)
def test_callback_runs_in_the_first_warp_only(shape):
    scan = coop.block.make_inclusive_sum(np.int32, shape, 2, prefix_op=counted_total)
    tiles = 6
    n = tiles * threads_of(shape) * 2
    x = RNG.integers(0, 100, n).astype(np.int32)
    y, states = _run(scan, np.int32, shape, 2, x, [0, 0], 0, state_len=2)
    np.testing.assert_array_equal(y, np.cumsum(x, dtype=np.int32))
    assert states[0, 1] == tiles                       # thread 0: once per call
    assert (states[32:, 1] == 0).all()                 # never outside the first warp
    assert set(states[1:32, 1]) <= {0, tiles}          # other lanes of warp 0: every call or none
    called = states[:32, 1] == tiles
    np.testing.assert_array_equal(states[:32, 0][called], x.sum(dtype=np.int32))


def test_one_item_per_thread_and_callers_storage():
    shape = (32, 4)
    scan = coop.block.make_inclusive_sum(np.int32, shape, 1, prefix_op=running_total)
    nbytes, align = scan.temp_storage_bytes, scan.temp_storage_alignment

    @cuda.jit(link=scan.files)
    def kernel(x, y, z, n):
        t = cuda.threadIdx.x + 32 * cuda.threadIdx.y
        temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
        own = cuda.local.array(1, numba.int32)
        own[0] = 0
        given = cuda.local.array(1, numba.int32)
        given[0] = 0
        for base in range(0, n, 128):
            y[base + t] = scan(x[base + t], own)
            z[base + t] = scan(x[base + t], given, temp_storage=temp)

    n = 10 * 128
    x = RNG.integers(-9, 9, n).astype(np.int32)
    y = cuda.device_array(n, dtype=np.int32)
    z = cuda.device_array(n, dtype=np.int32)
    kernel[1, shape](cuda.to_device(x), y, z, n)
    np.testing.assert_array_equal(y.copy_to_host(), np.cumsum(x, dtype=np.int32))
    np.testing.assert_array_equal(z.copy_to_host(), np.cumsum(x, dtype=np.int32))


@pytest.mark.parametrize("shape", SHAPES)
def test_style2_running_scans(shape):
    threads = threads_of(shape)
    dx = shape[0]
    tile = 4 * threads

    @cuda.jit
    def kernel(x, y, z, n):
        block = coop.this_block()
        items = coop.ThreadData(4)
        t = cuda.threadIdx.x + dx * cuda.threadIdx.y
        total = cuda.local.array(1, numba.int32)
        total[0] = 0
        best = cuda.local.array(1, numba.int32)
        best[0] = -2**31
        for base in range(0, n, tile):
            valid = min(tile, n - base)
            coop.load(block, x[base:], items, valid_items=valid, oob_default=0)
            coop.exclusive_sum(block, items, prefix_op=running_total, prefix_state=total)
            coop.store(block, y[base:], items, valid_items=valid)
        lowest = numba.int32(-2**31)
        for base in range(0, n, threads):          # one value per thread: the scan returned
            v = x[base + t] if base + t < n else lowest
            m = coop.inclusive_scan(block, v, scan_op=bigger, prefix_op=running_max, prefix_state=best)
            if base + t < n:
                z[base + t] = m

    n = 5 * tile - 9
    x = RNG.integers(-1000, 1000, n).astype(np.int32)
    y = cuda.device_array(n, dtype=np.int32)
    z = cuda.device_array(n, dtype=np.int32)
    kernel[1, shape](cuda.to_device(x), y, z, n)
    np.testing.assert_array_equal(y.copy_to_host(), np.concatenate([[0], np.cumsum(x, dtype=np.int32)[:-1]]))
    np.testing.assert_array_equal(z.copy_to_host(), np.maximum.accumulate(x))
