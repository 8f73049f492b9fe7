"""numba-cuda's float16 shim in an operator's link inputs is mergeable (inline): an
operator doing float16 arithmetic links beside a kernel that does its own, before or
after it (each carries a compiled copy of numba's shim; two strong copies are "multiply
defined"), as a cooperative primitive's operator must beside the user's kernel. nvJitLink
13.0 refuses a weak copy beside a strong one, so the copy is inline, not weak."""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402

from cuprims._compile.link import link_cubin  # noqa: E402
from cuprims._operators.numba_device import target_capability  # noqa: E402
from cuprims._operators.numba_ops import compile_python_op  # noqa: E402
from cuprims._operators.numba_shims import mergeable_text  # noqa: E402
from cuprims._value_types import value_type  # noqa: E402
from cuprims.errors import LinkError  # noqa: E402


def _kernel_codes() -> list[bytes]:
    """A kernel adding float16 values: its LTO-IR, then numba's shim compiled beside it."""
    @cuda.jit
    def kernel(x):
        x[0] = x[0] + x[1]

    with target_capability((9, 0)):
        codes, _ = cuda.compile_all(kernel.py_func, types.void(types.float16[::1]), device=False, cc=(9, 0),
                                    output="ltoir", abi="numba")
    return [bytes(c) if isinstance(c, bytes) else bytes(getattr(c, "code", None) or c.data) for c in codes]


def test_an_operators_float16_shim_links_beside_a_kernels_own_in_either_order():
    vt = value_type("float16")
    op_codes = compile_python_op(lambda a, b: a + b, (vt, vt), vt, "cuprims_test_shim_add", (9, 0))
    kernel = _kernel_codes()
    assert len(op_codes) == 2 and len(kernel) == 2        # each carries a shim
    for others in (kernel[1:] + op_codes, op_codes + kernel[1:]):
        cubin = link_cubin(kernel[0], others, 90)
        assert cubin[:4] == b"\x7fELF"


def test_the_shims_definitions_become_inline_and_kept():
    text = 'extern "C" __device__ int\n    f(int &r) { r = 1; return 0; }\n'
    assert mergeable_text(text) == 'extern "C" __device__ inline __attribute__((used)) int\n    f(int &r) { r = 1; return 0; }\n'


def test_two_strong_copies_of_the_shim_do_not_link():
    # what the operator's mergeable copy avoids: the kernel's shim twice
    kernel = _kernel_codes()
    with pytest.raises(LinkError, match="multiply defined"):
        link_cubin(kernel[0], kernel[1:] + kernel[1:], 90)
