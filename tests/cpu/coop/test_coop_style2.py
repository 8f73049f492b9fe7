"""coop Style 2 (single-phase calls in plain @cuda.jit kernels), compiled for sm_90 with no
GPU (the block shape from ``coop.target(block=...)``) and linked into a cubin with the
link inputs numba's compilation collected itself: no ``link=``, no ``.files``."""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402

from cuprims import coop  # noqa: E402
from cuprims._base import stats  # noqa: E402
from cuprims.coop import _build  # noqa: E402
from cuprims.coop._style2 import kernel_unit as _kernel_unit  # noqa: E402

from coop_helpers import kernel_sections, link_kernel, shared_bytes, style2_ptx  # noqa: E402
from twins import PAIR, argmax, bigger, style2_sum_scan_kernel  # noqa: E402


pytestmark = pytest.mark.usefixtures("sm90")     # coop primitives built for sm_90 (tests/cpu/conftest.py)


def _link(kernel, argtypes, block):
    with coop.target(block=block):
        cubin = link_kernel(kernel, argtypes, [])
    assert cubin[:4] == b"\x7fELF"
    assert len([n for n in kernel_sections(cubin) if n.startswith(".text.")]) == 1
    return cubin


def _unit_specs():
    return set(_kernel_unit._units)


@pytest.mark.ci_sample(every=2)
@pytest.mark.parametrize("shape", [(128,), (32, 4), (64, 2, 2)])
@pytest.mark.parametrize("items", [1, 4, 16])
def test_load_reduce_scan_store_pipeline(shape, items):
    kernel = style2_sum_scan_kernel(items)           # test_coop_style2_gpu's, int32 here
    cubin = _link(kernel, (types.int32[::1], types.int32[::1], types.int32[::1], types.int64), shape)
    dims = tuple(shape) + (1,) * (3 - len(shape))
    assert {sp.kind for sp in _unit_specs() if sp.dims == dims and sp.items == items} >= {"load", "reduce", "scan",
                                                                                       "store"}
    assert shared_bytes(cubin) > 0   # the providers' own TempStorage


@pytest.mark.ci_sample(every=4)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                                   "float16", "float32", "float64", "complex64", "complex128", "bool"])
def test_sum_and_scan_every_type(dtype):
    nb = getattr(types, "boolean" if dtype == "bool" else dtype)

    @cuda.jit
    def kernel(x, y):
        block = coop.this_block()
        data = coop.ThreadData(3)
        coop.load(block, x, data)
        s = coop.sum(block, data)
        coop.exclusive_sum(block, data)
        coop.store(block, y, data)
        if cuda.threadIdx.x == 0:
            y[0] = s

    _link(kernel, (nb[::1], nb[::1]), (32, 4))


def test_block_operators_exchange_and_sorts():
    @cuda.jit
    def kernel(x, y, out):
        block = coop.this_block()
        items = coop.ThreadData(4)
        coop.load(block, x, items, algorithm="warp_transpose")
        m = coop.reduce(block, items, binary_op="max", algorithm="raking")
        coop.exclusive_scan(block, items, scan_op="max", initial_value=-1)
        other = coop.ThreadData(4)                     # int32, from items (the scan's input)
        coop.inclusive_scan(block, items, other, scan_op=lambda a, b: a + b, algorithm="warp_scans")
        coop.exchange(block, other, block_exchange_type=coop.block.BlockExchangeType.BlockedToStriped)
        coop.exchange(block, other, items, block_exchange_type="StripedToBlocked", warp_time_slicing=True)
        coop.radix_sort_keys(block, items, descending=True)
        coop.radix_sort_keys(block, items, begin_bit=0, end_bit=8)
        v = coop.exclusive_sum(block, x[cuda.threadIdx.x])          # a scalar: returned
        s = coop.sum(block, v, valid_items=7)
        coop.store(block, y, items, algorithm="striped")
        if cuda.threadIdx.x == 0:
            out[0] = m + s

    _link(kernel, (types.int32[::1], types.int32[::1], types.int32[::1]), (32, 4))
    kinds = {(sp.kind, sp.mode, sp.algorithm) for sp in _unit_specs() if sp.dims == (32, 4, 1)}
    assert {("radix_sort", "descending", ""), ("exchange", "StripedToBlocked", "timesliced"),
            ("scan", "inclusive", "warp_scans"), ("reduce", "", "raking")} <= kinds


def test_struct_with_python_operator():
    rec = numba.from_dtype(PAIR)

    @cuda.jit
    def kernel(x, y, out, n):
        block = coop.this_block()
        items = coop.ThreadData(2)                     # the record type, from x
        coop.load(block, x, items, valid_items=n)      # the rest: all bytes zero
        best = coop.reduce(block, items, binary_op=argmax)
        coop.inclusive_scan(block, items, scan_op=argmax)
        coop.store(block, y, items)
        if cuda.threadIdx.x == 0:
            out[0] = best

    _link(kernel, (rec[::1], rec[::1], rec[::1], types.int32), (32, 4))
    structs = [sp for sp in _unit_specs() if sp.vt.is_struct and sp.op is not None]
    assert {sp.kind for sp in structs} >= {"reduce", "scan"}
    assert all(sp.op.kind == "python" for sp in structs)


def test_warp_group():
    @cuda.jit
    def kernel(x, out):
        warp = coop.this_warp()
        v = x[cuda.threadIdx.x]
        s = coop.sum(warp, v)
        low = coop.reduce(warp, v, binary_op="min", valid_items=16)
        before = coop.exclusive_sum(warp, v)
        peak = coop.inclusive_scan(warp, v, scan_op="max")
        out[cuda.threadIdx.x] = s + low + before + peak

    _link(kernel, (types.float64[::1], types.float64[::1]), (64, 2))
    assert {sp.kind for sp in _unit_specs() if sp.dims == (32, 1, 1)} >= {"warp_reduce", "warp_scan"}


def test_merge_sorts_block_and_warp():
    def by_v(a, b):
        return a.v < b.v

    rec = numba.from_dtype(PAIR)

    @cuda.jit
    def kernel(x, y, n):
        block, warp = coop.this_block(), coop.this_warp()
        keys = coop.ThreadData(4)
        coop.load(block, x, keys)
        coop.merge_sort_keys(block, keys, compare_op=lambda a, b: a > b)
        coop.merge_sort_keys(warp, keys, compare_op="<", valid_items=n, oob_default=2**30)
        coop.store(block, x, keys)
        pairs = coop.ThreadData(2)                     # the record type, from y
        coop.load(block, y, pairs)
        coop.merge_sort_keys(block, pairs, compare_op=by_v)
        coop.store(block, y, pairs)

    _link(kernel, (types.int32[::1], rec[::1], types.int32), (32, 4))
    sorts = {(sp.kind, sp.dims, sp.op.kind) for sp in _unit_specs() if sp.kind.endswith("merge_sort")}
    assert {("merge_sort", (32, 4, 1), "python"), ("warp_merge_sort", (32, 1, 1), "builtin")} <= sorts


def test_group_passed_to_a_device_function():
    @cuda.jit(device=True)
    def block_total(block, items):
        return coop.sum(block, items)

    @cuda.jit
    def kernel(x, out):
        block = coop.this_block()
        items = coop.ThreadData(2, dtype=numba.float32)
        coop.load(block, x, items)
        t = block_total(block, items)
        if cuda.threadIdx.x == 0:
            out[0] = t

    _link(kernel, (types.float32[::1], types.float32[::1]), 256)


def test_one_python_operator_in_the_kernels_unit_and_a_device_functions():
    @cuda.jit(device=True)
    def block_max(block, v):                 # its own unit, holding the kernel's provider too
        return coop.reduce(block, v, binary_op=bigger)

    @cuda.jit
    def kernel(x, out):
        block = coop.this_block()
        a = coop.reduce(block, x[cuda.threadIdx.x], binary_op=bigger)
        b = block_max(block, x[cuda.threadIdx.x])
        c = coop.sum(block, x[cuda.threadIdx.x])
        if cuda.threadIdx.x == 0:
            out[0] = a + b + c

    # the operator's LTO-IR defines its symbol strongly: linked twice it would be "multiply defined"
    _link(kernel, (types.int32[::1], types.int32[::1]), 128)


def test_three_calls_build_one_unit_and_a_second_compile_builds_none(fresh_caches):
    @cuda.jit
    def kernel(x, y, out):
        block = coop.this_block()
        items = coop.ThreadData(4)
        coop.load(block, x, items)
        total = coop.sum(block, items)
        coop.store(block, y, items)
        if cuda.threadIdx.x == 0:
            out[0] = total

    args = (types.float32[::1], types.float32[::1], types.float32[::1])
    _link(kernel, args, 128)
    counts = stats.snapshot()
    assert counts["nvrtc_compiles"] == 1       # load, reduce and store in one NVRTC unit
    assert counts["links"] == 2                # that unit's probe link, then the kernel's
    _link(kernel, args, 128)
    assert stats.snapshot()["nvrtc_compiles"] == 1                  # memory hit
    _build.clear_memory()
    _link(kernel, args, 128)
    assert stats.snapshot()["nvrtc_compiles"] == 1                  # disk hit, as a new process


def test_providers_inline_and_counts_are_checked():
    @cuda.jit
    def kernel(x, y, n):
        block = coop.this_block()
        items = coop.ThreadData(4)
        coop.load(block, x, items, valid_items=n)
        coop.store(block, y, items)

    with coop.target(block=128):
        ptx = style2_ptx(kernel, (types.float32[::1], types.float32[::1], types.int32))
    body = ptx[ptx.index(".entry"):]
    assert "call" not in body.replace("call.uni", "")   # provider and helpers inlined (trap aside)
    assert "trap;" in body                              # out-of-range counts and a short array trap


def test_arrays_not_known_contiguous_are_checked():
    @cuda.jit
    def kernel(x, y):
        block = coop.this_block()
        items = coop.ThreadData(2)
        coop.load(block, x, items)                     # layout 'A': its stride is checked
        coop.store(block, y, items)

    with coop.target(block=64):
        strided = style2_ptx(kernel, (types.float64[:], types.float64[::1]))
        contiguous = style2_ptx(kernel, (types.float64[::1], types.float64[::1]))
    assert "trap;" in strided and "trap;" in contiguous              # a full tile past the array's end
    assert strided.count("setp.") > contiguous.count("setp.")         # and the stride, where not known


def test_dump_dir_gets_the_kernels_unit(fresh_caches, tmp_path, monkeypatch):
    dump = tmp_path / "dump"
    monkeypatch.setenv("CUPRIMS_DUMP_DIR", str(dump))

    @cuda.jit
    def kernel(x, out):
        out[0] = coop.sum(coop.this_block(), x[cuda.threadIdx.x])

    _link(kernel, (types.int16[::1], types.int16[::1]), 64)
    texts = [p.read_text() for p in dump.glob("*.cu")]
    assert any("cub::BlockReduce<short, 64" in t for t in texts)
