"""coop warp exchange (CUB's WarpExchange) on the GPU, against numpy.

Each logical warp owns a tile of ``lanes * items`` values. Blocked: lane ``l`` holds
``tile[l * items + i]``; striped: lane ``l`` holds ``tile[l + i * lanes]``. A kernel reads
the tile in one arrangement by hand, exchanges it (in place, or into another array) and
writes it back in the other arrangement by hand: the output must be the input. Both
exchanges, Style 1 (``coop.warp.make_exchange``) and Style 2 (``coop.exchange`` with
``coop.this_warp()``), logical warps of 32 to 2 lanes, 1 to 7 items, blocks (128,),
(32, 4) and (64, 2, 2), several types (a struct too) and the caller's storage.
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

from cuprims import coop  # noqa: E402
from twins import PAIR, SHAPES  # noqa: E402

RNG = np.random.default_rng(71)


def _values(n, dtype):
    dtype = np.dtype(dtype)
    if dtype.names is not None:
        x = np.zeros(n, dtype)
        x["v"] = RNG.uniform(-10, 10, n)
        x["i"] = np.arange(n)
        return x
    if dtype.kind == "c":
        return (RNG.uniform(-5, 5, n) + 1j * RNG.uniform(-5, 5, n)).astype(dtype)
    if dtype.kind == "b":
        return RNG.integers(0, 2, n).astype(dtype)
    if dtype.kind == "f":
        return RNG.uniform(-100, 100, n).astype(dtype)
    info = np.iinfo(dtype)
    return RNG.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True).astype(dtype)


def _launch(kernel, shape, x, dtype):
    d_x, d_y = cuda.to_device(x), cuda.to_device(np.zeros_like(x))
    kernel[1, shape](d_x, d_y)
    return d_y.copy_to_host()


def _style1_kernel(mode, dtype, lanes, items, into, callers_storage):
    nbt = numba.from_dtype(np.dtype(dtype))
    ex = coop.warp.make_exchange(mode, nbt, items, threads_in_warp=lanes)
    to_blocked = getattr(mode, "name", mode) == "StripedToBlocked"   # an enum member or its name
    nbytes, align = ex.temp_storage_bytes, ex.temp_storage_alignment
    # every logical warp of the largest block its own slot (a constant for the shared array)
    total = nbytes * (1024 // lanes) if callers_storage else 8

    @cuda.jit(link=ex.files)
    def kernel(x, y):
        t = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z)
        w, lane = t // lanes, t % lanes
        base = w * lanes * items
        a = cuda.local.array(items, nbt)
        b = cuda.local.array(items, nbt)
        for i in range(items):                 # read in the input arrangement
            a[i] = x[base + lane + i * lanes] if to_blocked else x[base + lane * items + i]
        temp = cuda.shared.array(total, numba.uint8, alignment=align)
        mine = temp[w * nbytes:(w + 1) * nbytes]
        if into:
            if callers_storage:
                ex(a, b, temp_storage=mine)
            else:
                ex(a, b)
        else:
            if callers_storage:
                ex(a, a, temp_storage=mine)
            else:
                ex(a, a)
            for i in range(items):
                b[i] = a[i]
        for i in range(items):                 # write in the output arrangement
            if to_blocked:
                y[base + lane * items + i] = b[i]
            else:
                y[base + lane + i * lanes] = b[i]
    return kernel


@pytest.mark.parametrize("mode", ["StripedToBlocked", "BlockedToStriped"])
@pytest.mark.parametrize("lanes", [32, 8, 2])
@pytest.mark.parametrize("items", [1, 4, 7])
@pytest.mark.parametrize("shape", SHAPES)
def test_warp_exchange_round_trips(mode, lanes, items, shape):
    threads = int(np.prod(shape))
    x = _values(threads * items, np.int32)
    kernel = _style1_kernel(coop.warp.WarpExchangeType[mode], np.int32, lanes, items, into=items == 4,
                            callers_storage=False)
    np.testing.assert_array_equal(_launch(kernel, shape, x, np.int32), x)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.float16, np.bool_, np.uint8, PAIR])
@pytest.mark.parametrize("mode", ["StripedToBlocked", "BlockedToStriped"])
def test_warp_exchange_types_and_callers_storage(dtype, mode):
    x = _values(128 * 3, dtype)
    kernel = _style1_kernel(mode, dtype, 16, 3, into=False, callers_storage=True)
    np.testing.assert_array_equal(_launch(kernel, (128,), x, dtype), x)


@pytest.mark.parametrize("mode", ["StripedToBlocked", "BlockedToStriped"])
@pytest.mark.parametrize("shape", SHAPES)
def test_style2_warp_exchange(mode, shape):
    items = 4
    to_blocked = mode == "StripedToBlocked"

    @cuda.jit
    def kernel(x, y):
        warp = coop.this_warp()
        t = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z)
        base = (t // 32) * 32 * items
        data = coop.ThreadData(items)
        out = coop.ThreadData(items)
        # 'striped' and 'direct' (blocked) loads read the input arrangement for us
        coop.load(warp, x[base:], data, algorithm="striped" if to_blocked else "direct")
        coop.exchange(warp, data, out, block_exchange_type=mode)
        coop.store(warp, y[base:], out, algorithm="direct" if to_blocked else "striped")

    threads = int(np.prod(shape))
    x = _values(threads * items, np.float32)
    np.testing.assert_array_equal(_launch(kernel, shape, x, np.float32), x)
