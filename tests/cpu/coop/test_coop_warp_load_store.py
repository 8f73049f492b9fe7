"""coop warp load/store (CUB's WarpLoad/WarpStore: direct, striped, vectorize, transpose)
in both styles, and Style 2's ``temp_storage=``: kernels compiled for sm_90 with no GPU
and linked (nvJitLink, LTO) into a cubin; arguments and errors."""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402

from cuprims import coop  # noqa: E402
from cuprims._base import stats  # noqa: E402
from cuprims.coop._style2 import kernel_unit as _kernel_unit  # noqa: E402
from cuprims.errors import ArgumentError, LinkError  # noqa: E402

from coop_helpers import link_kernel, linked_ptx, shared_bytes, style2_ptx  # noqa: E402
from twins import PAIR, WARP_IO_ALGORITHMS  # noqa: E402


pytestmark = pytest.mark.usefixtures("sm90")     # coop primitives built for sm_90 (tests/cpu/conftest.py)


def _warp_kernel(load, store, nb, lanes, items, partial=False, caller_storage=False):
    """Each logical warp loads its tile of x and stores it to y (``partial``: the first n)."""
    tile = lanes * items
    nbytes = max(load.temp_storage_bytes, store.temp_storage_bytes)
    align = max(load.temp_storage_alignment, store.temp_storage_alignment)
    total = (128 // lanes) * nbytes

    @cuda.jit(link=load.files + store.files)
    def kernel(x, y, n):
        t = cuda.threadIdx.x
        w = t // lanes
        temp = cuda.shared.array(total, numba.uint8, alignment=align)
        mine = temp[w * nbytes:(w + 1) * nbytes]
        items_ = cuda.local.array(items, nb)
        if caller_storage:
            if partial:
                load(x[w * tile:], items_, n, 7, mine)
                cuda.syncwarp()
                store(y[w * tile:], items_, n, mine)
            else:
                load(x[w * tile:], items_, temp_storage=mine)
                cuda.syncwarp()
                store(y[w * tile:], items_, temp_storage=mine)
        elif partial:
            load(x[w * tile:], items_, n, 7)
            store(y[w * tile:], items_, n)
        else:
            load(x[w * tile:], items_)
            store(y[w * tile:], items_)

    return kernel


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("algorithm", WARP_IO_ALGORITHMS)
@pytest.mark.parametrize("lanes,items", [(32, 4), (8, 3), (1, 2)])
def test_warp_load_store_algorithms_link_and_need_their_files(algorithm, lanes, items):
    load = coop.warp.make_load(numba.int32, items, algorithm, threads_in_warp=lanes)
    store = coop.warp.make_store(numba.int32, items, algorithm, threads_in_warp=lanes)
    args = (types.int32[::1], types.int32[::1], types.int32)
    for partial in (False, True):
        cubin = link_kernel(_warp_kernel(load, store, numba.int32, lanes, items, partial), args, [load, store])
        if algorithm == "transpose" and lanes > 1:     # a tile per logical warp it serves
            assert load.temp_storage_bytes >= 4 * lanes * items
            assert shared_bytes(cubin) >= load.own_storage_warps * load.temp_storage_layout[0]
    if algorithm != "transpose":
        assert load.temp_storage_bytes == store.temp_storage_bytes == 1    # no shared memory
    with pytest.raises(LinkError, match=f"{load.spec.symbol}|{store.spec.symbol}"):
        link_kernel(_warp_kernel(load, store, numba.int32, lanes, items), args, [load, store], with_files=False)


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("dtype", ["uint8", "int64", "float16", "float64", "complex64"])
def test_warp_transpose_types_and_callers_storage(dtype):
    nb = getattr(types, dtype)
    load = coop.warp.make_load(dtype, 5, "transpose", threads_in_warp=16)
    store = coop.warp.make_store(dtype, 5, "transpose", threads_in_warp=16)
    assert load.own_storage_warps == min(64, 16 * 1024 // load.temp_storage_layout[0])
    args = (nb[::1], nb[::1], types.int32)
    link_kernel(_warp_kernel(load, store, nb, 16, 5, partial=True), args, [load, store])
    cubin = link_kernel(_warp_kernel(load, store, nb, 16, 5, partial=True, caller_storage=True), args, [load, store])
    own = max(load.temp_storage_layout[0], store.temp_storage_layout[0]) * load.own_storage_warps
    assert shared_bytes(cubin) < 8 * load.temp_storage_bytes + own   # the caller's, not the own storage


def test_warp_vectorized_load_inlines():
    load = coop.warp.make_load(numba.float32, 4, "vectorize")
    store = coop.warp.make_store(numba.float32, 4, "vectorize")
    kernel = _warp_kernel(load, store, numba.float32, 32, 4)
    ptx = linked_ptx(kernel, (types.float32[::1], types.float32[::1], types.int32), [load, store])
    assert not [line for line in ptx.splitlines() if "call" in line.split("//")[0]]
    assert ".v4" in ptx


def test_warp_load_store_arguments_are_checked_before_any_compile():
    with pytest.raises(ArgumentError, match="algorithm"):
        coop.warp.make_load(numba.int32, 4, "warp_transpose")           # a block algorithm
    with pytest.raises(ArgumentError, match="algorithm"):
        coop.warp.make_store(numba.int32, 4, "fast")
    with pytest.raises(ArgumentError, match="threads_in_warp"):
        coop.warp.make_load(numba.int32, 4, threads_in_warp=48)
    with pytest.raises(ArgumentError, match="items_per_thread"):
        coop.warp.make_store(numba.int32, 0)
    with pytest.raises(ArgumentError, match="dtype"):
        coop.warp.make_load("not a type", 4)
    assert stats.snapshot().get("nvrtc_compiles", 0) == 0


# ---------------------------------------------------------------- Style 2: warps

def _link2(kernel, argtypes, block):
    with coop.target(block=block):
        cubin = link_kernel(kernel, argtypes, [])
    assert cubin[:4] == b"\x7fELF"
    return cubin


@pytest.mark.parametrize("algorithm", WARP_IO_ALGORITHMS)
def test_style2_warp_load_store(algorithm):
    @cuda.jit
    def kernel(x, y, n):
        warp = coop.this_warp()
        t = cuda.threadIdx.x + cuda.blockDim.x * cuda.threadIdx.y
        base = (t // 32) * 128
        items = coop.ThreadData(4)                   # float64, from x
        coop.load(warp, x[base:], items, algorithm=algorithm)
        coop.store(warp, y[base:], items, algorithm=algorithm)
        coop.load(warp, x[base:], items, algorithm=algorithm, valid_items=n - base, oob_default=-1)
        coop.store(warp, y[base:], items, algorithm=algorithm, valid_items=n - base)

    _link2(kernel, (types.float64[::1], types.float64[::1], types.int32), (32, 4))
    kinds = {(sp.kind, sp.algorithm, sp.dims) for sp in _kernel_unit._units if sp.vt.code == "f8"}
    assert {("warp_load", algorithm, (32, 1, 1)), ("warp_store", algorithm, (32, 1, 1))} <= kinds


def test_style2_warp_load_store_of_structs():
    rec = numba.from_dtype(PAIR)

    @cuda.jit
    def kernel(x, y, n):
        warp = coop.this_warp()
        base = (cuda.threadIdx.x // 32) * 96
        items = coop.ThreadData(3)                   # the record, from x
        coop.load(warp, x[base:], items, algorithm="transpose", valid_items=n)    # the rest: all bytes 0
        coop.store(warp, y[base:], items, algorithm="striped")

    _link2(kernel, (rec[::1], rec[::1], types.int32), 128)


def test_style2_warp_load_with_a_block_algorithm_names_the_argument():
    def kernel(x, y):
        items = coop.ThreadData(4)
        coop.load(coop.this_warp(), x, items, algorithm="warp_transpose")

    with pytest.raises(ArgumentError, match=r"argument 'algorithm'.*'transpose'.*coop\.load\(\) at"):
        _link2(cuda.jit(kernel), (types.int32[::1], types.int32[::1]), 64)


# ---------------------------------------------------------------- Style 2: temp_storage=

def test_style2_temp_storage_on_every_call():
    radix = coop.block.make_radix_sort_pairs(numba.int32, numba.float32, 128, 4)
    nbytes, align = radix.temp_storage_bytes, radix.temp_storage_alignment   # the largest of these calls'

    @cuda.jit
    def kernel(x, v, out, n):
        block, warp = coop.this_block(), coop.this_warp()
        temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
        keys = coop.ThreadData(4)
        values = coop.ThreadData(4)
        coop.load(block, x, keys, algorithm="transpose", temp_storage=temp)
        cuda.syncthreads()
        coop.load(block, v, values, valid_items=n, temp_storage=temp)
        cuda.syncthreads()
        s = coop.sum(block, keys, temp_storage=temp)
        cuda.syncthreads()
        r = coop.reduce(block, x[cuda.threadIdx.x], binary_op="max", valid_items=n, temp_storage=temp)
        cuda.syncthreads()
        coop.inclusive_sum(block, keys, temp_storage=temp)
        cuda.syncthreads()
        e = coop.exclusive_scan(block, x[cuda.threadIdx.x], scan_op="min", initial_value=0, temp_storage=temp)
        cuda.syncthreads()
        coop.exchange(block, keys, block_exchange_type="BlockedToStriped", temp_storage=temp)
        cuda.syncthreads()
        coop.radix_sort_keys(block, keys, temp_storage=temp)
        cuda.syncthreads()
        coop.radix_sort_pairs(block, keys, values, descending=True, temp_storage=temp)
        cuda.syncthreads()
        coop.merge_sort_keys(block, keys, compare_op="<", valid_items=n, oob_default=2**30, temp_storage=temp)
        cuda.syncthreads()
        coop.merge_sort_pairs(block, keys, values, compare_op=">", temp_storage=temp)
        cuda.syncthreads()
        w = cuda.threadIdx.x // 32
        mine = temp[w * 1024:(w + 1) * 1024]        # each warp its own part
        ws = coop.sum(warp, x[cuda.threadIdx.x], temp_storage=mine)
        coop.merge_sort_keys(warp, keys, compare_op="<", temp_storage=mine)
        cuda.syncwarp()
        coop.store(warp, x[w * 128:], keys, algorithm="transpose", temp_storage=mine)
        cuda.syncthreads()
        coop.store(block, v, values, algorithm="warp_transpose", temp_storage=temp)
        if cuda.threadIdx.x == 0:
            out[0] = s + r + e + ws

    assert nbytes >= 4 * 1024
    cubin = _link2(kernel, (types.int32[::1], types.float32[::1], types.int32[::1], types.int32), 128)
    # only the caller's storage (and the system's 1 KiB): no provider's own
    assert nbytes <= shared_bytes(cubin) <= nbytes + 1024


def _sorts(with_temp):
    @cuda.jit
    def kernel(x, y):
        block = coop.this_block()
        temp = cuda.shared.array(8192, numba.uint8, alignment=16)
        items = coop.ThreadData(4)
        coop.load(block, x, items)
        if with_temp:
            coop.radix_sort_keys(block, items, temp_storage=temp)
        else:
            coop.radix_sort_keys(block, items)
        coop.store(block, y, items)
    return kernel


def test_style2_temp_storage_is_checked_at_run_time():
    # its size and alignment against the provider's TempStorage (a trap otherwise)
    with coop.target(block=64):
        plain = style2_ptx(_sorts(False), (types.int32[::1], types.int32[::1]))
        checked = style2_ptx(_sorts(True), (types.int32[::1], types.int32[::1]))
    body = checked[checked.index(".entry"):]
    assert "trap;" in body and "call" not in body.replace("call.uni", "")
    assert checked.count("setp.") > plain.count("setp.")


def _float_storage(x, y):
    temp = cuda.shared.array(1024, numba.float32)
    coop.sum(coop.this_block(), x[0], temp_storage=temp)


def _thread_data_storage(x, y):
    temp = coop.ThreadData(1024, dtype=numba.uint8)
    coop.sum(coop.this_block(), x[0], temp_storage=temp)


def _positional_storage(x, y):
    temp = cuda.shared.array(1024, numba.uint8)
    coop.sum(coop.this_block(), x[0], temp)


@pytest.mark.parametrize("fn,pattern", [
    (_float_storage, r"argument 'temp_storage'.*uint8.*coop\.sum\(\) at .*test_coop_warp_load_store"),
    (_thread_data_storage, r"argument 'temp_storage'.*uint8"),
], ids=lambda v: getattr(v, "__name__", "")[:24])
def test_style2_bad_temp_storage(fn, pattern):
    with pytest.raises(ArgumentError, match=pattern):
        _link2(cuda.jit(fn), (types.int32[::1], types.int32[::1]), 64)


def test_style2_temp_storage_is_keyword_only():
    from cuprims.errors import CoopError

    with pytest.raises(CoopError, match="too many positional arguments"):
        _link2(cuda.jit(_positional_storage), (types.int32[::1], types.int32[::1]), 64)


@pytest.mark.parametrize("lanes,logical", [(32, "0xffffffffu"), (16, "(((1u << 16) - 1u) << (16 * ((tid & 31u) / 16)))"),
                                           (8, "(((1u << 8) - 1u) << (8 * ((tid & 31u) / 8)))")])
def test_own_storage_barrier_waits_for_the_logical_warps_live_lanes_only(lanes, logical):
    # __syncwarp() over lanes that do not exist (the last warp of a 48-thread block) is
    # undefined: the barrier before reusing the warp's own storage names the logical warp's
    # lanes that exist
    from cuprims.coop._codegen import provider_text
    from cuprims.coop._spec import ProviderSpec, element_type

    text, _ = provider_text(ProviderSpec("warp_store", element_type("int32"), (lanes, 1, 1), 4, "transpose"))
    own = text[text.index('void cuprims_coop_warp_store'):text.index("_ts(")]
    assert f"__syncwarp(live & {logical});" in own
    assert "__syncwarp()" not in text
    assert "const unsigned live = left >= 32u ? 0xffffffffu : (1u << left) - 1u;" in own


# ---------------------------------------------------------------- warp exchange (WarpExchange)

def _exchange_kernel(ex, nb, items):
    @cuda.jit(link=ex.files)
    def kernel(x, y):
        t = cuda.threadIdx.x
        a = cuda.local.array(items, nb)
        for i in range(items):
            a[i] = x[t * items + i]
        ex(a, a)
        for i in range(items):
            y[t * items + i] = a[i]
    return kernel


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.complex128, np.bool_, PAIR])
@pytest.mark.parametrize("mode", ["StripedToBlocked", "BlockedToStriped"])
def test_warp_exchange_links_inlined_and_is_keyed_by_its_arrangement(dtype, mode):
    nb = numba.from_dtype(np.dtype(dtype))
    ex = coop.warp.make_exchange(coop.warp.WarpExchangeType[mode], nb, 3, threads_in_warp=8)
    other = coop.warp.make_exchange("BlockedToStriped" if mode == "StripedToBlocked" else "StripedToBlocked", nb, 3,
                                    threads_in_warp=8)
    assert ex.spec.symbol != other.spec.symbol and ex.spec.mode == mode
    assert ex.temp_storage_bytes >= 8 * 3 * np.dtype(dtype).itemsize
    assert 1 <= ex.own_storage_warps <= 128
    ptx = linked_ptx(_exchange_kernel(ex, nb, 3), (nb[::1], nb[::1]), [ex])
    # inlined by the LTO link
    assert not [line for line in ptx.splitlines() if "call" in line.split("//")[0]]
    assert "bar.warp.sync" in ptx                  # CUB's exchange through shared memory


def test_warp_exchange_arguments_are_checked_before_any_compile():
    with pytest.raises(ArgumentError, match="warp_exchange_type"):
        coop.warp.make_exchange("WarpStripedToBlocked", numba.int32, 4)   # a block-only arrangement
    with pytest.raises(ArgumentError, match="warp_exchange_type"):
        coop.warp.make_exchange(3, numba.int32, 4)
    with pytest.raises(ArgumentError, match="threads_in_warp"):
        coop.warp.make_exchange("StripedToBlocked", numba.int32, 4, threads_in_warp=12)
    with pytest.raises(ArgumentError, match="items_per_thread"):
        coop.warp.make_exchange("StripedToBlocked", numba.int32, 0)
    with pytest.raises(ArgumentError, match="methods"):
        coop.warp.make_exchange("StripedToBlocked", numba.int32, 4, methods={"x": 1})
    assert stats.snapshot().get("nvrtc_compiles", 0) == 0


def test_style2_warp_exchange_builds_a_warp_exchange_and_refuses_block_options():
    @cuda.jit
    def kernel(x, y):
        warp = coop.this_warp()
        base = (cuda.threadIdx.x // 32) * 128
        items = coop.ThreadData(4)
        coop.load(warp, x[base:], items, algorithm="striped")
        coop.exchange(warp, items, block_exchange_type="StripedToBlocked")
        coop.store(warp, y[base:], items)

    _link2(kernel, (types.float32[::1], types.float32[::1]), 64)
    kinds = {(sp.kind, sp.mode, sp.dims) for sp in _kernel_unit._units if sp.vt.code == "f4"}
    assert ("warp_exchange", "StripedToBlocked", (32, 1, 1)) in kinds

    def sliced(x, y):
        items = coop.ThreadData(4)
        coop.load(coop.this_warp(), x, items)
        coop.exchange(coop.this_warp(), items, block_exchange_type="StripedToBlocked", warp_time_slicing=True)

    with pytest.raises(Exception, match="warp_time_slicing"):
        _link2(cuda.jit(sliced), (types.int32[::1], types.int32[::1]), 64)

    def warp_striped(x, y):
        items = coop.ThreadData(4)
        coop.load(coop.this_warp(), x, items)
        coop.exchange(coop.this_warp(), items, block_exchange_type="WarpStripedToBlocked")

    with pytest.raises(ArgumentError, match="block_exchange_type"):
        _link2(cuda.jit(warp_striped), (types.int32[::1], types.int32[::1]), 64)
