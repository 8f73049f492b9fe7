"""Style 1 factories over a value type made with numba's extension API (``methods=``),
run on the GPU against numpy: reduce and inclusive scan by an operator writing through a
result pointer, exchange, and block and warp merge sorts, each called with the caller's
storage first and without it, over block shapes of 32 to 1024 threads and 1 or 3 items
per thread; no LDL/STL in the kernels' SASS.

tests/cpu/coop/test_coop_user_types.py links the same kernels for sm_90 with no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

import coop_forms  # noqa: E402
import coop_user_type as user  # noqa: E402

CASES = [pytest.param(*c, id=f"{c[0]}-{'x'.join(map(str, c[1]))}-{c[2]}") for c in user.user_cases()]


@pytest.mark.parametrize("factory,shape,items", CASES)
def test_user_type_primitives_match_numpy_in_registers(factory, shape, items):
    try:
        case = user.build_user_case(factory, shape, items)
    except coop_forms.BeyondSharedMemory as exc:
        pytest.skip(f"no kernel can call it: {exc}")
    x = case.x()
    d_y = cuda.to_device(np.zeros(case.out_size, user.PAIR_X))
    case.kernel[1, shape](cuda.to_device(x), d_y)
    y, want = d_y.copy_to_host(), case.expected(x)
    half = len(want) // len(case.forms)
    for f, form in enumerate(case.forms):
        for field in ("lo", "hi"):
            np.testing.assert_array_equal(y[field][f * half:(f + 1) * half], want[field][f * half:(f + 1) * half],
                                          err_msg=f"{form}: {field}")
    assert not coop_forms.local_memory_in_sass(case.kernel)
