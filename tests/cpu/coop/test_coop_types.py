"""Element types whose numba local arrays are less aligned than their C++ type (complex:
aligned to its parts in numba, to its whole size in ``cuda::std::complex``; structs: byte
arrays in numba): the providers take such values as ``void*`` and copy them into aligned
locals. Compiled for sm_90 with no GPU; tests/gpu/coop/test_coop_types_gpu.py runs them."""

from __future__ import annotations

import re

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402

from cuprims import OpKind, coop  # noqa: E402
from cuprims.coop._codegen import provider_text, under_aligned  # noqa: E402
from cuprims.coop._spec import ProviderSpec, element_type  # noqa: E402
from cuprims.op import op_spec  # noqa: E402

from coop_helpers import link_kernel, linked_ptx  # noqa: E402
from twins import PAIR, argmax  # noqa: E402


pytestmark = pytest.mark.usefixtures("sm90")     # coop primitives built for sm_90 (tests/cpu/conftest.py)


@pytest.mark.parametrize("name,expected", [("complex64", True), ("complex128", True), (PAIR, True),
                                           ("float16", False), ("bool", False), ("int64", False),
                                           ("float32", False)])
def test_which_types_are_copied_into_aligned_locals(name, expected):
    vt = element_type(name)
    assert under_aligned(vt) is expected
    specs = [ProviderSpec("load", vt, (128, 1, 1), 4, "direct"),
             ProviderSpec("scan", vt, (128, 1, 1), 4, "raking", op_spec(OpKind.PLUS), mode="inclusive"),
             ProviderSpec("reduce", vt, (128, 1, 1), 1, "warp_reductions", op_spec(OpKind.PLUS)),
             ProviderSpec("exchange", vt, (128, 1, 1), 4, "", mode="BlockedToStriped")]
    for spec in specs:
        if vt.is_struct and spec.kind != "load" and spec.kind != "exchange":
            continue      # a struct has no '+'
        text, _ = provider_text(spec)
        assert ("memcpy(" in text and "_raw" in text) is expected, spec.kind
    if expected:
        load, _ = provider_text(specs[0])
        t = vt.cpp
        # the global source stays typed, the thread's items and oob arrive as void*
        assert f"(const {t}* src, void* items_raw, int valid, const void* oob_raw)" in load
        assert f"{t} items[4];" in load and "memcpy(items_raw, items, sizeof(items));" in load


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("nb", [numba.complex64, numba.complex128, numba.from_dtype(PAIR)],
                         ids=["complex64", "complex128", "struct"])
def test_under_aligned_items_in_local_memory_link(nb):
    load = coop.block.make_load(nb, (32, 4), 5, algorithm="warp_transpose")
    store = coop.block.make_store(nb, (32, 4), 5)

    @cuda.jit(link=load.files + store.files)
    def kernel(x, y, k):
        items = cuda.local.array(5, nb)
        load(x, items, 600)                          # no oob_default: zero bytes, structs too
        y[640 + cuda.threadIdx.x] = items[k % 5]     # indexed at run time: the items stay in local memory
        store(y, items)

    args = (nb[::1], nb[::1], types.int64)
    assert link_kernel(kernel, args, [load, store])[:4] == b"\x7fELF"
    ptx = linked_ptx(kernel, args, [load, store])
    # the local copies are aligned as the C++ type wants (LTO keeps one aligned local frame)
    depot = [line for line in ptx.splitlines() if "__local_depot" in line and ".local" in line]
    assert depot and all(int(re.search(r"\.align (\d+)", line).group(1)) >= element_type(nb).alignment
                         for line in depot)


@pytest.mark.parametrize("kind,mode", [("scan", "inclusive"), ("scan", "exclusive"), ("warp_scan", "exclusive"),
                                       ("reduce", "")])
def test_bool_sums_go_through_the_or_functor_not_cubs_sum(kind, mode):
    # CUB's warp scans take a sum's exclusive prefix as inclusive - input: wrong for a
    # saturating bool sum, so bool never reaches CUB's Sum entry points
    dims = (32, 1, 1) if kind == "warp_scan" else (128, 1, 1)
    items = 1 if kind in ("warp_scan", "reduce") else 3
    algorithm = "" if kind == "warp_scan" else ("warp_reductions" if kind == "reduce" else "warp_scans")
    text, _ = provider_text(ProviderSpec(kind, element_type("bool"), dims, items, algorithm, op_spec(OpKind.PLUS),
                                         mode=mode))
    assert "Sum(" not in text and "_functor{}" in text
    assert ("false, " in text) is (mode == "exclusive")
    int_text, _ = provider_text(ProviderSpec(kind, element_type("int32"), dims, items, algorithm,
                                             op_spec(OpKind.PLUS), mode=mode))
    assert "Sum(" in int_text                       # other types keep CUB's Sum


@pytest.mark.parametrize("kind,algorithm,copies", [("store", "transpose", True), ("store", "warp_transpose", True),
                                                   ("store", "warp_transpose_timesliced", True),
                                                   ("store", "direct", False), ("warp_store", "transpose", True),
                                                   ("warp_store", "striped", False)])
def test_transposing_stores_leave_the_callers_items_alone(kind, algorithm, copies):
    # CUB's transposing stores exchange the items in place: the provider stores a copy
    dims = (16, 1, 1) if kind == "warp_store" else (128, 1, 1)
    text, _ = provider_text(ProviderSpec(kind, element_type("int32"), dims, 4, algorithm))
    assert ("prim.Store(dst, tmp" in text) is copies
    assert ("const_cast<int*>(items)" in text.replace("int32_t", "int")) is not copies


def test_style2_struct_load_without_oob_default_is_not_compiled_to_a_trap():
    # the left-out oob_default of a record type is zeroed bytes of the caller's, not a null
    # record pointer (which numba would read: UB, which LLVM compiled to an unconditional trap)
    record = numba.from_dtype(PAIR)

    @cuda.jit
    def kernel(x, y, n):
        warp = coop.this_warp()
        data = coop.ThreadData(3)
        coop.load(warp, x, data, algorithm="transpose", valid_items=n)
        coop.store(warp, y, data, algorithm="transpose", valid_items=n)

    from cuprims._operators.numba_device import target_capability

    with coop.target(block=64), target_capability((9, 0)):
        ptx, _ = cuda.compile_ptx(kernel.py_func, (types.Array(record, 1, "C"), types.Array(record, 1, "C"),
                                                   types.int32), cc=(9, 0))
    body = ptx[ptx.index(".entry"):]
    assert body.count("call.uni") == 2          # the load's and the store's providers are called


def test_two_style1_struct_results_have_their_own_slots():
    # a record result is a pointer to its bytes: each call's must outlive the next call
    # (numba's IR inliner puts the primitive's local arrays in the kernel's own frame)
    record = numba.from_dtype(PAIR)

    reduce = coop.warp.make_reduce(PAIR, argmax, threads_in_warp=4)
    # the call forms' overload is inlined in numba's IR, and the device function it calls too
    assert reduce._numba_type_.templates[0]._inline.is_always_inline
    assert reduce._device.targetoptions["inline"] == "always"

    @cuda.jit(link=reduce.files)
    def kernel(x, out):
        t = cuda.threadIdx.x
        a = reduce(x[t])
        b = reduce(x[t], 3)
        out[t, 0] = a
        out[t, 1] = b

    link_kernel(kernel, (types.Array(record, 1, "C"), types.Array(record, 2, "C")), [reduce])
    scalar = coop.warp.make_reduce(np.int32, "max", threads_in_warp=4)
    assert scalar._numba_type_.templates[0]._inline.is_never_inline    # scalars: LLVM inlines them
