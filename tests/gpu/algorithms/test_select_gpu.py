"""Select on the GPU against numpy: every dtype, edge sizes, all and none selected, an
iterator input, an output iterator, a predicate capturing a device array that it also
writes to (a side effect), the object API and a stream."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import CountingIterator, TransformOutputIterator  # noqa: E402
from side_streams import side_stream  # noqa: E402
from twins import _even  # noqa: E402


def _select(host: np.ndarray, cond, count_dtype=np.int64):
    n = host.size
    out = cp.full(max(n, 1), -3, np.int64).astype(host.dtype)  # wraps for unsigned dtypes
    count = cp.full(1, -1, np.int64).astype(count_dtype)
    cuprims.select(d_in=cp.asarray(host), d_out=out, d_num_selected_out=count, cond=cond, num_items=n)
    return out.get()[: int(count.get()[0])]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16, np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 1000, (1 << 22) + 3])
def test_even_values_against_numpy(dtype, n):
    host = np.random.default_rng(n).integers(0, 100, n).astype(dtype)
    np.testing.assert_array_equal(_select(host, _even), host[host % 2 == 0])


def test_all_and_none_selected():
    host = np.arange(100_000, dtype=np.int32)
    np.testing.assert_array_equal(_select(host, lambda v: v >= 0, np.int32), host)
    assert _select(host, lambda v: v < 0).size == 0


def test_counting_input_into_an_output_iterator():
    n = 1 << 20
    out = cp.zeros(n, np.int64)
    count = cp.zeros(1, np.int64)
    cuprims.select(d_in=CountingIterator(np.int64(0)), d_out=TransformOutputIterator(out, lambda v: v * 10),
                   d_num_selected_out=count, cond=lambda v: v % 7 == 3, num_items=n)
    m = int(count.get()[0])
    expected = np.arange(n)[np.arange(n) % 7 == 3] * 10
    assert m == expected.size
    np.testing.assert_array_equal(out.get()[:m], expected)


def test_a_predicate_reading_and_writing_a_captured_array():
    n = 200_003
    limit = cp.asarray([500], dtype=np.int64)
    seen = cp.zeros(n, np.int32)

    def below_and_mark(v):
        seen[v] = 1          # a side effect: every item is tested exactly once
        return v < limit[0]

    out, count = cp.zeros(n, np.int64), cp.zeros(1, np.int64)
    cuprims.select(d_in=CountingIterator(np.int64(0)), d_out=out, d_num_selected_out=count, cond=below_and_mark,
                   num_items=n)
    assert int(count.get()[0]) == 500 and int(seen.sum()) == n
    np.testing.assert_array_equal(out.get()[:500], np.arange(500))
    limit[0] = 7                 # read again at the next call, with no new build
    links = cuprims.cache_info()["links"]
    cuprims.select(d_in=CountingIterator(np.int64(0)), d_out=out, d_num_selected_out=count, cond=below_and_mark,
                   num_items=n)
    assert int(count.get()[0]) == 7 and cuprims.cache_info()["links"] == links


def test_object_api_and_a_stream():
    n = 1 << 20
    x = cp.asarray(np.random.default_rng(2).random(n).astype(np.float32))
    y, count = cp.empty(n, np.float32), cp.empty(1, np.int64)
    s = cuprims.make_select(d_in=x, d_out=y, d_num_selected_out=count, cond=lambda v: v > 0.5)
    nbytes = s(temp_storage=None, d_in=x, d_out=y, d_num_selected_out=count, num_items=n)
    tmp = cp.empty(nbytes, np.uint8)
    stream = side_stream()
    s(temp_storage=tmp, d_in=x, d_out=y, d_num_selected_out=count, num_items=n, stream=stream)
    stream.synchronize()
    host = x.get()
    np.testing.assert_array_equal(y.get()[: int(count.get()[0])], host[host > 0.5])


@pytest.mark.big_memory
def test_more_than_two_to_the_31_items_run_in_partitions():
    # i % 7 as int8: the kept items repeat (0, 1), so order and the partition seam show
    n = (1 << 31) + 12_345
    period = (cp.arange(7 << 20, dtype=np.int32) % 7).astype(np.int8)
    full, rest = divmod(n, period.size)
    x = cp.concatenate([cp.tile(period, full), period[:rest]])
    out = cp.empty(n, np.int8)
    count = cp.full(1, -1, np.int32)
    cuprims.select(d_in=x, d_out=out, d_num_selected_out=count, cond=lambda v: v < 2, num_items=n)
    whole, tail = divmod(n, 7)
    kept = int(count.get()[0])
    assert kept == 2 * whole + min(tail, 2)
    assert bool(cp.all(out[:kept - kept % 2].reshape(-1, 2) == cp.asarray(np.array([0, 1], np.int8))))
    assert kept % 2 == 0 or int(out[kept - 1]) == 0


@pytest.mark.parametrize("dtype", [np.int8, np.uint32, np.float32, np.float64, np.complex64, np.bool_])
def test_identity_selects_each_item_by_its_truth_value(dtype):
    """OpKind.IDENTITY as the predicate: numpy's bool of each item (nonzero; NaN true)."""
    rng = np.random.default_rng(3)
    host = rng.integers(0, 3, 100_003).astype(dtype)
    if np.dtype(dtype).kind in "fc":
        host[::7] = np.nan
        host[1::11] = -0.0
    np.testing.assert_array_equal(_select(host, cuprims.OpKind.IDENTITY), host[host.astype(bool)])


# ------------------------------------------------------------------ items into an array of another dtype

def test_squares_of_int32_selected_into_int32():
    # numba types x * x of int32 as int64: each selected item is converted to int32 at the store, as
    # C++ converts (squares past 2^31 wrap, as numpy's astype wraps them)
    from cuprims import TransformIterator

    h = np.random.default_rng(4).integers(-100_000, 100_000, 1_000_003).astype(np.int32)
    it = TransformIterator(cp.asarray(h), lambda x: x * x)
    out, count = cp.empty(h.size, np.int32), cp.empty(1, np.int64)
    cuprims.select(d_in=it, d_out=out, d_num_selected_out=count, cond=lambda v: v % 3 == 0, num_items=h.size)
    squares = h.astype(np.int64) ** 2
    want = squares[squares % 3 == 0].astype(np.int32)
    assert int(count.get()[0]) == want.size
    np.testing.assert_array_equal(out.get()[:want.size], want)


@pytest.mark.parametrize("items, out", [(np.float64, np.float32), (np.int64, np.float16), (np.int16, np.int64),
                                        (np.complex128, np.complex64)])
def test_arrays_into_an_array_of_another_dtype(items, out):
    h = (np.random.default_rng(5).random(300_001) * 2000 - 1000).astype(items)
    y, count = cp.empty(h.size, out), cp.empty(1, np.int32)
    cuprims.select(d_in=cp.asarray(h), d_out=y, d_num_selected_out=count, cond=cuprims.OpKind.IDENTITY,
                   num_items=h.size)
    want = h[h != 0].astype(out)
    assert int(count.get()[0]) == want.size
    np.testing.assert_array_equal(y.get()[:want.size], want)
