"""segmented_inclusive_scan / segmented_exclusive_scan on the GPU against numpy (each
segment's own cumsum): dtypes, offsets of both widths as arrays and iterators, empty
segments, one segment over the whole GPU, many tiny segments, irregular lengths, gaps
between segments (left unwritten), unordered and overlapping-free shuffled segments (the
whole-segment way), init values (host, numpy one-element, device), Python operators,
struct values, in place, the object API on a stream."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import CountingIterator, OpKind, TransformIterator  # noqa: E402
from side_streams import side_stream  # noqa: E402

PAIR = cuprims.gpu_struct({"lo": np.float32, "hi": np.float32})
SENTINEL = -7


def reference(x, starts, ends, dtype, inclusive=True, init=None, accumulate=np.add.accumulate, fill=SENTINEL):
    out = np.full(x.size, fill, dtype) if x.dtype.names is None else np.zeros(x.size, dtype)
    for b, e in zip(starts.tolist(), ends.tolist()):
        if e <= b:
            continue
        run = x[b:e].astype(dtype)
        if inclusive:
            scanned = accumulate(run)
            out[b:e] = scanned if init is None else accumulate(np.r_[np.asarray(init, dtype), run])[1:]
        else:
            out[b:e] = accumulate(np.r_[np.asarray(init, dtype), run[:-1]])
    return out


def run(x, starts, ends, out_dtype=None, inclusive=True, op=OpKind.PLUS, init=None, offsets=None):
    out_dtype = out_dtype or x.dtype
    y = cp.full(x.size, SENTINEL, out_dtype)
    d_starts, d_ends = (cp.asarray(starts), cp.asarray(ends)) if offsets is None else offsets
    kw = dict(d_in=cp.asarray(x), d_out=y, start_offsets_in=d_starts, end_offsets_in=d_ends, op=op,
              num_segments=len(starts))
    if inclusive:
        cuprims.segmented_inclusive_scan(init_value=init, **kw)
    else:
        cuprims.segmented_exclusive_scan(init_value=init, **kw)
    return y.get()


def offsets_of(lengths, dtype=np.int64):
    o = np.r_[0, np.cumsum(lengths)].astype(dtype)
    return o[:-1], o[1:]


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("offset_dtype", [np.int32, np.int64])
def test_both_directions_for_several_types_and_offset_widths(dtype, offset_dtype):
    rng = np.random.default_rng(1)
    lengths = rng.integers(0, 600, 500)
    starts, ends = offsets_of(lengths, offset_dtype)
    x = rng.integers(0, 3, int(lengths.sum())).astype(dtype)
    out = np.int64 if np.dtype(dtype).kind in "iu" else dtype
    tol = dict(rtol=1e-5) if out == np.float32 else dict(rtol=1e-12)
    np.testing.assert_allclose(run(x, starts, ends, out), reference(x, starts, ends, out), **tol)
    np.testing.assert_allclose(run(x, starts, ends, out, inclusive=False, init=np.asarray(5, out)[()]),
                               reference(x, starts, ends, out, inclusive=False, init=5), **tol)


@pytest.mark.parametrize("inclusive", [True, False])
@pytest.mark.parametrize("n", [1, 3071, 3072, 3073, 100_000, 1 << 22])
def test_one_segment_over_every_tile(inclusive, n):
    x = np.ones(n, np.int64)
    got = run(x, np.array([0]), np.array([n]), inclusive=inclusive, init=None if inclusive else np.int64(0))
    want = np.arange(1, n + 1) if inclusive else np.arange(n)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("length", [1, 2, 16, 255, 256, 4097])
def test_many_equal_segments(length):
    count = max(1, (1 << 21) // length)
    rng = np.random.default_rng(length)
    x = rng.random(count * length).astype(np.float32)
    starts, ends = offsets_of(np.full(count, length), np.int32)
    np.testing.assert_allclose(run(x, starts, ends), reference(x, starts, ends, np.float32), rtol=1e-4)


def test_irregular_lengths_with_empty_segments_and_gaps():
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 8193, 3000)
    lengths[rng.random(3000) < 0.2] = 0
    gaps = rng.integers(0, 50, 3000)
    starts = np.cumsum(np.r_[0, lengths[:-1] + gaps[:-1]]).astype(np.int64) + gaps[0]
    ends = starts + lengths
    x = rng.integers(-5, 6, int(ends[-1]) + 17).astype(np.int32)
    for inclusive in (True, False):
        init = None if inclusive else np.int32(100)
        got = run(x, starts, ends, inclusive=inclusive, init=init)
        np.testing.assert_array_equal(got, reference(x, starts, ends, np.int32, inclusive, init))


def test_unordered_segments_take_the_whole_segment_way():
    rng = np.random.default_rng(4)
    lengths = rng.integers(1, 3000, 400)
    starts, ends = offsets_of(lengths)
    order = rng.permutation(400)
    starts, ends = starts[order], ends[order]
    x = rng.random(int(lengths.sum()))
    np.testing.assert_allclose(run(x, starts, ends), reference(x, starts, ends, np.float64), rtol=1e-12)
    np.testing.assert_allclose(run(x, starts, ends, inclusive=False, init=np.float64(1)),
                               reference(x, starts, ends, np.float64, False, 1.0), rtol=1e-12)


def test_iterator_offsets_and_an_inclusive_init():
    width = 100
    count = 20_000
    x = np.arange(width * count, dtype=np.int64) % 7
    starts = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * 100)
    ends = TransformIterator(CountingIterator(np.int64(1)), lambda i: i * 100)
    got = run(x, np.zeros(count), np.zeros(count), init=np.int64(1000), offsets=(starts, ends))
    s, e = offsets_of(np.full(count, width))
    np.testing.assert_array_equal(got, reference(x, s, e, np.int64, init=1000))


def test_python_operator_capturing_an_array_struct_values_and_a_device_init():
    rng = np.random.default_rng(5)
    starts, ends = offsets_of(rng.integers(0, 2000, 300))
    n = int(ends[-1])
    x = rng.random(n).astype(np.float32)
    step = cp.asarray([0.5], np.float32)

    def plus_a_step(a, b):   # associative: each combination adds one step
        return a + b + step[0]

    got = run(x, starts, ends, op=plus_a_step)
    want = np.full(n, SENTINEL, np.float32)
    for b, e in zip(starts, ends):
        if e > b:
            want[b:e] = np.cumsum(x[b:e], dtype=np.float64) + 0.5 * np.arange(e - b)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)

    def span(a, b):
        return PAIR(min(a.lo, b.lo), max(a.hi, b.hi))

    pairs = np.empty(n, PAIR.dtype)
    pairs["lo"], pairs["hi"] = x, x + 1
    y = cp.zeros(n, PAIR.dtype)
    cuprims.segmented_inclusive_scan(d_in=cp.asarray(pairs), d_out=y, start_offsets_in=cp.asarray(starts),
                                     end_offsets_in=cp.asarray(ends), op=span, num_segments=len(starts))
    got = y.get()
    for b, e in zip(starts[:40], ends[:40]):
        np.testing.assert_array_equal(got["lo"][b:e], np.minimum.accumulate(x[b:e]))
        np.testing.assert_array_equal(got["hi"][b:e], np.maximum.accumulate(x[b:e] + 1))
    init = cp.asarray([3], np.int64)
    xi = rng.integers(0, 9, n).astype(np.int64)
    d = cp.asarray(xi)
    s = cuprims.make_segmented_exclusive_scan(d_in=d, d_out=d, start_offsets_in=cp.asarray(starts),
                                              end_offsets_in=cp.asarray(ends), op=OpKind.PLUS, init_value=init)
    call = dict(d_in=d, d_out=d, start_offsets_in=cp.asarray(starts), end_offsets_in=cp.asarray(ends),
                num_segments=len(starts), init_value=init)
    stream = side_stream()
    with stream:
        tmp = cp.empty(s(temp_storage=None, **call), np.uint8)
    s(temp_storage=tmp, stream=stream, **call)
    stream.synchronize()
    np.testing.assert_array_equal(d.get(), reference(xi, starts, ends, np.int64, False, 3, fill=0) +
                                  np.where(np.isin(np.arange(n), np.concatenate(
                                      [np.arange(b, e) for b, e in zip(starts, ends)])), 0, xi))


def test_no_segments_writes_nothing():
    y = cp.full(10, 9, np.int32)
    cuprims.segmented_inclusive_scan(d_in=cp.ones(10, np.int32), d_out=y, start_offsets_in=cp.zeros(1, np.int64),
                                     end_offsets_in=cp.zeros(1, np.int64), op=OpKind.PLUS, num_segments=0)
    assert (y.get() == 9).all()
