"""Segmented sort on a GPU against numpy: every key dtype in both orders, keys only and pairs
(the values are the items' input positions, so stability is checked too), segment lengths on
every side of each kernel's boundaries (CUB's short-circuit, small and medium sub-warp
tiles, the middle tier, CUB's tile, passes through global memory), the fallback for few
segments and the classified dispatch, DoubleBuffers (both pass parities), empty input and
empty segments, one huge segment of millions, 2^16 segments of 4096 keys, iterator offsets,
offsets of every integer type, struct values, streams, and numpy's NaN order.

Run:  python -m pytest tests/gpu/algorithms/test_segmented_sort_gpu.py -x -q
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import CountingIterator, DoubleBuffer, SortOrder, TransformIterator  # noqa: E402
from test_radix_sort_gpu import (KEYS, ORDERS, device_values, empty_like_values, host_of, permute,  # noqa: E402
                                 random_keys, random_values, same_bits)
from twins import STRUCT, ordered_bits  # noqa: E402

# around every boundary of the sm_90 policy for 4-byte keys (small sub-warp tile 18, the
# medium sub-warp's half tile 64 (keys alone), medium 112, middle tier 4096, CUB's tile 5888)
# and the scaled ones of other widths
LENGTHS = [0, 1, 2, 3, 5, 17, 18, 19, 40, 63, 64, 65, 111, 112, 113, 300, 1000, 1279, 1280, 1281, 2047, 2048, 2049,
           2944, 4095, 4096, 4097, 5887, 5888, 5889, 9000, 30_000]


def layout(lengths, rng, offset_dtype=np.int64, gap=2, shuffle=True, backwards=0):
    """Starts and ends of segments of these lengths, with gaps between them (items no segment
    covers), listed in shuffled order; ``backwards`` more segments whose end lies below their
    start (empty). Returns (starts, ends, num_items)."""
    lengths = np.asarray(lengths, np.int64)
    gaps = rng.integers(0, gap + 1, lengths.size)
    ends = np.cumsum(lengths + gaps)
    starts = ends - lengths
    if shuffle:
        order = rng.permutation(lengths.size)
        starts, ends = starts[order], ends[order]
    n = int(ends.max()) + gap if ends.size else 0
    if backwards:
        starts = np.concatenate([starts, np.full(backwards, max(n - 1, 0))])
        ends = np.concatenate([ends, np.zeros(backwards, np.int64)])
    return starts.astype(offset_dtype), ends.astype(offset_dtype), n


def reference_perm(keys, starts, ends, descending):
    """Positions the sorted output takes its items from (identity outside every segment)."""
    perm = np.arange(keys.size)
    for b, e in zip(starts.astype(np.int64), ends.astype(np.int64)):
        if e > b:
            perm[b:e] = b + np.argsort(ordered_bits(keys[b:e], descending), kind="stable")
    return perm


def inside_mask(n, starts, ends):
    mask = np.zeros(n, bool)
    for b, e in zip(starts.astype(np.int64), ends.astype(np.int64)):
        mask[b:max(b, e)] = True
    return mask


def same_keys(got, want):
    """Bit for bit, but any NaN for a NaN: segments sorted by radix passes write the quiet
    NaN, the short (merge-sorted) ones keep a NaN's bits."""
    if got.dtype.kind == "f":
        nan = np.isnan(want)
        return np.array_equal(np.isnan(got), nan) and same_bits(got[~nan], want[~nan])
    return same_bits(got, want)


def sort(keys_d, out_d, values_d, out_vd, n, starts, ends, order, **kw):
    cuprims.segmented_sort(d_in_keys=keys_d, d_out_keys=out_d, d_in_values=values_d, d_out_values=out_vd,
                           num_items=n, num_segments=len(starts), start_offsets_in=starts, end_offsets_in=ends,
                           order=order, **kw)


@pytest.fixture(scope="module", autouse=True)
def prebuild():
    """Build the sorters used below concurrently (NVRTC runs outside the GIL)."""
    cc = int("".join(map(str, cp.cuda.Device().compute_capability)))
    P = cuprims.ProxyArray

    def build(job):
        k, v, o = job
        cuprims.make_segmented_sort(d_in_keys=P(k), d_out_keys=P(k), d_in_values=None if v is None else P(v),
                                    d_out_values=None if v is None else P(v), start_offsets_in=P(np.int64),
                                    end_offsets_in=P(np.int64), order=o, compute_capability=cc)

    jobs = [(k, v, o) for k in KEYS for o in ORDERS for v in (None, "int64")]
    build(jobs[0])  # the compiler stack's first import outside the pool
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(build, jobs[1:]))


# --------------------------------------------------------------------------- results

@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
@pytest.mark.parametrize("key", KEYS)
def test_every_key_type_keys_and_pairs(key, order):
    """Partitioned (many segments of every length) and CUB's fallback (few segments)."""
    rng = np.random.default_rng(len(key) + order.value)
    desc = order is SortOrder.DESCENDING
    for lengths in (LENGTHS * 20, LENGTHS[:12] + LENGTHS[-6:]):
        starts, ends, n = layout(lengths, rng, backwards=3)
        keys = random_keys(key, n, rng)
        perm = reference_perm(keys, starts, ends, desc)
        inside = inside_mask(n, starts, ends)
        d_keys, d_vals = cp.asarray(keys), cp.arange(n, dtype=cp.int64)
        sentinel = random_keys(key, n, rng)
        out_k, out_v = cp.asarray(sentinel), cp.full(n, -1, cp.int64)
        d_starts, d_ends = cp.asarray(starts), cp.asarray(ends)
        sort(d_keys, out_k, None, None, n, d_starts, d_ends, order)
        got = cp.asnumpy(out_k)
        assert same_keys(got[inside], keys[perm][inside]), (key, len(lengths))
        assert same_bits(got[~inside], sentinel[~inside]), "items outside every segment were written"
        sort(d_keys, out_k, d_vals, out_v, n, d_starts, d_ends, order)
        got_v = cp.asnumpy(out_v)
        assert same_keys(cp.asnumpy(out_k)[inside], keys[perm][inside])
        assert np.array_equal(got_v[inside], perm[inside]), "pairs out of place (or unstable)"
        assert (got_v[~inside] == -1).all()
        assert same_bits(cp.asnumpy(d_keys), keys), "the input keys were written"


@pytest.mark.parametrize("key,order", [("int32", SortOrder.ASCENDING), ("float64", SortOrder.DESCENDING)])
def test_thousands_of_segments_of_every_group_over_several_classify_blocks(key, order):
    # 7,203 segments (2,048 a classify block: four blocks, the last one partial) of small,
    # medium and large lengths shuffled together, three of them backwards
    rng = np.random.default_rng(11)
    starts, ends, n = layout(LENGTHS[:24] * 300, rng, offset_dtype=np.int32, backwards=3)
    keys = random_keys(key, n, rng)
    perm = reference_perm(keys, starts, ends, order is SortOrder.DESCENDING)
    inside = inside_mask(n, starts, ends)
    sentinel = random_keys(key, n, rng)
    out_k, out_v = cp.asarray(sentinel), cp.full(n, -1, cp.int64)
    sort(cp.asarray(keys), out_k, cp.arange(n, dtype=cp.int64), out_v, n, cp.asarray(starts), cp.asarray(ends), order)
    assert same_keys(cp.asnumpy(out_k)[inside], keys[perm][inside])
    assert np.array_equal(cp.asnumpy(out_v)[inside], perm[inside]), "pairs out of place (or unstable)"
    assert same_bits(cp.asnumpy(out_k)[~inside], sentinel[~inside]), "items outside every segment were written"


@pytest.mark.parametrize("key", ["int8", "int16", "int32", "int64", "float32", "float64"])
def test_double_buffer_both_pass_parities(key):
    """int8: 2 radix passes, int16: 3, int32: 6, int64: 11 (sm_90): the result lands in
    whichever buffer current() names afterwards."""
    rng = np.random.default_rng(5)
    for lengths in (LENGTHS * 20, LENGTHS[-8:]):
        starts, ends, n = layout(lengths, rng)
        keys = random_keys(key, n, rng)
        perm = reference_perm(keys, starts, ends, False)
        inside = inside_mask(n, starts, ends)
        kdb = DoubleBuffer(cp.asarray(keys), cp.empty(n, keys.dtype))
        vdb = DoubleBuffer(cp.arange(n, dtype=cp.int32), cp.empty(n, cp.int32))
        cuprims.segmented_sort(d_in_keys=kdb, d_in_values=vdb, num_items=n, num_segments=starts.size,
                               start_offsets_in=cp.asarray(starts), end_offsets_in=cp.asarray(ends),
                               order=SortOrder.ASCENDING)
        assert kdb.selector == vdb.selector
        assert same_keys(cp.asnumpy(kdb.current())[inside], keys[perm][inside]), (key, kdb.selector)
        assert np.array_equal(cp.asnumpy(vdb.current())[inside], perm[inside])


def test_object_api_struct_values_and_offset_types():
    rng = np.random.default_rng(7)
    for offsets in (np.int32, np.uint32, np.int64, np.uint64):
        starts, ends, n = layout(LENGTHS * 30, rng, offsets)
        keys = random_keys("float32", n, rng)
        values = random_values(STRUCT, n, rng)
        d_keys, d_vals = cp.asarray(keys), device_values(values)
        out_k, out_v = cp.empty_like(d_keys), empty_like_values(n, STRUCT)
        kw = dict(d_in_keys=d_keys, d_out_keys=out_k, d_in_values=d_vals, d_out_values=out_v,
                  start_offsets_in=cp.asarray(starts), end_offsets_in=cp.asarray(ends))
        sorter = cuprims.make_segmented_sort(**kw, order=SortOrder.DESCENDING)
        call = dict(kw, num_items=n, num_segments=starts.size)
        tmp = cp.empty(sorter(temp_storage=None, **call), np.uint8)
        for _ in range(2):  # the storage is reusable
            sorter(temp_storage=tmp, **call)
        perm = reference_perm(keys, starts, ends, True)
        inside = inside_mask(n, starts, ends)
        assert same_keys(cp.asnumpy(out_k)[inside], keys[perm][inside]), offsets
        assert same_bits(host_of(out_v)[inside], permute(values, perm)[inside]), offsets


def test_empty_input_and_empty_segments():
    keys = cp.arange(10, dtype=cp.int32)[::-1].copy()
    out = cp.full(10, -7, cp.int32)
    z = cp.zeros(4, cp.int64)
    for n, ns in ((0, 0), (0, 4), (10, 0), (10, 4)):  # nothing to sort: out untouched
        cuprims.segmented_sort(d_in_keys=keys, d_out_keys=out, num_items=n, num_segments=ns, start_offsets_in=z,
                               end_offsets_in=z, order=SortOrder.ASCENDING)
        assert (out.get() == -7).all()
    db = DoubleBuffer(keys, cp.empty_like(keys))
    cuprims.segmented_sort(d_in_keys=db, num_items=0, num_segments=0, start_offsets_in=z, end_offsets_in=z,
                           order=SortOrder.ASCENDING)
    assert db.selector == 0
    # 10^4 empty segments (past the fallback: classified) and a few non-empty ones
    starts = np.zeros(10_000, np.int64)
    ends = np.zeros(10_000, np.int64)
    starts[5000], ends[5000] = 2, 9
    cuprims.segmented_sort(d_in_keys=keys, d_out_keys=out, num_items=10, num_segments=10_000,
                           start_offsets_in=cp.asarray(starts), end_offsets_in=cp.asarray(ends),
                           order=SortOrder.ASCENDING)
    host = out.get()
    assert host[2:9].tolist() == sorted(keys.get()[2:9].tolist()) and (host[[0, 1, 9]] == -7).all()


@pytest.mark.big_memory
@pytest.mark.parametrize("segments", [1, 1000], ids=["alone", "among-many"])
def test_one_huge_segment(segments):
    """A segment of millions: one block sorts it by passes through global memory."""
    rng = np.random.default_rng(11)
    huge = 3_000_000
    lengths = [huge] + list(rng.integers(0, 3000, segments - 1))
    starts, ends, n = layout(lengths, rng, gap=0)
    keys = rng.integers(-(1 << 31), 1 << 31, n, dtype=np.int64).astype(np.int32)
    d_keys, out = cp.asarray(keys), cp.empty(n, cp.int32)
    vals, out_v = cp.arange(n, dtype=cp.int32), cp.empty(n, cp.int32)
    sort(d_keys, out, vals, out_v, n, cp.asarray(starts), cp.asarray(ends), SortOrder.DESCENDING)
    perm = reference_perm(keys, starts, ends, True)
    assert np.array_equal(out.get(), keys[perm]) and np.array_equal(out_v.get(), perm)


def test_2e16_segments_of_4096_from_iterators():
    """The benchmark's problem: 2^16 x 4096 int32 keys, offsets from TransformIterators."""
    ns, size = 1 << 16, 4096
    host = np.random.default_rng(3).integers(-(1 << 31), 1 << 31, ns * size, dtype=np.int32)
    keys = cp.asarray(host)
    out = cp.empty_like(keys)
    starts = TransformIterator(CountingIterator(np.int32(0)), lambda i: i * 4096)
    ends = TransformIterator(CountingIterator(np.int32(1)), lambda i: i * 4096)
    cuprims.segmented_sort(d_in_keys=keys, d_out_keys=out, num_items=ns * size, num_segments=ns,
                           start_offsets_in=starts, end_offsets_in=ends, order=SortOrder.ASCENDING)
    ascending = cp.sort(keys.reshape(ns, size), axis=1)
    assert bool(cp.array_equal(out.reshape(ns, size), ascending))
    # descending, in place through a DoubleBuffer (both buffers are used)
    db = DoubleBuffer(keys, out)
    cuprims.segmented_sort(d_in_keys=db, num_items=ns * size, num_segments=ns, start_offsets_in=starts,
                           end_offsets_in=ends, order=SortOrder.DESCENDING)
    assert bool(cp.array_equal(db.current().reshape(ns, size), ascending[:, ::-1]))


def test_iterator_offsets_of_several_sizes():
    rng = np.random.default_rng(13)
    for size, ns in ((3, 5000), (100, 3000), (700, 600), (5000, 200), (20_000, 700)):
        n = size * ns
        keys = random_keys("float64", n, rng)
        starts = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * size)
        ends = TransformIterator(CountingIterator(np.int64(1)), lambda i: i * size)
        out = cp.empty(n, cp.float64)
        cuprims.segmented_sort(d_in_keys=cp.asarray(keys), d_out_keys=out, num_items=n, num_segments=ns,
                               start_offsets_in=starts, end_offsets_in=ends, order=SortOrder.ASCENDING)
        b = np.arange(ns) * size
        perm = reference_perm(keys, b, b + size, False)
        assert same_keys(out.get(), keys[perm]), size


def test_streams():
    rng = np.random.default_rng(17)
    starts, ends, n = layout(LENGTHS * 25, rng)
    keys = random_keys("uint64", n, rng)
    perm = reference_perm(keys, starts, ends, False)
    inside = inside_mask(n, starts, ends)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        d_keys = cp.asarray(keys)
        d_starts, d_ends = cp.asarray(starts), cp.asarray(ends)
        out1, out2 = cp.zeros_like(d_keys), cp.zeros_like(d_keys)
    kw = dict(d_in_values=None, d_out_values=None, start_offsets_in=d_starts, end_offsets_in=d_ends)
    cuprims.segmented_sort(d_in_keys=d_keys, d_out_keys=out1, num_items=n, num_segments=starts.size,
                           order=SortOrder.ASCENDING, stream=stream, **kw)
    sorter = cuprims.make_segmented_sort(d_in_keys=d_keys, d_out_keys=out2, order=SortOrder.ASCENDING, **kw)
    call = dict(d_in_keys=d_keys, d_out_keys=out2, num_items=n, num_segments=starts.size, **kw)
    with stream:
        tmp = cp.empty(sorter(temp_storage=None, **call), np.uint8)
    sorter(temp_storage=tmp, stream=stream, **call)
    stream.synchronize()
    for out in (out1, out2):
        assert same_bits(cp.asnumpy(out)[inside], keys[perm][inside])


@pytest.mark.parametrize("key", ["float16", "float32", "float64"])
def test_nans_in_numpys_order(key):
    """NaNs (either sign) last ascending and first descending, -0.0 tied with +0.0, in every
    path: segments short enough for the merge sorts and long ones for the radix passes."""
    rng = np.random.default_rng(19)
    dt = np.dtype(key)
    starts, ends, n = layout(LENGTHS * 6, rng, shuffle=False)
    keys = random_keys(dt, n, rng)
    keys[rng.random(n) < 0.1] = np.nan
    keys[rng.random(n) < 0.05] = -np.array(np.nan, dt)
    keys[rng.random(n) < 0.05] = -0.0
    inside = inside_mask(n, starts, ends)
    for order in ORDERS:
        out = cp.empty(n, dt)
        sort(cp.asarray(keys), out, None, None, n, cp.asarray(starts), cp.asarray(ends), order)
        got = out.get()
        for b, e in zip(starts, ends):
            if e > b:
                want = np.sort(keys[b:e])
                want = want if order is SortOrder.ASCENDING else want[::-1]
                nan = np.isnan(want)
                assert np.array_equal(np.isnan(got[b:e]), nan), (b, e, order)
                assert np.array_equal(got[b:e][~nan], want[~nan]), (b, e, order)  # -0.0 == +0.0
        perm = reference_perm(keys, starts, ends, order is SortOrder.DESCENDING)
        assert same_keys(got[inside], keys[perm][inside])  # stable: zeros keep their input order


# ------------------------------------------------------------------ offsets as users give them

def _fixed_offsets(form, n, size):
    """Start and end offsets of segments of ``size`` items, in the form a user writes them."""
    if form == "int64-arrays":
        offsets = cp.arange(0, n + 1, size)  # CuPy's default integer
        assert offsets.dtype == cp.int64
        return offsets[:-1], offsets[1:]
    if form == "int32-arrays":
        offsets = cp.arange(0, n + 1, size, dtype=cp.int32)
        return offsets[:-1], offsets[1:]
    starts = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * 4096)
    if form == "transform-iterators":
        return starts, TransformIterator(CountingIterator(np.int64(1)), lambda i: i * 4096)
    return starts, starts + 1  # "advanced-iterator": iterator arithmetic for the ends


@pytest.mark.parametrize("form", ["int64-arrays", "int32-arrays", "transform-iterators", "advanced-iterator"])
def test_fixed_size_segments_with_the_offsets_users_write(form):
    """2^12 segments of 4096 int32 keys (the benchmark's shape, fewer segments), the offsets
    as CuPy's default int64 arange, int32 arrays, int64 TransformIterators, and ``it + 1``:
    the one-shot call with numpy scalar counts, then the object API with values,
    descending; against numpy."""
    ns, size = 1 << 12, 4096
    n = ns * size
    rng = np.random.default_rng(29)
    host = rng.integers(-(1 << 31), 1 << 31, n, dtype=np.int64).astype(np.int32)
    keys, out = cp.asarray(host), cp.empty(n, cp.int32)
    starts, ends = _fixed_offsets(form, n, size)
    cuprims.segmented_sort(d_in_keys=keys, d_out_keys=out, num_items=np.int64(n), num_segments=np.int32(ns),
                           start_offsets_in=starts, end_offsets_in=ends, order=SortOrder.ASCENDING)
    assert np.array_equal(cp.asnumpy(out).reshape(ns, size), np.sort(host.reshape(ns, size), axis=1)), form
    vals, out_v = cp.arange(n, dtype=cp.int32), cp.empty(n, cp.int32)
    kw = dict(d_in_keys=keys, d_out_keys=out, d_in_values=vals, d_out_values=out_v, start_offsets_in=starts,
              end_offsets_in=ends)
    sorter = cuprims.make_segmented_sort(**kw, order=SortOrder.DESCENDING)
    call = dict(kw, num_items=n, num_segments=ns)
    sorter(temp_storage=cp.empty(sorter(temp_storage=None, **call), np.uint8), **call)
    b = np.arange(ns, dtype=np.int64) * size
    perm = reference_perm(host, b, b + size, True)
    assert np.array_equal(cp.asnumpy(out), host[perm]) and np.array_equal(cp.asnumpy(out_v), perm), form


@pytest.mark.parametrize("offsets", [np.int64, np.uint32, np.uint64])
def test_wide_typed_offsets_every_path_and_far_empty_segments(offsets):
    """Offsets of 64-bit (and unsigned) types run on 32-bit kernels below 2^31 items: every
    kernel's path, and segments whose end lies at or below a start far past num_items (or
    below zero) stay empty (the conversion clamps monotonically)."""
    rng = np.random.default_rng(31)
    starts, ends, n = layout(LENGTHS * 10, rng)
    far = [((1 << 32) - 100, 0), ((1 << 32) + 5, 1 << 32), (1 << 31, 7), ((1 << 31) + 9, (1 << 31) + 9)]
    if offsets is np.int64:
        far += [(1 << 40, 1 << 40), (5, -(1 << 40)), (-3, -3), (1 << 62, -(1 << 62))]
    elif offsets is np.uint64:
        far += [((1 << 64) - 1, 0), ((1 << 64) - 1, 1 << 63)]
    else:
        far = [(b, e) for b, e in far if max(b, e) < 1 << 32]
    starts = np.array(starts.tolist() + [b for b, _ in far], dtype=offsets)
    ends = np.array(ends.tolist() + [e for _, e in far], dtype=offsets)
    keys = random_keys("int32", n, rng)
    sentinel = random_keys("int32", n, rng)
    out = cp.asarray(sentinel)
    sort(cp.asarray(keys), out, None, None, n, cp.asarray(starts), cp.asarray(ends), SortOrder.ASCENDING)
    real = slice(0, starts.size - len(far))   # the far ones are empty: reference them out
    perm = reference_perm(keys, starts[real], ends[real], False)
    inside = inside_mask(n, starts[real], ends[real])
    got = cp.asnumpy(out)
    assert same_bits(got[inside], keys[perm][inside]) and same_bits(got[~inside], sentinel[~inside]), offsets


@pytest.mark.big_memory
@pytest.mark.parametrize("offsets", [np.int64, np.uint32])
def test_offsets_past_2_pow_31_items(offsets):
    """Past 2^31 - 1 items the kernels compute offsets in 64 bits: 600 segments (classified)
    spread over 2^31 + 10^4 int8 keys, those near the end starting past 2^31 (about 6.5 GB)."""
    n = (1 << 31) + 10_000
    rng = np.random.default_rng(37)
    body = np.sort(rng.choice((1 << 31) - 10_000, 595, replace=False))
    tail = (1 << 31) - 3000 + np.arange(5) * 2500   # the first across 2^31, the rest past it
    starts = np.concatenate([body, tail]).astype(np.int64)
    following = np.concatenate([starts[1:], [n]])
    ends = starts + np.minimum(rng.integers(0, 6000, 600), following - starts)   # no overlaps
    ends[-5:] = np.minimum(starts[-5:] + 2000, following[-5:])
    keys = cp.random.default_rng(5).integers(-128, 128, n, dtype=cp.int16).astype(cp.int8)
    out = cp.full(n, 77, cp.int8)
    sort(keys, out, None, None, n, cp.asarray(starts.astype(offsets)), cp.asarray(ends.astype(offsets)),
         SortOrder.DESCENDING)
    for b, e in zip(starts.tolist(), ends.tolist()):
        want = np.sort(cp.asnumpy(keys[b:e]))[::-1]
        assert np.array_equal(cp.asnumpy(out[b:e]), want), (b, e)
    gaps = [(e, b) for e, b in zip(ends[:-1].tolist(), starts[1:].tolist()) if b > e]
    for e, b in gaps[-10:]:   # items no segment covers, past 2^31 too, are left alone
        assert bool(cp.all(out[e:b] == 77)), (e, b)
