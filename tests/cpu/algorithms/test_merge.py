"""Merge on the CPU: ahead-of-time sm_90 builds for several key and value dtypes, a Python
comparator, struct keys, iterators and the 64-bit-offset variant; a golden, kernel
parameters against the cubin, CUB's sm_90 tile facts read back through ``cuprims_meta``,
and bad arguments named before anything is compiled or launched."""

from __future__ import annotations

import numpy as np
import pytest

import cuprims
from cpu_helpers import check_golden, check_kernel_params, render_source
from cuprims import CountingIterator, DiscardIterator, OpKind, ProxyArray as P
from cuprims.errors import ArgumentError, ArgumentTypeError
from twins import KEY_STRUCT, struct_less

i4, i8, f4, f8 = np.int32, np.int64, np.float32, np.float64


def _make(key=i4, value=None, op=OpKind.LESS, **over):
    v = None if value is None else P(value)
    kw = dict(d_in_keys1=P(key), d_in_values1=v, d_in_keys2=P(key), d_in_values2=v, d_out_keys=P(key),
              d_out_values=v, op=op, compute_capability=90)
    kw.update(over)
    return cuprims.make_merge(**kw)


def test_golden_and_parameters(shared_cache):
    obj = _make(i4, i4)
    check_golden("merge_i4_i4_less_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    # CUB's sm_90 merge policy: 512 threads, 15 nominal 4-byte items (7 for 8-byte pairs),
    # keys and values copied in bulk into shared memory
    assert (meta["threads"], meta["items"], meta["vsmem"]) == (512, 7, 0)
    assert meta["bulk_keys"] == meta["bulk_values"] == 1 and meta["offset_size"] == 4


@pytest.mark.parametrize("key, value, items", [(np.int8, None, 15), (np.uint16, np.float32, 10), (i4, None, 15),
                                               (i8, i8, 3), (f4, np.int8, 12), (f8, None, 7),
                                               (np.float16, np.complex128, 3)])
def test_builds_for_key_and_value_types(shared_cache, key, value, items):
    obj = _make(key, value)
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    assert meta["items"] == items and meta["key_size"] == np.dtype(key).itemsize
    assert meta["value_size"] == (0 if value is None else np.dtype(value).itemsize)


def test_python_comparator_and_struct_keys(shared_cache):
    check_kernel_params(_make(f4, None, op=lambda a, b: a > b), 90)
    obj = _make(KEY_STRUCT, i4, op=struct_less)
    check_kernel_params(obj, 90)
    assert not obj._builds.result(90).meta["bulk_keys"]    # an 8-byte struct aligned to 4: no bulk copy


def test_iterators_in_and_out(shared_cache):
    obj = _make(i8, i8, d_in_keys1=CountingIterator(np.int64(0)), d_in_values1=CountingIterator(np.int64(0)),
                d_out_keys=DiscardIterator(P(i8)))
    check_kernel_params(obj, 90)
    assert not obj.desc.d_in_keys1.is_pointer and obj.desc.d_in_keys2.is_pointer
    assert not obj.desc.d_out_keys.is_pointer


def test_wide_offsets_variant(shared_cache):
    obj = _make(np.uint8)
    wide = obj._builds_of(1)
    wide.build_for([90], obj._objects(OpKind.LESS))
    assert wide.result(90).meta["offset_size"] == 8
    assert obj.desc.variant(1).kernel_params()[0][1] == "i64"


@pytest.mark.parametrize("over, argument", [
    (dict(d_in_values1=P(i4), d_in_values2=None, d_out_values=P(i4)), "d_in_values2"),
    (dict(d_in_values1=None, d_in_values2=P(i4), d_out_values=P(i4)), "d_in_values1"),
    (dict(d_in_values1=P(i4), d_in_values2=P(i4), d_out_values=None), "d_out_values"),
    (dict(d_in_keys2=P(i8)), "d_in_keys2"),
    (dict(d_out_keys=P(f4)), "d_out_keys"),
    (dict(d_in_values1=P(i4), d_in_values2=P(f4), d_out_values=P(i4)), "d_in_values2"),
    (dict(d_in_values1=P(i4), d_in_values2=P(i4), d_out_values=P(i8)), "d_out_values"),
    (dict(op=OpKind.PLUS), "op"),
    (dict(op=None), "op"),
    (dict(d_in_keys1=P(KEY_STRUCT), d_in_keys2=P(KEY_STRUCT), d_out_keys=P(KEY_STRUCT)), "op"),
    (dict(d_in_keys1=P(np.complex64), d_in_keys2=P(np.complex64), d_out_keys=P(np.complex64)), "op"),
])
def test_bad_build_arguments_are_named(shared_cache, over, argument):
    with pytest.raises(ArgumentError) as info:
        _make(**over)
    assert info.value.argument == argument


def test_missing_keyword_is_named():
    with pytest.raises(ArgumentTypeError) as info:
        cuprims.make_merge(d_in_keys1=P(i4), d_in_keys2=P(i4), d_out_keys=P(i4), d_in_values1=None,
                           d_in_values2=None, op=OpKind.LESS)
    assert "d_out_values" in str(info.value)


def test_call_arguments_are_checked_before_launching(shared_cache):
    obj = _make(i4)
    kw = dict(temp_storage=None, d_in_keys1=P(i4), d_in_values1=None, d_in_keys2=P(i4), d_in_values2=None,
              d_out_keys=P(i4), d_out_values=None, num_items1=1, num_items2=1)
    for name, bad in (("num_items1", -1), ("num_items2", 1.5)):
        with pytest.raises(ArgumentError) as info:
            obj(**{**kw, name: bad})
        assert info.value.argument == name
    with pytest.raises(ArgumentError) as info:
        obj(**{**kw, "d_in_values1": P(i4)})
    assert info.value.argument == "d_in_values1"
