"""Segmented reduce on the GPU against numpy: every dispatch (a thread, a warp or a block
per segment by the max_segment_size hint, and slices over the whole GPU for few
segments), empty segments, one huge segment, iterator offsets, struct values, streams."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import CountingIterator, OpKind, TransformIterator  # noqa: E402


def _expected_sums(values: np.ndarray, starts: np.ndarray, ends: np.ndarray, init) -> np.ndarray:
    wide = values.astype(np.float64 if values.dtype.kind == "f" else np.int64)
    prefix = np.concatenate([[0], np.cumsum(wide)])
    return prefix[ends] - prefix[starts] + init


def _irregular(num_segments: int, max_len: int, seed: int, empty_every: int = 7):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len + 1, num_segments)
    lengths[::empty_every] = 0
    ends = np.cumsum(lengths).astype(np.int64)
    starts = ends - lengths
    return starts, ends


def _run(values, starts, ends, out_dtype, op=OpKind.PLUS, init=0, hint=None, stream=None):
    out = cp.full(starts.size, -1, out_dtype)
    cuprims.segmented_reduce(d_in=cp.asarray(values), d_out=out, num_segments=starts.size,
                             start_offsets_in=cp.asarray(starts), end_offsets_in=cp.asarray(ends), op=op,
                             h_init=np.asarray(init, out_dtype)[()], max_segment_size=hint, stream=stream)
    return out.get()


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("segments, max_len, hint", [
    (5000, 12, 16),            # a thread per segment
    (5000, 300, 512),          # a warp per segment
    (5000, 3000, None),        # a block per segment
    (3, 400_000, None),        # few segments: sliced over the GPU
    (1, 1 << 24, 1 << 24),     # one huge segment
])
def test_sums_against_numpy(dtype, segments, max_len, hint):
    starts, ends = _irregular(segments, max_len, seed=segments)
    if segments == 1:
        starts, ends = np.array([0], np.int64), np.array([max_len], np.int64)
    n = int(ends.max()) if ends.size else 0
    values = np.random.default_rng(3).integers(-50, 50, n).astype(dtype)
    got = _run(values, starts, ends, dtype, init=5, hint=hint)
    expected = _expected_sums(values, starts, ends, 5)
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(got, expected, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-3)
    else:
        np.testing.assert_array_equal(got, expected.astype(dtype))


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.float32, np.int64, np.float64])
@pytest.mark.parametrize("segments, max_len", [(1, 1), (37, 5), (70_000, 200), (300_000, 20)])
def test_warp_kernel_segments_at_every_alignment(dtype, segments, max_len):
    # hints within a warp's tile: cuprims' warp kernel, vector loads from each segment's
    # first 16-byte boundary; lengths 0..max_len put the starts at every alignment
    rng = np.random.default_rng(segments + max_len)
    lengths = rng.integers(0, max_len + 1, segments)
    ends = np.cumsum(lengths).astype(np.int64)
    starts = ends - lengths
    n = int(ends[-1]) + 3
    values = rng.integers(-3, 4, n).astype(dtype)
    out_dtype = np.int64 if np.dtype(dtype).kind in "iu" else dtype
    got = _run(values.astype(out_dtype), starts, ends, out_dtype, init=2, hint=max(17, max_len))
    np.testing.assert_allclose(got, _expected_sums(values, starts, ends, 2), rtol=1e-6)
    # items of another type than the sums: read through the conversion, not as vectors
    if out_dtype != dtype:
        got = _run(values, starts, ends, out_dtype, init=2, hint=max(17, max_len))
        np.testing.assert_array_equal(got, _expected_sums(values, starts, ends, 2))


def test_warp_kernel_with_an_offset_view_a_struct_op_and_a_stream():
    pair = cuprims.gpu_struct({"lo": np.float32, "hi": np.float32})

    def widest(a, b):
        return pair(min(a.lo, b.lo), max(a.hi, b.hi))

    rng = np.random.default_rng(4)
    starts, ends = _irregular(20_000, 300, seed=4)
    host = np.zeros(int(ends[-1]) + 1, pair.dtype)
    host["lo"] = rng.random(host.size, dtype=np.float32)
    host["hi"] = host["lo"] + 1
    d_in = cp.asarray(host)[1:]          # 8 bytes past a 16-byte boundary
    stream = cp.cuda.Stream(non_blocking=True)
    out = cp.empty(starts.size, pair.dtype)
    cuprims.segmented_reduce(d_in=d_in, d_out=out, num_segments=starts.size, start_offsets_in=cp.asarray(starts),
                             end_offsets_in=cp.asarray(ends), op=widest, h_init=pair(np.inf, -np.inf),
                             max_segment_size=300, stream=stream)
    stream.synchronize()
    got, view = out.get(), host[1:]
    for k in range(0, starts.size, 97):
        s, e = starts[k], ends[k]
        want = (view["lo"][s:e].min(), view["hi"][s:e].max()) if e > s else (np.inf, -np.inf)
        assert (got[k]["lo"], got[k]["hi"]) == want, k


def test_empty_segments_give_h_init_and_zero_segments_do_nothing():
    starts = np.array([0, 3, 3, 10], np.int64)
    ends = np.array([3, 3, 3, 10], np.int64)
    values = np.arange(10, dtype=np.int32)
    np.testing.assert_array_equal(_run(values, starts, ends, np.int32, init=100), [103, 100, 100, 100])
    out = cp.full(1, -1, np.int32)
    cuprims.segmented_reduce(d_in=cp.asarray(values), d_out=out, num_segments=0, start_offsets_in=cp.asarray(starts),
                             end_offsets_in=cp.asarray(ends), op=OpKind.PLUS, h_init=np.int32(0))
    assert int(out.get()[0]) == -1


@pytest.mark.parametrize("segments", [2, 1 << 14])
def test_maximum_with_a_python_op_and_fixed_size_offsets_from_iterators(segments):
    size = 300
    values = np.random.default_rng(5).random(segments * size).astype(np.float32)
    starts = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * 300)
    ends = TransformIterator(CountingIterator(np.int64(1)), lambda i: i * 300)
    out = cp.zeros(segments, np.float32)
    cuprims.segmented_reduce(d_in=cp.asarray(values), d_out=out, num_segments=segments, start_offsets_in=starts,
                             end_offsets_in=ends, op=lambda a, b: max(a, b), h_init=np.float32(-1))
    np.testing.assert_array_equal(out.get(), values.reshape(segments, size).max(axis=1))


def test_struct_values():
    pair = cuprims.gpu_struct({"lo": np.float32, "hi": np.float32})

    def widest(a, b):
        return pair(min(a.lo, b.lo), max(a.hi, b.hi))

    rng = np.random.default_rng(9)
    starts, ends = _irregular(50, 400, seed=9, empty_every=1000)
    n = int(ends[-1])  # the segments cover the values exactly
    host = np.zeros(n, pair.dtype)
    host["lo"] = rng.random(n, dtype=np.float32)
    host["hi"] = host["lo"] + 1
    out = cp.empty(starts.size, pair.dtype)
    d_in = cp.asarray(host)
    cuprims.segmented_reduce(d_in=d_in, d_out=out, num_segments=starts.size, start_offsets_in=cp.asarray(starts),
                             end_offsets_in=cp.asarray(ends), op=widest, h_init=pair(np.inf, -np.inf))
    got = out.get()
    for k, (s, e) in enumerate(zip(starts, ends)):
        if e > s:
            assert got[k]["lo"] == host["lo"][s:e].min() and got[k]["hi"] == host["hi"][s:e].max()


def test_object_api_temp_query_int32_offsets_and_a_stream():
    starts, ends = _irregular(3, 100_000, seed=4)           # few segments: the sliced path needs storage
    starts, ends = starts.astype(np.int32), ends.astype(np.int32)
    values = np.random.default_rng(6).integers(0, 9, int(ends[-1])).astype(np.int64)
    x, out = cp.asarray(values), cp.zeros(3, np.int64)
    d_s, d_e = cp.asarray(starts), cp.asarray(ends)
    r = cuprims.make_segmented_reduce(d_in=x, d_out=out, start_offsets_in=d_s, end_offsets_in=d_e, op=OpKind.PLUS,
                                      h_init=np.int64(0))
    nbytes = r(temp_storage=None, d_in=x, d_out=out, num_segments=3, start_offsets_in=d_s, end_offsets_in=d_e,
               h_init=np.int64(0))
    assert nbytes >= 1
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        tmp = cp.empty(nbytes, np.uint8)
    r(temp_storage=tmp, d_in=x, d_out=out, num_segments=3, start_offsets_in=d_s, end_offsets_in=d_e,
      h_init=np.int64(0), stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.get(), _expected_sums(values, starts, ends, 0))
