"""Iterators as the inputs and outputs of reduce and scan on a GPU, against numpy on the
same sequences materialised on the host: every iterator kind, nested compositions,
output iterators, state that changes between calls of one built object, and bad arrays
(misaligned, strided, host memory, too short) that must raise ArgumentError and leave
the process working."""

from __future__ import annotations

import numpy as np
import pytest

import cuprims
from cuprims import (CacheModifiedInputIterator, ConstantIterator, CountingIterator, DiscardIterator, OpKind,
                     PermutationIterator, ReverseIterator, ShuffleIterator, TransformIterator,
                     TransformOutputIterator, ZipIterator)
from cuprims.errors import ArgumentError

cp = pytest.importorskip("cupy")

SIZES = [0, 1, 1000, (1 << 20) + 7]
BIG = (1 << 22) + 3


def _sum(d_in, n, dtype, h_init=0):
    out = cp.full(1, 99, dtype=dtype)
    cuprims.reduce_into(d_in=d_in, d_out=out, num_items=n, op=OpKind.PLUS, h_init=np.asarray(h_init, dtype)[()])
    return out.get()[0]


def _scan(d_in, n, dtype, inclusive=True, init=0):
    out = cp.full(max(n, 1), -1, dtype=dtype)
    if inclusive:
        cuprims.inclusive_scan(d_in=d_in, d_out=out, op=OpKind.PLUS, num_items=n)
    else:
        cuprims.exclusive_scan(d_in=d_in, d_out=out, op=OpKind.PLUS, init_value=np.asarray(init, dtype)[()],
                               num_items=n)
    return out[:n].get()


def _expect_scan(values, dtype, inclusive=True, init=0):
    values = np.asarray(values).astype(dtype)
    incl = np.cumsum(values, dtype=dtype)
    if inclusive:
        return incl
    return np.concatenate([[dtype(init)], incl[:-1] + dtype(init)]).astype(dtype) if len(values) else incl


# ------------------------------------------------------------------------ reduce inputs

@pytest.mark.parametrize("n", SIZES + [BIG])
def test_reduce_counting(n):
    assert _sum(CountingIterator(np.int64(5)), n, np.int64) == sum(range(5, 5 + n))


def test_reduce_counting_int64_large():
    n = 1 << 30
    assert _sum(CountingIterator(np.int64(0)), n, np.int64) == n * (n - 1) // 2


@pytest.mark.parametrize("n", SIZES)
def test_reduce_constant(n):
    assert _sum(ConstantIterator(np.float64(0.5)), n, np.float64) == 0.5 * n


@pytest.mark.parametrize("n", SIZES + [BIG])
def test_reduce_transform_square(n):
    host = np.random.default_rng(1).random(max(n, 1)).astype(np.float32)[:n]
    x = cp.asarray(host)
    got = _sum(TransformIterator(x, lambda v: v * v), n, np.float32)
    np.testing.assert_allclose(got, np.sum(host.astype(np.float64) ** 2), rtol=1e-4)


@pytest.mark.parametrize("n", SIZES)
def test_reduce_reverse_permutation_cache_modified(n):
    host = np.arange(n, dtype=np.int64) * 3 - 7
    x = cp.asarray(host)
    assert _sum(ReverseIterator(x), n, np.int64) == host.sum()
    assert _sum(CacheModifiedInputIterator(x, modifier="stream"), n, np.int64) == host.sum()
    idx_host = np.random.default_rng(2).integers(0, max(n, 1), n).astype(np.int32)
    idx = cp.asarray(idx_host)
    assert _sum(PermutationIterator(x, idx), n, np.int64) == host[idx_host].sum()


@pytest.mark.parametrize("n", [1, 17, 1000, (1 << 20) + 7])
def test_shuffle_is_a_bijection(n):
    got = _scan(ShuffleIterator(n, seed=11), n, np.int64)
    values = np.diff(np.concatenate([[0], got]))
    np.testing.assert_array_equal(np.sort(values), np.arange(n))
    other = np.diff(np.concatenate([[0], _scan(ShuffleIterator(n, seed=12), n, np.int64)]))
    if n > 16:
        assert not np.array_equal(values, other)  # another seed, another permutation


def test_argmax_through_zip_returns_the_first_index_on_ties():
    rng = np.random.default_rng(3)
    host = rng.integers(0, 50, (1 << 20) + 5).astype(np.float32)  # many ties on the maximum
    x = cp.asarray(host)
    Pair = cuprims.gpu_struct({"value": np.float32, "index": np.int64})

    def better(a, b):
        if a[0] > b[0] or (a[0] == b[0] and a[1] < b[1]):
            return a
        return b

    out = cp.empty(1, Pair.dtype)
    cuprims.reduce_into(d_in=ZipIterator(x, CountingIterator(np.int64(0))), d_out=out, num_items=host.size,
                        op=better, h_init=Pair(-np.inf, np.iinfo(np.int64).max))
    res = out.get()[0]
    assert int(res["index"]) == int(np.argmax(host)) and float(res["value"]) == host.max()


def test_nested_transform_of_zip_of_counting_and_permutation():
    n = 100_001
    rng = np.random.default_rng(4)
    host = rng.random(n).astype(np.float64)
    idx_host = rng.permutation(n).astype(np.int64)
    x, idx = cp.asarray(host), cp.asarray(idx_host)
    it = TransformIterator(ZipIterator(CountingIterator(np.int64(0)), PermutationIterator(x, idx)),
                           lambda v: v[0] * v[1], np.float64)
    got = _sum(it, n, np.float64)
    np.testing.assert_allclose(got, np.sum(np.arange(n) * host[idx_host]), rtol=1e-9)


# ------------------------------------------------------------------------ scan inputs/outputs

@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("inclusive", [True, False])
def test_scan_counting_into_reverse(n, inclusive):
    out = cp.full(max(n, 1), -1, np.int64)
    it = ReverseIterator(out[:n]) if n else ReverseIterator(out)
    if inclusive:
        cuprims.inclusive_scan(d_in=CountingIterator(np.int32(1)), d_out=it, op=OpKind.PLUS, num_items=n)
    else:
        cuprims.exclusive_scan(d_in=CountingIterator(np.int32(1)), d_out=it, op=OpKind.PLUS,
                               init_value=np.int64(10), num_items=n)
    expect = _expect_scan(np.arange(1, n + 1), np.int64, inclusive, 10)
    np.testing.assert_array_equal(out[:n].get()[::-1], expect)


def test_scan_into_permutation_transform_output_and_discard():
    n = 300_007
    rng = np.random.default_rng(5)
    host = rng.integers(-9, 9, n).astype(np.int32)
    x = cp.asarray(host)
    expect = np.cumsum(host, dtype=np.int32)
    # scatter: out[idx[i]] = scan[i]
    idx_host = rng.permutation(n).astype(np.int32)
    out = cp.zeros(n, np.int32)
    cuprims.inclusive_scan(d_in=x, d_out=PermutationIterator(out, cp.asarray(idx_host)), op=OpKind.PLUS, num_items=n)
    scattered = np.zeros(n, np.int32)
    scattered[idx_host] = expect
    np.testing.assert_array_equal(out.get(), scattered)
    # transformed on the way out, into another dtype
    out64 = cp.zeros(n, np.float64)
    cuprims.inclusive_scan(d_in=x, d_out=TransformOutputIterator(out64, lambda v: v * 0.5, np.int32),
                           op=OpKind.PLUS, num_items=n)
    np.testing.assert_array_equal(out64.get(), expect * 0.5)
    # computed and dropped: nothing to compare but nothing may break either
    cuprims.inclusive_scan(d_in=x, d_out=DiscardIterator(x), op=OpKind.PLUS, num_items=n)
    cp.cuda.runtime.deviceSynchronize()


def test_reduce_into_transform_output_and_0d_array():
    n = 1 << 20
    x = cp.arange(n, dtype=np.float64)
    mean = cp.empty((), np.float64)
    cuprims.reduce_into(d_in=x, d_out=TransformOutputIterator(mean, lambda s: s / n), num_items=n, op=OpKind.PLUS,
                        h_init=np.float64(0))
    assert float(mean) == (n - 1) / 2
    total = cp.empty((), np.float64)
    cuprims.reduce_into(d_in=x, d_out=total, num_items=n, op=OpKind.PLUS, h_init=np.float64(0))
    assert float(total) == n * (n - 1) / 2


# ------------------------------------------------------------------------ runtime state

def test_new_state_compiles_nothing():
    n = 10_000
    out = cp.empty(1, np.int64)
    reducer = cuprims.make_reduce_into(d_in=CountingIterator(np.int64(0)), d_out=out, op=OpKind.PLUS,
                                       h_init=np.int64(0))
    reducer(temp_storage=None, d_in=CountingIterator(np.int64(0)), d_out=out, num_items=n, h_init=np.int64(0))
    scan_out = cp.empty(n, np.int64)
    cuprims.inclusive_scan(d_in=ShuffleIterator(n, seed=1), d_out=scan_out, op=OpKind.PLUS, num_items=n)
    x = cp.arange(n, dtype=np.float32)
    _sum(TransformIterator(x, lambda v: v * v), n, np.float32)
    before = cuprims.cache_info()
    for start in (-5, 0, 123456):
        tmp = cp.empty(max(1, reducer(temp_storage=None, d_in=CountingIterator(np.int64(start)), d_out=out,
                                      num_items=n, h_init=np.int64(0))), np.uint8)
        reducer(temp_storage=tmp, d_in=CountingIterator(np.int64(start)), d_out=out, num_items=n, h_init=np.int64(0))
        assert int(out.get()[0]) == sum(range(start, start + n))
    for seed in (2, 3):
        cuprims.inclusive_scan(d_in=ShuffleIterator(n, seed=seed), d_out=scan_out, op=OpKind.PLUS, num_items=n)
        assert int(scan_out[-1].get()) == n * (n - 1) // 2
    y = cp.arange(n, dtype=np.float32) + 1
    np.testing.assert_allclose(_sum(TransformIterator(y, lambda v: v * v), n, np.float32),
                               np.sum((np.arange(n, dtype=np.float64) + 1) ** 2), rtol=1e-4)
    after = cuprims.cache_info()
    for key in ("numba_compiles", "nvrtc_compiles", "links"):
        assert after[key] == before[key], key


# ------------------------------------------------------------------------ bad arrays

def _bad_arrays(dtype):
    base = cp.zeros(1024 * np.dtype(dtype).itemsize + 64, dtype=np.uint8)
    # an array starting one byte into an allocation (CuPy's view() refuses to make one)
    misaligned = cp.ndarray((1024,), dtype=dtype, memptr=base.data + 1)
    strided = cp.zeros(2048, dtype=dtype)[::2]
    host = np.zeros(1024, dtype=dtype)
    short = cp.zeros(10, dtype=dtype)
    return [("misaligned", misaligned), ("strided", strided), ("host", host), ("short", short)]


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.complex64])
@pytest.mark.parametrize("algo", ["reduce", "inclusive_scan"])
def test_bad_arrays_raise_and_the_process_keeps_working(dtype, algo):
    n = 1024
    good = cp.ones(n, dtype=dtype)
    for what, bad in _bad_arrays(dtype):
        for role in ("d_in", "d_out"):
            args = {"d_in": good, "d_out": cp.zeros(n if algo != "reduce" else 1, dtype=dtype)}
            if role == "d_out" and algo == "reduce" and what == "short":
                continue  # one item is all a reduction writes
            args[role] = bad
            with pytest.raises(ArgumentError) as info:
                if algo == "reduce":
                    cuprims.reduce_into(**args, num_items=n, op=OpKind.PLUS, h_init=np.asarray(0, dtype)[()])
                else:
                    cuprims.inclusive_scan(**args, op=OpKind.PLUS, num_items=n)
            assert info.value.argument == role, (what, role)
    # the context is healthy: a real call still works
    assert _sum(good, n, dtype) == n


# ------------------------------------------------------------------------ transforms

@pytest.mark.parametrize("n", SIZES)
def test_unary_transform_through_iterators(n):
    rng = np.random.default_rng(6)
    host = rng.random(max(n, 1)).astype(np.float32)[:n]
    x = cp.asarray(host)
    y = cp.zeros(max(n, 1), np.float32)
    # x*2 written through a +1 output iterator equals x*2+1 into an array
    cuprims.unary_transform(d_in=x, d_out=TransformOutputIterator(y, lambda v: v + 1), op=lambda v: v * 2, num_items=n)
    np.testing.assert_allclose(y[:n].get(), host * 2 + 1, rtol=1e-6)
    # a counting input, reversed into a wider type
    z = cp.zeros(max(n, 1), np.float64)
    cuprims.unary_transform(d_in=CountingIterator(np.int32(3)), d_out=ReverseIterator(z[:n] if n else z),
                            op=lambda v: v * 0.5, num_items=n)
    np.testing.assert_array_equal(z[:n].get()[::-1], np.arange(3, 3 + n) * 0.5)


def test_binary_transform_of_zip_and_shuffle():
    n = 200_003
    rng = np.random.default_rng(7)
    a, b = rng.random(n).astype(np.float32), rng.integers(0, 9, n).astype(np.int32)
    c = rng.random(n).astype(np.float32)
    out = cp.zeros(n, np.float64)
    cuprims.binary_transform(d_in1=ZipIterator(cp.asarray(a), cp.asarray(b)), d_in2=cp.asarray(c), d_out=out,
                             op=lambda z, y: z[0] * z[1] + y, num_items=n)
    np.testing.assert_allclose(out.get(), a.astype(np.float64) * b + c, rtol=1e-6)
    perm = cp.zeros(n, np.int64)
    cuprims.unary_transform(d_in=ShuffleIterator(n, seed=5), d_out=perm, op=OpKind.IDENTITY, num_items=n)
    np.testing.assert_array_equal(np.sort(perm.get()), np.arange(n))
    # scatter through a permutation output: out[perm[i]] = i
    inverse = cp.zeros(n, np.int64)
    cuprims.unary_transform(d_in=CountingIterator(np.int64(0)), d_out=PermutationIterator(inverse, perm),
                            op=OpKind.IDENTITY, num_items=n)
    np.testing.assert_array_equal(inverse.get()[perm.get()], np.arange(n))
