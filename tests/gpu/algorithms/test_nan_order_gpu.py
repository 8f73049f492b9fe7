"""NaN order on a GPU against numpy, in every algorithm that orders floating-point keys:
merge sort (OpKind.LESS / GREATER and a Python comparator), binary search (lower and
upper bound, LESS over numpy-sorted data, GREATER over its reverse) and radix sort (both
orders). Keys: float16/32/64 with NaNs of both signs (quiet and with payloads), +-inf,
+-0.0 and duplicates. numpy's order puts every NaN after every number, ascending
(``np.sort``, ``np.searchsorted``); descending is its reverse.

Run:  python -m pytest tests/gpu/algorithms/test_nan_order_gpu.py -x -q
"""

from __future__ import annotations

import numpy as np
import pytest

from cuprims import OpKind, SortOrder
from cuprims.algorithms.binary_search.api import lower_bound, upper_bound
from cuprims.algorithms.merge_sort.api import merge_sort
from cuprims.algorithms.radix_sort.api import radix_sort

cp = pytest.importorskip("cupy")

FLOATS = ["float16", "float32", "float64"]
SIZES = [1, 7, 1000, (1 << 18) + 3]


def nan_last_less(a, b):
    """numpy's order as a Python comparator: a before b, NaN after every number."""
    return a < b or (b != b and a == a)


def nan_first_greater(a, b):
    return b < a or (a != a and b == b)


def nan_keys(dt, n: int, seed: int) -> np.ndarray:
    """n keys: about a fifth NaN (both signs, quiet and payload patterns), infinities and
    zeros of both signs, the rest small numbers with many duplicates."""
    dt = np.dtype(dt)
    ut = np.dtype(f"u{dt.itemsize}")
    rng = np.random.default_rng(seed)
    high = 1 << (8 * dt.itemsize - 1)
    inf = int(np.array(np.inf, dt).view(ut))
    nan_bits = [int(np.array(np.nan, dt).view(ut)), inf + 1, high - 1]  # quiet, payload 1, all-ones payload
    nans = np.array(nan_bits + [b | high for b in nan_bits], dtype=ut).view(dt)
    specials = np.array([np.inf, -np.inf, 0.0, -0.0], dtype=dt)
    keys = (rng.integers(-40, 40, n) / 4).astype(dt)
    kind = rng.random(n)
    keys = np.where(kind < 0.2, nans[rng.integers(0, nans.size, n)], keys)
    keys = np.where((kind >= 0.2) & (kind < 0.3), specials[rng.integers(0, specials.size, n)], keys)
    if n >= nans.size + specials.size:  # each pattern at least once
        keys[: nans.size] = nans
        keys[nans.size: nans.size + specials.size] = specials
        rng.shuffle(keys)
    return keys.astype(dt)


def stable_order(keys: np.ndarray, descending: bool) -> np.ndarray:
    """numpy's stable order (NaNs last, all NaNs tied), or its reverse with ties still in
    input order."""
    if not descending:
        return np.argsort(keys, kind="stable")
    order = np.argsort(keys[::-1], kind="stable")[::-1]
    return (keys.size - 1 - order).astype(np.int64)


def assert_numpy_order(got: np.ndarray, keys: np.ndarray, descending: bool) -> None:
    """``got`` holds ``keys`` in numpy's order (compared through NaN masks, numbers by value)."""
    want = np.sort(keys)
    if descending:
        want = want[::-1]
    assert got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want)), "NaN positions differ from numpy's"
    assert np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def quiet_nans(keys: np.ndarray) -> np.ndarray:
    """What radix sort writes: every NaN as the quiet NaN, every other key as it was."""
    return np.where(np.isnan(keys), np.array(np.nan, keys.dtype), keys)


# ------------------------------------------------------------------ merge sort

@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", [OpKind.LESS, OpKind.GREATER], ids=["LESS", "GREATER"])
@pytest.mark.parametrize("dt", FLOATS)
def test_merge_sort_builtin(dt, op, n):
    keys = nan_keys(dt, n, seed=n)
    descending = op is OpKind.GREATER
    d_keys, d_vals = cp.asarray(keys), cp.arange(n, dtype=np.int32)
    out_k, out_v = cp.empty_like(d_keys), cp.empty_like(d_vals)
    merge_sort(d_in_keys=d_keys, d_out_keys=out_k, num_items=n, op=op)
    assert_numpy_order(cp.asnumpy(out_k), keys, descending)
    merge_sort(d_in_keys=d_keys, d_in_values=d_vals, d_out_keys=out_k, d_out_values=out_v, num_items=n, op=op)
    perm = stable_order(keys, descending)
    # stable, NaNs tied: exactly numpy's stable permutation; keys keep their bits
    assert np.array_equal(cp.asnumpy(out_v), perm)
    assert same_bits(cp.asnumpy(out_k), keys[perm])


@pytest.mark.parametrize("n", [1000, (1 << 18) + 3])
@pytest.mark.parametrize("descending", [False, True], ids=["less", "greater"])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_merge_sort_python_comparator(dt, descending, n):
    keys = nan_keys(dt, n, seed=n + 1)
    op = nan_first_greater if descending else nan_last_less
    d_keys, d_vals = cp.asarray(keys), cp.arange(n, dtype=np.int32)
    out_k, out_v = cp.empty_like(d_keys), cp.empty_like(d_vals)
    merge_sort(d_in_keys=d_keys, d_in_values=d_vals, d_out_keys=out_k, d_out_values=out_v, num_items=n, op=op)
    assert_numpy_order(cp.asnumpy(out_k), keys, descending)
    assert np.array_equal(cp.asnumpy(out_v), stable_order(keys, descending))


# ------------------------------------------------------------------ binary search

def search_values(data: np.ndarray, seed: int) -> np.ndarray:
    """Values to look up: every key pattern there is (NaNs of both signs, +-inf, +-0.0),
    exact hits and misses."""
    rng = np.random.default_rng(seed)
    extra = nan_keys(data.dtype, 64, seed)
    misses = (rng.integers(-50, 50, 200) / 8 + 1 / 16).astype(data.dtype)
    hits = data[rng.integers(0, data.size, 200)] if data.size else data[:0]
    return np.concatenate([extra, misses, hits]).astype(data.dtype)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dt", FLOATS)
def test_binary_search_less_over_numpy_sorted(dt, n):
    data = np.sort(nan_keys(dt, n, seed=n + 2))  # NaNs at the end, as numpy sorts
    values = search_values(data, seed=n + 3)
    out = cp.empty(values.size, np.int64)
    for fn, side in ((lower_bound, "left"), (upper_bound, "right")):
        for comp in (None, OpKind.LESS):
            out.fill(-1)
            fn(d_data=cp.asarray(data), num_items=n, d_values=cp.asarray(values), num_values=values.size,
               d_out=out, comp=comp)
            np.testing.assert_array_equal(cp.asnumpy(out), np.searchsorted(data, values, side=side))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dt", FLOATS)
def test_binary_search_greater_over_reversed(dt, n):
    asc = np.sort(nan_keys(dt, n, seed=n + 4))
    desc = asc[::-1].copy()  # NaNs first
    values = search_values(asc, seed=n + 5)
    out = cp.empty(values.size, np.int64)
    # in descending data: lower bound = how many go strictly before v = n - (ascending upper bound)
    for fn, side in ((lower_bound, "right"), (upper_bound, "left")):
        out.fill(-1)
        fn(d_data=cp.asarray(desc), num_items=n, d_values=cp.asarray(values), num_values=values.size, d_out=out,
           comp=OpKind.GREATER)
        np.testing.assert_array_equal(cp.asnumpy(out), n - np.searchsorted(asc, values, side=side))


# ------------------------------------------------------------------ radix sort

@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("order", [SortOrder.ASCENDING, SortOrder.DESCENDING], ids=["asc", "desc"])
@pytest.mark.parametrize("dt", FLOATS)
def test_radix_sort_numpy_order(dt, order, n):
    """numpy's order in both directions (codegen_sort.nan_last_radix_traits), stable, with
    every NaN written as the quiet NaN and every other key bit for bit."""
    keys = nan_keys(dt, n, seed=n + 6)
    descending = order is SortOrder.DESCENDING
    d_keys, d_vals = cp.asarray(keys), cp.arange(n, dtype=np.int32)
    out_k, out_v = cp.empty_like(d_keys), cp.empty_like(d_vals)
    radix_sort(d_in_keys=d_keys, d_out_keys=out_k, num_items=n, order=order)
    got = cp.asnumpy(out_k)
    assert_numpy_order(got, keys, descending)
    radix_sort(d_in_keys=d_keys, d_out_keys=out_k, d_in_values=d_vals, d_out_values=out_v, num_items=n,
               order=order)
    perm = stable_order(keys, descending)
    assert np.array_equal(cp.asnumpy(out_v), perm)
    assert same_bits(cp.asnumpy(out_k), quiet_nans(keys[perm]))
    assert same_bits(cp.asnumpy(d_keys), keys), "input keys were modified"
