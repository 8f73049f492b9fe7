"""coop.warp primitives on the GPU against numpy: logical warps of 32 and fewer lanes
(powers of two), partial warps (``num_valid``), Python operators, every int
and float type for the sum, and block shapes of more than one dimension."""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

from cuprims import coop  # noqa: E402
from twins import bigger  # noqa: E402

RNG = np.random.default_rng(12)


def _values(n, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return RNG.uniform(-50, 50, n).astype(dtype)
    return RNG.integers(0 if dtype.kind == "u" else -50, 50, n).astype(dtype)


def _run(prim, lanes, shape, dtype, valid=None):
    """Launch one block of ``shape``; each logical warp's first lane writes (all, partial)."""
    dx, dy = (tuple(shape) + (1, 1))[:2]
    threads = int(np.prod(shape))
    nvalid = lanes if valid is None else valid

    @cuda.jit(link=prim.files)
    def kernel(x, out):
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        a = prim(x[t])
        b = prim(x[t], nvalid)
        if t % lanes == 0:
            out[t // lanes, 0] = a
            out[t // lanes, 1] = b

    x = _values(threads, dtype)
    out = cuda.device_array((threads // lanes, 2), dtype=dtype)
    kernel[1, shape](cuda.to_device(x), out)
    return x.reshape(-1, lanes), out.copy_to_host()


@pytest.mark.parametrize("lanes", [32, 16, 8, 4, 2, 1])
@pytest.mark.parametrize("shape", [(128,), (32, 4), (64, 2, 2)])
def test_warp_sum(lanes, shape):
    prim = coop.warp.make_sum(np.int32, threads_in_warp=lanes)
    groups, got = _run(prim, lanes, shape, np.int32, valid=max(1, lanes - 1))
    np.testing.assert_array_equal(got[:, 0], groups.sum(1, dtype=np.int32))
    np.testing.assert_array_equal(got[:, 1], groups[:, :max(1, lanes - 1)].sum(1, dtype=np.int32))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                                   np.uint64, np.float32, np.float64])
def test_warp_sum_every_int_and_float(dtype):
    prim = coop.warp.make_sum(dtype)
    groups, got = _run(prim, 32, (64,), dtype, valid=20)
    for col, part in ((0, groups), (1, groups[:, :20])):
        expected = part.sum(1, dtype=dtype)
        if np.dtype(dtype).kind == "f":
            np.testing.assert_allclose(got[:, col], expected, rtol=1e-5, atol=1e-3)
        else:
            np.testing.assert_array_equal(got[:, col], expected)


@pytest.mark.parametrize("lanes", [32, 8, 2])
def test_warp_reduce_python_operator(lanes):
    prim = coop.warp.make_reduce(np.float64, bigger, threads_in_warp=lanes)
    groups, got = _run(prim, lanes, (128,), np.float64, valid=lanes - 1)
    np.testing.assert_array_equal(got[:, 0], groups.max(1))
    np.testing.assert_array_equal(got[:, 1], groups[:, :lanes - 1].max(1))


def test_warp_reduce_builtin_min():
    prim = coop.warp.make_reduce(np.int64, "min", threads_in_warp=16)
    groups, got = _run(prim, 16, (32, 2), np.int64, valid=16)
    np.testing.assert_array_equal(got[:, 0], groups.min(1))
    np.testing.assert_array_equal(got[:, 1], groups.min(1))


@pytest.mark.parametrize("lanes", [32, 16, 4, 1])
@pytest.mark.parametrize("shape", [(128,), (32, 4), (64, 2, 2)])
def test_warp_exclusive_sum(lanes, shape):
    xsum = coop.warp.make_exclusive_sum(np.int32, threads_in_warp=lanes)
    dx, dy = (tuple(shape) + (1, 1))[:2]
    threads = int(np.prod(shape))

    @cuda.jit(link=xsum.files)
    def kernel(x, y):
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        y[t] = xsum(x[t])

    x = _values(threads, np.int32)
    y = cuda.device_array(threads, dtype=np.int32)
    kernel[1, shape](cuda.to_device(x), y)
    groups = x.reshape(-1, lanes)
    expected = np.cumsum(groups, axis=1, dtype=np.int32) - groups
    np.testing.assert_array_equal(y.copy_to_host(), expected.ravel())
