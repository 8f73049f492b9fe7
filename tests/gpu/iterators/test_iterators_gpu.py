"""Iterators as the values of lower_bound / upper_bound on a GPU, against numpy.searchsorted
of the same sequence materialised on the host: every iterator kind, compositions, state
that changes between calls of one built object, edge sizes and streams."""

from __future__ import annotations

import numpy as np
import pytest

import cuprims
from cuprims import (CacheModifiedInputIterator, ConstantIterator, CountingIterator, OpKind, PermutationIterator,
                     ReverseIterator, TransformIterator)
from side_streams import side_stream

cp = pytest.importorskip("cupy")

SIZES = [0, 1, 31, 1000, (1 << 20) + 7]


def _data(n=100_003, dtype=np.int32, seed=0):
    rng = np.random.default_rng(seed)
    host = np.sort(rng.integers(-(1 << 20), 1 << 20, n).astype(dtype))
    return host, cp.asarray(host)


def _search(d_data, host_data, values_it, host_values, side="left", out_dtype=np.int64, comp=None):
    n = len(host_values)
    out = cp.full(max(n, 1), -7, dtype=out_dtype)
    fn = cuprims.lower_bound if side == "left" else cuprims.upper_bound
    fn(d_data=d_data, num_items=d_data.size, d_values=values_it, num_values=n, d_out=out, comp=comp)
    expect = np.searchsorted(host_data, host_values, side=side)
    np.testing.assert_array_equal(out[:n].get(), expect.astype(out_dtype))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("side", ["left", "right"])
def test_counting_values(n, side):
    host, d = _data()
    start = -(1 << 19)
    _search(d, host, CountingIterator(np.int32(start)), np.arange(start, start + n, dtype=np.int32), side)


def test_one_object_many_states():
    """One build serves every CountingIterator of the same dtype: the start is launch state."""
    host, d = _data(dtype=np.int64, seed=1)
    out = cp.empty(500, np.uint64)
    search = cuprims.make_lower_bound(d_data=d, d_values=CountingIterator(np.int64(0)), d_out=out)
    for start in (-(1 << 20), -5, 0, 12345, 1 << 21):
        search(d_data=d, num_items=d.size, d_values=CountingIterator(np.int64(start)), num_values=500, d_out=out)
        expect = np.searchsorted(host, np.arange(start, start + 500, dtype=np.int64))
        np.testing.assert_array_equal(out.get(), expect.astype(np.uint64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint16])
def test_counting_other_dtypes(dtype):
    host, d = _data(dtype=dtype, seed=2) if np.dtype(dtype).kind == "f" else (None, None)
    if host is None:
        host = np.sort(np.random.default_rng(2).integers(0, 60000, 5000).astype(dtype))
        d = cp.asarray(host)
    start = dtype(-3) if np.dtype(dtype).kind == "f" else dtype(100)
    values = np.asarray(start, dtype) + np.arange(4000).astype(dtype)
    _search(d, host, CountingIterator(start), values.astype(dtype), "right")


@pytest.mark.parametrize("n", [0, 1, 1000])
def test_constant_values(n):
    host, d = _data(seed=3)
    v = host[len(host) // 3]
    _search(d, host, ConstantIterator(np.int32(v)), np.full(n, v, np.int32), "left")
    _search(d, host, ConstantIterator(np.int32(v)), np.full(n, v, np.int32), "right")


@pytest.mark.parametrize("modifier", ["stream", "global", "volatile"])
def test_cache_modified_values(modifier):
    host, d = _data(seed=4)
    hv = np.random.default_rng(5).integers(-(1 << 21), 1 << 21, (1 << 20) + 7).astype(np.int32)
    _search(d, host, CacheModifiedInputIterator(cp.asarray(hv), modifier=modifier), hv)


@pytest.mark.parametrize("n", [1, 31, 1000])
def test_reverse_of_array_and_of_counting(n):
    host, d = _data(seed=6)
    hv = np.random.default_rng(7).integers(-(1 << 21), 1 << 21, n).astype(np.int32)
    _search(d, host, ReverseIterator(cp.asarray(hv)), hv[::-1].copy())
    _search(d, host, ReverseIterator(CountingIterator(np.int32(500))), np.arange(500, 500 - n, -1, dtype=np.int32))


def test_permutation_values():
    host, d = _data(seed=8)
    rng = np.random.default_rng(9)
    pool = rng.integers(-(1 << 21), 1 << 21, 777).astype(np.int32)
    idx = rng.integers(0, 777, 5000).astype(np.int64)
    _search(d, host, PermutationIterator(cp.asarray(pool), cp.asarray(idx)), pool[idx])
    # indices from an iterator: a strided gather pool[0], pool[1], ... reversed
    _search(d, host, PermutationIterator(cp.asarray(pool), ReverseIterator(CountingIterator(np.int32(776)))),
            pool[::-1].copy())


def test_transform_python_op_and_builtin():
    host, d = _data(seed=10)
    n = (1 << 20) + 7
    _search(d, host, TransformIterator(CountingIterator(np.int32(0)), lambda i: (i * 37) % 2000003 - 1000000,
                                       np.int32),
            ((np.arange(n, dtype=np.int64) * 37) % 2000003 - 1000000).astype(np.int32))
    hv = np.random.default_rng(11).integers(-(1 << 20), 1 << 20, 3000).astype(np.int32)
    _search(d, host, TransformIterator(cp.asarray(hv), OpKind.NEGATE), -hv, "right")


def test_transform_inferred_type_and_float_data():
    host = np.sort(np.random.default_rng(12).normal(size=20000)).astype(np.float64)
    d = cp.asarray(host)
    it = TransformIterator(CountingIterator(np.int32(0)), lambda i: i * 0.001 - 3.0)  # numba infers float64
    assert it.dtype == np.float64
    _search(d, host, it, np.arange(6000, dtype=np.int32) * 0.001 - 3.0)


def test_transform_with_comparator_and_descending_data():
    host = np.sort(np.random.default_rng(13).integers(-1000, 1000, 5000).astype(np.int64))[::-1].copy()
    d = cp.asarray(host)
    it = TransformIterator(CountingIterator(np.int64(-1200)), lambda v: v * 2, np.int64)
    out = cp.empty(1200, np.int64)
    cuprims.upper_bound(d_data=d, num_items=d.size, d_values=it, num_values=1200, d_out=out,
                        comp=lambda a, b: a > b)
    values = np.arange(-1200, 0, dtype=np.int64) * 2
    expect = len(host) - np.searchsorted(host[::-1], values, side="left")
    np.testing.assert_array_equal(out.get(), expect)


def test_iterator_on_a_stream():
    host, d = _data(seed=14)
    stream = side_stream()
    out = cp.empty(4096, np.int32)
    with stream:
        cuprims.lower_bound(d_data=d, num_items=d.size, d_values=CountingIterator(np.int32(-2048)), num_values=4096,
                            d_out=out, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.get(), np.searchsorted(host, np.arange(-2048, 2048, dtype=np.int32)))


def test_array_too_short_for_num_values_is_an_error():
    host, d = _data(seed=15)
    out = cp.empty(100, np.int64)
    with pytest.raises(cuprims.errors.ArgumentError) as info:
        cuprims.lower_bound(d_data=d, num_items=d.size, d_values=CacheModifiedInputIterator(cp.zeros(10, np.int32)),
                            num_values=100, d_out=out)
    assert info.value.argument == "d_values"
