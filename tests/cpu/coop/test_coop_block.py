"""coop.block factories: real numba-cuda kernels calling each primitive, compiled for
sm_90 with no GPU and linked (nvJitLink, LTO) with the primitive's files into a cubin."""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402

from cuprims import coop  # noqa: E402
from cuprims.errors import ArgumentError, LinkError  # noqa: E402

from coop_helpers import kernel_sections, link_kernel, linked_ptx, shared_bytes  # noqa: E402
from twins import PAIR, bigger, block_scan_kernel, struct_argmax_kernel  # noqa: E402


pytestmark = pytest.mark.usefixtures("sm90")     # coop primitives built for sm_90 (tests/cpu/conftest.py)


def _kernel_text_sections(cubin: bytes) -> list[str]:
    return [n for n in kernel_sections(cubin) if n.startswith(".text.")]


def test_block_sum_links_and_needs_its_files():
    block_sum = coop.block.make_sum(numba.int32, 128)

    @cuda.jit(link=block_sum.files)
    def kernel(x, out):
        s = block_sum(x[cuda.threadIdx.x])
        if cuda.threadIdx.x == 0:
            out[0] = s

    args = (types.int32[::1], types.int32[::1])
    cubin = link_kernel(kernel, args, [block_sum])
    assert cubin[:4] == b"\x7fELF"
    assert len(_kernel_text_sections(cubin)) == 1
    # the provider's own TempStorage became the kernel's static shared memory
    assert block_sum.temp_storage_bytes > 1
    assert shared_bytes(cubin) >= block_sum.temp_storage_bytes
    # the kernel really calls the provider: without its LTO-IR the symbol is unresolved
    with pytest.raises(LinkError, match=block_sum.spec.symbol):
        link_kernel(kernel, args, [block_sum], with_files=False)


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                                   "float32", "float64"])
def test_block_reduce_every_int_and_float(dtype):
    nb = getattr(numba, dtype)
    block_max = coop.block.make_reduce(nb, (32, 4), "max", items_per_thread=4)

    @cuda.jit(link=block_max.files)
    def kernel(x, out):
        items = cuda.local.array(4, nb)
        t = cuda.threadIdx.x + 32 * cuda.threadIdx.y
        for i in range(4):
            items[i] = x[4 * t + i]
        m = block_max(items)
        if t == 0:
            out[0] = m

    cubin = link_kernel(kernel, (nb[::1], nb[::1]), [block_max])
    assert len(_kernel_text_sections(cubin)) == 1


def test_block_reduce_python_operator_partial_tile_and_user_storage():
    def absmax(a, b):
        return a if abs(a) >= abs(b) else b

    red = coop.block.make_reduce(numba.float32, (64, 2, 2), absmax)
    assert len(red.files) >= 2   # provider + the operator numba compiled under <provider>_op
    nbytes, align = red.temp_storage_bytes, red.temp_storage_alignment   # globals: no attributes in a kernel

    @cuda.jit(link=red.files)
    def kernel(x, n, out):
        t = cuda.threadIdx.x + 64 * (cuda.threadIdx.y + 2 * cuda.threadIdx.z)
        temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
        v = x[t] if t < n else numba.float32(0)
        a = red(v, n)                       # partial tile: the first n threads
        b = red(v, temp_storage=temp)       # the caller's storage
        if t == 0:
            out[0] = a
            out[1] = b

    cubin = link_kernel(kernel, (types.float32[::1], types.int32, types.float32[::1]), [red])
    assert shared_bytes(cubin) >= 2 * red.temp_storage_bytes   # ours and the caller's


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("items", [1, 3, 16])
def test_load_scan_store_pipeline(items):
    dims = (32, 4)
    load = coop.block.make_load(numba.int32, dims, items, algorithm="warp_transpose")
    scan = coop.block.make_inclusive_sum(numba.int32, dims, items)
    store = coop.block.make_store(numba.int32, dims, items, algorithm="striped")
    kernel, _ = block_scan_kernel(dims, items, "int32", load, scan, store)   # test_coop_block_gpu's scans
    cubin = link_kernel(kernel, (types.int32[::1], types.int32[::1], types.int64), [load, scan, store])
    assert len(_kernel_text_sections(cubin)) == 1


@pytest.mark.parametrize("mode,op,init", [("exclusive", "+", None), ("exclusive", "max", -5),
                                          ("inclusive", "min", None), ("inclusive", "*", 3)])
def test_scans_with_operators_and_initial_values(mode, op, init):
    make = coop.block.make_exclusive_scan if mode == "exclusive" else coop.block.make_inclusive_scan
    scan = make(numba.int64, 128, op, 2, initial_value=init)

    @cuda.jit(link=scan.files)
    def kernel(x, y):
        items = cuda.local.array(2, numba.int64)
        items[0] = x[2 * cuda.threadIdx.x]
        items[1] = x[2 * cuda.threadIdx.x + 1]
        scan(items, items)
        y[2 * cuda.threadIdx.x] = items[0]
        y[2 * cuda.threadIdx.x + 1] = items[1]

    link_kernel(kernel, (types.int64[::1], types.int64[::1]), [scan])


def test_arguments_are_checked_before_any_compile():
    from cuprims._base import stats

    with pytest.raises(ArgumentError, match="threads_per_block"):
        coop.block.make_sum(numba.int32, (1024, 2))
    with pytest.raises(ArgumentError, match="items_per_thread"):
        coop.block.make_load(numba.int32, 128, 0)
    with pytest.raises(ArgumentError, match="algorithm"):
        coop.block.make_sum(numba.int32, 128, algorithm="bogus")
    with pytest.raises(ArgumentError, match="initial_value"):
        coop.block.make_exclusive_scan(numba.int8, 128, "max", 1, initial_value=1000)
    with pytest.raises(ArgumentError, match="binary_op"):
        coop.block.make_reduce(numba.float32, 128, "^")   # no bit-xor on floats
    assert stats.snapshot().get("nvrtc_compiles", 0) == 0


def test_providers_and_python_operator_inline_into_the_kernel():
    red = coop.block.make_reduce(numba.float32, 128, bigger)
    load = coop.block.make_load(numba.float32, 128, 4, algorithm="vectorize")

    @cuda.jit(link=red.files + load.files)
    def kernel(x, out):
        buf = cuda.local.array(4, numba.float32)
        load(x[cuda.blockIdx.x * 512:], buf)
        s = red(buf[0] + buf[1] + buf[2] + buf[3])
        if cuda.threadIdx.x == 0:
            out[cuda.blockIdx.x] = s

    ptx = linked_ptx(kernel, (types.float32[::1], types.float32[::1]), [red, load])
    lines = ptx.splitlines()
    assert not [line for line in lines if "call" in line.split("//")[0]]   # weak symbols still inline
    assert any("shfl.sync" in line for line in lines)                     # CUB's warp reductions
    assert any("ld.global" in line and ".v4" in line for line in lines)   # the vectorized load


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("name", ["float16", "complex64", "complex128", "boolean"])
def test_other_scalars_compile_and_link(name):
    # float16 and complex sums, bool by '|': compile and link; GPU results not yet checked
    nb = getattr(types, name)
    prim = coop.block.make_reduce(nb, 128, "|") if name == "boolean" else coop.block.make_sum(nb, 128)

    @cuda.jit(link=prim.files)
    def kernel(x, out):
        s = prim(x[cuda.threadIdx.x])
        if cuda.threadIdx.x == 0:
            out[0] = s

    assert link_kernel(kernel, (nb[::1], nb[::1]), [prim])[:4] == b"\x7fELF"


def test_equal_primitives_share_link_inputs():
    r1 = coop.block.make_reduce(numba.float32, 128, bigger)
    r2 = coop.block.make_reduce(numba.float32, 128, bigger)
    assert [id(f) for f in r1.files] == [id(f) for f in r2.files]   # numba's set links them once

    @cuda.jit(link=r1.files + r2.files)
    def kernel(x, out):
        a = r1(x[cuda.threadIdx.x])
        b = r2(x[cuda.threadIdx.x])
        if cuda.threadIdx.x == 0:
            out[0] = a + b

    # the operator's LTO-IR defines a strong symbol: linked twice it would be "multiply defined"
    link_kernel(kernel, (types.float32[::1], types.float32[::1]), [r1, r2])


def test_struct_reduce_and_scan_with_python_operators():
    from numba.cuda.np.numpy_support import from_dtype

    red, scan, kernel = struct_argmax_kernel()      # the kernel test_coop_block_gpu runs
    rec = from_dtype(PAIR)
    assert red.temp_storage_bytes >= 8
    link_kernel(kernel, (rec[::1], rec[::1], rec[::1]), [red, scan])


class _DeviceArrayLike:
    """A CUDA Array Interface and nothing else (what a captured device array looks like)."""

    __cuda_array_interface__ = {"data": (0x7000_0000, False), "shape": (4,), "typestr": "<i4", "version": 3,
                                "strides": None}


def test_operators_that_capture_device_arrays_are_refused():
    # coop operators are compiled into the provider: there is no runtime state to bind a
    # captured array to, so the factory refuses them (naming the argument)
    table = _DeviceArrayLike()

    def add_from_table(a, b):
        return a + b + table[0]

    def before_by_table(a, b):
        return table[a] < table[b]

    with pytest.raises(ArgumentError, match="binary_op.*captures no device arrays"):
        coop.block.make_reduce(numba.int32, 128, add_from_table)
    with pytest.raises(ArgumentError, match="scan_op.*captures no device arrays"):
        coop.block.make_inclusive_scan(numba.int32, 128, lambda a, b: a + b + table[1], 1)
    with pytest.raises(ArgumentError, match="compare_op.*captures no device arrays"):
        coop.block.make_merge_sort_keys(numba.int32, 128, 2, before_by_table)
    with pytest.raises(ArgumentError, match="binary_op.*captures no device arrays"):
        coop.warp.make_reduce(numba.int32, add_from_table)
