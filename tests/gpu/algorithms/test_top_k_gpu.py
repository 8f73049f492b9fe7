"""top_k on the GPU against numpy: every key dtype (bool, integers, floats), keys alone and
pairs (values that index the input: each must point at an item with its key), both orders,
NaNs of both signs, ties, k = 0, 1, n, sizes 0, 1, around a tile (1024 float32 keys) and
many tiles, inputs where the candidates overflow the buffers (all keys in one digit),
sorted results, iterator keys and values, the object API with a temporary-storage query on
a non-default stream, k > n refused."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import CountingIterator, SortOrder  # noqa: E402
from side_streams import side_stream  # noqa: E402

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float16,
          np.float32, np.float64]
ORDERS = [SortOrder.DESCENDING, SortOrder.ASCENDING]


def data(dtype, n, rng, ties=False):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, n).astype(dtype)
    if dtype.kind == "f":
        x = (rng.standard_normal(n) * 100).astype(dtype)
        if ties:
            x = np.round(x / 16)
        x[rng.integers(0, max(n, 1), n // 50)] = np.nan
        x[rng.integers(0, max(n, 1), n // 50)] = -np.nan
        x[rng.integers(0, max(n, 1), n // 100)] = np.inf
        x[rng.integers(0, max(n, 1), n // 100)] = -np.inf
        return x.astype(dtype)
    info = np.iinfo(dtype)
    if ties:
        return rng.integers(max(info.min, -3), min(info.max, 3), n, endpoint=True).astype(dtype)
    return rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype)


def check(x, keys, values, k, order, sorted_):
    """The k keys numpy's sort puts first (NaNs count as the largest) and, for pairs, each
    value the index of a distinct item holding its key."""
    want = np.sort(x)
    want = want[::-1][:k] if order is SortOrder.DESCENDING else want[:k]
    got = keys if sorted_ else (np.sort(keys)[::-1] if order is SortOrder.DESCENDING else np.sort(keys))
    np.testing.assert_array_equal(got, want)
    if values is not None:
        assert len(np.unique(values)) == k
        np.testing.assert_array_equal(x[values], keys)


def run(x, k, order=SortOrder.DESCENDING, pairs=True, sorted_=False):
    n = x.size
    d_x = cp.asarray(x)
    ok = cp.empty(max(k, 1), x.dtype)
    extra = {}
    if pairs:
        ov = cp.empty(max(k, 1), np.int64)
        extra = dict(d_in_values=cp.arange(n, dtype=np.int64), d_out_values=ov)
    cuprims.top_k(d_in_keys=d_x, d_out_keys=ok, k=k, num_items=n, order=order, sorted=sorted_, **extra)
    return ok.get()[:k], (ov.get()[:k] if pairs else None)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ORDERS)
def test_every_dtype_against_numpy(dtype, order):
    rng = np.random.default_rng(3)
    for n, ks in [(0, (0,)), (1, (0, 1)), (1023, (1, 17, 1023)), (1024, (1024,)), (1025, (3, 1000)),
                  (3 * 1024 * 8 + 5, (1, 64, 5000)), ((1 << 20) + 3, (16, 1024, 100_000))]:
        x = data(dtype, n, rng)
        for k in ks:
            for pairs in (False, True):
                keys, values = run(x, k, order, pairs)
                check(x, keys, values, k, order, False)


def test_sorted_ties_keep_keys_with_their_values():
    x = data(np.float32, 1_000_000, np.random.default_rng(9), ties=True)
    for k in (5000, 300_000):
        for order in ORDERS:
            keys, values = run(x, k, order, sorted_=True)
            check(x, keys, values, k, order, True)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint64, np.float16, np.float32, np.float64])
@pytest.mark.parametrize("order", ORDERS)
def test_ties(dtype, order):
    rng = np.random.default_rng(4)
    for n in (5000, 300_001):
        x = data(dtype, n, rng, ties=True)
        for k in (1, 7, n // 3, n - 1, n):
            keys, values = run(x, k, order)
            check(x, keys, values, k, order, False)


@pytest.mark.parametrize("order", ORDERS)
def test_all_keys_in_one_digit_overflow_the_buffers(order):
    # every word shares its top 16 bits: the candidates of the second pass are all items
    x = (1.0 + np.random.default_rng(5).random(2_000_000) * 1e-3).astype(np.float32)
    x[::3] = 1.0
    for k in (1, 1000, 1_500_000):
        keys, values = run(x, k, order)
        check(x, keys, values, k, order, False)


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float16, np.float32, np.float64, np.int64])
@pytest.mark.parametrize("order", ORDERS)
def test_sorted(dtype, order):
    rng = np.random.default_rng(6)
    x = data(dtype, 500_000, rng)
    for k in (1, 2, 16, 1000, 4096, 4097, 3 * 4096 + 5, 100_000):
        for pairs in (False, True):
            keys, values = run(x, k, order, pairs, sorted_=True)
            check(x, keys, values, k, order, True)


def test_iterator_keys_and_values():
    n, k = 1_000_000, 100
    ok, ov = cp.empty(k, np.int64), cp.empty(k, np.int32)
    cuprims.top_k(d_in_keys=CountingIterator(np.int64(-500)), d_in_values=CountingIterator(np.int32(0)),
                  d_out_keys=ok, d_out_values=ov, k=k, num_items=n, sorted=True)
    assert ok.get().tolist() == list(range(n - 501, n - 501 - k, -1))
    assert ov.get().tolist() == list(range(n - 1, n - 1 - k, -1))


def test_object_api_temp_query_and_a_stream():
    n, k = 5_000_003, 1000
    x = cp.random.default_rng(7).standard_normal(n, dtype=np.float32)
    ok, ov = cp.empty(k, np.float32), cp.empty(k, np.int32)
    idx = cp.arange(n, dtype=np.int32)
    t = cuprims.make_top_k(d_in_keys=x, d_out_keys=ok, d_in_values=idx, d_out_values=ov,
                           order=SortOrder.ASCENDING)
    stream = side_stream()
    need = t(temp_storage=None, d_in_keys=x, d_out_keys=ok, d_in_values=idx, d_out_values=ov, k=np.int64(k),
             num_items=np.int64(n))
    assert need > 0
    tmp = cp.empty(need, np.uint8)
    t(temp_storage=tmp, d_in_keys=x, d_out_keys=ok, d_in_values=idx, d_out_values=ov, k=k, num_items=n,
      stream=stream)
    stream.synchronize()
    check(x.get(), ok.get(), ov.get(), k, SortOrder.ASCENDING, False)
    with pytest.raises(cuprims.errors.ArgumentError) as info:
        t(temp_storage=tmp, d_in_keys=x, d_out_keys=ok, d_in_values=idx, d_out_values=ov, k=n + 1, num_items=n)
    assert info.value.argument == "k"


def test_views_as_inputs():
    host = np.random.default_rng(8).standard_normal(200_000)
    x = cp.asarray(host)[1000:150_000]
    ok = cp.empty(50, np.float64)
    cuprims.top_k(d_in_keys=x, d_out_keys=ok, k=50, num_items=x.size, sorted=True)
    np.testing.assert_array_equal(ok.get(), np.sort(host[1000:150_000])[::-1][:50])
