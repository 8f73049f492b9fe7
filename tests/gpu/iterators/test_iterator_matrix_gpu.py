"""Every iterator kind with every algorithm it applies to, checked against numpy.

Input kinds (int64 values, exact arithmetic) feed reduce, inclusive scan, unary and
binary transform, merge sort keys and binary-search values; output kinds receive the
results of reduce, scan and both transforms. Zip iterators need struct operators and
have their own tests (argmax, zip keys and values in merge sort, binary transform).
"""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import (CacheModifiedInputIterator, ConstantIterator, CountingIterator, DiscardIterator,  # noqa: E402
                     OpKind, PermutationIterator, ReverseIterator, ShuffleIterator, TransformIterator,
                     TransformOutputIterator)

i8 = np.int64
SIZES = [1, 100_003]


def _data(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-1000, 1000, n).astype(i8)


def _input(kind: str, n: int):
    """(iterator, the values it yields as a host array)."""
    x = _data(n, 1)
    if kind == "counting":
        return CountingIterator(i8(5)), np.arange(5, 5 + n, dtype=i8)
    if kind == "constant":
        return ConstantIterator(i8(7)), np.full(n, 7, i8)
    if kind == "transform":
        return TransformIterator(cp.asarray(x), lambda v: v * 3 - 1), x * 3 - 1
    if kind == "reverse":
        return ReverseIterator(cp.asarray(x)), x[::-1].copy()
    if kind == "permutation":
        idx = np.random.default_rng(2).integers(0, n, n).astype(i8)
        return PermutationIterator(cp.asarray(x), cp.asarray(idx)), x[idx]
    if kind == "cache_modified":
        return CacheModifiedInputIterator(cp.asarray(x), "stream"), x
    if kind == "shuffle":
        it = ShuffleIterator(n, seed=3)
        got = cp.empty(n, i8)
        cuprims.unary_transform(d_in=it, d_out=got, op=OpKind.IDENTITY, num_items=n)
        host = got.get()
        np.testing.assert_array_equal(np.sort(host), np.arange(n))  # a bijection of [0, n)
        return it, host
    raise AssertionError(kind)


INPUTS = ["counting", "constant", "transform", "reverse", "permutation", "cache_modified", "shuffle"]


def _reduce(it, n, host):
    out = cp.full(1, -1, i8)
    cuprims.reduce_into(d_in=it, d_out=out, num_items=n, op=OpKind.PLUS, h_init=i8(0))
    assert int(out.get()[0]) == int(host.sum())


def _scan(it, n, host):
    out = cp.zeros(n, i8)
    cuprims.inclusive_scan(d_in=it, d_out=out, op=OpKind.PLUS, num_items=n)
    np.testing.assert_array_equal(out.get(), np.cumsum(host))


def _unary(it, n, host):
    out = cp.zeros(n, i8)
    cuprims.unary_transform(d_in=it, d_out=out, op=lambda v: v + 1, num_items=n)
    np.testing.assert_array_equal(out.get(), host + 1)


def _binary(it, n, host):
    y = _data(n, 4)
    out = cp.zeros(n, i8)
    cuprims.binary_transform(d_in1=it, d_in2=cp.asarray(y), d_out=out, op=OpKind.PLUS, num_items=n)
    np.testing.assert_array_equal(out.get(), host + y)


def _merge_sort(it, n, host):
    out = cp.zeros(n, i8)
    cuprims.merge_sort(d_in_keys=it, d_out_keys=out, num_items=n, op=OpKind.LESS)
    np.testing.assert_array_equal(out.get(), np.sort(host, kind="stable"))


def _lower_bound(it, n, host):
    data = np.sort(_data(4096, 5))
    out = cp.zeros(n, np.uint64)
    cuprims.lower_bound(d_data=cp.asarray(data), num_items=data.size, d_values=it, num_values=n, d_out=out)
    np.testing.assert_array_equal(out.get(), np.searchsorted(data, host, side="left"))


ALGORITHMS = {"reduce": _reduce, "inclusive_scan": _scan, "unary_transform": _unary,
              "binary_transform": _binary, "merge_sort": _merge_sort, "lower_bound": _lower_bound}


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("algo", list(ALGORITHMS))
@pytest.mark.parametrize("kind", INPUTS)
def test_input_iterator(kind, algo, n):
    it, host = _input(kind, n)
    ALGORITHMS[algo](it, n, host)


OUTPUTS = ["reverse", "permutation", "transform_output", "discard"]


def _results(algo: str, x: np.ndarray) -> np.ndarray:
    if algo == "reduce":
        return np.array([x.sum()], i8)
    if algo == "inclusive_scan":
        return np.cumsum(x)
    if algo == "unary_transform":
        return -x
    return x + _data(x.size, 6)


def _run_into(algo: str, d_in, d_out, n: int) -> None:
    if algo == "reduce":
        cuprims.reduce_into(d_in=d_in, d_out=d_out, num_items=n, op=OpKind.PLUS, h_init=i8(0))
    elif algo == "inclusive_scan":
        cuprims.inclusive_scan(d_in=d_in, d_out=d_out, op=OpKind.PLUS, num_items=n)
    elif algo == "unary_transform":
        cuprims.unary_transform(d_in=d_in, d_out=d_out, op=OpKind.NEGATE, num_items=n)
    else:
        cuprims.binary_transform(d_in1=d_in, d_in2=cp.asarray(_data(n, 6)), d_out=d_out, op=OpKind.PLUS,
                                 num_items=n)


@pytest.mark.parametrize("algo", ["reduce", "inclusive_scan", "unary_transform", "binary_transform"])
@pytest.mark.parametrize("kind", OUTPUTS)
def test_output_iterator(kind, algo):
    n = 100_003
    x = _data(n, 7)
    expected = _results(algo, x)
    m = expected.size
    z = cp.full(m, -123456789, i8)
    if kind == "reverse":
        out, check = ReverseIterator(z), lambda got: np.testing.assert_array_equal(got[::-1], expected)
    elif kind == "permutation":
        perm = np.random.default_rng(8).permutation(m).astype(i8)

        def check(got):
            np.testing.assert_array_equal(got[perm], expected)

        out = PermutationIterator(z, cp.asarray(perm))
    elif kind == "transform_output":
        out, check = TransformOutputIterator(z, lambda v: v * 2), \
            lambda got: np.testing.assert_array_equal(got, expected * 2)
    else:
        out, check = DiscardIterator(z), lambda got: np.testing.assert_array_equal(got, np.full(m, -123456789, i8))
    _run_into(algo, cp.asarray(x), out, n)
    check(z.get())
