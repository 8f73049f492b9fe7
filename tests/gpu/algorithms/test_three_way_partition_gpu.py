"""Three-way partition on the GPU against numpy: CUB's order (first part and second part
in input order, the rest in input order too), every size edge, all or none selected,
iterator input, DiscardIterator output, captured arrays, counts written on the device."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import CountingIterator, DiscardIterator  # noqa: E402


def _partition(x: np.ndarray, first, second):
    f = np.array([bool(first(v)) for v in x], bool) if x.size < 5000 else first(x)
    s = (~f) & (np.array([bool(second(v)) for v in x], bool) if x.size < 5000 else second(x))
    return x[f], x[s], x[~f & ~s]


def _run(host: np.ndarray, first, second, count_dtype=np.int64):
    n = host.size
    outs = [cp.full(max(n, 1), -7, np.int64).astype(host.dtype) for _ in range(3)]
    counts = cp.full(2, -1, np.int64).astype(count_dtype)
    cuprims.three_way_partition(d_in=cp.asarray(host), d_first_part_out=outs[0], d_second_part_out=outs[1],
                                d_unselected_out=outs[2], d_num_selected_out=counts, select_first_part_op=first,
                                select_second_part_op=second, num_items=n)
    c1, c2 = (int(v) for v in counts.get())
    return outs[0].get()[:c1], outs[1].get()[:c2], outs[2].get()[:n - c1 - c2]


def _small(v):
    return v < 30


def _large(v):
    return v > 70


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.uint8])
@pytest.mark.parametrize("n", [0, 1, 1000, (1 << 20) + 7])
def test_against_numpy(dtype, n):
    host = np.random.default_rng(n).integers(0, 100, n).astype(dtype)
    got = _run(host, _small, _large)
    want = _partition(host, _small, _large)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_all_first_none_selected_and_overlapping_predicates():
    host = np.arange(5000, dtype=np.int32)
    got = _run(host, lambda v: v >= 0, lambda v: v >= 0)     # everything in the first part
    assert got[0].size == 5000 and got[1].size == 0 and got[2].size == 0
    got = _run(host, lambda v: v < 0, lambda v: v < 0, np.int32)   # nothing selected
    np.testing.assert_array_equal(got[2], host)


def test_counting_input_discarded_rest_and_a_captured_bound():
    n = 100_003
    bound = cp.asarray([n // 3], dtype=np.int64)

    def below(v):
        return v < bound[0]

    first, second = cp.zeros(n, np.int64), cp.zeros(n, np.int64)
    counts = cp.zeros(2, np.int64)
    cuprims.three_way_partition(d_in=CountingIterator(np.int64(0)), d_first_part_out=first, d_second_part_out=second,
                                d_unselected_out=DiscardIterator(first), d_num_selected_out=counts,
                                select_first_part_op=below, select_second_part_op=lambda v: v % 2 == 0, num_items=n)
    c1, c2 = (int(v) for v in counts.get())
    assert c1 == n // 3
    np.testing.assert_array_equal(first.get()[:c1], np.arange(n // 3))
    rest = np.arange(n // 3, n)
    np.testing.assert_array_equal(second.get()[:c2], rest[rest % 2 == 0])
    # a new bound is read at the next call, with no new build
    before = cuprims.cache_info()["links"]
    bound[0] = 10
    cuprims.three_way_partition(d_in=CountingIterator(np.int64(0)), d_first_part_out=first, d_second_part_out=second,
                                d_unselected_out=DiscardIterator(first), d_num_selected_out=counts,
                                select_first_part_op=below, select_second_part_op=lambda v: v % 2 == 0, num_items=n)
    assert int(counts.get()[0]) == 10 and cuprims.cache_info()["links"] == before


@pytest.mark.big_memory
def test_more_than_two_to_the_31_items_run_in_partitions():
    # i % 7 as int8: the parts are repeating patterns, so order and every partition seam show
    n = (1 << 31) + 12_345
    period = (cp.arange(7 << 20, dtype=np.int32) % 7).astype(np.int8)
    full, rest = divmod(n, period.size)
    x = cp.concatenate([cp.tile(period, full), period[:rest]])
    outs = [cp.empty(n, np.int8) for _ in range(3)]
    counts = cp.full(2, -1, np.int64)
    cuprims.three_way_partition(d_in=x, d_first_part_out=outs[0], d_second_part_out=outs[1], d_unselected_out=outs[2],
                                d_num_selected_out=counts, select_first_part_op=lambda v: v < 2,
                                select_second_part_op=lambda v: v > 4, num_items=n)
    c1, c2 = (int(v) for v in counts.get())
    whole, tail = divmod(n, 7)
    assert c1 == 2 * whole + min(tail, 2) and c2 == 2 * whole + max(0, tail - 5)
    for out, count, values in ((outs[0], c1, (0, 1)), (outs[1], c2, (5, 6)), (outs[2], n - c1 - c2, (2, 3, 4))):
        pattern = cp.asarray(np.array(values, np.int8))
        k = len(values)
        reps, extra = divmod(count, k)
        assert bool(cp.all(out[:reps * k].reshape(reps, k) == pattern)), values
        assert bool(cp.all(out[reps * k:count] == pattern[:extra])), values


def test_identity_as_the_first_predicate():
    host = np.random.default_rng(4).integers(0, 10, 50_001).astype(np.int32)
    d_in = cp.asarray(host)
    first, second, rest = (cp.empty_like(d_in) for _ in range(3))
    counts = cp.zeros(2, np.int64)
    cuprims.three_way_partition(d_in=d_in, d_first_part_out=first, d_second_part_out=second, d_unselected_out=rest,
                                d_num_selected_out=counts, select_first_part_op=cuprims.OpKind.IDENTITY,
                                select_second_part_op=lambda v: v > 5, num_items=host.size)
    n1, n2 = (int(c) for c in counts.get())
    np.testing.assert_array_equal(first.get()[:n1], host[host != 0])
    assert n2 == 0                          # every item > 5 is nonzero: the first part took it
    np.testing.assert_array_equal(rest.get()[:host.size - n1 - n2], host[host == 0])


def test_squares_into_outputs_of_other_dtypes():
    # int64 items (numba's type of x * x over int32) into int32, int64 and float64 arrays
    from cuprims import TransformIterator

    h = np.random.default_rng(6).integers(-60_000, 60_000, 500_001).astype(np.int32)
    sq = h.astype(np.int64) ** 2
    outs = [cp.empty(h.size, np.int32), cp.empty(h.size, np.int64), cp.empty(h.size, np.float64)]
    counts = cp.empty(2, np.int64)
    cuprims.three_way_partition(d_in=TransformIterator(cp.asarray(h), lambda x: x * x), d_first_part_out=outs[0],
                                d_second_part_out=outs[1], d_unselected_out=outs[2], d_num_selected_out=counts,
                                select_first_part_op=lambda v: v < 1_000_000, select_second_part_op=lambda v: v > 3e9,
                                num_items=h.size)
    first, second, rest = _partition(sq, lambda v: v < 1_000_000, lambda v: v > 3e9)
    c1, c2 = (int(v) for v in counts.get())
    assert (c1, c2) == (first.size, second.size)
    np.testing.assert_array_equal(outs[0].get()[:c1], first.astype(np.int32))
    np.testing.assert_array_equal(outs[1].get()[:c2], second)
    np.testing.assert_array_equal(outs[2].get()[:rest.size], rest.astype(np.float64))
