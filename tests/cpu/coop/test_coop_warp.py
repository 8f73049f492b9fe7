"""coop.warp factories: kernels calling warp reductions (logical warps of 32 and fewer
lanes, Python operators) compiled for sm_90 with no GPU and linked into a cubin."""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402

from cuprims import coop  # noqa: E402
from cuprims.errors import ArgumentError, LinkError  # noqa: E402

from coop_helpers import link_kernel, shared_bytes  # noqa: E402
from twins import bigger  # noqa: E402


pytestmark = pytest.mark.usefixtures("sm90")     # coop primitives built for sm_90 (tests/cpu/conftest.py)


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                                   "float32", "float64"])
def test_warp_sum_every_int_and_float(dtype):
    nb = getattr(numba, dtype)
    warp_sum = coop.warp.make_sum(nb)

    @cuda.jit(link=warp_sum.files)
    def kernel(x, out):
        s = warp_sum(x[cuda.threadIdx.x])
        if cuda.threadIdx.x % 32 == 0:
            out[cuda.threadIdx.x // 32] = s

    args = (nb[::1], nb[::1])
    assert link_kernel(kernel, args, [warp_sum])[:4] == b"\x7fELF"
    with pytest.raises(LinkError, match=warp_sum.spec.symbol):
        link_kernel(kernel, args, [warp_sum], with_files=False)


@pytest.mark.parametrize("lanes", [1, 4, 16, 32])
def test_warp_reduce_logical_warps_and_python_operator(lanes):
    warp_max = coop.warp.make_reduce(numba.float64, bigger, threads_in_warp=lanes)

    @cuda.jit(link=warp_max.files)
    def kernel(x, n, out):
        t = cuda.threadIdx.x
        a = warp_max(x[t])
        b = warp_max(x[t], n)      # the logical warp's first n lanes
        if t % lanes == 0:
            out[2 * (t // lanes)] = a
            out[2 * (t // lanes) + 1] = b

    cubin = link_kernel(kernel, (types.float64[::1], types.int32, types.float64[::1]), [warp_max])
    # shuffle-based (powers of two): no shared memory at all
    assert warp_max.temp_storage_bytes == 1
    assert shared_bytes(cubin) <= 1024 // lanes


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("lanes", [32, 8])
@pytest.mark.parametrize("dtype", ["int32", "float64", "uint8"])
def test_warp_exclusive_sum(lanes, dtype):
    nb = getattr(numba, dtype)
    xsum = coop.warp.make_exclusive_sum(nb, threads_in_warp=lanes)

    @cuda.jit(link=xsum.files)
    def kernel(x, y):
        t = cuda.threadIdx.x
        y[t] = xsum(x[t])

    args = (nb[::1], nb[::1])
    link_kernel(kernel, args, [xsum])
    with pytest.raises(LinkError, match=xsum.spec.symbol):
        link_kernel(kernel, args, [xsum], with_files=False)


def test_warp_size_is_checked():
    with pytest.raises(ArgumentError, match="threads_in_warp"):
        coop.warp.make_sum(numba.int32, threads_in_warp=33)
    with pytest.raises(ArgumentError, match="threads_in_warp"):
        coop.warp.make_reduce(numba.int32, "+", threads_in_warp=0)
    with pytest.raises(ArgumentError, match="threads_in_warp"):
        coop.warp.make_merge_sort_keys(numba.int32, 2, "<", threads_in_warp=12)   # CUB: powers of two
