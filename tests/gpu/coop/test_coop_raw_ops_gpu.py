"""RawOp operators in coop primitives run on the GPU against numpy: a block and a warp
maximum sharing one RawOp, a merge sort by a RawOp comparator, Style 2's reduce by a
RawOp. tests/cpu/coop/test_coop_raw_ops.py links the same kernels for sm_90."""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

import coop_forms  # noqa: E402
import coop_raw_ops  # noqa: E402


def test_block_and_warp_maxima_by_one_rawop():
    _, kernel = coop_raw_ops.reductions_kernel(128)
    x = np.random.default_rng(1).integers(-10**6, 10**6, 128).astype(np.int32)
    out = cuda.device_array(5, np.int32)
    kernel[1, 128](cuda.to_device(x), out)
    got = out.copy_to_host()
    assert got[0] == x.max()
    np.testing.assert_array_equal(got[1:], x.reshape(4, 32).max(axis=1))
    assert not coop_forms.local_memory_in_sass(kernel)


def test_merge_sort_by_a_rawop_comparator():
    _, kernel = coop_raw_ops.sort_kernel(64, 3)
    keys = np.random.default_rng(2).standard_normal(192).astype(np.float32)
    d = cuda.to_device(keys)
    kernel[1, 64](d)
    np.testing.assert_array_equal(d.copy_to_host(), np.sort(keys))


def test_style2_reduce_by_a_rawop():
    kernel = coop_raw_ops.style2_kernel()
    x = np.random.default_rng(3).integers(-1000, 1000, 128).astype(np.int32)
    out = cuda.device_array(1, np.int32)
    kernel[1, 128](cuda.to_device(x), out)
    assert out.copy_to_host()[0] == x.max()
