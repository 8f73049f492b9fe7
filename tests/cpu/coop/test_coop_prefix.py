"""Block scans with a block prefix callback (CUB's ``BlockPrefixCallbackOp``): Style 1's
``prefix_op=`` / ``block_prefix_callback_op=`` and Style 2's ``prefix_op=`` with
``prefix_state=``, compiled for sm_90 with no GPU and linked into a cubin; the errors of
bad arguments; the provider's C++ and cache."""

from __future__ import annotations

import re

import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402
from numba.core.errors import TypingError as CoreTypingError  # noqa: E402
from numba.cuda.core.errors import TypingError as CudaTypingError  # noqa: E402

import cuprims  # noqa: E402
from cuprims import OpKind, coop  # noqa: E402
from cuprims._base import stats  # noqa: E402
from cuprims.coop._codegen import provider_text  # noqa: E402
from cuprims.coop._spec import ProviderSpec, element_type  # noqa: E402
from cuprims.errors import ArgumentError, CoopError, OperatorCompileError  # noqa: E402
from cuprims.op import op_spec  # noqa: E402

from coop_helpers import link_kernel, linked_ptx, style2_ptx  # noqa: E402
from twins import PAIR, argmax, bigger, running_argmax, running_max, running_total  # noqa: E402

REC = numba.from_dtype(PAIR)
I32 = types.int32[::1]


pytestmark = pytest.mark.usefixtures("sm90")     # coop primitives built for sm_90 (tests/cpu/conftest.py)


def _no_calls(ptx):
    """No PTX call instruction (names of kernels here contain 'callback')."""
    return not [line for line in ptx.splitlines() if re.match(r"\s*(@!?%p\d+\s+)?call(\.uni)?\s", line)]


def _factory(which, dtype, shape, items, prefix, op=None):
    b = coop.block
    if which == "exclusive_sum":
        return b.make_exclusive_sum(dtype, shape, items, prefix_op=prefix)
    if which == "inclusive_sum":
        return b.make_inclusive_sum(dtype, shape, items, prefix_op=prefix)
    if which == "exclusive_scan":
        return b.make_exclusive_scan(dtype, shape, op or "max", items, prefix_op=prefix)
    if which == "inclusive_scan":
        return b.make_inclusive_scan(dtype, shape, op or bigger, items, prefix_op=prefix)
    return b.make_scan(dtype, shape, items, mode="inclusive", block_prefix_callback_op=prefix)


def _tile_kernel(scan, nb, items, tile, state_nb=None):
    """One block scanning x tile after tile, the running state in a thread-local array."""
    state_nb = state_nb or nb
    if items == 1:
        @cuda.jit(link=scan.files)
        def kernel(x, y, n, init):
            state = cuda.local.array(1, state_nb)
            state[0] = init[0]
            t = cuda.threadIdx.x + cuda.blockDim.x * cuda.threadIdx.y
            for base in range(0, n, tile):
                y[base + t] = scan(x[base + t], state)
    else:
        @cuda.jit(link=scan.files)
        def kernel(x, y, n, init):
            state = cuda.local.array(1, state_nb)
            state[0] = init[0]
            t = cuda.threadIdx.x + cuda.blockDim.x * cuda.threadIdx.y
            buf = cuda.local.array(items, nb)
            for base in range(0, n, tile):
                for i in range(items):
                    buf[i] = x[base + items * t + i]
                scan(buf, buf, state)
                for i in range(items):
                    y[base + items * t + i] = buf[i]
    return kernel


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("items", [1, 4])
@pytest.mark.parametrize("which", ["exclusive_sum", "inclusive_sum", "exclusive_scan", "inclusive_scan",
                                   "make_scan"])
def test_every_scan_factory_takes_a_prefix_callback(which, items):
    shape = (128,) if items == 1 else (32, 4)
    callback = running_max if which.endswith("_scan") else running_total
    scan = _factory(which, numba.int32, shape, items, callback)
    assert scan.spec.prefix is not None and scan.spec.prefix_state.code == "i4"
    kernel = _tile_kernel(scan, numba.int32, items, 128 * items)
    args = (I32, I32, types.int64, I32)
    assert link_kernel(kernel, args, [scan])[:4] == b"\x7fELF"
    if items == 4:
        assert _no_calls(linked_ptx(kernel, args, [scan]))   # the callback inlines like the provider


@pytest.mark.parametrize("dtype,callback,op", [
    (numba.float64, running_max, bigger),
    (PAIR, running_argmax, argmax),
])
def test_float_and_struct_scans_with_python_operators_and_callbacks(dtype, callback, op):
    scan = coop.block.make_inclusive_scan(dtype, (32, 4), op, 3, prefix_op=callback)
    nb = REC if dtype is PAIR else dtype
    kernel = _tile_kernel(scan, nb, 3, 384)
    args = (nb[::1], nb[::1], types.int64, nb[::1])
    assert link_kernel(kernel, args, [scan])[:4] == b"\x7fELF"
    # the combiner and the callback: two Python functions, each with its own LTO-IR
    assert len(scan.files) >= 3


def test_prefix_callback_with_a_state_of_another_type():
    def wide_total(state, aggregate):    # int64 running total, int32 prefixes
        old = state[0]
        state[0] = old + aggregate
        return old

    scan = coop.block.make_exclusive_sum(numba.int32, 128, 2,
                                         prefix_op=coop.block.PrefixCallback(wide_total, numba.int64))
    assert scan.spec.prefix_state.code == "i8"
    kernel = _tile_kernel(scan, numba.int32, 2, 256, state_nb=numba.int64)
    assert link_kernel(kernel, (I32, I32, types.int64, types.int64[::1]), [scan])[:4] == b"\x7fELF"


def test_the_callers_temp_storage_with_a_prefix_callback():
    scan = coop.block.make_inclusive_sum(numba.int32, 128, 4, prefix_op=running_total)
    nbytes, align = scan.temp_storage_bytes, scan.temp_storage_alignment

    @cuda.jit(link=scan.files)
    def kernel(x, y):
        temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
        state = cuda.local.array(1, numba.int32)
        state[0] = 0
        buf = cuda.local.array(4, numba.int32)
        for i in range(4):
            buf[i] = x[4 * cuda.threadIdx.x + i]
        scan(buf, buf, state, temp_storage=temp)
        for i in range(4):
            y[4 * cuda.threadIdx.x + i] = buf[i]

    assert link_kernel(kernel, (I32, I32), [scan])[:4] == b"\x7fELF"


# ---------------------------------------------------------------- Style 1 errors

@pytest.mark.parametrize("bad", [OpKind.PLUS, "+", 42, int])
def test_prefix_op_must_be_a_python_function(bad):
    with pytest.raises(ArgumentError, match="argument 'prefix_op'.*prefix\\(state, block_aggregate\\)"):
        coop.block.make_inclusive_sum(numba.int32, 128, 4, prefix_op=bad)
    with pytest.raises(ArgumentError, match="argument 'block_prefix_callback_op'"):
        coop.block.make_scan(numba.int32, 128, 4, block_prefix_callback_op=bad)


def test_prefix_op_and_initial_value_exclude_each_other():
    with pytest.raises(ArgumentError, match="argument 'initial_value'.*prefix callback"):
        coop.block.make_exclusive_scan(numba.int32, 128, "max", 4, initial_value=0, prefix_op=running_max)


def test_prefix_callback_state_dtype_is_checked():
    with pytest.raises(ArgumentError, match="prefix_op"):
        coop.block.make_inclusive_sum(numba.int32, 128, 4, prefix_op=coop.block.PrefixCallback(running_total,
                                                                                               "no-such-type"))


def test_a_callback_numba_cannot_compile_fails_at_the_factory():
    def broken(state, aggregate):
        return state.no_such_attribute

    with pytest.raises(OperatorCompileError, match="broken"):
        coop.block.make_inclusive_sum(numba.int32, 128, 4, prefix_op=broken)


def test_the_state_array_is_checked_when_the_kernel_compiles():
    scan = coop.block.make_inclusive_sum(numba.int32, 128, 4, prefix_op=running_total)

    @cuda.jit(link=scan.files)
    def of_float(x):
        state = cuda.local.array(1, numba.float32)
        buf = cuda.local.array(4, numba.int32)
        scan(buf, buf, state)
        x[cuda.threadIdx.x] = buf[0]

    @cuda.jit(link=scan.files)
    def strided(x):
        state = cuda.local.array(4, numba.int32)
        buf = cuda.local.array(4, numba.int32)
        scan(buf, buf, state[::2])
        x[cuda.threadIdx.x] = buf[0]

    @cuda.jit(link=scan.files)
    def no_state(x):
        buf = cuda.local.array(4, numba.int32)
        scan(buf, buf)
        x[cuda.threadIdx.x] = buf[0]

    for kernel, pattern in ((of_float, "prefix_state must be a 1-D C-contiguous array of int32"),
                            (strided, "prefix_state must be a 1-D C-contiguous array"),
                            (no_state, "missing a required argument: 'prefix_state'")):
        with pytest.raises((CoreTypingError, CudaTypingError), match=pattern):
            link_kernel(kernel, (I32,), [scan])


# ---------------------------------------------------------------- Style 2

def _link2(kernel, argtypes, block=128):
    with coop.target(block=block):
        cubin = link_kernel(kernel, argtypes, [])
    assert cubin[:4] == b"\x7fELF"
    return cubin


def test_style2_scans_with_a_prefix_callback():
    @cuda.jit
    def kernel(x, y, z, n):
        block = coop.this_block()
        items = coop.ThreadData(4)
        total = cuda.local.array(1, numba.int32)
        total[0] = 0
        best = cuda.local.array(1, numba.int32)
        best[0] = -2**31
        t = cuda.threadIdx.x + 32 * cuda.threadIdx.y
        for base in range(0, n, 512):
            valid = min(512, n - base)
            coop.load(block, x[base:], items, valid_items=valid, oob_default=0)
            coop.inclusive_sum(block, items, prefix_op=running_total, prefix_state=total)
            coop.store(block, y[base:], items, valid_items=valid)
            z[base // 4 + t] = coop.exclusive_scan(block, x[base + t], scan_op=bigger, prefix_op=running_max,
                                                   prefix_state=best)

    args = (I32, I32, I32, types.int64)
    _link2(kernel, args, (32, 4))
    with coop.target(block=(32, 4)):
        assert _no_calls(style2_ptx(kernel, args))


def test_style2_struct_state_and_into_another_thread_data():
    @cuda.jit
    def kernel(x, y, init):
        block = coop.this_block()
        items = coop.ThreadData(2)
        out = coop.ThreadData(2)
        best = cuda.local.array(1, REC)
        best[0] = init[0]
        coop.load(block, x, items)
        coop.inclusive_scan(block, items, out, scan_op=argmax, prefix_op=running_argmax, prefix_state=best)
        coop.store(block, y, out)

    _link2(kernel, (REC[::1], REC[::1], REC[::1]))


def test_style2_prefix_callbacks_with_the_callers_temp_storage():
    # prefix_op=/prefix_state= and temp_storage= together: the _ts twin of the callback's
    # entry point, sized by the Style 1 factory with the same arguments
    scan = coop.block.make_inclusive_sum(numba.int32, (32, 4), 4, prefix_op=running_total)
    one = coop.block.make_exclusive_scan(numba.int32, (32, 4), bigger, 1, prefix_op=running_max)
    nbytes = max(scan.temp_storage_bytes, one.temp_storage_bytes)
    align = max(scan.temp_storage_alignment, one.temp_storage_alignment)

    @cuda.jit
    def kernel(x, y, z, n):
        block = coop.this_block()
        temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
        items = coop.ThreadData(4)
        out = coop.ThreadData(4)
        total = cuda.local.array(1, numba.int32)
        total[0] = 0
        best = cuda.local.array(1, numba.int32)
        best[0] = -2**31
        t = cuda.threadIdx.x + 32 * cuda.threadIdx.y
        for base in range(0, n, 512):
            coop.load(block, x[base:], items, temp_storage=temp)
            cuda.syncthreads()
            coop.inclusive_sum(block, items, prefix_op=running_total, prefix_state=total, temp_storage=temp)
            cuda.syncthreads()
            coop.exclusive_sum(block, items, out, prefix_op=running_total, prefix_state=total, temp_storage=temp)
            cuda.syncthreads()
            coop.store(block, y[base:], out, temp_storage=temp)
            cuda.syncthreads()
            z[base // 4 + t] = coop.exclusive_scan(block, x[base + t], scan_op=bigger, prefix_op=running_max,
                                                   prefix_state=best, temp_storage=temp)
            cuda.syncthreads()

    args = (I32, I32, I32, types.int64)
    cubin = _link2(kernel, args, (32, 4))
    from coop_helpers import shared_bytes

    assert nbytes <= shared_bytes(cubin) <= nbytes + 1024     # the caller's storage only
    with coop.target(block=(32, 4)):
        ptx = style2_ptx(kernel, args)
    assert _no_calls(ptx) and "trap;" in ptx


def _no_state(x, y):
    items = coop.ThreadData(4)
    block = coop.this_block()
    coop.load(block, x, items)
    coop.inclusive_sum(block, items, prefix_op=running_total)


def _no_callback(x, y):
    items = coop.ThreadData(4)
    block = coop.this_block()
    coop.load(block, x, items)
    coop.inclusive_sum(block, items, prefix_state=y)


def _warp(x, y):
    state = cuda.local.array(1, numba.int32)
    y[0] = coop.inclusive_sum(coop.this_warp(), x[0], prefix_op=running_total, prefix_state=state)


def _with_initial_value(x, y):
    state = cuda.local.array(1, numba.int32)
    y[0] = coop.inclusive_scan(coop.this_block(), x[0], scan_op="max", initial_value=0, prefix_op=running_max,
                               prefix_state=state)


def _scalar_state(x, y):
    y[0] = coop.inclusive_sum(coop.this_block(), x[0], prefix_op=running_total, prefix_state=x[1])


WIDE_TOTAL = coop.block.PrefixCallback(running_total, numba.int64)


def _mismatched_state(x, y):
    y[0] = coop.inclusive_sum(coop.this_block(), x[0], prefix_op=WIDE_TOTAL, prefix_state=x)


@pytest.mark.parametrize("fn,error,pattern", [
    (_no_state, CoopError, "both prefix_op= .*and prefix_state="),
    (_no_callback, CoopError, "both prefix_op= .*and prefix_state="),
    (_warp, CoopError, "warp scans take no prefix callback"),
    (_with_initial_value, CoopError, "initial_value= and prefix_op= exclude each other"),
    (_scalar_state, ArgumentError, "argument 'prefix_state'.*1-D C-contiguous array"),
    (_mismatched_state, ArgumentError, "argument 'prefix_state'.*int64"),
], ids=lambda v: getattr(v, "__name__", "")[:24])
def test_style2_bad_prefix_calls(fn, error, pattern):
    with pytest.raises(error, match=pattern):
        _link2(cuda.jit(fn), (I32, I32))


# ---------------------------------------------------------------- the provider

def test_the_callback_and_its_state_type_are_in_the_key_and_symbol():
    vt = element_type("int32")
    plain = ProviderSpec("scan", vt, (128, 1, 1), 4, "raking", op_spec(OpKind.PLUS), mode="inclusive")
    assert "prefix" not in plain.key            # keys (and cached units) of scans without one unchanged
    with_total = ProviderSpec("scan", vt, (128, 1, 1), 4, "raking", op_spec(OpKind.PLUS), mode="inclusive",
                              prefix=op_spec(running_total), prefix_state=vt)
    with_max = ProviderSpec("scan", vt, (128, 1, 1), 4, "raking", op_spec(OpKind.PLUS), mode="inclusive",
                            prefix=op_spec(running_max), prefix_state=vt)
    wide = ProviderSpec("scan", vt, (128, 1, 1), 4, "raking", op_spec(OpKind.PLUS), mode="inclusive",
                        prefix=op_spec(running_total), prefix_state=element_type("int64"))
    assert len({plain.symbol, with_total.symbol, with_max.symbol, wide.symbol}) == 4
    assert [s for s, _ in with_total.python_ops] == [with_total.prefix_symbol]
    text, externs = provider_text(with_total)
    assert with_total.prefix_symbol in externs
    assert "prim.InclusiveSum(" in text and ", prefix);" in text
    assert "void* state, long long state_len" in text


def test_a_second_build_compiles_nothing():
    coop.block.make_inclusive_scan(numba.int32, 128, bigger, 4, prefix_op=running_max)
    cuprims.clear_all_caches()
    stats.reset()
    again = coop.block.make_inclusive_scan(numba.int32, 128, bigger, 4, prefix_op=running_max)
    snap = stats.snapshot()
    assert snap.get("nvrtc_compiles", 0) == 0 and snap.get("numba_compiles", 0) == 0
    assert len(again.files) >= 3
