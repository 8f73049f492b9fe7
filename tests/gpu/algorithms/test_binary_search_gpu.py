"""Lower and upper bound on a GPU against numpy.searchsorted (and CuPy for the largest
sizes): dtypes, index types, edge sizes, duplicates, NaN, descending order, Python and
struct comparators, more than 2^31 items, the cached-levels setting and streams."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import cuprims
from cuprims import OpKind, ProxyArray
from cuprims.algorithms.binary_search.api import lower_bound, make_lower_bound, make_upper_bound, upper_bound

cp = pytest.importorskip("cupy")

Pair = cuprims.gpu_struct({"key": np.int64, "weight": np.float32}, name="Pair")

# each data dtype is checked with one index type (so each needs one build)
CASES = [("int32", "uint64"), ("int64", "int64"), ("uint32", "int32"), ("int8", "uint32"), ("float32", "int64"),
         ("float64", "uint64"), ("float16", "int32"), ("uint16", "uint64")]
SIZES = [0, 1, 2, 7, 1000, (1 << 20) + 3]


def by_abs(a, b):
    return abs(a) < abs(b)


def pair_less(a, b):
    return a.key < b.key


def _arch() -> int:
    return int(cp.cuda.Device().compute_capability)


@pytest.fixture(scope="module", autouse=True)
def prebuild():
    cc = _arch()
    P = ProxyArray
    jobs = [lambda d=d, o=o: make_lower_bound(d_data=P(d), d_values=P(d), d_out=P(o), compute_capability=cc)
            for d, o in CASES]
    jobs += [
        lambda: make_lower_bound(d_data=P(np.float32), d_values=P(np.float32), d_out=P(np.int64),
                                 comp=OpKind.GREATER, compute_capability=cc),
        lambda: make_lower_bound(d_data=P(np.float64), d_values=P(np.float64), d_out=P(np.int64), comp=by_abs,
                                 compute_capability=cc),
        lambda: make_lower_bound(d_data=P(Pair.dtype), d_values=P(Pair.dtype), d_out=P(np.uint64), comp=pair_less,
                                 compute_capability=cc),
        lambda: make_lower_bound(d_data=P(np.int8), d_values=P(np.int8), d_out=P(np.int64), compute_capability=cc),
    ]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda job: job(), jobs))


def _sorted_data(n, dtype, seed):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        span = min(int(info.max), max(n // 3, 10))  # duplicates on purpose
        lo = max(int(info.min), -span)
        a = rng.integers(lo, span, n, endpoint=True).astype(dt)
    else:
        a = np.round(rng.standard_normal(n) * 50).astype(dt)  # many duplicates too
    return np.sort(a)


def _values(m, data, dtype, seed):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    lo, hi = (float(data.min()), float(data.max())) if data.size else (0.0, 10.0)
    v = rng.uniform(lo - 3, hi + 3, m)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = np.clip(np.round(v), info.min, info.max)
    v = v.astype(dt)
    if data.size:
        v[: m // 4] = data[rng.integers(0, data.size, m // 4)]  # exact hits, often duplicated
    return v


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("data_dt,out_dt", CASES, ids=lambda v: str(v))
def test_lower_and_upper_against_numpy(data_dt, out_dt, n):
    data = _sorted_data(n, data_dt, seed=n + 1)
    values = _values(4097, data, data_dt, seed=n + 2)
    d, v = cp.asarray(data), cp.asarray(values)
    out = cp.full(values.size + 2, 77, out_dt)
    lower_bound(d_data=d, num_items=n, d_values=v, num_values=values.size, d_out=out)
    np.testing.assert_array_equal(cp.asnumpy(out[:-2]), np.searchsorted(data, values, side="left"))
    assert cp.asnumpy(out[-2:]).tolist() == [77, 77]
    upper_bound(d_data=d, num_items=n, d_values=v, num_values=values.size, d_out=out)
    np.testing.assert_array_equal(cp.asnumpy(out[:-2]), np.searchsorted(data, values, side="right"))
    # small ranges fit in L2 and are searched through the cache alone: force the deep
    # (evict-first) and prefetch phases too
    for maker, side in ((make_lower_bound, "left"), (make_upper_bound, "right")):
        obj = maker(d_data=d, d_values=v, d_out=out)  # (the object one-shot calls use too: reset below)
        default_window = obj._window_bytes
        obj._hot_levels_override = 2
        try:
            for window in (0, 16, 128):
                obj._window_bytes = window
                out.fill(77)
                obj(d_data=d, num_items=n, d_values=v, num_values=values.size, d_out=out, comp=None)
                np.testing.assert_array_equal(cp.asnumpy(out[:-2]), np.searchsorted(data, values, side=side))
        finally:
            obj._hot_levels_override, obj._window_bytes = None, default_window


def test_prefix_of_data_and_values():
    data = _sorted_data(10_000, "int32", 3)
    values = _values(1000, data, "int32", 4)
    d, v, out = cp.asarray(data), cp.asarray(values), cp.zeros(1000, np.uint64)
    lower_bound(d_data=d, num_items=5000, d_values=v, num_values=600, d_out=out)
    got = cp.asnumpy(out)
    np.testing.assert_array_equal(got[:600], np.searchsorted(data[:5000], values[:600]))
    assert (got[600:] == 0).all()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_nan_sorts_last_like_numpy(dtype):
    data = np.sort(np.concatenate([_sorted_data(1000, dtype, 5), np.full(17, np.nan, dtype)]))
    values = np.concatenate([_values(500, data[:1000], dtype, 6), np.array([np.nan, np.inf, -np.inf], dtype)])
    out_dt = dict(CASES)[dtype]
    out = cp.empty(values.size, out_dt)
    for side, fn in (("left", lower_bound), ("right", upper_bound)):
        fn(d_data=cp.asarray(data), num_items=data.size, d_values=cp.asarray(values), num_values=values.size,
           d_out=out)
        np.testing.assert_array_equal(cp.asnumpy(out), np.searchsorted(data, values, side=side))


def test_descending_with_greater():
    asc = _sorted_data(50_000, "float32", 7)
    desc = asc[::-1].copy()
    values = _values(3000, asc, "float32", 8)
    out = cp.empty(values.size, np.int64)
    n = desc.size
    lower_bound(d_data=cp.asarray(desc), num_items=n, d_values=cp.asarray(values), num_values=values.size,
                d_out=out, comp=OpKind.GREATER)
    # first i with not (desc[i] > v): n - (number of elements > v)
    np.testing.assert_array_equal(cp.asnumpy(out), n - np.searchsorted(asc, values, side="right"))
    upper_bound(d_data=cp.asarray(desc), num_items=n, d_values=cp.asarray(values), num_values=values.size,
                d_out=out, comp=OpKind.GREATER)
    np.testing.assert_array_equal(cp.asnumpy(out), n - np.searchsorted(asc, values, side="left"))


def test_python_comparator():
    rng = np.random.default_rng(9)
    raw = rng.standard_normal(20_000) * 10
    data = raw[np.argsort(np.abs(raw), kind="stable")]
    values = rng.standard_normal(5000) * 12
    out = cp.empty(values.size, np.int64)
    keys = np.abs(data)
    for side, fn in (("left", lower_bound), ("right", upper_bound)):
        fn(d_data=cp.asarray(data), num_items=data.size, d_values=cp.asarray(values), num_values=values.size,
           d_out=out, comp=by_abs)
        np.testing.assert_array_equal(cp.asnumpy(out), np.searchsorted(keys, np.abs(values), side=side))


def test_struct_comparator():
    rng = np.random.default_rng(10)
    n, m = 30_000, 4000
    h = np.empty(n, Pair.dtype)
    h["key"] = np.sort(rng.integers(-5000, 5000, n))
    h["weight"] = rng.random(n)
    q = np.empty(m, Pair.dtype)
    q["key"] = rng.integers(-6000, 6000, m)
    q["weight"] = rng.random(m)
    d = cp.asarray(h.view(np.uint8)).view(Pair.dtype)
    v = cp.asarray(q.view(np.uint8)).view(Pair.dtype)
    out = cp.empty(m, np.uint64)
    search = make_upper_bound(d_data=d, d_values=v, d_out=out, comp=pair_less)
    search(d_data=d, num_items=n, d_values=v, num_values=m, d_out=out, comp=pair_less)
    np.testing.assert_array_equal(cp.asnumpy(out), np.searchsorted(h["key"], q["key"], side="right"))


def test_large_against_cupy_and_launch_settings():
    n, m = 1 << 28, 1 << 24
    r = cp.random.default_rng(11)
    data = cp.sort(r.integers(-(1 << 30), 1 << 30, n, dtype=cp.int32))
    values = r.integers(-(1 << 30) - 5, (1 << 30) + 5, m, dtype=cp.int32)
    out = cp.empty(m, cp.uint64)
    search = make_lower_bound(d_data=data, d_values=values, d_out=out)
    want = cp.searchsorted(data, values, side="left")
    default_window = search._window_bytes
    try:
        for hot, window in ((None, default_window), (0, 0), (12, 512), (64, 64), (None, 4)):
            search._hot_levels_override = hot
            search._window_bytes = window
            out.fill(0)
            search(d_data=data, num_items=n, d_values=values, num_values=m, d_out=out, comp=None)
            assert bool(cp.array_equal(out.astype(cp.int64), want)), (hot, window)
    finally:
        search._hot_levels_override, search._window_bytes = None, default_window
    upper = make_upper_bound(d_data=data, d_values=values, d_out=out)
    upper(d_data=data, num_items=n, d_values=values, num_values=m, d_out=out, comp=None)
    assert bool(cp.array_equal(out.astype(cp.int64), cp.searchsorted(data, values, side="right")))


@pytest.mark.big_memory
def test_more_than_2_31_items():
    n = (1 << 31) + 4321
    data = cp.zeros(n, cp.int8)
    data[n - 1000:] = 1
    data[n - 10:] = 2
    data[:7] = -1
    values = cp.asarray([0, 1, 2, 3, -1, -2], dtype=cp.int8)
    out = cp.empty(6, cp.int64)
    lower_bound(d_data=data, num_items=n, d_values=values, num_values=6, d_out=out)
    assert cp.asnumpy(out).tolist() == [7, n - 1000, n - 10, n, 0, 0]
    upper_bound(d_data=data, num_items=n, d_values=values, num_values=6, d_out=out)
    assert cp.asnumpy(out).tolist() == [n - 1000, n - 10, n, n, 7, 0]


def test_streams_and_torch():
    import torch

    data = torch.arange(0, 2000, 2, dtype=torch.int64, device="cuda")
    values = torch.tensor([-1, 0, 1, 2, 1999, 5000], dtype=torch.int64, device="cuda")
    out = torch.empty(6, dtype=torch.int64, device="cuda")
    ts = torch.cuda.Stream()
    ts.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(ts):
        lower_bound(d_data=data, num_items=1000, d_values=values, num_values=6, d_out=out, stream=ts)
    ts.synchronize()
    assert out.tolist() == [0, 0, 1, 1, 1000, 1000]
    assert torch.equal(out, torch.searchsorted(data, values))


def test_int32_output_limit_on_device():
    d = cp.zeros(10, np.int32)
    with pytest.raises(cuprims.errors.ArgumentError, match="d_values"):
        lower_bound(d_data=d, num_items=10, d_values=cp.zeros(3, np.int64), num_values=3, d_out=cp.empty(3, np.int32))
    with pytest.raises(cuprims.errors.ArgumentError, match="d_out"):
        lower_bound(d_data=d, num_items=10, d_values=d, num_values=10, d_out=cp.empty(10, np.float32))
