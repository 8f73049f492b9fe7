"""Operators that capture CuPy arrays, on a GPU: reduce, scan, unary and binary transforms,
binary search comparators and transform iterators read the array bound at each call;
swapping it (a global rebound, a closure cell reassigned, a default replaced) changes the
results and compiles nothing new, and nothing keeps a dropped array alive."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import cuprims
from cuprims import CountingIterator, OpKind, TransformIterator, TransformOutputIterator
from cuprims.errors import ArgumentError

cp = pytest.importorskip("cupy")

COMPILES = ("numba_compiles", "nvrtc_compiles", "links")

FLOOR = None  # globals the operators below capture (rebound by the tests)
OFFSET = None
KEYS = None


def _compiles() -> tuple:
    info = cuprims.cache_info()
    return tuple(info[k] for k in COMPILES)


def _weak(x):
    try:
        return weakref.ref(x)
    except TypeError:
        pytest.skip("this CuPy's arrays take no weak references")


def _clipped_max(a, b):
    return max(max(a, b), FLOOR[0])  # associative: max(items, h_init, FLOOR[0])


def _by_key(a, b):
    return KEYS[a] < KEYS[b]  # indices ordered by the key each one has in the captured table


def _reduce(d_in, n, op, dtype=np.float32, h_init=0):
    out = cp.full(1, -1, dtype=dtype)
    cuprims.reduce_into(d_in=d_in, d_out=out, num_items=n, op=op, h_init=np.asarray(h_init, dtype)[()])
    return out.get()[0]


@pytest.mark.parametrize("n", [1, 1000, (1 << 20) + 7])
def test_reduce_op_reads_the_global_bound_at_each_call(n):
    global FLOOR
    x = cp.arange(n, dtype=cp.float32)
    FLOOR = cp.asarray([-5.0], dtype=cp.float32)
    assert _reduce(x, n, _clipped_max) == n - 1
    before = _compiles()
    for floor in (1e7, 2e7, -1.0):
        FLOOR = cp.asarray([floor], dtype=cp.float32)
        assert _reduce(x, n, _clipped_max) == max(n - 1, floor)
    assert _compiles() == before


def test_built_reducer_reads_the_closure_cell_at_each_call():
    n = 100_000
    x = cp.arange(n, dtype=cp.int64)
    out = cp.empty(1, cp.int64)

    def make():
        floor = cp.asarray([0], dtype=cp.int64)

        def op(a, b):
            return max(max(a, b), floor[0])

        def set_floor(v):
            nonlocal floor
            floor = cp.asarray([v], dtype=cp.int64)
        return op, set_floor

    op, set_floor = make()
    h_init = np.int64(0)
    reducer = cuprims.make_reduce_into(d_in=x, d_out=out, op=op, h_init=h_init)
    temp = cp.empty(reducer(temp_storage=None, d_in=x, d_out=out, num_items=n, op=op, h_init=h_init), cp.uint8)
    before = _compiles()
    for floor in (0, 10 ** 9, 7, 10 ** 12):
        set_floor(floor)
        reducer(temp_storage=temp, d_in=x, d_out=out, num_items=n, op=op, h_init=h_init)
        assert int(out.get()[0]) == max(n - 1, floor)
    assert _compiles() == before
    with pytest.raises(ArgumentError):  # the operator's arrays are bound per call: op= is needed
        reducer(temp_storage=temp, d_in=x, d_out=out, num_items=n, h_init=h_init)


def test_transform_iterator_gathers_from_the_current_table():
    n = 5000
    rng = np.random.default_rng(1)
    tables = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
    table = cp.asarray(tables[0])

    def lookup(i):
        return table[i]

    def total():
        return _reduce(TransformIterator(CountingIterator(np.int64(0)), lookup, np.float32), n, OpKind.PLUS)

    assert total() == pytest.approx(tables[0].sum(dtype=np.float64), rel=1e-4, abs=1e-2)
    before = _compiles()
    for host in tables[1:]:
        table = cp.asarray(host)
        assert total() == pytest.approx(host.sum(dtype=np.float64), rel=1e-4, abs=1e-2)
    assert _compiles() == before


def test_transform_iterator_over_an_array_with_a_2d_capture():
    n = 4096
    x = cp.arange(n, dtype=cp.float32)
    m = cp.arange(12, dtype=cp.float32).reshape(3, 4)

    def scaled():
        it = TransformIterator(x, lambda v: v * m[1, 2] + m.shape[1])
        return _reduce(it, n, OpKind.PLUS, np.float64)

    def expect(mat):
        return float(np.sum(np.arange(n, dtype=np.float64) * float(mat[1, 2]) + mat.shape[1]))

    assert scaled() == pytest.approx(expect(m.get()))
    before = _compiles()
    m = cp.full((5, 7), 0.5, dtype=cp.float32)  # another shape, same dtype and rank
    assert scaled() == pytest.approx(expect(m.get()))
    assert _compiles() == before


def test_scan_op_and_output_iterator_capture_arrays():
    n = 300_000
    host = np.random.default_rng(2).integers(-100, 100, n).astype(np.int32)
    x = cp.asarray(host)
    floor = cp.asarray([50], dtype=cp.int32)
    scale = cp.asarray([2], dtype=cp.int32)
    y = cp.empty(n, cp.int32)
    out = TransformOutputIterator(y, lambda s: s * scale[0])

    def run():
        cuprims.inclusive_scan(d_in=x, d_out=out, op=lambda a, b: max(max(a, b), floor[0]), num_items=n)
        return y.get()

    def expect():
        running = np.maximum.accumulate(host)
        running = np.maximum(running, int(floor.get()[0]))
        running[0] = host[0]  # the first item is not combined with anything
        return running * int(scale.get()[0])

    np.testing.assert_array_equal(run(), expect())
    before = _compiles()
    floor = cp.asarray([90], dtype=cp.int32)
    scale = cp.asarray([-3], dtype=cp.int32)
    np.testing.assert_array_equal(run(), expect())
    assert _compiles() == before


def test_default_argument_capture_follows_the_new_default():
    n = 10_000
    x = cp.ones(n, dtype=cp.float64)

    def weighted(v, w=cp.asarray([3.0])):
        return v * w[0]

    it = TransformIterator(x, weighted, np.float64)
    assert _reduce(it, n, OpKind.PLUS, np.float64) == 3.0 * n
    before = _compiles()
    weighted.__defaults__ = (cp.asarray([0.25]),)
    assert _reduce(it, n, OpKind.PLUS, np.float64) == 0.25 * n
    assert _compiles() == before


def test_dtype_change_through_a_built_object_is_an_error_and_one_shot_rebuilds():
    global FLOOR
    n = 1000
    x = cp.arange(n, dtype=cp.float32)
    out = cp.empty(1, cp.float32)
    FLOOR = cp.asarray([0.0], dtype=cp.float32)
    h_init = np.float32(0)
    reducer = cuprims.make_reduce_into(d_in=x, d_out=out, op=_clipped_max, h_init=h_init)
    FLOOR = cp.asarray([1e6], dtype=cp.float64)
    with pytest.raises(ArgumentError, match="FLOOR"):
        reducer(temp_storage=None, d_in=x, d_out=out, num_items=n, op=_clipped_max, h_init=h_init)
    assert _reduce(x, n, _clipped_max) == 1e6  # a new build for float64 captures


def test_the_captured_array_is_not_kept_alive():
    global FLOOR
    n = 1000
    x = cp.arange(n, dtype=cp.float32)
    FLOOR = cp.asarray([2e3], dtype=cp.float32)
    try:
        ref = weakref.ref(FLOOR)
    except TypeError:
        pytest.skip("this CuPy's arrays take no weak references")
    assert _reduce(x, n, _clipped_max) == 2e3
    FLOOR = cp.asarray([0.0], dtype=cp.float32)
    gc.collect()
    assert ref() is None


def test_unary_transform_reads_the_closure_array_at_each_call():
    # a new closure over a new array of the same kind: the same build, the new array read
    n = 1000
    x = cp.arange(n, dtype=cp.float32)
    y = cp.empty_like(x)
    before = None
    for shift in (5.0, -2.0, 0.5):
        w = cp.asarray([shift], dtype=cp.float32)
        cuprims.unary_transform(d_in=x, d_out=y, op=lambda v: v + w[0], num_items=n)
        np.testing.assert_array_equal(y.get(), x.get() + np.float32(shift))
        if before is None:
            before = _compiles()
    assert _compiles() == before


@pytest.mark.parametrize("n", [1, 1000, (1 << 20) + 3])
def test_unary_transform_reads_the_global_bound_at_each_call(n):
    global OFFSET
    x = cp.arange(n, dtype=cp.float32)
    y = cp.empty_like(x)
    op = lambda v: v + OFFSET[0]  # noqa: E731
    OFFSET = cp.asarray([-5.0], dtype=cp.float32)
    cuprims.unary_transform(d_in=x, d_out=y, op=op, num_items=n)
    np.testing.assert_array_equal(y.get(), x.get() - np.float32(5))
    before = _compiles()
    for shift in (3.0, 1e6, -0.25):
        OFFSET = cp.asarray([shift], dtype=cp.float32)
        cuprims.unary_transform(d_in=x, d_out=y, op=op, num_items=n)
        np.testing.assert_array_equal(y.get(), x.get() + np.float32(shift))
    assert _compiles() == before
    ref = _weak(OFFSET)
    OFFSET = None
    gc.collect()
    assert ref() is None


def test_binary_transform_reads_the_global_bound_at_each_call():
    global OFFSET
    n = 100_003
    a_host = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    b_host = (np.arange(n) % 17).astype(np.int32)
    a, b = cp.asarray(a_host), cp.asarray(b_host)
    y = cp.empty(n, cp.float64)
    op = lambda p, q: p * OFFSET[0] + q * OFFSET[1]  # noqa: E731
    OFFSET = cp.asarray([1.0, 2.0], dtype=cp.float64)
    cuprims.binary_transform(d_in1=a, d_in2=b, d_out=y, op=op, num_items=n)
    before = _compiles()
    # every product is exact in float64, so the sums are too (with or without FMA)
    for w0, w1 in ((1.0, 2.0), (-0.5, 0.25), (3.0, 0.0)):
        OFFSET = cp.asarray([w0, w1], dtype=cp.float64)
        cuprims.binary_transform(d_in1=a, d_in2=b, d_out=y, op=op, num_items=n)
        np.testing.assert_array_equal(y.get(), a_host.astype(np.float64) * w0 + b_host.astype(np.float64) * w1)
    assert _compiles() == before
    ref = _weak(OFFSET)
    OFFSET = None
    gc.collect()
    assert ref() is None


def test_built_binary_transform_reads_the_closure_cell_at_each_call():
    n = 50_000
    a = cp.arange(n, dtype=cp.int32)
    b = cp.full(n, 3, dtype=cp.int32)
    y = cp.empty(n, cp.int64)

    def make():
        scale = cp.asarray([1, 1], dtype=cp.int64)

        def op(p, q):
            return p * scale[0] + q * scale[1]

        def set_scale(s0, s1):
            nonlocal scale
            scale = cp.asarray([s0, s1], dtype=cp.int64)
        return op, set_scale

    op, set_scale = make()
    transform = cuprims.make_binary_transform(d_in1=a, d_in2=b, d_out=y, op=op)
    transform(d_in1=a, d_in2=b, d_out=y, op=op, num_items=n)
    np.testing.assert_array_equal(y.get(), np.arange(n, dtype=np.int64) + 3)
    old = _weak(op.__closure__[0].cell_contents)
    before = _compiles()
    for s0, s1 in ((2, 0), (-1, 10 ** 9), (0, 7)):
        set_scale(s0, s1)
        transform(d_in1=a, d_in2=b, d_out=y, op=op, num_items=n)
        np.testing.assert_array_equal(y.get(), np.arange(n, dtype=np.int64) * s0 + 3 * s1)
    assert _compiles() == before
    gc.collect()
    assert old() is None  # the first array, dropped by set_scale, is not kept by the object
    with pytest.raises(ArgumentError) as info:  # the operator's arrays are bound per call: op= is needed
        transform(d_in1=a, d_in2=b, d_out=y, num_items=n)
    assert info.value.argument == "op"


def test_lower_bound_comparator_reads_the_table_bound_at_each_call():
    global KEYS
    m, nv = 5000, 3000
    rng = np.random.default_rng(4)
    values_host = rng.integers(0, m, nv).astype(np.int32)  # indices into the key table
    values = cp.asarray(values_host)
    out = cp.empty(nv, cp.int64)
    before = None
    for _ in range(3):
        keys_host = rng.integers(-1000, 1000, m).astype(np.int32)  # with ties
        order = np.argsort(keys_host, kind="stable").astype(np.int32)  # indices sorted by their keys
        KEYS = cp.asarray(keys_host)
        data = cp.asarray(order)
        cuprims.lower_bound(d_data=data, num_items=m, d_values=values, num_values=nv, d_out=out, comp=_by_key)
        expect = np.searchsorted(keys_host[order], keys_host[values_host], side="left")
        np.testing.assert_array_equal(out.get(), expect)
        if before is None:
            before = _compiles()
    assert _compiles() == before
    search = cuprims.make_upper_bound(d_data=data, d_values=values, d_out=out, comp=_by_key)
    search(d_data=data, num_items=m, d_values=values, num_values=nv, d_out=out, comp=_by_key)
    np.testing.assert_array_equal(out.get(), np.searchsorted(keys_host[order], keys_host[values_host], side="right"))
    with pytest.raises(ArgumentError) as info:  # the comparator's arrays are bound per call: comp= is needed
        search(d_data=data, num_items=m, d_values=values, num_values=nv, d_out=out)
    assert info.value.argument == "comp"
    ref = _weak(KEYS)
    KEYS = None
    gc.collect()
    assert ref() is None
