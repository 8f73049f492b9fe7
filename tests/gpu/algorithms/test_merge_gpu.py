"""merge on the GPU against numpy's stable sort of the concatenation: every integer and float
dtype, keys and pairs (values that record each item's origin, so stability shows), NaNs,
sizes 0, 1, around a tile (512 x 15 int32 keys, 512 x 7 int32 pairs) and of many tiles,
unequal sides (one empty, one much longer), iterator inputs, a descending Python comparator
capturing a device array, struct keys, the object API with its temporary-storage query on a
non-default stream, and more than 2^31 items in all."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import CountingIterator, OpKind  # noqa: E402
from side_streams import side_stream  # noqa: E402
from twins import KEY_STRUCT, struct_less  # noqa: E402
from struct_arrays import Structs  # noqa: E402

DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32,
          np.float64]
SIZES = [(0, 0), (1, 0), (0, 1), (1, 1), (3840, 3840), (3840, 3841), (7679, 1), (5, 300_000), (300_000, 5),
         (0, 100_000), (100_000, 0), ((1 << 20) + 3, (1 << 19) + 11)]


def sorted_keys(dtype, n, rng, nan=False):
    """n keys sorted as np.sort sorts (NaN last), with many ties; NaNs and both zeros among floats."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        x = (rng.integers(-40, 40, n) / 4).astype(dt)
        if nan and n:
            x[rng.random(n) < 0.05] = np.nan
            x[rng.random(n) < 0.05] = -0.0
    else:
        info = np.iinfo(dt)
        x = rng.integers(max(info.min, -60), min(info.max, 60), n, endpoint=True).astype(dt)
    return np.sort(x, kind="stable")


def reference(k1, k2, v1=None, v2=None):
    keys = np.concatenate([k1, k2])
    order = np.argsort(keys, kind="stable")
    if v1 is None:
        return keys[order], None
    return keys[order], np.concatenate([v1, v2])[order]


def run(k1, k2, v1=None, v2=None, op=OpKind.LESS, out_k=None, out_v=None):
    n1, n2 = k1.size, k2.size
    d_k1, d_k2 = cp.asarray(k1), cp.asarray(k2)
    out_k = cp.full(max(n1 + n2, 1), 7, k1.dtype) if out_k is None else out_k
    pairs = v1 is not None
    d_v1 = cp.asarray(v1) if pairs else None
    d_v2 = cp.asarray(v2) if pairs else None
    if pairs and out_v is None:
        out_v = cp.full(max(n1 + n2, 1), -1, v1.dtype)
    cuprims.merge(d_in_keys1=d_k1, d_in_values1=d_v1, d_in_keys2=d_k2, d_in_values2=d_v2, d_out_keys=out_k,
                  d_out_values=out_v if pairs else None, num_items1=n1, num_items2=n2, op=op)
    return out_k[:n1 + n2].get(), (out_v[:n1 + n2].get() if pairs else None)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pairs", [False, True], ids=["keys", "pairs"])
def test_against_numpy_stable_sort(dtype, pairs):
    rng = np.random.default_rng(5)
    for n1, n2 in SIZES:
        k1, k2 = sorted_keys(dtype, n1, rng, nan=True), sorted_keys(dtype, n2, rng, nan=True)
        v1 = np.arange(n1, dtype=np.int32) if pairs else None     # each item's origin
        v2 = np.arange(n1, n1 + n2, dtype=np.int32) if pairs else None
        want_k, want_v = reference(k1, k2, v1, v2)
        got_k, got_v = run(k1, k2, v1, v2)
        np.testing.assert_array_equal(got_k, want_k, err_msg=f"sizes {n1}, {n2}")
        if pairs:
            np.testing.assert_array_equal(got_v, want_v, err_msg=f"sizes {n1}, {n2}")


@pytest.mark.parametrize("vdtype", [np.int8, np.float64, np.complex128])
def test_pairs_with_other_value_types(vdtype):
    rng = np.random.default_rng(9)
    n1, n2 = 50_001, 70_003
    k1, k2 = sorted_keys(np.int32, n1, rng), sorted_keys(np.int32, n2, rng)
    v1 = (np.arange(n1) % 100).astype(vdtype)
    v2 = (np.arange(n2) % 100 + 100).astype(vdtype)
    want_k, want_v = reference(k1, k2, v1, v2)
    got_k, got_v = run(k1, k2, v1, v2)
    np.testing.assert_array_equal(got_k, want_k)
    np.testing.assert_array_equal(got_v, want_v)


def test_greater_puts_nan_first():
    rng = np.random.default_rng(2)
    k1 = np.sort(sorted_keys(np.float32, 20_000, rng, nan=True))[::-1].copy()
    k2 = np.sort(sorted_keys(np.float32, 9_000, rng, nan=True))[::-1].copy()
    v1, v2 = np.arange(k1.size, dtype=np.int64), np.arange(k1.size, k1.size + k2.size, dtype=np.int64)
    got_k, got_v = run(k1, k2, v1, v2, op=OpKind.GREATER)
    keys = np.concatenate([k1, k2])
    # stable descending with NaN first: sort by (not NaN, -key), ties in input order
    order = np.lexsort((np.arange(keys.size), -np.nan_to_num(keys.astype(np.float64), nan=0.0), ~np.isnan(keys)))
    np.testing.assert_array_equal(got_k, keys[order])
    np.testing.assert_array_equal(got_v, np.concatenate([v1, v2])[order])


def test_python_comparator_descending_capturing_a_device_array():
    rank = cp.asarray(-np.arange(1000, dtype=np.int64))     # rank[a] < rank[b]  <=>  a > b

    def by_rank(a, b):
        return rank[a] < rank[b]

    rng = np.random.default_rng(4)
    k1 = np.sort(rng.integers(0, 1000, 123_457))[::-1].astype(np.int32)
    k2 = np.sort(rng.integers(0, 1000, 65_536))[::-1].astype(np.int32)
    v1, v2 = np.arange(k1.size, dtype=np.int32), np.arange(k1.size, k1.size + k2.size, dtype=np.int32)
    got_k, got_v = run(k1, k2, v1, v2, op=by_rank)
    keys = np.concatenate([k1, k2])
    order = np.lexsort((np.arange(keys.size), -keys.astype(np.int64)))
    np.testing.assert_array_equal(got_k, keys[order])
    np.testing.assert_array_equal(got_v, np.concatenate([v1, v2])[order])


def test_counting_iterator_inputs():
    n1, n2 = 100_000, 77_777
    rng = np.random.default_rng(8)
    k2 = np.sort(rng.integers(0, 200_000, n2)).astype(np.int64)
    d_k2 = cp.asarray(k2)
    out_k, out_v = cp.empty(n1 + n2, np.int64), cp.empty(n1 + n2, np.int64)
    # keys1 0, 1, ..., values the origins (the first sequence's from a counting iterator too)
    cuprims.merge(d_in_keys1=CountingIterator(np.int64(0)), d_in_values1=CountingIterator(np.int64(0)),
                  d_in_keys2=d_k2, d_in_values2=cp.arange(n1, n1 + n2, dtype=np.int64), d_out_keys=out_k,
                  d_out_values=out_v, num_items1=n1, num_items2=n2, op=OpKind.LESS)
    want_k, want_v = reference(np.arange(n1, dtype=np.int64), k2, np.arange(n1, dtype=np.int64),
                               np.arange(n1, n1 + n2, dtype=np.int64))
    np.testing.assert_array_equal(out_k.get(), want_k)
    np.testing.assert_array_equal(out_v.get(), want_v)


def _struct_sorted(n, rng):
    keys = np.zeros(n, KEY_STRUCT)
    keys["a"] = rng.integers(0, 50, n)
    keys["b"] = rng.integers(0, 4, n)
    return keys[np.lexsort((np.arange(n), -keys["b"], keys["a"]))]   # struct_less: a ascending, b descending


@pytest.mark.parametrize("pairs", [False, True], ids=["keys", "pairs"])
def test_struct_keys_with_a_python_comparator(pairs):
    rng = np.random.default_rng(6)
    n1, n2 = 30_001, 9_999
    k1, k2 = _struct_sorted(n1, rng), _struct_sorted(n2, rng)
    out_k = Structs(np.zeros(n1 + n2, KEY_STRUCT))
    v1, v2 = np.arange(n1, dtype=np.int32), np.arange(n1, n1 + n2, dtype=np.int32)
    out_v = cp.empty(n1 + n2, np.int32) if pairs else None
    cuprims.merge(d_in_keys1=Structs(k1), d_in_values1=cp.asarray(v1) if pairs else None, d_in_keys2=Structs(k2),
                  d_in_values2=cp.asarray(v2) if pairs else None, d_out_keys=out_k, d_out_values=out_v,
                  num_items1=n1, num_items2=n2, op=struct_less)
    keys = np.concatenate([k1, k2])
    order = np.lexsort((np.arange(n1 + n2), -keys["b"], keys["a"]))
    got = out_k.get()
    np.testing.assert_array_equal(got["a"], keys["a"][order])
    np.testing.assert_array_equal(got["b"], keys["b"][order])
    if pairs:
        np.testing.assert_array_equal(out_v.get(), np.concatenate([v1, v2])[order])


def test_object_api_temp_query_and_stream():
    rng = np.random.default_rng(1)
    n1, n2 = 2_000_003, 1_000_001
    k1, k2 = sorted_keys(np.float32, n1, rng, nan=True), sorted_keys(np.float32, n2, rng, nan=True)
    v1, v2 = np.arange(n1, dtype=np.int32), np.arange(n1, n1 + n2, dtype=np.int32)
    d = dict(d_in_keys1=cp.asarray(k1), d_in_values1=cp.asarray(v1), d_in_keys2=cp.asarray(k2),
             d_in_values2=cp.asarray(v2), d_out_keys=cp.empty(n1 + n2, np.float32),
             d_out_values=cp.empty(n1 + n2, np.int32))
    m = cuprims.make_merge(op=OpKind.LESS, **d)
    nbytes = m(temp_storage=None, num_items1=n1, num_items2=n2, **d)
    tiles = -(-(n1 + n2) // (512 * 7))
    assert (tiles + 1) * 4 <= nbytes <= (tiles + 1) * 4 + 512
    stream = side_stream()
    with stream:
        tmp = cp.empty(nbytes, np.uint8)
    m(temp_storage=tmp, num_items1=n1, num_items2=n2, stream=stream, **d)
    stream.synchronize()
    want_k, want_v = reference(k1, k2, v1, v2)
    np.testing.assert_array_equal(d["d_out_keys"].get(), want_k)
    np.testing.assert_array_equal(d["d_out_values"].get(), want_v)
    # a zero-sized call launches nothing and still answers the query
    assert m(temp_storage=None, num_items1=0, num_items2=0, **d) >= 1


@pytest.mark.big_memory
def test_more_than_2_pow_31_items():
    n1, n2 = (1 << 30) + 12_345, (1 << 30) + 54_321     # 2^31 + 66_666 in all: 64-bit offsets
    m = 251
    k1 = (cp.arange(n1, dtype=cp.int64) * m // n1).astype(cp.uint8)   # sorted, each of 0..250 about n1/251 times
    k2 = (cp.arange(n2, dtype=cp.int64) * m // n2).astype(cp.uint8)
    counts = cp.bincount(k1, minlength=m) + cp.bincount(k2, minlength=m)
    out = cp.empty(n1 + n2, cp.uint8)
    cuprims.merge(d_in_keys1=k1, d_in_values1=None, d_in_keys2=k2, d_in_values2=None, d_out_keys=out,
                  d_out_values=None, num_items1=n1, num_items2=n2, op=OpKind.LESS)
    del k1, k2
    assert bool(cp.all(out[:-1] <= out[1:]))
    assert bool(cp.all(cp.bincount(out, minlength=m) == counts))
