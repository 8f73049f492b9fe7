"""The warp shuffles run on the GPU against numpy: index, up, down and xor over every int,
float and complex type and a struct, block shapes 32 to 1024 in one to three dimensions
with logical warps of 1 to 32 lanes, each form in one kernel (storage left out, first, by
keyword), and no LDL/STL in the kernel's SASS; Style 2's ``coop.shuffle_*`` likewise.

tests/cpu/coop/test_coop_shuffle.py links the same kernels for sm_90 with no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

import coop_forms  # noqa: E402
import coop_shuffle  # noqa: E402

CASES = [pytest.param(*case, id=coop_shuffle.case_id(*case)) for case in coop_shuffle.all_cases()]


@pytest.mark.parametrize("mode,type_name,shape", CASES)
def test_every_form_matches_numpy_and_keeps_values_in_registers(mode, type_name, shape):
    case = coop_shuffle.build(mode, type_name, shape)
    x = coop_shuffle.inputs(type_name, case.threads)
    want = coop_shuffle.expected(mode, x, case.lanes)
    d_y = cuda.device_array(len(coop_shuffle.FORMS) * case.threads, x.dtype)
    case.kernel[1, shape](cuda.to_device(x), d_y)
    y = d_y.copy_to_host()
    for f, form in enumerate(coop_shuffle.FORMS):
        got, expected = y[f * case.threads:(f + 1) * case.threads], want[f * case.threads:(f + 1) * case.threads]
        for name in y.dtype.names or (None,):
            np.testing.assert_array_equal(got if name is None else got[name],
                                          expected if name is None else expected[name], err_msg=form)
    assert not coop_forms.local_memory_in_sass(case.kernel)


def test_style2_shuffles_match_numpy():
    from cuprims import coop

    threads = 96     # three warps

    @cuda.jit
    def kernel(x, out):
        warp = coop.this_warp()
        t = cuda.threadIdx.x
        v = x[t]
        out[t] = coop.shuffle_index(warp, v, 5)
        out[threads + t] = coop.shuffle_up(warp, v, 2)
        out[2 * threads + t] = coop.shuffle_down(warp, v, 3)
        out[3 * threads + t] = coop.shuffle_xor(warp, v, t % 4)

    x = np.arange(threads, dtype=np.float64) * 1.5
    out = cuda.device_array(4 * threads, np.float64)
    kernel[1, threads](cuda.to_device(x), out)
    got = out.copy_to_host().reshape(4, threads)
    t = np.arange(threads)
    lane, base = t % 32, t - t % 32
    np.testing.assert_array_equal(got[0], x[base + 5])
    np.testing.assert_array_equal(got[1], np.where(lane >= 2, x[np.maximum(t - 2, 0)], x))
    np.testing.assert_array_equal(got[2], np.where(lane + 3 < 32, x[np.minimum(t + 3, threads - 1)], x))
    np.testing.assert_array_equal(got[3], x[base + (lane ^ (t % 4))])
