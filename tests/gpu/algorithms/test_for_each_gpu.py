"""for_each on the GPU against numpy: a scatter through captured arrays for every integer and
float dtype and sizes around a tile (2048 int32 items), a histogram with atomics, an
operator whose result is dropped, zip and struct input, the object API on a stream with new
arrays each call, and past 2^31 items from an iterator."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import CountingIterator, ZipIterator  # noqa: E402
from side_streams import side_stream  # noqa: E402

DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32,
          np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_scatter_against_numpy(dtype):
    rng = np.random.default_rng(2)
    for n in (0, 1, 2047, 2048, 2049, 3 * 2048 + 5, (1 << 20) + 3):
        x = rng.integers(0, 100, n).astype(dtype)
        perm = rng.permutation(n).astype(np.int64)
        d_x, d_perm, d_out = cp.asarray(x), cp.asarray(perm), cp.zeros(max(n, 1), dtype)

        def scatter(i):
            d_out[d_perm[i]] = d_x[i]

        cuprims.for_each(d_in=CountingIterator(np.int64(0)), op=scatter, num_items=n)
        want = np.zeros(max(n, 1), dtype)
        want[perm] = x
        np.testing.assert_array_equal(d_out.get(), want, err_msg=f"n={n}")


def test_a_histogram_with_atomics_and_a_dropped_result():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 300, 3_000_001).astype(np.int32)
    counts = cp.zeros(300, np.int32)

    def count(v):
        cuda.atomic.add(counts, v, 1)
        return v * 2                               # dropped

    cuprims.for_each(d_in=cp.asarray(x), op=count, num_items=x.size)
    np.testing.assert_array_equal(counts.get(), np.bincount(x, minlength=300))


def test_zip_and_struct_input():
    n = 100_003
    vals = cp.arange(n, dtype=cp.float32) * 0.5
    out = cp.zeros(n, np.float32)

    def put(pair):
        out[n - 1 - pair[0]] = pair[1]

    cuprims.for_each(d_in=ZipIterator(CountingIterator(np.int32(0)), vals), op=put, num_items=n)
    np.testing.assert_array_equal(out.get(), vals.get()[::-1])
    item = cuprims.gpu_struct({"at": np.int32, "v": np.float64})
    host = np.zeros(5000, item.dtype)
    host["at"] = np.arange(5000)[::-1]
    host["v"] = np.arange(5000) * 1.5
    dest = cp.zeros(5000, np.float64)

    def place(s):
        dest[s.at] = s.v

    cuprims.for_each(d_in=cp.asarray(host), op=place, num_items=5000)
    np.testing.assert_array_equal(dest.get(), (np.arange(5000) * 1.5)[::-1])


def test_object_api_on_a_stream_with_new_arrays_each_call():
    n = 1_000_000
    a, b = cp.zeros(n, np.int32), cp.zeros(n, np.int32)

    def marker(arr):
        def mark(i):
            arr[i] = i + 1
        return mark

    mark_a, mark_b = marker(a), marker(b)      # one operator, two arrays captured
    f = cuprims.make_for_each(d_in=CountingIterator(np.int32(0)), op=mark_a)
    stream = side_stream()
    tmp = cp.empty(f(temp_storage=None, d_in=CountingIterator(np.int32(0)), num_items=n, op=mark_a), np.uint8)
    assert tmp.size == 1
    f(temp_storage=tmp, d_in=CountingIterator(np.int32(0)), num_items=n, op=mark_a, stream=stream)
    f(temp_storage=tmp, d_in=CountingIterator(np.int32(0)), num_items=n // 2, op=mark_b, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(a.get(), np.arange(1, n + 1))
    np.testing.assert_array_equal(b.get(), np.r_[np.arange(1, n // 2 + 1), np.zeros(n - n // 2, np.int32)])


@pytest.mark.big_memory
def test_past_2_31_items_from_an_iterator():
    n = (1 << 31) + 4099
    total = cp.zeros(2, np.uint64)

    def tally(i):
        if i >= (1 << 31):
            cuda.atomic.add(total, 0, 1)
        if i == n - 1:
            total[1] = i

    cuprims.for_each(d_in=CountingIterator(np.int64(0)), op=tally, num_items=n)
    assert total.get().tolist() == [4099, n - 1]
