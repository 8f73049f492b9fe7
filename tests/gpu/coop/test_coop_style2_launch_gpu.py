"""coop Style 2 on the GPU: what depends on the launch and on the device.

Warps (``coop.this_warp()``) in blocks of several shapes; one kernel relaunched with
other block shapes (each compiles its own specialization, and each result is right);
the group passed to a device function; and counts out of range, which must trap (a
trap poisons the CUDA context, so those kernels run in a subprocess that must fail).
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

RNG = np.random.default_rng(22)


@pytest.mark.parametrize("shape", [(128,), (32, 4), (64, 2, 2)])
@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_warp_group(shape, dtype):
    threads = int(np.prod(shape))

    @cuda.jit
    def kernel(x, out):
        warp = coop.this_warp()
        t = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z)
        v = x[t]
        total = coop.sum(warp, v)
        low = coop.reduce(warp, v, binary_op="min", valid_items=20)     # the first 20 lanes
        out[t, 2] = coop.exclusive_sum(warp, v)
        out[t, 3] = coop.inclusive_scan(warp, v, scan_op="max")
        if t % 32 == 0:
            out[t, 0] = total
            out[t, 1] = low

    x = RNG.integers(-50, 50, threads).astype(dtype)
    out = cuda.device_array((threads, 4), dtype=dtype)
    kernel[1, shape](cuda.to_device(x), out)
    got, warps = out.copy_to_host(), x.reshape(-1, 32)
    np.testing.assert_array_equal(got[::32, 0], warps.sum(axis=1, dtype=dtype))
    np.testing.assert_array_equal(got[::32, 1], warps[:, :20].min(axis=1))
    exclusive = np.cumsum(warps, axis=1, dtype=dtype) - warps
    np.testing.assert_array_equal(got[:, 2], exclusive.ravel())
    np.testing.assert_array_equal(got[:, 3], np.maximum.accumulate(warps, axis=1).ravel())


def test_relaunch_with_another_block_shape_recompiles():
    @cuda.jit
    def kernel(x, totals):
        block = coop.this_block()
        data = coop.ThreadData(2)
        tile = 2 * cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z
        coop.load(block, x[cuda.blockIdx.x * tile:], data)
        total = coop.sum(block, data)
        if cuda.threadIdx.x + cuda.threadIdx.y + cuda.threadIdx.z == 0:
            totals[cuda.blockIdx.x] = total

    x = RNG.integers(-50, 50, 4 * 2 * 512).astype(np.int64)
    d = cuda.to_device(x)
    for shape in [(128,), (256,), (32, 4), (64, 2, 2), (128,)]:   # 128 threads again: its first build
        tile = 2 * int(np.prod(shape))
        totals = cuda.device_array(4, dtype=np.int64)
        kernel[4, shape](d, totals)
        np.testing.assert_array_equal(totals.copy_to_host(), x[:4 * tile].reshape(4, tile).sum(axis=1))
    assert getattr(kernel, "_launch_config_sensitive", True)


def test_group_and_items_passed_to_a_device_function():
    @cuda.jit(device=True)
    def scan_and_total(block, items):
        coop.inclusive_sum(block, items)
        return coop.sum(block, items)

    @cuda.jit
    def kernel(x, y, out):
        block = coop.this_block()
        items = coop.ThreadData(3, dtype=numba.float32)
        coop.load(block, x, items)
        t = scan_and_total(block, items)
        coop.store(block, y, items)
        if cuda.threadIdx.x == 0:
            out[0] = t

    x = RNG.integers(0, 5, 3 * 96).astype(np.float32)
    y, out = cuda.device_array(3 * 96, dtype=np.float32), cuda.device_array(1, dtype=np.float32)
    kernel[1, 96](cuda.to_device(x), y, out)
    np.testing.assert_array_equal(y.copy_to_host(), np.cumsum(x))
    assert out.copy_to_host()[0] == np.cumsum(x).sum()


# ---------------------------------------------------------------- out-of-range counts trap

TRAP_CASES = ["load_over_tile", "load_negative", "load_past_array", "load_short_full_tile",
              "store_past_array", "sum_over_threads", "temp_storage_too_small", "temp_storage_misaligned"]


def run_count_case(case):
    """Launch a kernel with the count ``case`` names out of range (or "in_range") and wait
    for it; the GPU test runs this in a subprocess. Prints OK when the kernel finished."""
    items, threads = 4, 64
    tile = items * threads
    valid = {"load_over_tile": tile + 1, "load_negative": -1, "load_past_array": tile,
             "store_past_array": tile, "sum_over_threads": threads + 1}.get(case, tile // 2)
    which = {"load_short_full_tile": 0, "store_past_array": 1, "sum_over_threads": 2, "temp_storage_too_small": 4,
             "temp_storage_misaligned": 5, "in_range_storage": 6, "in_range_misaligned_storage": 7}.get(case, 3)
    x_size = tile // 2 if case in ("load_past_array", "load_short_full_tile") else tile
    y_size = tile // 2 if case == "store_past_array" else tile
    x = cuda.to_device(np.ones(x_size, dtype=np.float32))
    y = cuda.device_array(y_size, dtype=np.float32)
    _count_kernel(items, which)[1, threads](x, y, valid)
    cuda.synchronize()
    print("OK")


def _count_kernel(items, which):
    """which: 0 a full-tile load; 1 the store's count is ``valid``; 2 the sum's; 3 the load's;
    4 a transposed load given 16 bytes of storage; 5 given exactly the TempStorage's bytes,
    not aligned (too small once its address is rounded up); 6 (in range) given enough
    aligned storage; 7 (in range) misaligned storage with room to round up."""
    twin = coop.block.make_load(np.float32, 64, items, "transpose")
    exact = twin.temp_storage_bytes - (twin.temp_storage_alignment - 1)   # the TempStorage alone

    @cuda.jit
    def kernel(x, y, valid):
        block = coop.this_block()
        data = coop.ThreadData(items)
        storage = cuda.shared.array(8192, numba.uint8, alignment=16)
        if which == 0:
            coop.load(block, x, data)
        elif which == 4:
            coop.load(block, x, data, algorithm="transpose", temp_storage=storage[:16])
        elif which == 5:
            coop.load(block, x, data, algorithm="transpose", temp_storage=storage[1:1 + exact])
        elif which == 6:
            coop.load(block, x, data, algorithm="transpose", temp_storage=storage)
        elif which == 7:
            coop.load(block, x, data, algorithm="transpose", temp_storage=storage[1:])
        else:
            coop.load(block, x, data, valid_items=valid if which == 3 else 4)
        s = coop.sum(block, x[0], valid_items=valid if which == 2 else 1)
        coop.store(block, y, data, valid_items=valid if which == 1 else 4)
        if cuda.threadIdx.x == 0:
            y[0] = s
    return kernel


def _run_in_subprocess(case):
    code = ("import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('style2_counts', {str(Path(__file__))!r})\n"
            "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
            f"module.run_count_case({case!r})\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ))


@pytest.mark.parametrize("case", ["in_range", "in_range_storage", "in_range_misaligned_storage"])
def test_in_range_counts_run(case):
    result = _run_in_subprocess(case)
    assert result.returncode == 0 and "OK" in result.stdout, result.stderr[-3000:]


@pytest.mark.parametrize("case", TRAP_CASES)
def test_out_of_range_counts_trap(case):
    result = _run_in_subprocess(case)
    assert result.returncode != 0 and "OK" not in result.stdout, (case, result.stdout[-2000:])
    assert "CUDA" in result.stderr or "cuda" in result.stderr, result.stderr[-3000:]
