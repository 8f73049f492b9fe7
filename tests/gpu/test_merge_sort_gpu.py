"""Merge sort on a GPU against numpy: built-in and Python comparators, stability, struct
keys, values of every shape, in place, edge sizes up to 2^26 and past 2^31 items.

Run:  python -m pytest tests/gpu/test_merge_sort_gpu.py -x -q
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import cuprims
from cuprims import OpKind
from cuprims.algorithms.merge_sort import make_merge_sort, merge_sort

cp = pytest.importorskip("cupy")

SIZES = [0, 1, 31, 1000, (1 << 20) + 7]
KEYS = ["int8", "uint16", "int32", "uint32", "int64", "float32", "float64"]
KEY_STRUCT = np.dtype([("a", np.int32), ("b", np.float32)], align=True)
BIG_VALUE = np.dtype([("x", np.float64, (6,)), ("tag", np.int32)], align=True)  # 56 bytes


def py_less(a, b):
    return a < b


def py_greater(a, b):
    return a > b


def struct_less(x, y):  # by a, then by b descending
    return x.a < y.a or (x.a == y.a and x.b > y.b)


class Structs:
    """A device array of structs (CUDA Array Interface with a structured descr)."""

    def __init__(self, host: np.ndarray):
        self.dtype, self.size = host.dtype, host.size
        self.raw = cp.asarray(np.ascontiguousarray(host).view(np.uint8).reshape(-1))

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.size,), "typestr": f"|V{self.dtype.itemsize}", "descr": self.dtype.descr,
                "data": (self.raw.data.ptr, False), "version": 3, "strides": None}

    def get(self) -> np.ndarray:
        return cp.asnumpy(self.raw).view(self.dtype)


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
