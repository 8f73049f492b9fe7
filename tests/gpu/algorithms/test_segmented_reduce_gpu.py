"""Segmented reduce on the GPU against numpy: every dispatch (without a hint the adaptive
kernel, a warp per short segment and the block for each long one; a thread, a warp or a
block per segment by the max_segment_size hint; slices over the whole GPU for few
segments), empty segments, one huge segment, iterator offsets, struct values, streams."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import CountingIterator, OpKind, TransformIterator, TransformOutputIterator  # noqa: E402
from side_streams import side_stream  # noqa: E402


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
    (5000, 3000, None),        # no hint: the adaptive kernel (warps and blocks)
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
    d_starts, d_ends = cp.asarray(starts), cp.asarray(ends)
    stream = side_stream()
    out = cp.empty(starts.size, pair.dtype)
    cuprims.segmented_reduce(d_in=d_in, d_out=out, num_segments=starts.size, start_offsets_in=d_starts,
                             end_offsets_in=d_ends, op=widest, h_init=pair(np.inf, -np.inf),
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
    stream = side_stream()
    with stream:
        tmp = cp.empty(nbytes, np.uint8)
    r(temp_storage=tmp, d_in=x, d_out=out, num_segments=3, start_offsets_in=d_s, end_offsets_in=d_e,
      h_init=np.int64(0), stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.get(), _expected_sums(values, starts, ends, 0))


# ---------------------------------------------------------------- no hint: the adaptive kernel
#
# As a user calls it: no max_segment_size, CuPy's int64 offsets (int32 too), numpy scalars.
# Segments of at most CUB's warp tile (512 float32 items) go to a warp, longer ones to the
# block; item values are small integers, so float sums are exact in any order.

# more than half the GPU's block slots (not the sliced path), few enough groups of eight
# that several blocks share each (8 here; 5 for the 8000 irregular segments below)
NO_HINT_SEGMENTS = 3000


def _adaptive_run(values, starts, ends, out_dtype, init):
    out = cp.full(len(starts), -1, out_dtype)
    cuprims.segmented_reduce(d_in=cp.asarray(values), d_out=out, num_segments=len(starts),
                             start_offsets_in=cp.asarray(starts), end_offsets_in=cp.asarray(ends), op=OpKind.PLUS,
                             h_init=np.asarray(init, out_dtype)[()])
    return out.get()


@pytest.mark.parametrize("offset_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("size", [0, 1, 31, 32, 33, 256, 4096, 8192])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_no_hint_fixed_sizes_against_numpy(size, dtype, offset_dtype):
    ends = np.arange(1, NO_HINT_SEGMENTS + 1, dtype=offset_dtype) * size
    starts = ends - size
    values = np.random.default_rng(size).integers(-50, 50, NO_HINT_SEGMENTS * size + 5).astype(dtype)
    got = _adaptive_run(values, starts, ends, dtype, init=3)
    np.testing.assert_array_equal(got, _expected_sums(values, starts, ends, 3).astype(dtype))


@pytest.mark.parametrize("offset_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int8])
def test_no_hint_irregular_segments_with_empty_ones(dtype, offset_dtype):
    # lengths 1..8192 (every seventh empty): starts at every alignment, short and long
    # segments in the same groups of eight
    starts, ends = _irregular(8000, 8192, seed=11)
    starts, ends = starts.astype(offset_dtype), ends.astype(offset_dtype)
    values = np.random.default_rng(12).integers(-50, 50, int(ends[-1]) + 7).astype(dtype)
    out_dtype = np.int64 if dtype == np.int8 else dtype      # int8 items into int64 sums: read one at a time
    got = _adaptive_run(values, starts, ends, out_dtype, init=-4)
    np.testing.assert_array_equal(got, _expected_sums(values, starts, ends, -4).astype(out_dtype))


def test_no_hint_many_groups_stride_over_the_grid():
    # more groups of eight than the capped grid has blocks (a block per group, no sharing):
    # each block takes several, the warps fetching the next group's offsets while they
    # reduce, short and long segments mixed
    starts, ends = _irregular(1 << 17, 1200, seed=13, empty_every=5)
    values = np.random.default_rng(14).integers(-9, 10, int(ends[-1])).astype(np.float32)
    got = _adaptive_run(values, starts, ends, np.float32, init=1)
    np.testing.assert_array_equal(got, _expected_sums(values, starts, ends, 1).astype(np.float32))
    # segments of at most a warp tile only (no block phase at all), 2^20 of them
    ends = np.arange(1, (1 << 20) + 1, dtype=np.int64) * 37
    starts = ends - 37
    values = np.random.default_rng(15).integers(-9, 10, int(ends[-1])).astype(np.float32)
    got = _adaptive_run(values, starts, ends, np.float32, init=0)
    np.testing.assert_array_equal(got, values.reshape(-1, 37).sum(axis=1, dtype=np.float64).astype(np.float32))


@pytest.mark.parametrize("size", [33, 256, 4096])
def test_no_hint_offsets_from_iterators(size):
    starts = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * size)
    ends = TransformIterator(CountingIterator(np.int64(1)), lambda i: i * size)
    values = np.random.default_rng(size).integers(-50, 50, NO_HINT_SEGMENTS * size).astype(np.float32)
    out = cp.full(NO_HINT_SEGMENTS, -1, np.float32)
    cuprims.segmented_reduce(d_in=cp.asarray(values), d_out=out, num_segments=NO_HINT_SEGMENTS,
                             start_offsets_in=starts, end_offsets_in=ends, op=OpKind.PLUS, h_init=np.float32(0))
    np.testing.assert_array_equal(out.get(), values.reshape(-1, size).sum(axis=1))


def test_no_hint_irregular_offsets_from_iterators_and_an_iterator_input():
    # segment i is [i(i+1)/2, (i+1)(i+2)/2): i + 1 items, 1..3000 (warps, then blocks)
    starts = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * (i + 1) // 2)
    ends = TransformIterator(CountingIterator(np.int64(1)), lambda i: i * (i + 1) // 2)
    i = np.arange(NO_HINT_SEGMENTS, dtype=np.int64)
    lo, hi = i * (i + 1) // 2, (i + 1) * (i + 2) // 2
    out = cp.full(NO_HINT_SEGMENTS, -1, np.int64)
    # the items are their own positions: segment sums have a closed form
    cuprims.segmented_reduce(d_in=CountingIterator(np.int64(0)), d_out=out, num_segments=NO_HINT_SEGMENTS,
                             start_offsets_in=starts, end_offsets_in=ends, op=OpKind.PLUS, h_init=np.int64(10))
    np.testing.assert_array_equal(out.get(), (lo + hi - 1) * (hi - lo) // 2 + 10)


def test_no_hint_output_iterator_python_op_and_h_init_as_an_array():
    starts, ends = _irregular(NO_HINT_SEGMENTS, 2000, seed=16)
    values = np.random.default_rng(17).integers(-1000, 1000, int(ends[-1])).astype(np.int32)
    doubled = cp.full(NO_HINT_SEGMENTS, -1, np.int64)
    cuprims.segmented_reduce(d_in=cp.asarray(values), d_out=TransformOutputIterator(doubled, lambda v: v * 2, np.int32),
                             num_segments=NO_HINT_SEGMENTS, start_offsets_in=cp.asarray(starts),
                             end_offsets_in=cp.asarray(ends), op=lambda a, b: max(a, b),
                             h_init=np.array([-5000], np.int32))
    expected = np.array([values[s:e].max(initial=-5000) for s, e in zip(starts, ends)], np.int64) * 2
    np.testing.assert_array_equal(doubled.get(), expected)


@pytest.mark.parametrize("hint", [None, 300])
def test_struct_items_at_four_bytes_past_an_eight_byte_boundary(hint):
    # a struct of two float32 is aligned to 4 bytes but 8 long: at an odd word its items
    # never fall on 16-byte vectors (read one at a time), by the warp and the block alike
    pair = cuprims.gpu_struct({"lo": np.float32, "hi": np.float32})

    def widest(a, b):
        return pair(min(a.lo, b.lo), max(a.hi, b.hi))

    starts, ends = _irregular(NO_HINT_SEGMENTS, 300 if hint else 3000, seed=18)
    host = np.zeros(int(ends[-1]), pair.dtype)
    host["lo"] = np.random.default_rng(19).random(host.size, dtype=np.float32)
    host["hi"] = host["lo"] + 1
    raw = cp.zeros(host.nbytes + 16, np.uint8)
    raw[4:4 + host.nbytes] = cp.asarray(host.view(np.uint8))
    d_in = cp.ndarray((host.size,), pair.dtype, memptr=raw.data + 4)   # 4 bytes past an 8-byte boundary
    assert d_in.data.ptr % 8 == 4
    out = cp.empty(NO_HINT_SEGMENTS, pair.dtype)
    cuprims.segmented_reduce(d_in=d_in, d_out=out, num_segments=NO_HINT_SEGMENTS, start_offsets_in=cp.asarray(starts),
                             end_offsets_in=cp.asarray(ends), op=widest, h_init=pair(np.inf, -np.inf),
                             max_segment_size=hint)
    got = out.get()
    for k in range(0, NO_HINT_SEGMENTS, 7):
        s, e = starts[k], ends[k]
        want = (host["lo"][s:e].min(), host["hi"][s:e].max()) if e > s else (np.inf, -np.inf)
        assert (got[k]["lo"], got[k]["hi"]) == want, k
