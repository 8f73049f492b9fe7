"""inclusive_scan_by_key / exclusive_scan_by_key on the GPU against numpy (each run's own
cumsum): every integer and float key and value dtype, sizes around a tile and many tiles
(runs crossing tiles), NaN keys, a single run, all distinct keys, iterators, Python
operators (one capturing a device array), struct values, device-held init values, in
place, the object API on a stream."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import ConstantIterator, CountingIterator, OpKind, TransformIterator  # noqa: E402
from side_streams import side_stream  # noqa: E402

PAIR = cuprims.gpu_struct({"lo": np.float32, "hi": np.float32})


def reference(keys: np.ndarray, values: np.ndarray, dtype, inclusive=True, init=0, accumulate=np.add.accumulate):
    """Each run's own scan in ``dtype`` (NaN keys equal nothing); exclusive: shifted, from init."""
    out = np.empty(keys.size, dtype)
    heads = np.flatnonzero(np.r_[np.ones(min(keys.size, 1), bool), keys[1:] != keys[:-1]])
    for start, stop in zip(heads, np.r_[heads[1:], keys.size]):
        run = values[start:stop].astype(dtype)
        if inclusive:
            out[start:stop] = accumulate(run)
        else:
            out[start:stop] = accumulate(np.r_[np.asarray(init, dtype), run[:-1]])
    return out


def scan(keys, values, out_dtype=None, inclusive=True, op=OpKind.PLUS, init=None, **kw):
    out_dtype = out_dtype or values.dtype
    n = keys.size
    out = cp.zeros(n, out_dtype)
    args = dict(d_in_keys=cp.asarray(keys), d_in_values=cp.asarray(values), d_out=out, scan_op=op, num_items=n, **kw)
    if inclusive:
        cuprims.inclusive_scan_by_key(**args)
    else:
        cuprims.exclusive_scan_by_key(init_value=init, **args)
    return out.get()


def _tolerance(dtype):
    return dict(rtol=2e-3) if dtype == np.float16 else dict(rtol=1e-5) if dtype == np.float32 else dict(rtol=1e-12)


@pytest.mark.parametrize("key", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
                                 np.float16, np.float32, np.float64])
@pytest.mark.parametrize("value", [np.int8, np.uint16, np.int32, np.int64, np.float16, np.float32, np.float64])
def test_both_directions_for_every_key_and_value_type(key, value):
    rng = np.random.default_rng(1)
    n = 40_000
    keys = np.sort(rng.integers(0, 100, n)).astype(key)
    values = rng.integers(0, 4, n).astype(value)   # small: int8 and float16 run sums stay exact
    out = np.int64 if np.dtype(value).kind in "iu" else value
    np.testing.assert_allclose(scan(keys, values, out), reference(keys, values, out), **_tolerance(out))
    init = np.asarray(3, out)[()]
    np.testing.assert_allclose(scan(keys, values, out, inclusive=False, init=init),
                               reference(keys, values, out, inclusive=False, init=3), **_tolerance(out))


@pytest.mark.parametrize("inclusive", [True, False])
@pytest.mark.parametrize("n", [0, 1, 2, 4031, 4032, 4033, 100_000, 1 << 22])
def test_sizes_around_a_tile_with_runs_crossing_tiles(inclusive, n):
    rng = np.random.default_rng(n)
    keys = np.cumsum(rng.random(n) < 0.001).astype(np.int32)    # runs of ~1000: many cross a tile
    values = rng.random(n)
    got = scan(keys, values, inclusive=inclusive, init=np.float64(-1))
    np.testing.assert_allclose(got, reference(keys, values, np.float64, inclusive, -1.0), rtol=1e-10)


def test_one_run_all_distinct_keys_and_nan_keys():
    n = 1 << 20
    ones = np.ones(n, np.int32)
    assert (scan(np.full(n, 4, np.int16), ones) == np.arange(1, n + 1)).all()   # one run over every tile
    assert (scan(np.arange(n, dtype=np.int64), ones) == 1).all()
    assert (scan(np.arange(n, dtype=np.int64), ones, inclusive=False, init=np.int32(9)) == 9).all()
    keys = np.repeat(np.array([1.0, np.nan, np.nan, 2.0], np.float32), 3)   # NaN != NaN: each NaN its own run
    got = scan(keys, np.ones(keys.size, np.float32))
    assert got.tolist() == [1, 2, 3, 1, 1, 1, 1, 1, 1, 1, 2, 3]


def test_iterator_keys_and_values_with_a_python_operator():
    n = 1 << 18
    keys = TransformIterator(CountingIterator(np.int64(0)), lambda i: i // 1000)
    out = cp.empty(n, np.int64)
    cuprims.inclusive_scan_by_key(d_in_keys=keys, d_in_values=ConstantIterator(np.int64(2)), d_out=out,
                                  scan_op=lambda a, b: a + b, num_items=n)
    assert (out.get() == 2 * (np.arange(n) % 1000 + 1)).all()


def test_python_equality_capturing_a_device_array_and_a_maximum_scan():
    rng = np.random.default_rng(3)
    n = 300_000
    keys = np.sort(rng.integers(0, 100_000, n)).astype(np.int32)
    values = rng.random(n).astype(np.float32)
    width = cp.asarray([10], np.int32)

    def same_decade(a, b):
        return a // width[0] == b // width[0]

    got = scan(keys, values, op=OpKind.MAXIMUM, equality_op=same_decade)
    np.testing.assert_array_equal(got, reference(keys // 10, values, np.float32, accumulate=np.maximum.accumulate))


def test_struct_values_with_a_python_scan():
    def span(a, b):
        return PAIR(min(a.lo, b.lo), max(a.hi, b.hi))

    rng = np.random.default_rng(4)
    n = 50_000
    keys = np.sort(rng.integers(0, 300, n)).astype(np.int32)
    lo = rng.random(n).astype(np.float32)
    pairs = np.empty(n, PAIR.dtype)
    pairs["lo"], pairs["hi"] = lo, lo + 1
    got = scan(keys, pairs, op=span)
    np.testing.assert_array_equal(got["lo"], reference(keys, lo, np.float32, accumulate=np.minimum.accumulate))
    np.testing.assert_array_equal(got["hi"], reference(keys, lo + 1, np.float32, accumulate=np.maximum.accumulate))


def test_device_init_value_in_place_object_api_on_a_stream():
    rng = np.random.default_rng(5)
    n = 500_000
    keys = np.sort(rng.integers(0, 5_000, n)).astype(np.uint16)
    values = rng.integers(0, 100, n).astype(np.int64)
    k, v = cp.asarray(keys), cp.asarray(values)
    init = cp.asarray([7], np.int64)
    s = cuprims.make_exclusive_scan_by_key(d_in_keys=k, d_in_values=v, d_out=v, scan_op=OpKind.PLUS, init_value=init)
    call = dict(d_in_keys=k, d_in_values=v, d_out=v, init_value=init, num_items=n)
    stream = side_stream()
    with stream:
        tmp = cp.empty(s(temp_storage=None, **call), np.uint8)
        init[0] = 11      # read by the kernel when it runs: this value, not the one at build time
    s(temp_storage=tmp, stream=stream, **call)
    stream.synchronize()
    np.testing.assert_array_equal(v.get(), reference(keys, values, np.int64, inclusive=False, init=11))


def test_numpy_one_element_init_and_a_wider_output():
    keys = np.repeat(np.arange(200, dtype=np.int32), 37)
    values = np.ones(keys.size, np.int8)
    got = scan(keys, values, np.int32, inclusive=False, init=np.array([100], np.int32))
    np.testing.assert_array_equal(got, reference(keys, values, np.int32, inclusive=False, init=100))


@pytest.mark.big_memory
def test_past_2_31_items_through_the_64_bit_build():
    """2^31 + 4097 positions within runs of 2^20 keys, counted from zero in each run."""
    n = (1 << 31) + 4097
    keys = TransformIterator(CountingIterator(np.int64(0)), lambda i: i // (1 << 20))
    out = cp.empty(n, np.int32)
    cuprims.exclusive_scan_by_key(d_in_keys=keys, d_in_values=ConstantIterator(np.int32(1)), d_out=out,
                                  scan_op=OpKind.PLUS, init_value=np.int32(0), num_items=n)
    picks = np.r_[np.arange(0, 5), (1 << 31) - 3 + np.arange(6), n - 5 + np.arange(5),
                  np.random.default_rng(9).integers(0, n, 2000)]
    np.testing.assert_array_equal(out[cp.asarray(picks)].get(), picks % (1 << 20))
    del out
