"""Operators that capture CuPy arrays, on a GPU: reduce, scan and transform iterators read
the array bound at each call; swapping it (a global rebound, a closure cell reassigned,
a default replaced) changes the results and compiles nothing new."""

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

FLOOR = None  # a global the operators below capture (rebound by the tests)


def _compiles() -> tuple:
    info = cuprims.cache_info()
    return tuple(info[k] for k in COMPILES)


def _clipped_max(a, b):
    return max(max(a, b), FLOOR[0])  # associative: max(items, h_init, FLOOR[0])


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


def test_unary_transform_not_yet_adapted_still_reads_the_array_it_was_built_with():
    # unary_transform packs no Python operator state yet: a captured array is compiled in
    # (a new array is a new build), so results stay correct
    n = 1000
    x = cp.arange(n, dtype=cp.float32)
    y = cp.empty_like(x)
    for shift in (5.0, -2.0):
        w = cp.asarray([shift], dtype=cp.float32)
        cuprims.unary_transform(d_in=x, d_out=y, op=lambda v: v + w[0], num_items=n)
        np.testing.assert_array_equal(y.get(), x.get() + np.float32(shift))
