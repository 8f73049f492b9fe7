"""coop Style 1 on the GPU: a call whose arrays are too short or strided traps.

A Style 1 primitive hands CUB a bare pointer, so each call first checks what it will
touch: a load's or store's array must hold the tile (or ``num_valid`` of it) in C order,
and each thread's items array ``items_per_thread`` elements, and a caller's ``temp_storage``
the provider's TempStorage in shared memory (its size, from its address rounded up to its
alignment). A view that is contiguous
whatever numba's layout says (``x[::1]``) runs; a count past 2^31 is clamped to the tile,
not wrapped. A trap poisons the CUDA context, so the trapping kernels run in a subprocess
that must fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

from cuprims import coop  # noqa: E402

THREADS, ITEMS = 64, 4
TILE = THREADS * ITEMS
LANES = 16
SHORT = ITEMS - 1      # a thread array one item short

TRAP_CASES = ["block_load_short_array", "block_load_strided", "block_load_short_items", "block_store_short_array",
              "block_store_strided", "block_load_valid_past_array", "warp_load_short_array", "warp_store_strided",
              "radix_sort_short_keys", "scan_short_output", "temp_storage_too_small", "temp_storage_misaligned",
              "temp_storage_in_global_memory"]


def _block_kernel(case: str):
    load = coop.block.make_load(numba.float32, THREADS, ITEMS, algorithm="direct")
    store = coop.block.make_store(numba.float32, THREADS, ITEMS, algorithm="direct")

    @cuda.jit(link=load.files + store.files)
    def kernel(x, y, which, valid):
        items = cuda.local.array(ITEMS, numba.float32)
        short = cuda.local.array(SHORT, numba.float32)
        if which == 0:
            load(x, items)                       # x holds the tile, or less
        elif which == 1:
            load(x[::2], items)                  # every other element: strided
        elif which == 2:
            load(x, short)                       # the items array is one short
        elif which == 3:
            load(x[::1], items)                  # layout "A", contiguous: runs
        else:
            load(x, items, num_valid=valid, oob_default=-1.0)
        if which == 4:
            store(y[::2], items)
        elif which == 5:
            store(y, items, num_valid=valid)
        else:
            store(y, items)
    return kernel


def _warp_kernel():
    load = coop.warp.make_load(numba.float32, ITEMS, threads_in_warp=LANES)
    store = coop.warp.make_store(numba.float32, ITEMS, threads_in_warp=LANES)

    @cuda.jit(link=load.files + store.files)
    def kernel(x, y, which):
        items = cuda.local.array(ITEMS, numba.float32)
        base = (cuda.threadIdx.x // LANES) * LANES * ITEMS
        load(x[base:], items)
        if which == 1:
            store(y[base * 2::2], items)
        else:
            store(y[base:], items)
    return kernel


def _sort_scan_kernel():
    sort = coop.block.make_radix_sort_keys(numba.int32, THREADS, ITEMS)
    scan = coop.block.make_inclusive_sum(numba.int32, THREADS, ITEMS)

    @cuda.jit(link=sort.files + scan.files)
    def kernel(x, y, which):
        keys = cuda.local.array(ITEMS, numba.int32)
        short = cuda.local.array(SHORT, numba.int32)
        t = cuda.threadIdx.x
        for i in range(ITEMS):
            keys[i] = x[t * ITEMS + i]
        if which == 1:
            sort(short)
        else:
            sort(keys)
        if which == 2:
            scan(keys, short)
        else:
            scan(keys, keys)
        for i in range(ITEMS):
            y[t * ITEMS + i] = keys[i]
    return kernel


def _storage_kernel():
    load = coop.block.make_load(numba.float32, THREADS, ITEMS, algorithm="transpose")
    nbytes, align = load.temp_storage_bytes, load.temp_storage_alignment
    exact = load.temp_storage_layout[0]      # CUB's TempStorage: no room to round an address up
    size = nbytes + 64                       # a constant for the shared array's size

    @cuda.jit(link=load.files)
    def kernel(x, y, which, in_global):
        storage = cuda.shared.array(size, numba.uint8, alignment=align)
        items = cuda.local.array(ITEMS, numba.float32)
        if which == 0:
            load(x, items, temp_storage=storage[:nbytes // 2])    # too small
        elif which == 1:
            load(x, items, temp_storage=storage[1:1 + exact])     # misaligned: too small once rounded up
        elif which == 2:
            load(x, items, temp_storage=storage[align:])          # large enough, aligned: runs
        elif which == 3:
            load(temp_storage=in_global, src=x, items=items)      # global memory
        else:
            load(storage[1:], x, items)                           # misaligned, room to round up: runs
        t = cuda.threadIdx.x
        for i in range(ITEMS):
            y[t * ITEMS + i] = items[i]
    return kernel


def run_case(case: str) -> None:
    """Launch the kernel ``case`` names and wait for it; prints OK when it finished (the
    GPU test runs this in a subprocess)."""
    x = np.arange(2 * TILE, dtype=np.float32)
    if case.startswith("warp"):
        d_x = cuda.to_device(x[:TILE - 1] if case == "warp_load_short_array" else x[:TILE])
        _warp_kernel()[1, THREADS](d_x, cuda.device_array(2 * TILE, np.float32), int(case == "warp_store_strided"))
    elif case.startswith("temp_storage"):
        which = {"temp_storage_too_small": 0, "temp_storage_misaligned": 1, "temp_storage_in_global_memory": 3}[case]
        _storage_kernel()[1, THREADS](cuda.to_device(x[:TILE]), cuda.device_array(TILE, np.float32), which,
                                      cuda.device_array(1 << 16, np.uint8))
    elif case in ("radix_sort_short_keys", "scan_short_output"):
        which = 1 if case == "radix_sort_short_keys" else 2
        _sort_scan_kernel()[1, THREADS](cuda.to_device(np.arange(TILE, dtype=np.int32)),
                                        cuda.device_array(TILE, np.int32), which)
    else:
        which, valid, x_size, y_size = {
            "block_load_short_array": (0, 0, TILE - 1, TILE), "block_load_strided": (1, 0, 2 * TILE, TILE),
            "block_load_short_items": (2, 0, TILE, TILE), "block_store_short_array": (0, 0, TILE, TILE - 1),
            "block_store_strided": (4, 0, TILE, 2 * TILE), "block_load_valid_past_array": (6, TILE // 2, TILE // 4,
                                                                                         TILE),
        }[case]
        _block_kernel(case)[1, THREADS](cuda.to_device(x[:x_size]), cuda.device_array(y_size, np.float32), which,
                                        valid)
    cuda.synchronize()
    print("OK")


def _run_in_subprocess(case):
    code = ("import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('style1_bounds', {str(Path(__file__))!r})\n"
            "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
            f"module.run_case({case!r})\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ))


@pytest.mark.parametrize("case", TRAP_CASES)
def test_a_call_past_its_arrays_traps(case):
    result = _run_in_subprocess(case)
    assert result.returncode != 0 and "OK" not in result.stdout, (case, result.stdout[-2000:])
    assert "CUDA" in result.stderr or "cuda" in result.stderr, result.stderr[-3000:]


def test_in_range_calls_run_and_a_contiguous_view_of_layout_a_is_accepted():
    x = np.random.default_rng(5).uniform(-1, 1, TILE).astype(np.float32)
    kernel = _block_kernel("in_range")
    for which, valid in ((0, 0), (3, 0), (6, TILE // 2), (6, (1 << 31) + 5), (5, TILE // 3)):
        d_y = cuda.to_device(np.full(TILE, np.nan, np.float32))
        kernel[1, THREADS](cuda.to_device(x), d_y, which, valid)
        y = d_y.copy_to_host()
        if which == 6 and valid < TILE:        # the partial load pads with oob_default
            expected = np.where(np.arange(TILE) < valid, x, np.float32(-1))
        elif which == 5:                       # the partial store leaves the rest
            expected = np.where(np.arange(TILE) < valid, x, np.float32(np.nan))
        else:                                  # a whole tile; 2^31 + 5 is clamped to it
            expected = x
        np.testing.assert_array_equal(y, expected, err_msg=f"which={which} valid={valid}")


def test_warp_load_store_in_range_runs():
    x = np.arange(TILE, dtype=np.float32)
    d_y = cuda.to_device(np.zeros(TILE, np.float32))
    _warp_kernel()[1, THREADS](cuda.to_device(x), d_y, 0)
    np.testing.assert_array_equal(d_y.copy_to_host(), x)


def test_sort_and_scan_in_range_run():
    keys = np.random.default_rng(6).integers(-1000, 1000, TILE).astype(np.int32)
    d_y = cuda.device_array(TILE, np.int32)
    _sort_scan_kernel()[1, THREADS](cuda.to_device(keys), d_y, 0)
    np.testing.assert_array_equal(d_y.copy_to_host(), np.cumsum(np.sort(keys)).astype(np.int32))


def test_callers_storage_that_holds_the_temp_storage_runs():
    x = np.random.default_rng(7).uniform(-1, 1, TILE).astype(np.float32)
    for which in (2, 4):                      # aligned; byte-misaligned with room to round up
        d_y = cuda.device_array(TILE, np.float32)
        _storage_kernel()[1, THREADS](cuda.to_device(x), d_y, which, cuda.device_array(1 << 16, np.uint8))
        np.testing.assert_array_equal(d_y.copy_to_host(), x)     # a blocked load: thread t holds t*ITEMS...
