"""find_if on the GPU against numpy: every integer and float dtype, matches at the front, in
the middle, at the end, nowhere and in every tile, sizes around a tile (4096 float32 items),
NaNs, each index dtype, a predicate capturing a device array, iterator and struct input,
OpKind.IDENTITY, the object API on a stream, and past 2^31 items from an iterator."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import CountingIterator, OpKind, TransformIterator  # noqa: E402
from side_streams import side_stream  # noqa: E402

DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32,
          np.float64]


def first(flags: np.ndarray) -> int:
    hits = np.flatnonzero(flags)
    return int(hits[0]) if hits.size else flags.size


def _is_seven(v):
    return v == 7


@pytest.mark.parametrize("dtype", DTYPES)
def test_against_numpy(dtype):
    rng = np.random.default_rng(5)
    out = cp.full(1, -1, np.int64)
    for n in (0, 1, 4095, 4096, 4097, 3 * 4096 + 5, (1 << 20) + 3):
        for where in ([], [0], [n // 2], [n - 1], [n // 3, n // 2], list(range(0, n, 1000))):
            x = rng.integers(0, 7, n).astype(dtype)
            x[[w for w in where if 0 <= w < n]] = 7
            cuprims.find_if(d_in=cp.asarray(x), d_out_index=out, cond=_is_seven, num_items=n)
            assert int(out[0]) == first(x == 7), (n, where)


@pytest.mark.parametrize("index", [np.int32, np.uint32, np.int64, np.uint64])
def test_each_index_dtype_and_nans(index):
    x = np.ones(100_000, np.float32)
    x[[77_777, 88_888]] = np.nan
    out = cp.zeros(3, index)                       # only the first element is written
    cuprims.find_if(d_in=cp.asarray(x), d_out_index=out, cond=lambda v: v != v, num_items=x.size)
    assert out.get().tolist() == [77_777, 0, 0]
    cuprims.find_if(d_in=cp.asarray(x), d_out_index=out, cond=lambda v: v > 2, num_items=x.size)
    assert int(out[0]) == x.size                   # none: num_items


def test_a_predicate_capturing_an_array_with_the_object_api_on_a_stream():
    n = 10_000_019
    x = cp.arange(n, dtype=cp.int32) % 1000
    limit = cp.asarray([998], np.int32)

    def above(v):
        return v > limit[0]

    where = cp.empty(1, np.int64)
    f = cuprims.make_find_if(d_in=x, d_out_index=where, cond=above)
    stream = side_stream()
    tmp = cp.empty(f(temp_storage=None, d_in=x, d_out_index=where, num_items=n, cond=above), np.uint8)
    assert tmp.size == 1
    f(temp_storage=tmp, d_in=x, d_out_index=where, num_items=n, cond=above, stream=stream)
    stream.synchronize()
    assert int(where[0]) == 999
    limit[0] = 2000                                 # the array is read at every call: nothing above now
    side_stream(stream)                             # the write above (on the current stream) comes first
    f(temp_storage=tmp, d_in=x, d_out_index=where, num_items=n, cond=above, stream=stream)
    stream.synchronize()
    assert int(where[0]) == n


def test_identity_iterators_and_structs():
    where = cp.empty(1, np.int64)
    flags = cp.zeros(50_000, np.bool_)
    flags[31_337] = True
    cuprims.find_if(d_in=flags, d_out_index=where, cond=OpKind.IDENTITY, num_items=flags.size)
    assert int(where[0]) == 31_337
    squares = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * i)
    cuprims.find_if(d_in=squares, d_out_index=where, cond=lambda v: v > 10**12, num_items=10**7)
    assert int(where[0]) == 10**6 + 1
    pair = cuprims.gpu_struct({"a": np.int32, "b": np.float64})
    host = np.zeros(20_000, pair.dtype)
    host["a"] = np.arange(host.size)
    host["b"][[12_345, 15_000]] = 2.5
    cuprims.find_if(d_in=cp.asarray(host), d_out_index=where, cond=lambda p: p.b > 1.0, num_items=host.size)
    assert int(where[0]) == 12_345


@pytest.mark.big_memory
def test_past_2_31_items_from_an_iterator():
    n = (1 << 31) + 4099
    where = cp.empty(1, np.int64)
    cuprims.find_if(d_in=CountingIterator(np.int64(0)), d_out_index=where, cond=lambda i: i >= (1 << 31) + 17,
                    num_items=n)
    assert int(where[0]) == (1 << 31) + 17
    cuprims.find_if(d_in=CountingIterator(np.int64(0)), d_out_index=where, cond=lambda i: i < 0, num_items=n)
    assert int(where[0]) == n
