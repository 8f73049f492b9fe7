"""Warp reductions and scans over logical warps whose size is not a power of two, run on
the GPU against numpy: every case of ``coop_logical_warps`` (sum, max by a Python
operator, exclusive sum; Style 2's sum and exclusive sum over ``coop.this_warp(lanes)``),
logical warps of 3 to 31 lanes laid out as CUB lays them, block shapes of 32 to 128
threads in one to three dimensions, and no LDL/STL in the kernel's SASS.

tests/cpu/coop/test_coop_logical_warps.py links the same kernels for sm_90 with no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

import coop_forms  # noqa: E402
import coop_logical_warps as lw  # noqa: E402

CASES = [pytest.param(*case, id=lw.case_id(*case)) for case in lw.all_cases()]


@pytest.mark.parametrize("call,lanes,shape", CASES)
def test_each_call_matches_numpy_over_cubs_layout(call, lanes, shape):
    case = lw.build(call, lanes, shape)
    x = lw.inputs(call, case.threads)
    want, defined = lw.expected(case, x)
    d_y = cuda.to_device(np.zeros(lw.out_size(case), x.dtype))
    case.kernel[1, shape](cuda.to_device(x), d_y)
    got = d_y.copy_to_host()
    np.testing.assert_array_equal(got[defined], want[defined])
    assert not coop_forms.local_memory_in_sass(case.kernel)
