"""reduce_by_key, run_length_encode and non_trivial_runs on the GPU against numpy (runs from
np.diff, sums by np.add.reduceat): every integer and float key and value dtype, sizes around
a tile, NaN keys, a single run, all distinct keys, iterators, Python operators (one capturing
a device array), struct values, the object API on a stream."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import ConstantIterator, CountingIterator, DiscardIterator, OpKind, TransformIterator  # noqa: E402
from side_streams import side_stream  # noqa: E402

PAIR = cuprims.gpu_struct({"lo": np.float32, "hi": np.float32})


def reference(keys: np.ndarray, values: np.ndarray, reduce=np.add):
    """(unique keys, aggregates) of each run of equal consecutive keys (NaN equals nothing)."""
    n = keys.size
    if n == 0:
        return keys[:0], values[:0]
    heads = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[heads], reduce.reduceat(values, heads)


def run(keys: np.ndarray, values: np.ndarray, aggregate=None, op=OpKind.PLUS, **kw):
    aggregate = aggregate or values.dtype
    n = keys.size
    k, v = cp.asarray(keys), cp.asarray(values)
    uk, agg, runs = cp.zeros(max(n, 1), keys.dtype), cp.zeros(max(n, 1), aggregate), cp.full(1, -1, np.int64)
    cuprims.reduce_by_key(d_in_keys=k, d_in_values=v, d_out_unique_keys=uk, d_out_aggregates=agg,
                          d_out_num_runs=runs, reduction_op=op, num_items=n, **kw)
    m = int(runs[0])
    return uk[:m].get(), agg[:m].get()


@pytest.mark.parametrize("key", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
                                 np.float16, np.float32, np.float64])
@pytest.mark.parametrize("value", [np.int32, np.int64, np.float32, np.float64])
def test_sums_for_every_key_and_value_type(key, value):
    rng = np.random.default_rng(1)
    n = 50_000
    keys = np.sort(rng.integers(0, 100, n)).astype(key)
    values = rng.integers(-50, 50, n).astype(value)
    uk, agg = run(keys, values)
    want_k, want_a = reference(keys, values)
    np.testing.assert_array_equal(uk, want_k)
    np.testing.assert_allclose(agg, want_a, rtol=1e-5 if value == np.float32 else 1e-12)


@pytest.mark.parametrize("n", [0, 1, 2, 767, 768, 769, 10_000, 1 << 20])
def test_sizes_around_a_tile_with_random_runs(n):
    rng = np.random.default_rng(n)
    keys = np.cumsum(rng.random(n) < 0.3).astype(np.int32)
    values = rng.random(n).astype(np.float64)
    uk, agg = run(keys, values)
    want_k, want_a = reference(keys, values)
    np.testing.assert_array_equal(uk, want_k)
    np.testing.assert_allclose(agg, want_a, rtol=1e-12)


def test_one_run_all_distinct_keys_and_nan_keys():
    n = 100_000
    ones = np.ones(n, np.float64)
    uk, agg = run(np.full(n, 7, np.int32), ones)
    assert uk.tolist() == [7] and agg.tolist() == [n]
    keys = np.arange(n, dtype=np.int64)
    uk, agg = run(keys, ones)
    np.testing.assert_array_equal(uk, keys)
    assert (agg == 1).all()
    keys = np.repeat(np.array([1.0, np.nan, np.nan, 2.0], np.float32), 3)   # NaN != NaN: each NaN its own run
    uk, agg = run(keys, np.ones(keys.size, np.float32))
    assert agg.tolist() == [3, 1, 1, 1, 1, 1, 1, 3] and np.isnan(uk[1:7]).all()


def test_run_lengths_from_a_constant_iterator_and_iterator_keys():
    n = 1 << 18
    keys = TransformIterator(CountingIterator(np.int64(0)), lambda i: i // 5)
    uk, lengths, runs = cp.empty(n, np.int64), cp.empty(n, np.int32), cp.empty(1, np.int32)
    cuprims.reduce_by_key(d_in_keys=keys, d_in_values=ConstantIterator(np.int32(1)), d_out_unique_keys=uk,
                          d_out_aggregates=lengths, d_out_num_runs=runs, reduction_op=OpKind.PLUS, num_items=n)
    m = int(runs[0])
    assert m == -(-n // 5)
    np.testing.assert_array_equal(uk[:m].get(), np.arange(m))
    assert (lengths[:m - 1].get() == 5).all() and int(lengths[m - 1]) == n - 5 * (m - 1)


def test_python_operators_one_capturing_a_device_array_and_discarded_keys():
    rng = np.random.default_rng(3)
    n = 30_000
    keys = np.sort(rng.integers(0, 1000, n)).astype(np.int32)
    values = rng.random(n).astype(np.float32)
    width = cp.asarray([10], np.int32)

    def same_decade(a, b):
        return a // width[0] == b // width[0]

    def larger(a, b):
        return a if a > b else b

    agg, runs = cp.empty(n, np.float32), cp.empty(1, np.int64)
    cuprims.reduce_by_key(d_in_keys=cp.asarray(keys), d_in_values=cp.asarray(values),
                          d_out_unique_keys=DiscardIterator(cp.empty(1, np.int32)), d_out_aggregates=agg,
                          d_out_num_runs=runs, reduction_op=larger, equality_op=same_decade, num_items=n)
    decades = keys // 10
    heads = np.flatnonzero(np.r_[True, decades[1:] != decades[:-1]])
    m = int(runs[0])
    assert m == heads.size
    np.testing.assert_array_equal(agg[:m].get(), np.maximum.reduceat(values, heads))


def test_a_coarser_equality_writes_each_runs_last_key():
    # equal tens: a run's keys differ, and CUB (so cuda.compute) writes the last one; runs
    # cross tiles (about 4,600 keys a tile for 4-byte keys and values)
    rng = np.random.default_rng(5)
    n = 100_003
    keys = np.sort(rng.integers(0, 2_000, n)).astype(np.int32)
    values = rng.integers(-9, 10, n).astype(np.int64)

    def same_ten(a, b):
        return a // 10 == b // 10

    uk, agg, runs = cp.empty(n, np.int32), cp.empty(n, np.int64), cp.empty(1, np.int64)
    cuprims.reduce_by_key(d_in_keys=cp.asarray(keys), d_in_values=cp.asarray(values), d_out_unique_keys=uk,
                          d_out_aggregates=agg, d_out_num_runs=runs, reduction_op=OpKind.PLUS,
                          equality_op=same_ten, num_items=n)
    heads = np.flatnonzero(np.r_[True, keys[1:] // 10 != keys[:-1] // 10])
    m = int(runs[0])
    assert m == heads.size
    np.testing.assert_array_equal(uk[:m].get(), keys[np.r_[heads[1:], n] - 1])
    np.testing.assert_array_equal(agg[:m].get(), np.add.reduceat(values, heads))


def test_struct_values_with_a_python_reduction():
    def span(a, b):
        return PAIR(min(a.lo, b.lo), max(a.hi, b.hi))

    rng = np.random.default_rng(4)
    n = 20_000
    keys = np.sort(rng.integers(0, 300, n)).astype(np.int32)
    lo = rng.random(n).astype(np.float32)
    pairs = np.empty(n, PAIR.dtype)
    pairs["lo"], pairs["hi"] = lo, lo + 1
    uk, agg, runs = cp.empty(n, np.int32), cp.empty(n, PAIR.dtype), cp.empty(1, np.int64)
    cuprims.reduce_by_key(d_in_keys=cp.asarray(keys), d_in_values=cp.asarray(pairs), d_out_unique_keys=uk,
                          d_out_aggregates=agg, d_out_num_runs=runs, reduction_op=span, num_items=n)
    heads = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    m = int(runs[0])
    got = agg[:m].get()
    np.testing.assert_array_equal(got["lo"], np.minimum.reduceat(lo, heads))
    np.testing.assert_array_equal(got["hi"], np.maximum.reduceat(lo + 1, heads))


def test_object_api_on_a_stream_and_a_wider_aggregate():
    rng = np.random.default_rng(5)
    n = 200_000
    keys = np.sort(rng.integers(0, 5_000, n)).astype(np.uint16)
    values = rng.integers(0, 100, n).astype(np.int8)
    k, v = cp.asarray(keys), cp.asarray(values.astype(np.int64))
    uk, agg, runs = cp.empty(n, np.uint16), cp.empty(n, np.int64), cp.empty(1, np.uint32)
    r = cuprims.make_reduce_by_key(d_in_keys=k, d_in_values=v, d_out_unique_keys=uk, d_out_aggregates=agg,
                                   d_out_num_runs=runs, reduction_op=OpKind.PLUS)
    call = dict(d_in_keys=k, d_in_values=v, d_out_unique_keys=uk, d_out_aggregates=agg, d_out_num_runs=runs,
                num_items=n)
    stream = side_stream()
    tmp = cp.empty(r(temp_storage=None, **call), np.uint8)
    r(temp_storage=tmp, stream=stream, **call)
    stream.synchronize()
    want_k, want_a = reference(keys, values.astype(np.int64))
    m = int(runs[0])
    np.testing.assert_array_equal(uk[:m].get(), want_k)
    np.testing.assert_array_equal(agg[:m].get(), want_a)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 1000, 1 << 20])
def test_run_length_encode_against_numpy(dtype, n):
    rng = np.random.default_rng(n)
    x = np.repeat(rng.integers(0, 50, n).astype(dtype), rng.integers(1, 4, n))[:n]
    unique, counts, runs = cp.empty(max(n, 1), dtype), cp.empty(max(n, 1), np.int64), cp.full(1, -1, np.int32)
    cuprims.run_length_encode(d_in=cp.asarray(x), d_out_unique=unique, d_out_counts=counts, d_out_num_runs=runs,
                              num_items=n)
    heads = np.flatnonzero(np.r_[np.ones(min(n, 1), bool), x[1:] != x[:-1]])
    m = int(runs[0])
    assert m == heads.size
    np.testing.assert_array_equal(unique[:m].get(), x[heads])
    np.testing.assert_array_equal(counts[:m].get(), np.diff(np.r_[heads, n]))


def test_run_length_encode_object_api_with_nan_items():
    x = cp.asarray(np.array([1, 1, np.nan, np.nan, 3, 3, 3], np.float32))
    unique, counts, runs = cp.empty(7, np.float32), cp.empty(7, np.uint32), cp.empty(1, np.int64)
    rle = cuprims.make_run_length_encode(d_in=x, d_out_unique=unique, d_out_counts=counts, d_out_num_runs=runs)
    call = dict(d_in=x, d_out_unique=unique, d_out_counts=counts, d_out_num_runs=runs, num_items=7)
    rle(temp_storage=cp.empty(rle(temp_storage=None, **call), np.uint8), **call)
    m = int(runs[0])
    assert m == 4 and counts[:m].get().tolist() == [2, 1, 1, 3]    # NaN != NaN


def _run_lengths_of(lengths: list[int] | np.ndarray) -> np.ndarray:
    """Items in runs of the given lengths, each run's item its index (alternating sign)."""
    ids = np.arange(len(lengths), dtype=np.int64)
    return np.repeat(np.where(ids % 2, -ids, ids), lengths)


@pytest.mark.parametrize("shape", ["runs across many tiles", "one run", "a head at every tile edge", "mixed"])
@pytest.mark.parametrize("count_dtype", [np.int32, np.uint32, np.int64])
def test_run_length_encode_where_runs_cross_tiles(shape, count_dtype):
    """Runs longer than a tile (whole tiles without a head), one run of every item, heads that
    fall on tile edges, and a mix of lone items and long runs: each run's length spans the
    tiles between its head and the next."""
    rng = np.random.default_rng(len(shape))
    lengths = {"runs across many tiles": [100_003] * 7 + [1],
               "one run": [1_000_001],
               "a head at every tile edge": [4096] * 64 + [4095, 4097, 1],
               "mixed": rng.choice([1, 1, 2, 3, 5000, 40_000], 500)}[shape]
    x = _run_lengths_of(lengths).astype(np.int32)
    n = x.size
    unique, counts, runs = cp.empty(n, np.int32), cp.empty(n, count_dtype), cp.full(1, -1, np.int64)
    cuprims.run_length_encode(d_in=cp.asarray(x), d_out_unique=unique, d_out_counts=counts, d_out_num_runs=runs,
                              num_items=n)
    m = int(runs[0])
    assert m == len(lengths)
    np.testing.assert_array_equal(counts[:m].get(), np.asarray(lengths, count_dtype))
    np.testing.assert_array_equal(unique[:m].get(), x[np.r_[0, np.cumsum(lengths)[:-1]]])


def test_run_length_encode_into_a_discard_iterator_and_from_an_iterator():
    """The unique items discarded, the items from a TransformIterator: the lengths alone."""
    n = 1_000_000
    items = TransformIterator(CountingIterator(np.int64(0)), lambda i: i // 3000)
    counts, runs = cp.empty(n, np.int64), cp.empty(1, np.int32)
    cuprims.run_length_encode(d_in=items, d_out_unique=DiscardIterator(cp.empty(1, np.int64)), d_out_counts=counts,
                              d_out_num_runs=runs, num_items=n)
    m = int(runs[0])
    want = np.full(-(-n // 3000), 3000)
    want[-1] = n - 3000 * (want.size - 1)
    assert m == want.size
    np.testing.assert_array_equal(counts[:m].get(), want)


def test_a_struct_too_wide_for_one_tile_state_word():
    """(int offset, 12-byte struct) pairs are no atomic word: the tile states' three arrays."""
    triple = cuprims.gpu_struct({"a": np.float32, "b": np.float32, "c": np.int32})

    def add(x, y):
        return triple(x.a + y.a, x.b + y.b, x.c + y.c)

    rng = np.random.default_rng(6)
    n = 300_000
    keys = np.sort(rng.integers(0, 20_000, n)).astype(np.int64)
    items = np.empty(n, triple.dtype)
    items["a"], items["b"], items["c"] = 1.0, 0.5, rng.integers(0, 10, n)
    uk, agg, runs = cp.empty(n, np.int64), cp.empty(n, triple.dtype), cp.empty(1, np.int64)
    cuprims.reduce_by_key(d_in_keys=cp.asarray(keys), d_in_values=cp.asarray(items), d_out_unique_keys=uk,
                          d_out_aggregates=agg, d_out_num_runs=runs, reduction_op=add, num_items=n)
    heads = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    m = int(runs[0])
    got = agg[:m].get()
    lengths = np.diff(np.r_[heads, n])
    assert m == heads.size
    np.testing.assert_array_equal(got["a"], lengths.astype(np.float32))
    np.testing.assert_array_equal(got["c"], np.add.reduceat(items["c"], heads))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
                                   np.float16, np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 2, 1000, 4607, 4608, 4609, 1 << 20])
def test_non_trivial_runs_against_numpy(dtype, n):
    rng = np.random.default_rng(n + 7)
    x = np.repeat(rng.integers(0, 50, n).astype(dtype), rng.integers(1, 4, n))[:n]
    offsets, lengths, runs = cp.full(max(n, 1), -1, np.int64), cp.empty(max(n, 1), np.int32), cp.full(1, -1, np.int32)
    cuprims.non_trivial_runs(d_in=cp.asarray(x), d_out_offsets=offsets, d_out_lengths=lengths, d_out_num_runs=runs,
                             num_items=n)
    heads = np.flatnonzero(np.r_[np.ones(min(n, 1), bool), x[1:] != x[:-1]])
    run_lengths = np.diff(np.r_[heads, n])
    repeated = run_lengths > 1
    m = int(runs[0])
    assert m == repeated.sum()
    np.testing.assert_array_equal(offsets[:m].get(), heads[repeated])
    np.testing.assert_array_equal(lengths[:m].get(), run_lengths[repeated])


def test_non_trivial_runs_edge_shapes_nan_and_the_object_api_on_a_stream():
    n = 1 << 20
    runs = cp.empty(1, np.int64)
    offsets, lengths = cp.empty(n, np.int32), cp.empty(n, np.int64)
    call = dict(d_out_offsets=offsets, d_out_lengths=lengths, d_out_num_runs=runs, num_items=n)
    cuprims.non_trivial_runs(d_in=cp.full(n, 3, np.int32), **call)        # one run over every tile
    assert int(runs[0]) == 1 and int(offsets[0]) == 0 and int(lengths[0]) == n
    cuprims.non_trivial_runs(d_in=cp.arange(n, dtype=np.int32), **call)   # all distinct: none
    assert int(runs[0]) == 0
    x = cp.asarray(np.array([np.nan, np.nan, 1, 1, np.nan], np.float32))  # NaN != NaN: never repeated
    ntr = cuprims.make_non_trivial_runs(d_in=x, d_out_offsets=offsets, d_out_lengths=lengths, d_out_num_runs=runs)
    call = dict(d_in=x, d_out_offsets=offsets, d_out_lengths=lengths, d_out_num_runs=runs, num_items=5)
    stream = side_stream()
    ntr(temp_storage=cp.empty(ntr(temp_storage=None, **call), np.uint8), stream=stream, **call)
    stream.synchronize()
    assert int(runs[0]) == 1 and int(offsets[0]) == 2 and int(lengths[0]) == 2


@pytest.mark.big_memory
def test_past_2_31_items_through_the_64_bit_build():
    """2^31 + 4097 items from iterators: runs of 2^20 keys, each counted (by a reduction of
    ones and by the run-length encoding), and the runs of more than one item (every run is
    long). Each output holds num_items items, as the calls require (the run keys and lengths
    in int32: 8 GiB an array)."""
    n = (1 << 31) + 4097
    run = 1 << 20
    keys = TransformIterator(CountingIterator(np.int64(0)), lambda i: i // (1 << 20))
    m = -(-n // run)
    want = np.full(m, run)
    want[-1] = n - run * (m - 1)
    uk, counts, runs = cp.empty(n, np.int32), cp.empty(n, np.int32), cp.empty(1, np.int64)
    cuprims.reduce_by_key(d_in_keys=keys, d_in_values=ConstantIterator(np.int32(1)), d_out_unique_keys=uk,
                          d_out_aggregates=counts, d_out_num_runs=runs, reduction_op=OpKind.PLUS, num_items=n)
    assert int(runs[0]) == m
    np.testing.assert_array_equal(uk[:m].get(), np.arange(m))
    np.testing.assert_array_equal(counts[:m].get(), want)
    uk[:m], counts[:m] = -1, 0
    cuprims.run_length_encode(d_in=keys, d_out_unique=uk, d_out_counts=counts, d_out_num_runs=runs, num_items=n)
    assert int(runs[0]) == m
    np.testing.assert_array_equal(uk[:m].get(), np.arange(m))
    np.testing.assert_array_equal(counts[:m].get(), want)
    del uk
    offsets = cp.empty(n, np.int64)
    cuprims.non_trivial_runs(d_in=keys, d_out_offsets=offsets, d_out_lengths=counts, d_out_num_runs=runs,
                             num_items=n)
    assert int(runs[0]) == m
    np.testing.assert_array_equal(offsets[:m].get(), np.arange(m, dtype=np.int64) * run)
    np.testing.assert_array_equal(counts[:m].get(), want)
    del offsets, counts
