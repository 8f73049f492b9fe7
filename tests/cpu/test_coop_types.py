"""Element types whose numba local arrays are less aligned than their C++ type (complex:
aligned to its parts in numba, to its whole size in ``cuda::std::complex``; structs: byte
arrays in numba): the providers take such values as ``void*`` and copy them into aligned
locals. Compiled for sm_90 with no GPU; tests/gpu/test_coop_types_gpu.py runs them."""

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

PAIR = np.dtype([("v", np.float32), ("i", np.int32)], align=True)


@pytest.fixture(autouse=True)
def sm90(shared_cache):
    with coop.target((9, 0)):
        yield


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
