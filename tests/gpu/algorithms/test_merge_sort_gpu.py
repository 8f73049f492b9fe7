"""Merge sort on a GPU against numpy: built-in and Python comparators, stability, struct
keys, values of every shape, in place, edge sizes up to 2^26 and past 2^31 items;
iterator keys (Transform, Reverse, Permutation, Zip) and values (Counting: an argsort
against numpy's stable argsort; Zip), and a comparator capturing a CuPy array that is
read at each call (rebinding it changes the order and compiles nothing).

Run:  python -m pytest tests/gpu/algorithms/test_merge_sort_gpu.py -x -q
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import cuprims
from cuprims import CountingIterator, OpKind, PermutationIterator, ReverseIterator, TransformIterator, ZipIterator
from cuprims.algorithms.merge_sort.api import make_merge_sort, merge_sort
from twins import KEY_STRUCT, struct_less
from struct_arrays import Structs

cp = pytest.importorskip("cupy")

SIZES = [0, 1, 31, 1000, (1 << 20) + 7]
KEYS = ["int8", "uint16", "int32", "uint32", "int64", "float32", "float64"]
BIG_VALUE = np.dtype([("x", np.float64, (6,)), ("tag", np.int32)], align=True)  # 56 bytes


def py_less(a, b):
    return a < b


def py_greater(a, b):
    return a > b


def permute(values: np.ndarray, perm: np.ndarray) -> np.ndarray:
    rows = np.ascontiguousarray(values).view(np.uint8).reshape(values.size, values.dtype.itemsize)
    return rows[perm].reshape(-1).view(values.dtype)


def ties(dt, n, rng):
    """Keys with many duplicates (stability shows), NaN-free."""
    dt = np.dtype(dt)
    return rng.integers(0, max(2, n // 8), n).astype(dt) if dt.kind in "iu" else \
        (rng.integers(-50, 50, n) / 4).astype(dt)


def stable_order(keys: np.ndarray, descending: bool) -> np.ndarray:
    if not descending:
        return np.argsort(keys, kind="stable")
    # stable descending: ties keep input order
    order = np.argsort(keys[::-1], kind="stable")[::-1]
    return (keys.size - 1 - order).astype(np.int64)


@pytest.fixture(scope="module", autouse=True)
def prebuild():
    cc = int("".join(map(str, cp.cuda.Device().compute_capability)))
    P = cuprims.ProxyArray
    jobs = [(k, v, op) for k in KEYS for v in (None, "int32") for op in (OpKind.LESS, OpKind.GREATER)]
    jobs += [("int32", None, py_less), ("int32", "int64", py_less), ("float32", None, py_greater),
             (KEY_STRUCT, "int16", struct_less), (KEY_STRUCT, None, struct_less), ("uint32", BIG_VALUE, OpKind.LESS),
             ("uint8", None, OpKind.LESS)]

    def build(job):
        k, v, op = job
        make_merge_sort(d_in_keys=P(k), d_out_keys=P(k), d_in_values=None if v is None else P(v),
                        d_out_values=None if v is None else P(v), op=op, compute_capability=cc)

    build(jobs[0])
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(build, jobs[1:]))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", [OpKind.LESS, OpKind.GREATER], ids=["less", "greater"])
@pytest.mark.parametrize("key", KEYS)
def test_builtin_comparators(key, op, n):
    rng = np.random.default_rng(n + len(key))
    keys = ties(key, n, rng)
    vals = np.arange(n, dtype=np.int32)
    perm = stable_order(keys, op is OpKind.GREATER)
    d_k, d_v = cp.asarray(keys), cp.asarray(vals)
    out_k, out_v = cp.empty_like(d_k), cp.empty_like(d_v)
    merge_sort(d_in_keys=d_k, d_out_keys=out_k, num_items=n, op=op)
    assert np.array_equal(cp.asnumpy(out_k), keys[perm])
    merge_sort(d_in_keys=d_k, d_in_values=d_v, d_out_keys=out_k, d_out_values=out_v, num_items=n, op=op)
    assert np.array_equal(cp.asnumpy(out_k), keys[perm]) and np.array_equal(cp.asnumpy(out_v), perm)
    assert np.array_equal(cp.asnumpy(d_k), keys), "input keys were modified"


@pytest.mark.parametrize("n", SIZES)
def test_python_comparator_pairs_in_place(n):
    rng = np.random.default_rng(n)
    keys = ties("int32", n, rng)
    vals = np.arange(n, dtype=np.int64)
    d_k, d_v = cp.asarray(keys), cp.asarray(vals)
    merge_sort(d_in_keys=d_k, d_in_values=d_v, d_out_keys=d_k, d_out_values=d_v, num_items=n, op=py_less)
    perm = stable_order(keys, False)
    assert np.array_equal(cp.asnumpy(d_k), keys[perm]) and np.array_equal(cp.asnumpy(d_v), perm)


def test_python_comparator_closure_descending():
    n = 100_000
    keys = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    d_k = cp.asarray(keys)
    out = cp.empty_like(d_k)
    merge_sort(d_in_keys=d_k, d_out_keys=out, num_items=n, op=py_greater)
    assert np.array_equal(cp.asnumpy(out), np.sort(keys)[::-1])
    scale = np.float32(-1.0)

    def by_scaled(a, b):  # a closure over a scalar
        return a * scale < b * scale

    merge_sort(d_in_keys=d_k, d_out_keys=out, num_items=n, op=by_scaled)
    assert np.array_equal(cp.asnumpy(out), np.sort(keys)[::-1])


@pytest.mark.parametrize("n", [1, 1000, (1 << 20) + 7])
@pytest.mark.parametrize("pairs", [False, True], ids=["keys", "pairs"])
def test_struct_keys(n, pairs):
    rng = np.random.default_rng(7)
    keys = np.zeros(n, KEY_STRUCT)
    keys["a"] = rng.integers(0, 50, n)
    keys["b"] = rng.integers(0, 4, n)
    vals = rng.integers(-30000, 30000, n).astype(np.int16)
    perm = np.lexsort((np.arange(n), -keys["b"], keys["a"]))  # a asc, b desc, then input order
    d_k = Structs(keys)
    out_k = Structs(np.zeros(n, KEY_STRUCT))
    if pairs:
        d_v, out_v = cp.asarray(vals), cp.empty(n, np.int16)
        merge_sort(d_in_keys=d_k, d_in_values=d_v, d_out_keys=out_k, d_out_values=out_v, num_items=n,
                   op=struct_less)
        assert np.array_equal(cp.asnumpy(out_v), vals[perm])
    else:
        merge_sort(d_in_keys=d_k, d_out_keys=out_k, num_items=n, op=struct_less)
    got = out_k.get()
    assert np.array_equal(got["a"], keys["a"][perm]) and np.array_equal(got["b"], keys["b"][perm])


@pytest.mark.parametrize("n", [1000, 300_001])
def test_large_values_use_cubs_fallback(n):
    """56-byte values: CUB shrinks the tile (or uses global-memory shared storage)."""
    rng = np.random.default_rng(9)
    keys = rng.integers(0, 1000, n).astype(np.uint32)
    vals = np.zeros(n, BIG_VALUE)
    vals["x"] = rng.random((n, 6))
    vals["tag"] = np.arange(n)
    d_v, out_v = Structs(vals), Structs(np.zeros(n, BIG_VALUE))
    out_k = cp.empty(n, np.uint32)
    merge_sort(d_in_keys=cp.asarray(keys), d_in_values=d_v, d_out_keys=out_k, d_out_values=out_v, num_items=n,
               op=OpKind.LESS)
    perm = stable_order(keys, False)
    assert np.array_equal(cp.asnumpy(out_k), keys[perm])
    assert np.array_equal(out_v.get().view(np.uint8), permute(vals, perm).view(np.uint8))


def test_object_api_and_stream():
    n = 1 << 20
    keys = np.random.default_rng(2).integers(-1000, 1000, n).astype(np.int32)
    d_k, out = cp.asarray(keys), cp.empty(n, np.int32)
    sorter = make_merge_sort(d_in_keys=d_k, d_out_keys=out, op=py_less)
    nbytes = sorter(temp_storage=None, d_in_keys=d_k, d_in_values=None, d_out_keys=out, d_out_values=None,
                    num_items=n, op=py_less)
    tmp = cp.empty(nbytes, np.uint8)
    stream = cp.cuda.Stream(non_blocking=True)
    sorter(temp_storage=tmp, d_in_keys=d_k, d_in_values=None, d_out_keys=out, d_out_values=None, num_items=n,
           op=py_less, stream=stream)
    stream.synchronize()
    assert np.array_equal(cp.asnumpy(out), np.sort(keys))


def test_2_pow_26_python_comparator():
    n = 1 << 26
    keys = cp.random.default_rng(3).integers(-(1 << 31), (1 << 31) - 1, n, dtype=cp.int64).astype(cp.int32)
    vals = cp.arange(n, dtype=cp.int32)
    out_k, out_v = cp.empty_like(keys), cp.empty_like(vals)
    merge_sort(d_in_keys=keys, d_in_values=vals, d_out_keys=out_k, d_out_values=out_v, num_items=n, op=py_less)
    assert bool(cp.all(out_k == cp.sort(keys)))
    assert bool(cp.all(keys[out_v] == out_k))
    same = out_k[:-1] == out_k[1:]
    assert bool(cp.all(~same | (out_v[:-1] < out_v[1:])))


@pytest.mark.big_memory
def test_more_than_2_pow_31_items():
    n = (1 << 31) + 999
    m = 251
    keys = ((cp.arange(n, dtype=cp.int64) * 138) % m).astype(cp.uint8)
    counts = np.full(m, n // m, np.int64)
    counts[(np.arange(n % m) * 138) % m] += 1
    merge_sort(d_in_keys=keys, d_out_keys=keys, num_items=n, op=OpKind.LESS)  # in place
    assert bool(cp.all(keys[:-1] <= keys[1:]))
    edges = cp.asnumpy(cp.searchsorted(keys, cp.arange(m + 1, dtype=cp.uint16).astype(cp.uint8)))
    edges[-1] = n
    assert np.array_equal(np.diff(edges), counts)


# ------------------------------------------------------------------- iterators

ITER_SIZES = [0, 1, 1000, (1 << 20) + 7]
COMPILES = ("numba_compiles", "nvrtc_compiles", "links")


def _compiles() -> tuple:
    info = cuprims.cache_info()
    return tuple(info[k] for k in COMPILES)


def _bucket(v):
    return v % 97


@pytest.mark.parametrize("n", ITER_SIZES)
def test_transform_keys_counting_values_is_a_stable_argsort(n):
    host = np.random.default_rng(n).integers(0, 1 << 30, n).astype(np.int32)
    d = cp.asarray(host)
    out_k, out_v = cp.empty(n, np.int32), cp.empty(n, np.int64)
    merge_sort(d_in_keys=TransformIterator(d, _bucket, np.int32), d_in_values=CountingIterator(np.int64(0)),
               d_out_keys=out_k, d_out_values=out_v, num_items=n, op=OpKind.LESS)
    keys = host % 97
    order = np.argsort(keys, kind="stable")
    assert np.array_equal(cp.asnumpy(out_v), order) and np.array_equal(cp.asnumpy(out_k), keys[order])
    assert np.array_equal(cp.asnumpy(d), host), "the array under the iterator was modified"


@pytest.mark.parametrize("n", ITER_SIZES)
def test_reverse_keys_descending(n):
    host = ties("float32", n, np.random.default_rng(n + 1))
    d = cp.asarray(host)
    out_k, out_v = cp.empty(n, np.float32), cp.empty(n, np.int32)
    merge_sort(d_in_keys=ReverseIterator(d), d_in_values=CountingIterator(np.int32(0)), d_out_keys=out_k,
               d_out_values=out_v, num_items=n, op=OpKind.GREATER)
    rev = host[::-1].copy()
    perm = stable_order(rev, True)
    assert np.array_equal(cp.asnumpy(out_k), rev[perm]) and np.array_equal(cp.asnumpy(out_v), perm)
    assert np.array_equal(cp.asnumpy(d), host)


@pytest.mark.parametrize("n", ITER_SIZES)
def test_permutation_keys_with_array_values(n):
    rng = np.random.default_rng(n + 2)
    pool = rng.standard_normal(5000)
    idx = rng.integers(0, pool.size, n).astype(np.int64)  # repeated indices: tied keys
    vals = np.arange(n, dtype=np.int32)
    keys_it = PermutationIterator(cp.asarray(pool), cp.asarray(idx))
    out_k, out_v = cp.empty(n, np.float64), cp.empty(n, np.int32)
    merge_sort(d_in_keys=keys_it, d_in_values=cp.asarray(vals), d_out_keys=out_k, d_out_values=out_v,
               num_items=n, op=py_less)
    keys = pool[idx]
    order = np.argsort(keys, kind="stable")
    assert np.array_equal(cp.asnumpy(out_k), keys[order]) and np.array_equal(cp.asnumpy(out_v), vals[order])


@pytest.mark.parametrize("n", ITER_SIZES)
def test_zip_values_into_structs(n):
    rng = np.random.default_rng(n + 3)
    keys = ties("int16", n, rng)
    tags = rng.standard_normal(n).astype(np.float32)
    Tagged = cuprims.gpu_struct({"tag": np.float32, "index": np.int64})  # the layout of Zip(float32, int64)
    out_k, out_v = cp.empty(n, np.int16), Structs(np.zeros(n, Tagged.dtype))
    merge_sort(d_in_keys=cp.asarray(keys), d_in_values=ZipIterator(cp.asarray(tags), CountingIterator(np.int64(0))),
               d_out_keys=out_k, d_out_values=out_v, num_items=n, op=OpKind.LESS)
    order = np.argsort(keys, kind="stable")
    got = out_v.get()
    assert np.array_equal(cp.asnumpy(out_k), keys[order])
    assert np.array_equal(got["index"], order) and np.array_equal(got["tag"], tags[order])


@pytest.mark.parametrize("n", [1000, (1 << 20) + 7])
def test_zip_keys_read_as_structs(n):
    rng = np.random.default_rng(n + 4)
    a = rng.integers(0, 50, n).astype(np.int32)
    b = rng.integers(0, 4, n).astype(np.float32)
    out_k, out_v = Structs(np.zeros(n, KEY_STRUCT)), cp.empty(n, np.int64)
    merge_sort(d_in_keys=ZipIterator(cp.asarray(a), cp.asarray(b)), d_in_values=CountingIterator(np.int64(0)),
               d_out_keys=out_k, d_out_values=out_v, num_items=n, op=struct_less)
    perm = np.lexsort((np.arange(n), -b, a))  # a ascending, b descending, then input order
    got = out_k.get()
    assert np.array_equal(got["a"], a[perm]) and np.array_equal(got["b"], b[perm])
    assert np.array_equal(cp.asnumpy(out_v), perm)


def test_built_sorter_takes_new_iterator_states():
    """One build serves every iterator of its kind: the counting start and the array under
    the transform are launch state."""
    n = 50_000
    rng = np.random.default_rng(5)
    out_k, out_v = cp.empty(n, np.int32), cp.empty(n, np.int64)
    first = cp.asarray(rng.integers(0, 1 << 30, n).astype(np.int32))
    sorter = make_merge_sort(d_in_keys=TransformIterator(first, _bucket, np.int32), d_out_keys=out_k,
                             d_in_values=CountingIterator(np.int64(0)), d_out_values=out_v, op=OpKind.LESS)
    temp = None
    before = None
    for start in (0, 10 ** 12, -7):
        host = rng.integers(0, 1 << 30, n).astype(np.int32)
        args = dict(d_in_keys=TransformIterator(cp.asarray(host), _bucket, np.int32),
                    d_in_values=CountingIterator(np.int64(start)), d_out_keys=out_k, d_out_values=out_v,
                    num_items=n, op=OpKind.LESS)
        if temp is None:
            temp = cp.empty(sorter(temp_storage=None, **args), np.uint8)
            before = _compiles()
        sorter(temp_storage=temp, **args)
        order = np.argsort(host % 97, kind="stable")
        assert np.array_equal(cp.asnumpy(out_v), order + start)
        assert np.array_equal(cp.asnumpy(out_k), (host % 97)[order])
    assert _compiles() == before


# ------------------------------------------------------------------- comparators capturing CuPy arrays

RANK = None  # a global the comparator below captures (rebound by the test)


def _by_rank(a, b):
    return RANK[a] < RANK[b]


def test_comparator_capturing_a_closure_array_reads_it_at_each_call():
    n = 200_000
    rng = np.random.default_rng(6)
    host = rng.integers(0, 1000, n).astype(np.int32)
    d = cp.asarray(host)
    out_k, out_v = cp.empty(n, np.int32), cp.empty(n, np.int32)
    weights = cp.asarray(np.arange(1000, dtype=np.float32))  # distinct per key: ties only among equal keys

    def by_weight(a, b):
        return weights[a] < weights[b]

    sorter = make_merge_sort(d_in_keys=d, d_out_keys=out_k, d_in_values=CountingIterator(np.int32(0)),
                             d_out_values=out_v, op=by_weight)
    args = dict(d_in_keys=d, d_in_values=CountingIterator(np.int32(0)), d_out_keys=out_k, d_out_values=out_v,
                num_items=n, op=by_weight)
    temp = cp.empty(sorter(temp_storage=None, **args), np.uint8)
    before = _compiles()
    tables = [np.arange(1000, dtype=np.float32), np.arange(1000, dtype=np.float32)[::-1].copy(),
              rng.permutation(1000).astype(np.float32)]
    results = []
    for table in tables:
        weights = cp.asarray(table)  # rebinds the closure cell the comparator reads
        sorter(temp_storage=temp, **args)
        order = np.argsort(table[host], kind="stable")
        assert np.array_equal(cp.asnumpy(out_v), order) and np.array_equal(cp.asnumpy(out_k), host[order])
        results.append(cp.asnumpy(out_k))
    assert not np.array_equal(results[0], results[1])  # the rebinding changed the order
    assert _compiles() == before
    with pytest.raises(cuprims.errors.ArgumentError):  # its arrays are bound per call: op= is needed
        sorter(temp_storage=temp, **{**args, "op": None})


@pytest.mark.parametrize("n", [1, 1000, (1 << 20) + 7])
def test_comparator_capturing_a_global_one_shot(n):
    global RANK
    rng = np.random.default_rng(n + 7)
    host = rng.integers(0, 64, n).astype(np.int64)
    d = cp.asarray(host)
    out = cp.empty(n, np.int64)
    RANK = cp.asarray(np.arange(64, dtype=np.int32))
    merge_sort(d_in_keys=d, d_out_keys=out, num_items=n, op=_by_rank)
    assert np.array_equal(cp.asnumpy(out), np.sort(host))
    before = _compiles()
    for table in (np.arange(64, dtype=np.int32)[::-1].copy(), rng.permutation(64).astype(np.int32)):
        RANK = cp.asarray(table)
        merge_sort(d_in_keys=d, d_out_keys=out, num_items=n, op=_by_rank)
        assert np.array_equal(cp.asnumpy(out), host[np.argsort(table[host], kind="stable")])
    assert _compiles() == before


def test_iterator_keys_and_values_into_arrays_of_other_dtypes():
    # int64 keys (numba's type of x * x over int32) sorted as the int32 output holds them, with an int64
    # CountingIterator's indices into int32 values: CUB sorts in the output's type
    h = np.random.default_rng(9).integers(-40_000, 40_000, 300_007).astype(np.int32)
    out_k, out_v = cp.empty(h.size, np.int32), cp.empty(h.size, np.int32)
    cuprims.merge_sort(d_in_keys=TransformIterator(cp.asarray(h), lambda x: x * x), d_in_values=CountingIterator(
        np.int64(0)), d_out_keys=out_k, d_out_values=out_v, num_items=h.size, op=OpKind.LESS)
    keys = (h.astype(np.int64) ** 2).astype(np.int32)
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(out_k.get(), keys[order])
    np.testing.assert_array_equal(out_v.get(), order.astype(np.int32))
