"""Radix sort on a GPU against numpy: every key dtype in both orders, keys only and
pairs, edge sizes up to 2^28 and past 2^31 items, numpy's float ordering (NaNs, -0.0),
bit ranges, DoubleBuffers, value types of every shape, the object API and streams.

Run:  python -m pytest tests/gpu/algorithms/test_radix_sort_gpu.py -x -q
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import cuprims
from cuprims import SortOrder
from cuprims.algorithms.radix_sort.api import make_radix_sort, radix_sort
from cuprims.algorithms.sort_common import DoubleBuffer
from side_streams import side_stream  # noqa: E402
from twins import STRUCT, ordered_bits, sorted_keys  # the radix order's model, test_radix_sort's too
from twins import random_keys as _random_keys
from struct_arrays import Structs

cp = pytest.importorskip("cupy")

KEYS = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
        "float64"]
ORDERS = [SortOrder.ASCENDING, SortOrder.DESCENDING]
SMALL_SIZES = [0, 1, 31, 1000, (1 << 20) + 7]
VALUE_TYPES = ["int32", "float16", "bool", "complex128", STRUCT, "int64", "uint8"]


# ------------------------------------------------------------------ reference

def reference_order(keys: np.ndarray, descending: bool, begin_bit: int = 0, end_bit: int | None = None):
    end_bit = keys.dtype.itemsize * 8 if end_bit is None else end_bit
    bits = ordered_bits(keys, descending) >> np.uint64(begin_bit)
    width = end_bit - begin_bit
    if width < 64:
        bits = bits & np.uint64((1 << width) - 1)
    return np.argsort(bits, kind="stable")


def random_keys(dt, n: int, rng: np.random.Generator) -> np.ndarray:
    """twins.random_keys, with many ties among the floats."""
    return _random_keys(dt, n, rng, ties=True)


def random_values(dt, n: int, rng: np.random.Generator) -> np.ndarray:
    dt = np.dtype(dt)
    raw = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8)
    v = raw.view(dt).copy() if dt.names is None else np.frombuffer(raw.tobytes(), dt).copy()
    if dt.kind == "b":
        v = rng.random(n) < 0.5
    return v


def permute(values: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """values[perm], moving whole items as bytes (numpy skips struct padding)."""
    rows = np.ascontiguousarray(values).view(np.uint8).reshape(values.size, values.dtype.itemsize)
    return rows[perm].reshape(-1).view(values.dtype)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                                                 np.ascontiguousarray(b).view(np.uint8))


def device_values(host: np.ndarray):
    return Structs(host) if host.dtype.names is not None else cp.asarray(host)


def host_of(x) -> np.ndarray:
    return x.get() if isinstance(x, Structs) else cp.asnumpy(x)


def empty_like_values(n, dtype):
    dtype = np.dtype(dtype)
    return Structs.empty(n, dtype) if dtype.names is not None else cp.empty(n, dtype)


# ------------------------------------------------------------------ builds

@pytest.fixture(scope="module", autouse=True)
def prebuild():
    """Build every sorter used below concurrently (NVRTC runs outside the GIL)."""
    cc = int("".join(map(str, cp.cuda.Device().compute_capability)))
    P = cuprims.ProxyArray
    jobs = [(k, None, o) for k in KEYS for o in ORDERS] + [(k, "int32", o) for k in KEYS for o in ORDERS]
    jobs += [("uint32", v, SortOrder.ASCENDING) for v in VALUE_TYPES if v != "int32"]

    def build(job):
        k, v, o = job
        make_radix_sort(d_in_keys=P(k), d_out_keys=P(k), d_in_values=None if v is None else P(v),
                        d_out_values=None if v is None else P(v), order=o, compute_capability=cc)

    build(jobs[0])  # first import of the compiler stack outside the pool
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(build, jobs[1:]))


# ------------------------------------------------------------------ tests

@pytest.mark.parametrize("n", SMALL_SIZES)
@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
@pytest.mark.parametrize("key", KEYS)
def test_keys_and_pairs(key, order, n):
    rng = np.random.default_rng(n + len(key))
    keys = random_keys(key, n, rng)
    values = np.arange(n, dtype=np.int32)
    desc = order is SortOrder.DESCENDING
    perm = reference_order(keys, desc)
    d_keys, d_vals = cp.asarray(keys), cp.asarray(values)
    out_k, out_v = cp.empty_like(d_keys), cp.empty_like(d_vals)
    # keys only
    radix_sort(d_in_keys=d_keys, d_out_keys=out_k, num_items=n, order=order)
    assert same_bits(cp.asnumpy(out_k), sorted_keys(keys[perm])), (key, n)
    # pairs: the values say where each key came from, so this also checks stability
    radix_sort(d_in_keys=d_keys, d_out_keys=out_k, d_in_values=d_vals, d_out_values=out_v, num_items=n,
               order=order)
    assert same_bits(cp.asnumpy(out_k), sorted_keys(keys[perm])) and np.array_equal(cp.asnumpy(out_v), perm), (key, n)
    assert same_bits(cp.asnumpy(d_keys), keys), "input keys were modified"


@pytest.mark.parametrize("key", ["float16", "float32", "float64"])
def test_float_order_is_numpys(key):
    """NaNs of either sign after +inf (before it descending), tied, out as the quiet NaN;
    -0.0 equal to +0.0 (stable); every other key bit for bit."""
    dt = np.dtype(key)
    rng = np.random.default_rng(0)
    if dt.itemsize == 2:
        keys = np.arange(1 << 16, dtype=np.uint16).view(np.float16).copy()  # every float16
    else:
        keys = random_keys(dt, 200_000, rng)
    keys = np.concatenate([keys, np.array([-0.0, 0.0, -0.0, 0.0] * 50, dt)])
    rng.shuffle(keys)
    n = keys.size
    vals = np.arange(n, dtype=np.int32)
    for order in ORDERS:
        out_k, out_v = cp.empty(n, dt), cp.empty(n, np.int32)
        radix_sort(d_in_keys=cp.asarray(keys), d_out_keys=out_k, d_in_values=cp.asarray(vals), d_out_values=out_v,
                   num_items=n, order=order)
        perm = reference_order(keys, order is SortOrder.DESCENDING)
        assert np.array_equal(cp.asnumpy(out_v), perm)
        got = cp.asnumpy(out_k)
        assert same_bits(got, sorted_keys(keys[perm]))
        zeros = np.flatnonzero(got == 0)
        assert np.all(np.diff(cp.asnumpy(out_v)[zeros]) > 0), "zeros of both signs keep their input order"


@pytest.mark.parametrize("value", [v for v in VALUE_TYPES if v != "int32"], ids=str)
@pytest.mark.parametrize("n", [1000, (1 << 20) + 7])
def test_value_types(value, n):
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 1 << 12, n).astype(np.uint32)  # ties
    values = random_values(value, n, rng)
    perm = reference_order(keys, False)
    out_k = cp.empty(n, np.uint32)
    d_vals, out_v = device_values(values), empty_like_values(n, values.dtype)
    radix_sort(d_in_keys=cp.asarray(keys), d_out_keys=out_k, d_in_values=d_vals, d_out_values=out_v, num_items=n,
               order=SortOrder.ASCENDING)
    assert np.array_equal(cp.asnumpy(out_k), keys[perm])
    assert same_bits(host_of(out_v), permute(values, perm))


@pytest.mark.parametrize("bits", [(0, 8), (4, 20), (16, 32), (7, 7), (0, 1), (31, 32), (3, 31)])
@pytest.mark.parametrize("n", [500, (1 << 20) + 7])
def test_bit_ranges(bits, n):
    b, e = bits
    rng = np.random.default_rng(b * 100 + e)
    keys = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    vals = np.arange(n, dtype=np.int32)
    out_k, out_v = cp.empty(n, np.uint32), cp.empty(n, np.int32)
    radix_sort(d_in_keys=cp.asarray(keys), d_out_keys=out_k, d_in_values=cp.asarray(vals), d_out_values=out_v,
               num_items=n, order=SortOrder.ASCENDING, begin_bit=b, end_bit=e)
    perm = reference_order(keys, False, b, e)
    assert np.array_equal(cp.asnumpy(out_v), perm) and np.array_equal(cp.asnumpy(out_k), keys[perm])


@pytest.mark.parametrize("bits", [(0, 32), (0, 24), (8, 16), (5, 5)])
@pytest.mark.parametrize("n", [31, 1000, (1 << 20) + 7])
def test_double_buffer(bits, n):
    b, e = bits
    rng = np.random.default_rng(n)
    keys = rng.integers(-(1 << 31), 1 << 31, n).astype(np.int32)
    vals = np.arange(n, dtype=np.int64)
    kdb = DoubleBuffer(cp.asarray(keys), cp.empty(n, np.int32))
    vdb = DoubleBuffer(cp.asarray(vals), cp.empty(n, np.int64))
    radix_sort(d_in_keys=kdb, d_out_keys=None, d_in_values=vdb, d_out_values=None, num_items=n,
               order=SortOrder.DESCENDING, begin_bit=b, end_bit=e)
    perm = reference_order(keys, True, b, e)
    assert kdb.selector == vdb.selector
    assert np.array_equal(cp.asnumpy(kdb.current()), keys[perm])
    assert np.array_equal(cp.asnumpy(vdb.current()), perm)
    # sorting again from the buffer it landed in (selector 1 start) works too
    again = cp.asnumpy(kdb.current()).copy()
    radix_sort(d_in_keys=kdb, d_out_keys=None, num_items=n, order=SortOrder.ASCENDING)
    assert np.array_equal(cp.asnumpy(kdb.current()), np.sort(again, kind="stable"))


def test_object_api_and_streams():
    n = (1 << 20) + 7
    rng = np.random.default_rng(5)
    keys = rng.random(n).astype(np.float32)
    vals = rng.integers(0, 100, n).astype(np.uint8)
    d_k, d_v = cp.asarray(keys), cp.asarray(vals)
    out_k, out_v = cp.empty_like(d_k), cp.empty_like(d_v)
    sorter = make_radix_sort(d_in_keys=d_k, d_out_keys=out_k, d_in_values=d_v, d_out_values=out_v,
                             order=SortOrder.DESCENDING)
    nbytes = sorter(temp_storage=None, d_in_keys=d_k, d_out_keys=out_k, d_in_values=d_v, d_out_values=out_v,
                    num_items=n)
    tmp = cp.empty(nbytes, np.uint8)
    stream = side_stream()
    with stream:
        for _ in range(3):
            sorter(temp_storage=tmp, d_in_keys=d_k, d_out_keys=out_k, d_in_values=d_v, d_out_values=out_v,
                   num_items=n, stream=stream)
    stream.synchronize()
    perm = reference_order(keys, True)
    assert np.array_equal(cp.asnumpy(out_k), keys[perm]) and np.array_equal(cp.asnumpy(out_v), vals[perm])
    # a stream handle as an int, and a torch tensor pair (if torch is there)
    radix_sort(d_in_keys=d_k, d_out_keys=out_k, num_items=n, order=SortOrder.ASCENDING, stream=stream.ptr)
    stream.synchronize()
    assert np.array_equal(cp.asnumpy(out_k), np.sort(keys))
    torch = pytest.importorskip("torch")
    tk = torch.as_tensor(d_k, device="cuda")
    tout = torch.empty_like(tk)
    radix_sort(d_in_keys=tk, d_out_keys=tout, num_items=n, order=SortOrder.ASCENDING,
               stream=torch.cuda.current_stream())
    torch.cuda.synchronize()
    assert np.array_equal(tout.cpu().numpy(), np.sort(keys))


# ---- large problems -------------------------------------------------------------

def _check_sorted_pairs(keys_in, keys_out, vals_out, descending):
    """Device-side checks for big inputs: ordered, a permutation, stable."""
    k = keys_out
    if descending:
        assert bool(cp.all(k[:-1] >= k[1:]))
    else:
        assert bool(cp.all(k[:-1] <= k[1:]))
    if vals_out is not None:
        assert bool(cp.all(keys_in[vals_out] == keys_out)), "values do not follow their keys"
        ties = k[:-1] == k[1:]
        assert bool(cp.all(~ties | (vals_out[:-1] < vals_out[1:]))), "not stable"


@pytest.mark.parametrize("key,order,pairs", [
    ("uint32", SortOrder.ASCENDING, False), ("uint32", SortOrder.ASCENDING, True),
    ("float32", SortOrder.DESCENDING, True), ("int64", SortOrder.ASCENDING, False),
    ("uint8", SortOrder.DESCENDING, True), ("float16", SortOrder.ASCENDING, False),
])
def test_2_pow_28(key, order, pairs):
    n = 1 << 28
    r = cp.random.default_rng(1)
    dt = np.dtype(key)
    if dt.kind == "f":
        keys = (r.standard_normal(n, dtype=cp.float32) * 1000).astype(dt)  # no NaNs: cp.sort is the reference
    else:
        info = np.iinfo(dt)
        keys = r.integers(int(info.min), int(info.max), n, dtype=cp.int64).astype(dt)
    out = cp.empty_like(keys)
    vals = cp.arange(n, dtype=cp.int32) if pairs else None
    out_v = cp.empty_like(vals) if pairs else None
    radix_sort(d_in_keys=keys, d_out_keys=out, d_in_values=vals, d_out_values=out_v, num_items=n, order=order)
    want = cp.sort(keys.astype(cp.float32)).astype(dt) if dt.itemsize == 2 and dt.kind == "f" else cp.sort(keys)
    if order is SortOrder.DESCENDING:
        want = want[::-1]
    assert bool(cp.all(out == want))
    _check_sorted_pairs(keys, out, out_v, order is SortOrder.DESCENDING)


@pytest.mark.big_memory
def test_more_than_2_pow_31_items():
    """64-bit offsets: a uint8 sort of 2^31 + 1000 items (about 4.3 GB of arrays)."""
    n = (1 << 31) + 1000
    m = 251  # key i is (i * 138) % 251: each residue once per 251 items
    keys = ((cp.arange(n, dtype=cp.int64) * 138) % m).astype(cp.uint8)
    counts = np.full(m, n // m, np.int64)
    counts[(np.arange(n % m) * 138) % m] += 1
    out = cp.empty_like(keys)
    radix_sort(d_in_keys=keys, d_out_keys=out, num_items=n, order=SortOrder.ASCENDING)
    assert bool(cp.all(out[:-1] <= out[1:]))
    edges = cp.asnumpy(cp.searchsorted(out, cp.arange(m + 1, dtype=cp.uint16).astype(cp.uint8)))
    edges[-1] = n
    assert np.array_equal(np.diff(edges), counts)
    # and in place through a DoubleBuffer, descending, with a partial bit range
    db = DoubleBuffer(keys, out)
    radix_sort(d_in_keys=db, d_out_keys=None, num_items=n, order=SortOrder.DESCENDING, begin_bit=4, end_bit=8)
    hi = db.current() >> 4
    assert bool(cp.all(hi[:-1] >= hi[1:]))
