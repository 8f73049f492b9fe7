"""coop block and warp merge sorts of keys: real numba-cuda kernels calling them, compiled
for sm_90 with no GPU and linked (nvJitLink, LTO) into a cubin; their arguments, cache
keys and caches."""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402
from numba.core.errors import TypingError  # noqa: E402
from numba.cuda.np.numpy_support import from_dtype  # noqa: E402

from cuprims import OpKind, RawOp, coop  # noqa: E402
from cuprims._base import stats  # noqa: E402
from cuprims.coop import _build  # noqa: E402
from cuprims.coop._codegen import provider_text  # noqa: E402
from cuprims.errors import ArgumentError, LinkError  # noqa: E402

from coop_helpers import link_kernel, linked_ptx, shared_bytes  # noqa: E402
from cpu_helpers import stub_ltoir  # noqa: E402
from twins import _by_k, _less  # noqa: E402

KEY_TYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
             "float64", "boolean"]
PAIR = np.dtype([("k", np.float32), ("i", np.int32)], align=True)


pytestmark = pytest.mark.usefixtures("sm90")     # coop primitives built for sm_90 (tests/cpu/conftest.py)


def _kernel(sort, nb, threads, items, partial=False):
    """Thread t sorts keys t * items ... of the block's tile (``partial``: the first n of them)."""

    @cuda.jit(link=sort.files)
    def kernel(x, n, oob):
        t = cuda.threadIdx.x
        keys = cuda.local.array(items, nb)
        for i in range(items):
            keys[i] = x[t * items + i]
        if partial:
            sort(keys, n, oob[0])
        else:
            sort(keys)
        for i in range(items):
            x[t * items + i] = keys[i]

    return kernel


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("dtype", KEY_TYPES)
def test_block_merge_sort_every_type_links_and_needs_its_files(dtype):
    nb = getattr(types, dtype)
    sort = coop.block.make_merge_sort_keys(nb, (32, 4), 4, OpKind.LESS)
    args = (nb[::1], types.int32, nb[::1])
    for partial in (False, True):
        cubin = link_kernel(_kernel(sort, nb, 128, 4, partial), args, [sort])
        assert shared_bytes(cubin) >= sort.temp_storage_bytes > 1       # the provider's own storage
    with pytest.raises(LinkError, match=sort.spec.symbol):
        link_kernel(_kernel(sort, nb, 128, 4), args, [sort], with_files=False)


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("dtype,op", [("float16", _less), ("int64", lambda a, b: a > b), ("boolean", _less),
                                      ("complex64", lambda a, b: a.real < b.real), ("uint8", "<"),
                                      ("float64", ">"), ("int32", OpKind.GREATER)])
def test_block_merge_sort_comparators(dtype, op):
    nb = getattr(types, dtype)
    sort = coop.block.make_merge_sort_keys(nb, 64, 3, op)
    link_kernel(_kernel(sort, nb, 64, 3, partial=True), (nb[::1], types.int32, nb[::1]), [sort])


def test_block_merge_sort_struct_keys_with_python_comparator_inline():
    rec = from_dtype(PAIR)
    sort = coop.block.make_merge_sort_keys(PAIR, (64, 2), 3, _by_k)
    kernel = _kernel(sort, rec, 128, 3, partial=True)
    args = (rec[::1], types.int32, rec[::1])
    link_kernel(kernel, args, [sort])
    # the comparator and CUB's sort are inlined: no call left in the linked kernel
    assert not [line for line in linked_ptx(kernel, args, [sort]).splitlines() if "call" in line.split("//")[0]]


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("dims,items", [((128,), 1), ((32, 4), 7), ((64, 2, 2), 16), ((1024,), 2), ((1,), 5)])
def test_block_merge_sort_shapes_items_and_callers_storage(dims, items):
    sort = coop.block.make_merge_sort_keys(numba.float32, dims, items, _less)
    nbytes, align = sort.temp_storage_bytes, sort.temp_storage_alignment
    assert nbytes >= 4 * int(np.prod(dims)) * items          # a whole tile of keys

    @cuda.jit(link=sort.files)
    def kernel(x, n):
        temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
        keys = cuda.local.array(items, numba.float32)
        for i in range(items):
            keys[i] = x[i]
        sort(keys)                                   # own storage
        sort(keys, n, np.float32(np.inf))           # a partial tile
        sort(keys, temp_storage=temp)                # the caller's
        sort(keys, n, np.inf, temp)
        for i in range(items):
            x[i] = keys[i]

    cubin = link_kernel(kernel, (types.float32[::1], types.int32), [sort])
    if np.prod(dims) > 1:          # one thread merges nothing: CUB then touches no storage
        assert shared_bytes(cubin) >= 2 * nbytes


def test_callers_storage_only_leaves_out_the_providers():
    sort = coop.block.make_merge_sort_keys(numba.int64, 256, 8, _less)
    nbytes, align = sort.temp_storage_bytes, sort.temp_storage_alignment

    @cuda.jit(link=sort.files)
    def kernel(x):
        temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
        keys = cuda.local.array(8, numba.int64)
        for i in range(8):
            keys[i] = x[8 * cuda.threadIdx.x + i]
        sort(keys, temp_storage=temp)
        for i in range(8):
            x[8 * cuda.threadIdx.x + i] = keys[i]

    assert nbytes <= shared_bytes(link_kernel(kernel, (types.int64[::1],), [sort])) < 2 * nbytes


def test_partial_sort_without_oob_default_fails_typing():
    sort = coop.block.make_merge_sort_keys(numba.int32, 128, 2, _less)

    @cuda.jit(link=sort.files)
    def kernel(x, n):
        keys = cuda.local.array(2, numba.int32)
        keys[0] = x[0]
        keys[1] = x[1]
        sort(keys, n)
        x[0] = keys[0]

    with pytest.raises(TypingError, match="oob_default"):
        link_kernel(kernel, (types.int32[::1], types.int32), [sort])


def test_merge_sort_providers_add_no_barrier_and_write_the_tail():
    sort = coop.block.make_merge_sort_keys(numba.int32, 128, 2, _less)
    text, _ = provider_text(sort.spec)
    # each of CUB's merge passes starts with a barrier: a call needs none of ours
    assert "__syncthreads" not in text and "StableSort" in text
    assert "keys[i] = *oob" in text


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("lanes", [1, 2, 4, 8, 16, 32])
def test_warp_merge_sort_logical_warps(lanes):
    sort = coop.warp.make_merge_sort_keys(numba.uint16, 3, _less, threads_in_warp=lanes)
    nbytes, warps = sort.temp_storage_bytes, sort.own_storage_warps
    assert nbytes >= 2 * lanes * 3
    assert warps == min(1024 // lanes, max(1, 32 * 1024 // nbytes))
    cubin = link_kernel(_kernel(sort, types.uint16, lanes, 3, partial=True),
                        (types.uint16[::1], types.int32, types.uint16[::1]), [sort])
    if lanes > 1:     # one slot per logical warp the own storage serves
        assert shared_bytes(cubin) >= warps * nbytes


def test_warp_merge_sort_own_storage_is_capped_and_callers_storage_per_warp():
    rec = from_dtype(PAIR)
    sort = coop.warp.make_merge_sort_keys(PAIR, 16, _by_k)
    nbytes, align = sort.temp_storage_bytes, sort.temp_storage_alignment
    assert sort.own_storage_warps == 32 * 1024 // nbytes < 32   # 16 pairs a lane: fewer warps than 1024 threads
    total = 4 * nbytes

    @cuda.jit(link=sort.files)
    def kernel(x, n, oob):
        t = cuda.threadIdx.x
        temp = cuda.shared.array(total, numba.uint8, alignment=align)
        mine = temp[(t // 32) * nbytes:(t // 32 + 1) * nbytes]
        keys = cuda.local.array(16, rec)
        for i in range(16):
            keys[i] = x[16 * t + i]
        sort(keys, temp_storage=mine)
        sort(keys, n, oob[0], mine)
        for i in range(16):
            x[16 * t + i] = keys[i]

    cubin = link_kernel(kernel, (rec[::1], types.int32, rec[::1]), [sort])
    assert total <= shared_bytes(cubin) < total + sort.own_storage_warps * nbytes


def test_arguments_are_checked_before_any_compile():
    make, warp = coop.block.make_merge_sort_keys, coop.warp.make_merge_sort_keys
    with pytest.raises(ArgumentError, match="dtype"):
        make("not a type", 128, 4, _less)
    with pytest.raises(ArgumentError, match="threads_per_block"):
        make(numba.int32, 96, 4, _less)           # CUB merges halves: a power of two
    with pytest.raises(ArgumentError, match="threads_per_block"):
        make(numba.int32, (32, 3), 4, _less)
    with pytest.raises(ArgumentError, match="threads_per_block"):
        make(numba.int32, 2048, 1, _less)
    with pytest.raises(ArgumentError, match="items_per_thread"):
        make(numba.int32, 128, 0, _less)
    with pytest.raises(ArgumentError, match="compare_op"):
        make(numba.int32, 128, 4, OpKind.PLUS)
    with pytest.raises(ArgumentError, match="compare_op"):
        make(PAIR, 128, 4, OpKind.LESS)              # structs need a Python comparator
    with pytest.raises(ArgumentError, match="compare_op"):
        make(numba.complex64, 128, 4, "<")
    with pytest.raises(ArgumentError, match="compare_op"):
        make(numba.int32, 128, 4, "<=")
    with pytest.raises(ArgumentError, match="compare_op"):
        make(numba.int32, 128, 4, RawOp(ltoir=stub_ltoir("less", 4), name="less", state=b"\0" * 8))
    with pytest.raises(ArgumentError, match="compare_op"):
        make(numba.int32, 128, 4, 3)
    with pytest.raises(ArgumentError, match="methods"):
        make(numba.int32, 128, 4, _less, methods={"construct": 3})
    with pytest.raises(ArgumentError, match="threads_in_warp"):
        warp(numba.int32, 4, _less, threads_in_warp=12)
    with pytest.raises(ArgumentError, match="threads_in_warp"):
        warp(numba.int32, 4, _less, threads_in_warp=64)
    with pytest.raises(ArgumentError, match="items_per_thread"):
        warp(numba.int32, -1, _less)
    with pytest.raises(ArgumentError, match="compare_op"):
        warp(numba.float32, 4, OpKind.MAXIMUM)
    with pytest.raises(ArgumentError, match="methods"):
        warp(numba.int32, 4, _less, methods={"construct": 3})
    assert stats.snapshot().get("nvrtc_compiles", 0) == 0


def test_keys_change_with_type_items_threads_comparator_and_group():
    base = coop.block.make_merge_sort_keys(numba.int32, 128, 4, _less)
    others = [coop.block.make_merge_sort_keys(numba.uint32, 128, 4, _less),
              coop.block.make_merge_sort_keys(numba.int32, 128, 2, _less),
              coop.block.make_merge_sort_keys(numba.int32, 256, 4, _less),
              coop.block.make_merge_sort_keys(numba.int32, (64, 2), 4, _less),
              coop.block.make_merge_sort_keys(numba.int32, 128, 4, lambda a, b: a > b),
              coop.block.make_merge_sort_keys(numba.int32, 128, 4, OpKind.LESS),
              coop.block.make_merge_sort_keys(numba.int32, 128, 4, OpKind.GREATER),
              coop.warp.make_merge_sort_keys(numba.int32, 4, _less),
              coop.warp.make_merge_sort_keys(numba.int32, 4, _less, threads_in_warp=16)]
    prims = [base, *others]
    assert len({p.spec.symbol for p in prims}) == len(prims)
    assert len({_build.unit_key([p.spec], 90) for p in prims}) == len(prims)


@pytest.mark.parametrize("group", ["block", "warp"])
def test_second_build_compiles_nothing(fresh_caches, group):
    def build():
        if group == "block":
            return coop.block.make_merge_sort_keys(PAIR, (32, 4), 3, _by_k)
        return coop.warp.make_merge_sort_keys(PAIR, 3, _by_k, threads_in_warp=8)

    first = build()
    counts = stats.snapshot()
    assert counts["nvrtc_compiles"] == 1 and counts["numba_compiles"] == 1
    build()                                                       # memory hit
    _build.clear_memory()                                         # as a new process: disk hit
    third = build()
    counts = stats.snapshot()
    assert counts["nvrtc_compiles"] == 1 and counts["numba_compiles"] == 1 and counts.get("links", 0) == 1
    assert [f.data for f in third.files] == [f.data for f in first.files]
    assert third.temp_storage_bytes == first.temp_storage_bytes > 1
