"""Style 1 primitives called as the established two-phase interface calls them, run on the
GPU against numpy: every factory of ``coop_forms`` over every int, float and complex type,
a struct, block shapes 32 to 1024 in one to three dimensions and 1 or 3 items per thread,
each call form in one kernel (storage first and positional in a byte-aligned
``cuda.shared.array(shape=prim.temp_storage_bytes, dtype="uint8")``, or left out; in
place; trailing extras), and no LDL/STL in the kernel's SASS.

tests/cpu/coop/test_coop_call_forms.py links the same kernels for sm_90 with no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

import coop_forms  # noqa: E402

CASES = [pytest.param(*case, id=coop_forms.case_id(*case)) for case in coop_forms.all_cases()]


def _check(case, y: np.ndarray, want: np.ndarray) -> None:
    per_form = len(want) // len(case.forms)
    for f, form in enumerate(case.forms):
        got, expected = y[f * per_form:(f + 1) * per_form], want[f * per_form:(f + 1) * per_form]
        if y.dtype.names:
            for name in y.dtype.names:
                np.testing.assert_array_equal(got[name], expected[name], err_msg=form)
        else:
            np.testing.assert_array_equal(got, expected, err_msg=form)


@pytest.mark.parametrize("factory,type_name,shape,items", CASES)
def test_call_forms_match_numpy_and_keep_items_in_registers(factory, type_name, shape, items):
    try:
        case = coop_forms.build(factory, type_name, shape, items)
    except coop_forms.BeyondSharedMemory as exc:
        pytest.skip(f"no kernel can call it: {exc}")
    x = case.x()
    d_y = cuda.device_array(case.out_size, x.dtype)
    case.kernel[1, shape](cuda.to_device(x), d_y)
    _check(case, d_y.copy_to_host(), case.expected(x))
    if not coop_forms.may_spill(factory, type_name, shape, items):     # (docs/coop.rst)
        assert not coop_forms.local_memory_in_sass(case.kernel), case.forms


@pytest.mark.parametrize("dtype", [np.int32, np.complex64])
def test_a_sum_seeded_by_an_initial_value(dtype):
    from cuprims import coop

    nb = numba.from_dtype(np.dtype(dtype))
    scan = coop.block.make_exclusive_scan(nb, 128, "+", 2, initial_value=5)

    @cuda.jit(link=scan.files)
    def kernel(x):
        items = cuda.local.array(2, nb)
        for i in range(2):
            items[i] = x[2 * cuda.threadIdx.x + i]
        scan(items, items)
        for i in range(2):
            x[2 * cuda.threadIdx.x + i] = items[i]

    x = np.arange(256).astype(dtype)
    d_x = cuda.to_device(x)
    kernel[1, 128](d_x)
    want = np.concatenate([[5], 5 + np.cumsum(x)[:-1]]).astype(dtype)
    np.testing.assert_array_equal(d_x.copy_to_host(), want)
