"""Segmented sort without a GPU: ahead-of-time sm_90 (and sm_80) builds over every key dtype,
keys and pairs, both orders, array and iterator offsets of every offset type; goldens; each
kernel's parameters against the cubin; the float keys' comparison operators evaluated by
NVRTC; argument errors named before any compile; and the host dispatch run against a fake
device that emulates the kernels in numpy (classification, grids, the temporary-storage layout,
DoubleBuffer parity), its results checked against numpy.

Regenerate the golden sources after an intended codegen change with::

    CUPRIMS_UPDATE_GOLDENS=1 python -m pytest tests/cpu/algorithms/test_segmented_sort.py -k golden
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import cuprims
from cpu_helpers import check_golden, check_kernel_params, counters, delta, render_source
from cuprims import CountingIterator, DoubleBuffer, ProxyArray as P, SortOrder, TransformIterator
from cuprims._codegen.common import preamble
from cuprims._compile.source import Source
from cuprims._value_types import value_type
from cuprims.algorithms.segmented_sort import api as ss
from cuprims.algorithms.segmented_sort.source import _key_order, segmented_sort_source
from cuprims.algorithms.sort_source import NAN_LAST_KEY, nan_last_radix_traits
from cuprims.errors import ArgumentError, ArgumentTypeError
from test_radix_nan_order import special_keys
from test_radix_sort import ELF, check_param_layout
from twins import STRUCT, ordered_bits

pytestmark = pytest.mark.runs_long   # long tests: sent to the workers first

ASC, DESC = SortOrder.ASCENDING, SortOrder.DESCENDING
i4, i8 = np.int32, np.int64


def fixed_offsets(size: int, dtype=np.int32):
    """Segments of ``size`` items: starts and ends from TransformIterators over CountingIterators."""
    starts = TransformIterator(CountingIterator(dtype(0)), lambda i: i * size)
    ends = TransformIterator(CountingIterator(dtype(1)), lambda i: i * size)
    return starts, ends


def make(key, value=None, order=ASC, offsets=i4, double_buffer=False, cc=90, **kw):
    """An ahead-of-time build over placeholders; ``offsets``: a dtype (arrays) or an iterator pair."""
    starts, ends = (P(offsets), P(offsets)) if not isinstance(offsets, tuple) else offsets
    if double_buffer:
        keys = dict(d_in_keys=DoubleBuffer(P(key), P(key)),
                    d_in_values=None if value is None else DoubleBuffer(P(value), P(value)))
    else:
        keys = dict(d_in_keys=P(key), d_out_keys=P(key), d_in_values=None if value is None else P(value),
                    d_out_values=None if value is None else P(value))
    return cuprims.make_segmented_sort(**keys, start_offsets_in=starts, end_offsets_in=ends, order=order,
                                       compute_capability=cc, **kw)


# ----------------------------------------------------------------------- builds

BUILDS = [  # key, value, order, offsets, double buffer: every key dtype and offset type at least once
    ("float16", STRUCT, ASC, i8, True),
    ("float64", None, DESC, np.uint32, False),
    ("bool", np.uint16, ASC, np.uint64, False),
    ("int8", np.float32, DESC, i4, False),
    ("uint8", None, ASC, "iterator", False),
    ("int16", None, DESC, i4, True),
    ("uint16", i4, ASC, i4, False),
    ("uint32", None, DESC, i8, False),
    ("int64", np.float64, ASC, i4, False),
    ("uint64", None, DESC, i4, False),
]


# With the slow tests; in CI the goldens below build 32-bit keys over 32-bit offsets and
# float pairs over an offset iterator (a double buffer is the same build)
@pytest.mark.slow
@pytest.mark.parametrize("key,value,order,offsets,double_buffer", BUILDS, ids=[b[0] for b in BUILDS])
def test_build_every_key_type(key, value, order, offsets, double_buffer, shared_cache):
    obj = make(key, value, order, fixed_offsets(64, np.int64) if offsets == "iterator" else offsets, double_buffer)
    assert obj.cubin()[:4] == ELF
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    kd = np.dtype(key)
    assert meta["key_size"] == kd.itemsize and meta["key_bits"] == 8 * kd.itemsize
    assert meta["value_size"] == (0 if value is None else np.dtype(value).itemsize)
    # variant 0 computes offsets in 32 bits whatever their type; the wide variant (past
    # 2^31 - 1 items) makes CUB's signed choice: uint32 -> int64
    assert meta["offset_size"] == 4
    wide_text = obj.desc.variant(1).source(90).text
    assert f"using cuprims_offset_t = {'int' if offsets in (i4,) else 'long long'};" in wide_text
    assert ("narrow_offsets<" in obj._builds.source(90).text) == (offsets not in (i4,))
    assert meta["radix_bits"] == (4 if kd.itemsize == 1 else 6)
    assert 0 <= meta["mid_items"] < meta["large_items"]
    assert meta["medium_threads"] == meta["small_threads"] == meta["large_threads"]
    assert meta["large_threads"] * meta["large_items"] > meta["medium_warp"] * meta["medium_items"] \
        > meta["small_warp"] * meta["small_items"] >= 1
    text = obj._builds.source(90).text
    assert (NAN_LAST_KEY in text) == (kd.kind == "f")
    assert ("Descending" in obj._builds.source(90).name_expressions[0]) == (order is DESC)


def test_golden_int32_keys_array_offsets(shared_cache):
    obj = make(i4)
    check_golden("segmented_sort_i4_keys_asc_i4_offsets_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    # CUB's sm_90 policy for 4-byte keys, and the middle tier: 4096-key segments fit it whole
    assert (meta["large_threads"], meta["large_items"], meta["mid_items"]) == (256, 23, 16)
    assert meta["partitioning_threshold"] == 500
    # the classify kernel's block, which the dispatch tests' fake device assumes
    assert (meta["classify_threads"], meta["classify_items"]) == (256, 8)


@pytest.mark.slow       # a whole segmented-sort build more; CI builds the int32 keys golden
def test_golden_float_pairs_iterator_offsets(shared_cache):
    starts, ends = fixed_offsets(4096)
    obj = make(np.float32, np.int64, DESC, (starts, ends))
    check_golden("segmented_sort_f4_i8_pairs_desc_fixed_size_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    # new iterator objects of the same kinds (equal lambdas) are the same build
    before = counters()
    again = make(np.float32, np.int64, DESC, fixed_offsets(4096))
    assert again is obj and delta(before) == {"numba_compiles": 0, "nvrtc_compiles": 0, "links": 0}
    # arrays instead of DoubleBuffers: the same code, the same object
    assert make(np.float32, np.int64, DESC, fixed_offsets(4096), double_buffer=True) is obj


def test_sm80_tiers(shared_cache):
    obj = make(i4, cc=80)
    check_kernel_params(obj, 80)
    meta = obj._builds.result(80).meta
    assert meta["medium_warp"] == 32 and meta["mid_items"] == 16


@pytest.mark.slow       # one more whole segmented-sort build (CI builds the sm80 one above)
def test_cubs_tiers_only(shared_cache):
    # mid_items=0: CUB's tiers alone (a tuning knob of the description)
    import dataclasses

    desc = dataclasses.replace(make(i4).desc, mid_items=0)
    plain = ss.SegmentedSort._make(desc, 90, (None, None, None))
    assert plain._builds.result(90).meta["mid_items"] == 0
    check_kernel_params(plain, 90)


@pytest.mark.parametrize("dt", ["float16", "float32", "float64"])
def test_float_key_comparisons_follow_numpys_order(dt, shared_cache):
    """NVRTC evaluates the twin's <, > and == (the sub-warp merge sorts' comparisons) on every
    pair of special keys: the order of the radix model (NaN last, -0.0 == +0.0)."""
    from cuprims._compile.nvrtc import compile_to_ltoir

    vt = value_type(np.dtype(dt))
    keys = special_keys(dt)
    words = ordered_bits(keys, False).tolist()
    bits = keys.view(f"u{keys.dtype.itemsize}").tolist()
    t = NAN_LAST_KEY
    checks = []
    for a, wa in zip(bits, words):
        for b, wb in zip(bits, words):
            x, y = f"{t}{{{a}ull}}", f"{t}{{{b}ull}}"
            checks.append(f"static_assert(({x} < {y}) == {str(wa < wb).lower()} && ({x} > {y}) == "
                          f"{str(wa > wb).lower()} && ({x} == {y}) == {str(wa == wb).lower()}, \"{a:#x} vs {b:#x}\");")
    text = (preamble((vt,), 90) + "#include <cub/device/dispatch/kernels/kernel_segmented_sort.cuh>\n"
            + nan_last_radix_traits(vt) + _key_order(vt) + "\n".join(checks) + "\n")
    assert compile_to_ltoir(Source(text, (), (), ()), 90)[0]


def test_source_kernels_and_offset_types():
    from cuprims.algorithms.arguments import describe

    for offsets, cpp in ((i4, "int"), (np.uint32, "long long"), (i8, "long long"), (np.uint64, "long long")):
        b = describe(P(offsets), "start_offsets_in")
        own = f"const {value_type(np.dtype(offsets)).cpp}*"
        for wide in (True, False):
            src = segmented_sort_source(key=value_type(np.dtype(i4)), value=None, descending=False, begin=b, end=b,
                                        arch=90, wide_offsets=wide)
            # the wide build: CUB's signed choice; the narrow one: 32 bits, other types read narrowed
            assert f"using cuprims_offset_t = {cpp if wide else 'int'};" in src.text
            param = own if wide or offsets is i4 else f"cuprims::segmented_sort::narrow_offsets<{own}>"
            assert all(f", {param}, {param}, cuprims_offset_t" in e
                       for e in src.name_expressions if "clear_kernel" not in e)
            assert len(src.name_expressions) == 6 and src.name_expressions[5].endswith("cuprims_mid_items, true>")
            assert dict(src.compile_options)["device_as_default_execution_space"] is True


def test_offset_width_follows_the_problem_not_the_offsets_type():
    """Variant 0 (32-bit offsets) for every offset type, arrays and iterators; variant 1
    (the offsets' own width) for any but int32, whose narrow build serves every size."""
    int64_iterators = fixed_offsets(64, np.int64)
    advanced = (int64_iterators[0], int64_iterators[0] + 1)   # `it + 1` as the end offsets
    counting = (CountingIterator(i4(0)), CountingIterator(i4(1)))
    # (i * 64 over an int32 count is int64: numba's type for the lambda's result)
    for offsets, wide in ((i4, 0), (np.uint32, 1), (i8, 1), (np.uint64, 1), (counting, 0), (fixed_offsets(64), 1),
                          (int64_iterators, 1), (advanced, 1)):
        starts, ends = (P(offsets), P(offsets)) if not isinstance(offsets, tuple) else offsets
        desc = ss._describe(P(i4), P(i4), None, None, starts, ends, ASC)
        obj = ss.SegmentedSort.__new__(ss.SegmentedSort)
        obj._adopt(desc, {})
        assert not desc.wide_offsets and desc.variant(1).wide_offsets and obj._wide_variant == wide
        assert ("narrow_offsets<" in desc.source(90).text) == bool(wide)
        assert "narrow_offsets<" not in desc.variant(1).source(90).text
        assert desc.variant(1).kernel_params() == desc.kernel_params()   # one parameter layout
    assert ss.NARROW_MAX_ITEMS == (1 << 31) - 1


def test_int64_offsets_build_both_variants(shared_cache):
    """CuPy's default offsets (int64 arrays): 32-bit kernels (variant 0, built ahead of time)
    and, past 2^31 - 1 items, 64-bit ones (variant 1), each laid out as the host packs it."""
    obj = make(i4, offsets=i8)
    check_kernel_params(obj, 90)
    assert obj._builds.result(90).meta["offset_size"] == 4
    wide = obj._builds_of(1)
    wide.build_for([90], ())
    result, source = wide.result(90), wide.source(90)
    assert result.meta["offset_size"] == 8 and "using cuprims_offset_t = long long;" in source.text
    check_param_layout(result, source, obj.desc.variant(1).kernel_params())
    # the offset width changes no tuning: both builds export the same launch facts
    assert {k: v for k, v in result.meta.items() if k != "offset_size"} == \
        {k: v for k, v in obj._builds.result(90).meta.items() if k != "offset_size"}


def test_golden_int64_offsets_narrowed(shared_cache):
    obj = make(i4, offsets=i8)
    check_golden("segmented_sort_i4_keys_asc_i8_offsets_sm90", render_source(obj._builds.source(90)))


def test_int64_iterator_offsets_build_narrow(shared_cache):
    starts, ends = fixed_offsets(4096, np.int64)
    obj = make(i4, offsets=(starts, starts + 1))
    check_kernel_params(obj, 90)
    assert obj._builds.result(90).meta["offset_size"] == 4
    assert "narrow_offsets<cuprims::input_iterator<" in obj._builds.source(90).text


def test_narrowed_offsets_keep_valid_segments_and_empty_ones_empty():
    """NVRTC evaluates narrow_offsets on offsets of each wide type: values in [0, INT_MAX]
    unchanged, the rest clamped (monotone: an end at or below its start stays so)."""
    from cuprims._compile.nvrtc import compile_to_ltoir

    top = (1 << 31) - 1
    cases = {
        "long long": [0, 5, top, top + 1, 1 << 32, (1 << 32) - 100, -1, -(1 << 40), (1 << 62)],
        "unsigned int": [0, 5, top, top + 1, (1 << 32) - 1],
        "unsigned long long": [0, 5, top, top + 1, (1 << 32) - 100, (1 << 64) - 1],
    }
    checks = []
    for cpp, values in cases.items():
        arr = f"cuprims_{cpp.replace(' ', '_')}"
        lits = ", ".join(f"static_cast<{cpp}>({v}ull)" if v >= 0 else f"static_cast<{cpp}>({v}ll)" for v in values)
        checks.append(f"constexpr {cpp} {arr}[] = {{{lits}}};")
        for i, v in enumerate(values):
            want = min(max(v, 0), top)
            checks.append(f"static_assert(cuprims::segmented_sort::narrow_offsets<const {cpp}*>{{{arr}}}[{i}] == "
                          f"{want}, \"{cpp} {v}\");")
    text = (preamble((value_type(np.dtype(i4)),), 90) + "#include <segmented_sort/cuprims_segmented_sort.cuh>\n"
            + "\n".join(checks) + "\n")
    assert compile_to_ltoir(Source(text, (), (), (), (("device_as_default_execution_space", True),)), 90)[0]


# ----------------------------------------------------------------------- argument errors

@pytest.mark.parametrize("kwargs,argument", [
    (dict(d_in_keys=P(i4)), "d_out_keys"),
    (dict(d_in_keys=P(i4), d_out_keys=P(i8)), "d_out_keys"),
    (dict(d_in_keys=P(i4), d_out_keys=P(i4), d_in_values=P(i4)), "d_out_values"),
    (dict(d_in_keys=DoubleBuffer(P(i4), P(i4)), d_out_keys=P(i4)), "d_out_keys"),
    (dict(d_in_keys=DoubleBuffer(P(i4), P(i4)), d_in_values=P(i4), d_out_values=P(i4)), "d_in_values"),
    (dict(d_in_keys=CountingIterator(i4(0)), d_out_keys=P(i4)), "d_in_keys"),
    (dict(d_in_keys=P(i4), d_out_keys=P(i4), end_offsets_in=P(i8)), "end_offsets_in"),
    (dict(d_in_keys=P(i4), d_out_keys=P(i4), start_offsets_in=np.zeros(3, i4)), "start_offsets_in"),
], ids=["no-out", "out-dtype", "values-without-out", "db-with-out", "db-keys-array-values", "iterator-keys",
        "offsets-of-two-types", "host-offsets"])
def test_build_argument_errors(kwargs, argument):
    kw = dict(start_offsets_in=P(i4), end_offsets_in=P(i4), order=ASC, compute_capability=90)
    kw.update(kwargs)
    with pytest.raises((ArgumentError, ArgumentTypeError)) as info:
        cuprims.make_segmented_sort(**kw)
    assert info.value.argument == argument


def test_signatures_are_keyword_only_and_exported():
    for fn in (cuprims.make_segmented_sort, cuprims.segmented_sort, ss.SegmentedSort.__call__):
        params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params), fn
    assert list(inspect.signature(cuprims.make_segmented_sort).parameters) == [
        "d_in_keys", "d_out_keys", "d_in_values", "d_out_values", "start_offsets_in", "end_offsets_in", "order",
        "compute_capability"]
    assert list(inspect.signature(cuprims.segmented_sort).parameters) == [
        "d_in_keys", "d_out_keys", "d_in_values", "d_out_values", "num_items", "num_segments", "start_offsets_in",
        "end_offsets_in", "order", "stream"]
    assert list(inspect.signature(ss.SegmentedSort.__call__).parameters)[1:] == [
        "temp_storage", "d_in_keys", "d_out_keys", "d_in_values", "d_out_values", "num_items", "num_segments",
        "start_offsets_in", "end_offsets_in", "stream"]
    assert "make_segmented_sort" in cuprims.__all__ and "segmented_sort" in cuprims.__all__
