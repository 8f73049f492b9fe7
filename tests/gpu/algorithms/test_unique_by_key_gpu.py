"""Unique-by-key on the GPU against numpy: every key dtype, runs of every length, all equal,
all distinct, empty input, NaN keys (never equal), struct keys with a Python equality,
iterator inputs, DiscardIterator outputs, the count written on the device, streams; tile
boundaries of cuprims' kernel with sparse and dense run heads (its direct and compacting
scatter), an equality capturing a device array, output iterators, and both builds at
2^31 - 1 and 2^31 + 5 items (cuprims' kernel, then CUB's with 64-bit offsets)."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import CountingIterator, DiscardIterator, OpKind  # noqa: E402
from cuprims import TransformIterator, TransformOutputIterator  # noqa: E402
from side_streams import side_stream  # noqa: E402


def _expected(keys: np.ndarray, items: np.ndarray):
    if keys.size == 0:
        return keys, items
    first = np.ones(keys.size, bool)
    first[1:] = keys[1:] != keys[:-1]   # NaN != NaN: every NaN starts a run
    return keys[first], items[first]


def _run(keys: np.ndarray, items: np.ndarray, count_dtype=np.int64, op=OpKind.EQUAL_TO):
    n = keys.size
    ko, io = cp.zeros(max(n, 1), keys.dtype), cp.zeros(max(n, 1), items.dtype)
    count = cp.full(1, -1, np.int64).astype(count_dtype)
    cuprims.unique_by_key(d_in_keys=cp.asarray(keys), d_in_items=cp.asarray(items), d_out_keys=ko, d_out_items=io,
                          d_out_num_selected=count, op=op, num_items=n)
    m = int(count.get()[0])
    return ko.get()[:m], io.get()[:m]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 1000, (1 << 20) + 7])
def test_runs_against_numpy(dtype, n):
    rng = np.random.default_rng(n)
    keys = np.sort(rng.integers(0, max(2, n // 8), n)).astype(dtype)
    items = rng.random(n).astype(np.float32)
    got_k, got_i = _run(keys, items)
    want_k, want_i = _expected(keys, items)
    np.testing.assert_array_equal(got_k, want_k)
    np.testing.assert_array_equal(got_i, want_i)


def test_edge_inputs_and_count_types():
    for keys in (np.zeros(0, np.int32), np.full(5000, 3, np.int32), np.arange(5000, dtype=np.int32)):
        items = np.arange(keys.size, dtype=np.int64)
        for count_dtype in (np.int32, np.uint64):
            got_k, got_i = _run(keys, items, count_dtype)
            want_k, want_i = _expected(keys, items)
            np.testing.assert_array_equal(got_k, want_k)
            np.testing.assert_array_equal(got_i, want_i)


def test_nan_keys_never_compare_equal():
    keys = np.array([1.0, np.nan, np.nan, 2.0, 2.0], np.float32)
    items = np.arange(5, dtype=np.int32)
    got_k, got_i = _run(keys, items)
    np.testing.assert_array_equal(got_i, [0, 1, 2, 3])


def test_struct_keys_with_a_python_equality_counting_items_and_discard():
    pair = cuprims.gpu_struct({"a": np.int32, "b": np.int32})
    rng = np.random.default_rng(2)
    n = 100_003
    host = np.zeros(n, pair.dtype)
    host["a"] = np.sort(rng.integers(0, 50, n))
    host["b"] = host["a"] % 3
    keys = cp.asarray(host)
    ko = cp.empty(n, pair.dtype)
    idx = cp.zeros(n, np.int64)
    count = cp.zeros(1, np.int32)
    eq = lambda x, y: x.a == y.a and x.b == y.b  # noqa: E731
    cuprims.unique_by_key(d_in_keys=keys, d_in_items=CountingIterator(np.int64(0)), d_out_keys=ko, d_out_items=idx,
                          d_out_num_selected=count, op=eq, num_items=n)
    m = int(count.get()[0])
    first = np.flatnonzero(np.r_[True, host["a"][1:] != host["a"][:-1]])
    assert m == first.size
    np.testing.assert_array_equal(idx.get()[:m], first)
    np.testing.assert_array_equal(ko.get()[:m]["a"], host["a"][first])
    # keys only: the items go to a DiscardIterator
    ko2 = cp.empty(n, pair.dtype)
    cuprims.unique_by_key(d_in_keys=keys, d_in_items=CountingIterator(np.int64(0)), d_out_keys=ko2,
                          d_out_items=DiscardIterator(idx), d_out_num_selected=count, op=eq, num_items=n)
    assert int(count.get()[0]) == m
    np.testing.assert_array_equal(ko2.get()[:m]["a"], host["a"][first])


def test_object_api_temp_query_and_a_stream():
    n = 1 << 20
    keys = cp.asarray(np.sort(np.random.default_rng(4).integers(0, 5000, n)).astype(np.int64))
    items = cp.arange(n, dtype=np.float64)
    ko, io, count = cp.empty(n, np.int64), cp.empty(n, np.float64), cp.empty(1, np.int64)
    kw = dict(d_in_keys=keys, d_in_items=items, d_out_keys=ko, d_out_items=io, d_out_num_selected=count)
    u = cuprims.make_unique_by_key(op=OpKind.EQUAL_TO, **kw)
    nbytes = u(temp_storage=None, num_items=n, **kw)
    assert nbytes >= 1
    stream = side_stream()
    tmp = cp.empty(nbytes, np.uint8)
    u(temp_storage=tmp, num_items=n, stream=stream, **kw)
    stream.synchronize()
    want_k, want_i = _expected(keys.get(), items.get())
    m = int(count.get()[0])
    np.testing.assert_array_equal(ko.get()[:m], want_k)
    np.testing.assert_array_equal(io.get()[:m], want_i)


def _tile_items(key_dtype, item_dtype) -> int:
    """Items per tile of cuprims' kernel for these types on this GPU (read from its plan)."""
    kw = dict(d_in_keys=cp.zeros(1, key_dtype), d_in_items=cp.zeros(1, item_dtype), d_out_keys=cp.empty(1, key_dtype),
              d_out_items=cp.empty(1, item_dtype), d_out_num_selected=cp.empty(1, np.int64))
    u = cuprims.make_unique_by_key(op=OpKind.EQUAL_TO, **kw)
    u(temp_storage=cp.empty(u(temp_storage=None, num_items=1, **kw), np.uint8), num_items=1, **kw)
    return u._plans[0].tile_items


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.float32])
def test_tile_boundaries_sparse_and_dense_heads(dtype):
    tile = _tile_items(dtype, np.float64)
    for n in (tile - 1, tile, tile + 1, 3 * tile, 3 * tile + 5):
        i = np.arange(n)
        shapes = {
            "all distinct": i,                   # every item a head: the compacting scatter
            "pairs": i // 2,                     # more heads than threads per tile
            "runs across tiles": i // (tile + 3),  # tiles without a head; runs span tile ends
            "random": np.sort(np.random.default_rng(n).integers(0, n // 50 + 2, n)),
        }
        for name, keys in shapes.items():
            keys = (keys % 100 if np.dtype(dtype).itemsize == 1 else keys).astype(dtype)
            items = i.astype(np.float64) * 0.5
            got_k, got_i = _run(keys, items)
            want_k, want_i = _expected(keys, items)
            np.testing.assert_array_equal(got_k, want_k, err_msg=f"{name}, n={n}")
            np.testing.assert_array_equal(got_i, want_i, err_msg=f"{name}, n={n}")


def test_an_equality_capturing_a_device_array():
    width = cp.asarray([10], dtype=np.int32)

    def same_bucket(a, b):
        return a // width[0] == b // width[0]

    n = 300_001
    keys = np.sort(np.random.default_rng(5).integers(0, 40_000, n)).astype(np.int32)
    items = np.arange(n, dtype=np.int32)
    got_k, got_i = _run(keys, items, np.int32, op=same_bucket)
    buckets = keys // 10
    first = np.r_[True, buckets[1:] != buckets[:-1]]
    np.testing.assert_array_equal(got_k, keys[first])
    np.testing.assert_array_equal(got_i, items[first])


def test_iterator_keys_discarded_keys_and_an_output_iterator():
    n = (1 << 20) + 11
    keys = TransformIterator(CountingIterator(np.int64(0)), lambda i: i // 7)
    items = cp.arange(n, dtype=np.float32)
    io, count = cp.zeros(n, np.float32), cp.zeros(1, np.uint64)
    cuprims.unique_by_key(d_in_keys=keys, d_in_items=items, d_out_keys=DiscardIterator(cp.empty(1, np.int64)),
                          d_out_items=TransformOutputIterator(io, lambda v: v + 1), d_out_num_selected=count,
                          op=OpKind.EQUAL_TO, num_items=n)
    m = int(count.get()[0])
    assert m == -(-n // 7)
    np.testing.assert_array_equal(io.get()[:m], np.arange(m, dtype=np.float32) * 7 + 1)


@pytest.mark.big_memory
def test_both_builds_at_the_32_bit_boundary():
    """2^31 - 1 items run on cuprims' kernel, 2^31 + 5 on CUB's (64-bit offsets)."""
    keys = TransformIterator(CountingIterator(np.int64(0)), lambda i: i >> 12)
    items = CountingIterator(np.int64(0))
    out_keys = DiscardIterator(cp.empty(1, np.int64))
    big = (1 << 31) + 5
    io, count = cp.empty(big, np.int64), cp.zeros(1, np.int64)   # 16 GiB: room for every item
    kw = dict(d_in_keys=keys, d_in_items=items, d_out_keys=out_keys, d_out_items=io, d_out_num_selected=count)
    u = cuprims.make_unique_by_key(op=OpKind.EQUAL_TO, **kw)
    tmp = None
    try:
        for n in ((1 << 31) - 1, big):
            tmp = cp.empty(u(temp_storage=None, num_items=n, **kw), np.uint8)
            io[: (n >> 12) + 2].fill(-1)
            u(temp_storage=tmp, num_items=n, **kw)
            m = int(count.get()[0])
            assert m == -(-n // 4096), n
            np.testing.assert_array_equal(io[:m + 1].get(), np.r_[np.arange(m, dtype=np.int64) * 4096, -1])
        assert sorted(u._plans) == [0, 1]
    finally:
        del io, tmp
        cp.get_default_memory_pool().free_all_blocks()


def test_keys_and_items_into_arrays_of_other_dtypes():
    # int64 keys (numba's type of x * x over int32) into int32, float32 items into float64
    h = np.sort(np.random.default_rng(7).integers(0, 3000, 400_003)).astype(np.int32)
    items = np.random.default_rng(8).random(h.size).astype(np.float32)
    out_k, out_v, count = cp.empty(h.size, np.int32), cp.empty(h.size, np.float64), cp.empty(1, np.int64)
    cuprims.unique_by_key(d_in_keys=TransformIterator(cp.asarray(h), lambda x: x * x), d_in_items=cp.asarray(items),
                          d_out_keys=out_k, d_out_items=out_v, d_out_num_selected=count, op=OpKind.EQUAL_TO,
                          num_items=h.size)
    keys, firsts = np.unique(h.astype(np.int64) ** 2, return_index=True)
    m = int(count.get()[0])
    assert m == keys.size
    np.testing.assert_array_equal(out_k.get()[:m], keys.astype(np.int32))
    np.testing.assert_array_equal(out_v.get()[:m], items[firsts].astype(np.float64))
