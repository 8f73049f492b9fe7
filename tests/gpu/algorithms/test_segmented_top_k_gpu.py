"""segmented_top_k on the GPU against numpy's stable sort of each row: every integer and
float dtype (and bool), keys alone and pairs (the values are checked to be the positions
numpy's stable order gives: of equal keys the earlier ones), both orders, NaNs and -0.0,
row lengths around each tier's tile, k = 0, 1, 1024 and the row length, rows by offsets
(arrays of both widths, iterators, empty and short rows), 0 and 1 rows, the object API
with its temporary-storage query on a non-default stream, and torch.topk's answer."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import CountingIterator, SortOrder, TransformIterator  # noqa: E402
from cuprims.algorithms.segmented_top_k.source import MAX_K, TIERS  # noqa: E402
from cuprims.errors import ArgumentError  # noqa: E402
from side_streams import side_stream  # noqa: E402

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float16,
          np.float32, np.float64]
TILES = [(32 if warp else t) * n for t, n, warp in TIERS]   # 4-byte keys (8-byte keys: half of each)
DESC, ASC = SortOrder.DESCENDING, SortOrder.ASCENDING


def reference(x: np.ndarray, k: int, order: SortOrder) -> np.ndarray:
    """Positions of the first k of numpy's stable sort of each row (rows of a 2-D ``x``) in
    ``order``: descending is the reversed stable sort of the reversed row, so NaNs come
    first and equal keys stay in row order."""
    if order is DESC:
        return (x.shape[1] - 1 - np.argsort(x[:, ::-1], axis=1, kind="stable"))[:, ::-1][:, :k]
    return np.argsort(x, axis=1, kind="stable")[:, :k]


def keys_of(dtype, n: int, rng, nans: bool = True) -> np.ndarray:
    """Keys with many ties; floats with NaNs, infinities and -0.0 among them."""
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, n).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x = (rng.standard_normal(n) * 100).round().astype(dtype)
        if nans and n:
            special = rng.random(n)
            x[special < 0.02] = np.nan
            x[(special >= 0.02) & (special < 0.03)] = -0.0
            x[(special >= 0.03) & (special < 0.035)] = np.inf
            x[(special >= 0.035) & (special < 0.04)] = -np.inf
        return x
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


def check_rows(x: np.ndarray, got_k: np.ndarray, got_v: np.ndarray | None, k: int, order: SortOrder) -> None:
    want = reference(x, k, order)
    np.testing.assert_array_equal(got_k, np.take_along_axis(x, want, 1))
    if got_v is not None:
        np.testing.assert_array_equal(got_v, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", [DESC, ASC])
def test_fixed_rows_every_dtype_keys_and_pairs(dtype, order):
    rng = np.random.default_rng(5)
    for rows, size, k in ((3, 1, 1), (50, 8, 8), (40, 255, 8), (40, 256, 64), (40, 257, 1), (9, 2048, 64),
                          (9, 2049, 64), (5, 4096, 1024), (3, 8192, 100), (3, 16384, 8), (3, 16385, 64),
                          (2, 40000, 1024), (4, 300, 0), (0, 300, 5)):
        x = keys_of(dtype, rows * size, rng).reshape(rows, size)
        d_x = cp.asarray(x.reshape(-1))
        for pairs in (False, True):
            out_k = cp.zeros(max(rows * k, 1), dtype)
            out_v = cp.full(max(rows * k, 1), -1, np.int32) if pairs else None
            cols = cp.tile(cp.arange(size, dtype=np.int32), rows) if pairs else None
            cuprims.segmented_top_k(d_in_keys=d_x, d_out_keys=out_k, d_in_values=cols, d_out_values=out_v, k=k,
                                    num_segments=rows, segment_size=np.int64(size), order=order)
            got_v = out_v[:rows * k].get().reshape(rows, k) if pairs else None
            check_rows(x, out_k[:rows * k].get().reshape(rows, k), got_v, k, order)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_nans_come_first_descending_and_last_ascending(dtype):
    x = np.array([1, np.nan, np.inf, -0.0, 0.0, -np.nan, -np.inf, 2] * 3, dtype)
    d_x = cp.asarray(x)
    out = cp.empty(8, dtype)
    cuprims.segmented_top_k(d_in_keys=d_x, d_out_keys=out, k=8, num_segments=1, segment_size=x.size)
    assert np.isnan(out[:6].get()).all() and out[6:].get().tolist() == [np.inf, np.inf]
    cuprims.segmented_top_k(d_in_keys=d_x, d_out_keys=out, k=8, num_segments=1, segment_size=x.size, order=ASC)
    np.testing.assert_array_equal(out.get(), [-np.inf] * 3 + [0.0] * 5)
    neg_zero_first = np.signbit(out.get()[3:])     # the keys' own bits, equal zeros in row order
    assert neg_zero_first.tolist() == [True, False, True, False, True]


def test_k_limits_are_refused():
    x = cp.zeros(8, np.float32)
    with pytest.raises(ArgumentError) as info:
        cuprims.segmented_top_k(d_in_keys=x, d_out_keys=x[:4], k=5, num_segments=2, segment_size=4)
    assert info.value.argument == "k"
    big = cp.zeros(4096, np.float32)
    with pytest.raises(ArgumentError) as info:
        cuprims.segmented_top_k(d_in_keys=big, d_out_keys=cp.empty_like(big), k=MAX_K + 1, num_segments=1,
                                segment_size=4096)
    assert info.value.argument == "k"


@pytest.mark.parametrize("offset_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("order", [DESC, ASC])
def test_offset_rows_of_every_tier_empty_and_short(offset_dtype, order):
    rng = np.random.default_rng(6)
    k = 64
    lengths = [0, 1, 63, 64, 65, 0, TILES[0] - 1, TILES[0], TILES[0] + 1, TILES[1], TILES[1] + 1, TILES[2],
               TILES[2] + 1, 3 * TILES[2] + 7, 0, 5]
    lengths = lengths + list(rng.integers(0, 3000, 200))
    offsets = np.r_[0, np.cumsum(lengths)].astype(offset_dtype)
    x = keys_of(np.float32, int(offsets[-1]), rng)
    vals = np.arange(x.size, dtype=np.int64)
    out_k = cp.full(len(lengths) * k, -7, np.float32)
    out_v = cp.full(len(lengths) * k, -7, np.int64)
    d_off = cp.asarray(offsets)
    cuprims.segmented_top_k(d_in_keys=cp.asarray(x), d_out_keys=out_k, d_in_values=cp.asarray(vals),
                            d_out_values=out_v, k=k, num_segments=len(lengths), start_offsets_in=d_off[:-1],
                            end_offsets_in=d_off[1:], order=order)
    got_k, got_v = out_k.get().reshape(-1, k), out_v.get().reshape(-1, k)
    for row, n in enumerate(lengths):
        a = int(offsets[row])
        take = min(n, k)
        want = reference(x[a:a + n][None, :], take, order)[0]
        np.testing.assert_array_equal(got_k[row, :take], x[a + want], err_msg=f"row {row} of {n}")
        np.testing.assert_array_equal(got_v[row, :take], a + want, err_msg=f"row {row} of {n}")
        assert (got_k[row, take:] == -7).all() and (got_v[row, take:] == -7).all()   # slots past a short row


def test_iterator_offsets_and_no_rows_or_one():
    rows, size, k = 1000, 300, 16
    x = cp.random.default_rng(7).standard_normal(rows * size, dtype=cp.float32)
    starts = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * 300)
    ends = TransformIterator(CountingIterator(np.int64(1)), lambda i: i * 300)
    out = cp.empty(rows * k, np.float32)
    cuprims.segmented_top_k(d_in_keys=x, d_out_keys=out, k=k, num_segments=rows, start_offsets_in=starts,
                            end_offsets_in=ends)
    check_rows(x.get().reshape(rows, size), out.get().reshape(rows, k), None, k, DESC)
    before = out.copy()
    cuprims.segmented_top_k(d_in_keys=x, d_out_keys=out, k=k, num_segments=0, start_offsets_in=starts,
                            end_offsets_in=ends)
    assert (out == before).all()
    cuprims.segmented_top_k(d_in_keys=x, d_out_keys=out, k=k, num_segments=1, segment_size=rows * size)
    np.testing.assert_array_equal(out[:k].get(), -np.sort(-x.get())[:k])


def test_object_api_temp_query_and_a_stream():
    rows, size, k = 64, 5000, 32
    x = cp.random.default_rng(8).random(rows * size, dtype=cp.float64)
    cols = cp.tile(cp.arange(size, dtype=np.int32), rows)
    out_k, out_v = cp.empty(rows * k, np.float64), cp.empty(rows * k, np.int32)
    kw = dict(d_in_keys=x, d_out_keys=out_k, d_in_values=cols, d_out_values=out_v)
    topk = cuprims.make_segmented_top_k(order=ASC, **kw)
    need = topk(temp_storage=None, k=k, num_segments=rows, segment_size=size, **kw)
    assert need == 1     # no temporary storage; the query reports the least it ever does
    stream = side_stream()
    with stream:
        tmp = cp.empty(need, np.uint8)
    topk(temp_storage=tmp, k=k, num_segments=rows, segment_size=size, stream=stream, **kw)
    stream.synchronize()
    check_rows(x.get().reshape(rows, size), out_k.get().reshape(rows, k), out_v.get().reshape(rows, k), k, ASC)


def test_matches_torch_topk():
    torch = pytest.importorskip("torch")
    for rows, cols, k in ((256, 16384, 64), (4096, 256, 8)):
        t = torch.randn(rows, cols, device="cuda")
        x = cp.asarray(t.reshape(-1))
        out_k, out_v = cp.empty(rows * k, np.float32), cp.empty(rows * k, np.int32)
        cuprims.segmented_top_k(d_in_keys=x, d_out_keys=out_k, d_in_values=cp.tile(cp.arange(cols, dtype=np.int32),
                                rows), d_out_values=out_v, k=k, num_segments=rows, segment_size=cols)
        values, indices = torch.topk(t, k, dim=-1)
        np.testing.assert_array_equal(out_k.get().reshape(rows, k), values.cpu().numpy())
        # random normal keys are distinct in practice: the indices agree too
        np.testing.assert_array_equal(out_v.get().reshape(rows, k), indices.cpu().numpy())
