"""coop sorts of key-value pairs (block radix sort ascending and descending, block and warp
merge sort), both styles: real numba-cuda kernels compiled for sm_90 with no GPU and
linked (nvJitLink, LTO) into a cubin; their arguments, cache keys and providers."""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402
from numba.core.errors import TypingError  # noqa: E402
from numba.cuda.np.numpy_support import from_dtype  # noqa: E402

from cuprims import OpKind, coop  # noqa: E402
from cuprims._base import stats  # noqa: E402
from cuprims.coop import _build  # noqa: E402
from cuprims.coop._style2 import kernel_unit as _kernel_unit  # noqa: E402
from cuprims.coop._codegen import provider_text  # noqa: E402
from cuprims.errors import ArgumentError, CoopError, LinkError  # noqa: E402

from coop_helpers import link_kernel, linked_ptx, shared_bytes  # noqa: E402
from twins import VALUE, _by_k, _less, block_pairs_kernel  # noqa: E402

KEY = np.dtype([("k", np.int16), ("i", np.int32)], align=True)


pytestmark = pytest.mark.usefixtures("sm90")     # coop primitives built for sm_90 (tests/cpu/conftest.py)


def _nb(dtype):
    return from_dtype(np.dtype(dtype)) if not isinstance(dtype, types.Type) else dtype


def _pairs_args(knb, vnb):
    return knb[::1], vnb[::1], types.int32[::1], knb[::1]


def _link_pairs(sort, key_dtype, value_dtype, shape, items, calls=(0, 1, 2, 3)):
    """The kernels test_coop_pairs_gpu sorts by, one per call (``mode`` 0: the whole tile, 1:
    radix bits or a merge's count, 2: the caller's storage, 3: a count and the caller's
    storage), linked: a warp's sort in a block of one logical warp."""
    knb, vnb = _nb(key_dtype), _nb(value_dtype)
    return [link_kernel(block_pairs_kernel(sort, shape, items, knb, vnb, c)[0], _pairs_args(knb, vnb), [sort])
            for c in calls]


# ---------------------------------------------------------------- Style 1: block radix sort of pairs

@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("key,value", [("int8", "int32"), ("uint16", "float64"), ("int32", "int32"),
                                       ("uint64", "uint8"), ("float16", "int16"), ("float32", VALUE),
                                       ("float64", "complex64"), ("int64", "boolean")])
@pytest.mark.parametrize("descending", [False, True])
def test_block_radix_sort_pairs_types_link_and_need_their_files(key, value, descending):
    make = coop.block.make_radix_sort_pairs_descending if descending else coop.block.make_radix_sort_pairs
    value = getattr(types, value) if isinstance(value, str) else value
    sort = make(getattr(types, key), value, (32, 4), 3)
    assert sort.spec.values is not None and sort.spec.mode == ("descending" if descending else "ascending")
    own, bits, theirs = _link_pairs(sort, getattr(types, key), value, (128,), 3, calls=(0, 1, 2))
    assert shared_bytes(own) >= sort.temp_storage_bytes > 1
    knb, vnb = getattr(types, key), _nb(value)
    with pytest.raises(LinkError, match=sort.spec.symbol):
        link_kernel(block_pairs_kernel(sort, (128,), 3, knb, vnb, 0)[0], _pairs_args(knb, vnb), [sort],
                    with_files=False)


@pytest.mark.parametrize("dims,items", [((128,), 1), ((32, 4), 7), ((64, 2, 2), 4)])
def test_block_radix_sort_pairs_shapes(dims, items):
    sort = coop.block.make_radix_sort_pairs(numba.uint32, numba.int32, dims, items)
    kernel, _ = block_pairs_kernel(sort, dims, items, numba.uint32, numba.int32, 0)
    link_kernel(kernel, _pairs_args(numba.uint32, numba.int32), [sort])


def test_radix_pairs_storage_holds_the_values_exchange():
    # the union of CUB's ranking and exchange storage: a tile of doubles outgrows the int keys'
    keys = coop.block.make_radix_sort_keys(numba.int32, 128, 16)
    pairs = coop.block.make_radix_sort_pairs(numba.int32, numba.float64, 128, 16)
    assert pairs.temp_storage_bytes >= 128 * 16 * 8 > keys.temp_storage_bytes
    text, _ = provider_text(pairs.spec)
    assert "cub::BlockRadixSort<int, 128, 16, double," in text and "double* values" in text


# ---------------------------------------------------------------- Style 1: merge sorts of pairs

@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("key,value,op", [("int32", "float32", _less), ("float64", "int64", ">"),
                                          ("uint8", "uint8", OpKind.LESS), ("float16", "int32", OpKind.GREATER),
                                          ("boolean", "float64", _less), (KEY, VALUE, _by_k)])
def test_block_merge_sort_pairs_types_full_partial_and_callers_storage(key, value, op):
    key = getattr(types, key) if isinstance(key, str) else key
    value = getattr(types, value) if isinstance(value, str) else value
    sort = coop.block.make_merge_sort_pairs(key, value, (32, 4), 3, op)
    own, partial, theirs, both = _link_pairs(sort, key, value, (128,), 3)
    assert shared_bytes(own) >= sort.temp_storage_bytes > 1
    # the caller's storage only (each kernel also has 1 KiB of the system's shared memory)
    assert sort.temp_storage_bytes <= shared_bytes(theirs) < shared_bytes(own) + sort.temp_storage_bytes


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("dims,items", [((128,), 1), ((32, 4), 5), ((64, 2, 2), 8), ((1,), 3)])
def test_block_merge_sort_pairs_shapes(dims, items):
    sort = coop.block.make_merge_sort_pairs(numba.float32, VALUE, dims, items, _less)
    _link_pairs(sort, numba.float32, VALUE, dims, items, calls=(0, 3))


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("lanes", [1, 2, 8, 16, 32])
def test_warp_merge_sort_pairs_logical_warps(lanes):
    sort = coop.warp.make_merge_sort_pairs(numba.int16, numba.float64, 3, _less, threads_in_warp=lanes)
    nbytes = sort.temp_storage_layout[0]          # CUB's TempStorage, one per logical warp
    assert sort.own_storage_warps == min(1024 // lanes, max(1, 32 * 1024 // nbytes))
    own, partial, theirs, both = _link_pairs(sort, numba.int16, numba.float64, (lanes,), 3)
    if lanes > 1:
        assert shared_bytes(own) >= sort.own_storage_warps * nbytes


def test_warp_merge_sort_pairs_of_structs_inline():
    sort = coop.warp.make_merge_sort_pairs(KEY, VALUE, 4, _by_k, threads_in_warp=16)
    knb, vnb = _nb(KEY), _nb(VALUE)
    kernel, _ = block_pairs_kernel(sort, (16,), 4, knb, vnb, 1)
    args = _pairs_args(knb, vnb)
    assert not [line for line in linked_ptx(kernel, args, [sort]).splitlines() if "call" in line.split("//")[0]]


def test_partial_pairs_sort_without_oob_default_fails_typing():
    sort = coop.block.make_merge_sort_pairs(numba.int32, numba.int32, 128, 2, _less)

    @cuda.jit(link=sort.files)
    def kernel(x, n):
        keys = cuda.local.array(2, numba.int32)
        values = cuda.local.array(2, numba.int32)
        keys[0] = x[0]
        values[0] = x[1]
        sort(keys, values, n)
        x[0] = keys[0] + values[0]

    with pytest.raises(TypingError, match="oob_default"):
        link_kernel(kernel, (types.int32[::1], types.int32), [sort])


def test_pairs_providers_write_the_keys_tail_only_and_add_no_barrier():
    sort = coop.block.make_merge_sort_pairs(numba.int32, numba.float32, 128, 2, _less)
    text, _ = provider_text(sort.spec)
    assert "__syncthreads" not in text and "StableSort(reinterpret_cast<int (&)[2]>(*keys), " \
        "reinterpret_cast<float (&)[2]>(*values)" in text
    assert "keys[i] = *oob" in text and "values[i] =" not in text


def test_pairs_arguments_are_checked_before_any_compile():
    block, warp = coop.block, coop.warp
    with pytest.raises(ArgumentError, match="dtype"):
        block.make_radix_sort_pairs(numba.complex64, numba.int32, 128, 4)
    with pytest.raises(ArgumentError, match="dtype"):
        block.make_radix_sort_pairs_descending(KEY, numba.int32, 128, 4)
    with pytest.raises(ArgumentError, match="value_dtype"):
        block.make_radix_sort_pairs(numba.int32, "not a type", 128, 4)
    with pytest.raises(ArgumentError, match="threads_per_block"):
        block.make_radix_sort_pairs(numba.int32, numba.int32, 2048, 4)
    with pytest.raises(ArgumentError, match="items_per_thread"):
        block.make_radix_sort_pairs_descending(numba.int32, numba.int32, 128, 0)
    with pytest.raises(ArgumentError, match="value_dtype"):
        block.make_merge_sort_pairs(numba.int32, object(), 128, 4, _less)
    with pytest.raises(ArgumentError, match="threads_per_block"):
        block.make_merge_sort_pairs(numba.int32, numba.int32, 96, 4, _less)
    with pytest.raises(ArgumentError, match="compare_op"):
        block.make_merge_sort_pairs(KEY, numba.int32, 128, 4, "<")
    with pytest.raises(ArgumentError, match="methods"):
        block.make_merge_sort_pairs(numba.int32, numba.int32, 128, 4, _less, methods={"assign": None})
    with pytest.raises(ArgumentError, match="threads_in_warp"):
        warp.make_merge_sort_pairs(numba.int32, numba.int32, 4, _less, threads_in_warp=12)
    with pytest.raises(ArgumentError, match="value_dtype"):
        warp.make_merge_sort_pairs(numba.int32, "nope", 4, _less)
    with pytest.raises(ArgumentError, match="compare_op"):
        warp.make_merge_sort_pairs(numba.int32, numba.int32, 4, OpKind.PLUS)
    assert stats.snapshot().get("nvrtc_compiles", 0) == 0


def test_pairs_keys_differ_from_keys_only_and_by_value_type():
    keys = coop.block.make_radix_sort_keys(numba.int32, 128, 4)
    prims = [keys, coop.block.make_radix_sort_pairs(numba.int32, numba.int32, 128, 4),
             coop.block.make_radix_sort_pairs(numba.int32, numba.float32, 128, 4),
             coop.block.make_radix_sort_pairs_descending(numba.int32, numba.int32, 128, 4),
             coop.block.make_merge_sort_keys(numba.int32, 128, 4, _less),
             coop.block.make_merge_sort_pairs(numba.int32, numba.int32, 128, 4, _less),
             coop.warp.make_merge_sort_pairs(numba.int32, numba.int32, 4, _less),
             coop.warp.make_merge_sort_pairs(numba.int32, VALUE, 4, _less)]
    assert len({p.spec.symbol for p in prims}) == len(prims)
    assert len({_build.unit_key([p.spec], 90) for p in prims}) == len(prims)
    assert "values=" not in keys.spec.key      # keys-only specs (and their caches) are unchanged


@pytest.mark.parametrize("key,value", [("int32", "complex64"), ("float32", VALUE), ("complex64", "complex64")])
def test_under_aligned_values_are_copied_into_aligned_locals(key, value):
    # numba's local arrays of complex and structs may be less aligned than the C++ type:
    # the values (as the keys, where theirs is such a type) arrive as void* and are copied
    from cuprims.coop._arguments import comparator
    from cuprims.coop._spec import ProviderSpec, element_type

    kvt, vvt = element_type(key), element_type(value)
    compare = _less if key == "complex64" else OpKind.LESS      # complex keys: a Python comparator
    spec = ProviderSpec("merge_sort", kvt, (128, 1, 1), 4, "", comparator(compare, kvt, "compare_op"), values=vvt)
    text, _ = provider_text(spec)
    assert "void* values_raw" in text and f"{vvt.cpp} values[4];" in text
    assert "memcpy(values, values_raw, sizeof(values));" in text
    assert "memcpy(values_raw, values, sizeof(values));" in text
    assert ("void* keys_raw" in text) is (key == "complex64")


def test_aligned_values_are_read_in_place():
    from cuprims.coop._spec import ProviderSpec, element_type

    spec = ProviderSpec("radix_sort", element_type("int32"), (128, 1, 1), 4, "", mode="ascending",
                        values=element_type("float64"))
    text, _ = provider_text(spec)
    assert "_raw" not in text and "double* values" in text


def test_second_pairs_build_compiles_nothing(fresh_caches):
    first = coop.warp.make_merge_sort_pairs(KEY, VALUE, 3, _by_k, threads_in_warp=8)
    assert stats.snapshot()["nvrtc_compiles"] == 1
    _build.clear_memory()
    again = coop.warp.make_merge_sort_pairs(KEY, VALUE, 3, _by_k, threads_in_warp=8)
    counts = stats.snapshot()
    assert counts["nvrtc_compiles"] == 1 and counts["numba_compiles"] == 1
    assert [f.data for f in again.files] == [f.data for f in first.files]


# ---------------------------------------------------------------- Style 2

def _link2(kernel, argtypes, block):
    with coop.target(block=block):
        cubin = link_kernel(kernel, argtypes, [])
    assert cubin[:4] == b"\x7fELF"
    return cubin


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("block", [(128,), (32, 4), (64, 2, 2)])
def test_style2_sorts_of_pairs(block):
    def by_i(a, b):
        return a.i < b.i

    rec = from_dtype(VALUE)

    @cuda.jit
    def kernel(x, v, s, n):
        g = coop.this_block()
        keys = coop.ThreadData(2)                 # float32, from x
        values = coop.ThreadData(2)               # int32, from v
        recs = coop.ThreadData(2)                 # the record, from s
        coop.load(g, x, keys)
        coop.load(g, v, values)
        coop.load(g, s, recs)
        coop.radix_sort_pairs(g, keys, values)
        coop.radix_sort_pairs(g, keys, recs, descending=True, begin_bit=0, end_bit=16)
        coop.merge_sort_pairs(g, keys, values, compare_op="<", valid_items=n, oob_default=np.inf)
        coop.merge_sort_pairs(g, values, recs, compare_op=lambda a, b: a > b)
        coop.merge_sort_pairs(coop.this_warp(), recs, keys, compare_op=by_i)
        coop.store(g, x, keys)
        coop.store(g, v, values)
        coop.store(g, s, recs)

    _link2(kernel, (types.float32[::1], types.int32[::1], rec[::1], types.int32), block)
    dims = tuple(block) + (1,) * (3 - len(block))
    found = {(sp.kind, sp.mode, sp.values.code) for sp in _kernel_unit._units
             if sp.values is not None and sp.dims in (dims, (32, 1, 1))}
    assert {("radix_sort", "ascending", "i4"), ("merge_sort", "", "i4"), ("warp_merge_sort", "", "f4")} <= found
    assert any(k == "radix_sort" and m == "descending" and c.startswith("struct:") for k, m, c in found)


def _values_too_short(x, y):
    g = coop.this_block()
    keys = coop.ThreadData(4)
    values = coop.ThreadData(2, dtype=numba.int32)
    coop.load(g, x, keys)
    coop.radix_sort_pairs(g, keys, values)


def _values_not_thread_data(x, y):
    g = coop.this_block()
    keys = coop.ThreadData(4)
    coop.load(g, x, keys)
    coop.merge_sort_pairs(g, keys, y, compare_op="<")


def _radix_pairs_of_a_warp(x, y):
    keys = coop.ThreadData(4)
    values = coop.ThreadData(4)
    coop.load(coop.this_block(), x, keys)
    coop.load(coop.this_block(), y, values)
    coop.radix_sort_pairs(coop.this_warp(), keys, values)


def _struct_radix_keys(x, y):
    keys = coop.ThreadData(4, dtype=VALUE)
    values = coop.ThreadData(4)
    coop.load(coop.this_block(), y, values)
    coop.radix_sort_pairs(coop.this_block(), keys, values)


def _pairs_partial_without_oob(x, y):
    keys = coop.ThreadData(4)
    values = coop.ThreadData(4)
    coop.load(coop.this_block(), x, keys)
    coop.load(coop.this_block(), y, values)
    coop.merge_sort_pairs(coop.this_block(), keys, values, compare_op="<", valid_items=5)


def _pairs_missing_values(x, y):
    keys = coop.ThreadData(4)
    coop.load(coop.this_block(), x, keys)
    coop.radix_sort_pairs(coop.this_block(), keys)


@pytest.mark.parametrize("fn,error,pattern", [
    (_values_too_short, ArgumentError, r"argument 'values'.*4 items.*radix_sort_pairs\(\) at .*test_coop_pairs"),
    (_values_not_thread_data, ArgumentError, r"argument 'values'.*coop.ThreadData"),
    (_radix_pairs_of_a_warp, CoopError, r"radix_sort_pairs\(\) at .*takes coop.this_block"),
    (_struct_radix_keys, ArgumentError, r"argument 'keys'.*integers or floats"),
    (_pairs_partial_without_oob, CoopError, r"merge_sort_pairs.*valid_items= needs oob_default="),
    (_pairs_missing_values, CoopError, r"coop.radix_sort_pairs\(\) at .*missing a required argument: 'values'"),
], ids=lambda v: getattr(v, "__name__", "")[:24])
def test_style2_pairs_bad_calls(fn, error, pattern):
    with pytest.raises(error, match=pattern):
        _link2(cuda.jit(fn), (types.float32[::1], types.int32[::1]), 128)
