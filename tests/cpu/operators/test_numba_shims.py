"""numba-cuda's float16 shim in an operator's link inputs is weak: an operator doing
float16 arithmetic links beside a kernel that does its own (each carries a compiled copy
of numba's shim; two strong copies are "multiply defined"), as a cooperative primitive's
operator must beside the user's kernel."""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402

from cuprims._compile.link import link_cubin  # noqa: E402
from cuprims._operators.numba_device import target_capability  # noqa: E402
from cuprims._operators.numba_ops import compile_python_op  # noqa: E402
from cuprims.errors import LinkError  # noqa: E402
from cuprims.types import value_type  # noqa: E402


def _kernel_codes() -> list[bytes]:
    """A kernel adding float16 values: its LTO-IR, then numba's shim compiled beside it."""
    @cuda.jit
    def kernel(x):
        x[0] = x[0] + x[1]

    with target_capability((9, 0)):
        codes, _ = cuda.compile_all(kernel.py_func, types.void(types.float16[::1]), device=False, cc=(9, 0),
                                    output="ltoir", abi="numba")
    return [bytes(c) if isinstance(c, bytes) else bytes(getattr(c, "code", None) or c.data) for c in codes]


def test_an_operators_float16_shim_links_beside_a_kernels_own():
    vt = value_type("float16")
    op_codes = compile_python_op(lambda a, b: a + b, (vt, vt), vt, "cuprims_test_shim_add", (9, 0))
    kernel = _kernel_codes()
    assert len(op_codes) == 2 and len(kernel) == 2        # each carries a shim
    cubin = link_cubin(kernel[0], kernel[1:] + op_codes, 90)
    assert cubin[:4] == b"\x7fELF"


def test_two_strong_copies_of_the_shim_do_not_link():
    # what the operator's weak copy avoids: the kernel's shim twice
    kernel = _kernel_codes()
    with pytest.raises(LinkError, match="multiply defined"):
        link_cubin(kernel[0], kernel[1:] + kernel[1:], 90)
