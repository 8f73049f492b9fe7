"""Scan results on a GPU against numpy (small sizes) or CuPy (huge sizes): every dtype,
edge sizes up to 2^28 and past 2^31 items, inclusive/exclusive, host and device init
values, op kinds, Python and raw operators, structs, mixed types, streams.

Data are small integers (also for floats), so every sum is exact and results compare
bit for bit whatever order the scan combines them in.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import cuprims
from cuprims import OpKind
from cuprims.algorithms.scan.api import exclusive_scan, inclusive_scan, make_exclusive_scan, make_inclusive_scan
from cuprims.errors import ArgumentError

cp = pytest.importorskip("cupy")

SIZES = [0, 1, 31, 1000, (1 << 20) + 7]
HUGE = 1 << 28
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]
HUGE_DTYPES = ["int32", "float64", "uint8"]  # also run at 2^28 items


def _cc() -> int:
    return int(cp.cuda.Device().compute_capability)


def _op_for(dt: np.dtype):
    """(op, numpy accumulate function, neutral init) checked for this dtype."""
    if dt.kind == "b":
        return OpKind.LOGICAL_OR, np.logical_or.accumulate, np.bool_(False)
    if dt.kind == "f" and dt.itemsize == 2:  # float16 sums leave the exact integers quickly
        return OpKind.MAXIMUM, np.maximum.accumulate, np.float16(-np.inf)
    return OpKind.PLUS, (lambda a: np.cumsum(a, dtype=dt)), dt.type(0)


def _init_for(dt: np.dtype):
    """A non-neutral init value, to see that it is combined in."""
    if dt.kind == "b":
        return np.bool_(False)  # (True would saturate every output)
    if dt.kind == "f" and dt.itemsize == 2:
        return np.float16(1.0)
    if dt.kind == "c":
        return dt.type(2 - 1j)
    return dt.type(5)


def _host_data(n: int, dt: np.dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dt.kind == "b":
        return rng.random(n) < (2.0 / max(n, 1))
    if dt.kind == "u":
        return rng.integers(0, 4, n).astype(dt)
    if dt.kind == "i":
        return rng.integers(-3, 4, n).astype(dt)
    if dt.kind == "f":
        return rng.integers(-3, 4, n).astype(dt)  # small integers: exact sums
    return (rng.integers(-3, 4, n) + 1j * rng.integers(-3, 4, n)).astype(dt)


def _device_data(n: int, dt: np.dtype, seed: int):
    if n < (1 << 22):
        return cp.asarray(_host_data(n, dt, seed))
    r = cp.random.default_rng(seed)
    if dt.kind == "u":
        return r.integers(0, 4, n, dtype=cp.int64).astype(dt)
    return r.integers(-3, 4, n, dtype=cp.int64).astype(dt)


def _combine(op, init, values):
    """init (op) values, elementwise, for the reference's init handling."""
    if op is OpKind.LOGICAL_OR:
        return np.logical_or(init, values)
    if op is OpKind.MAXIMUM:
        return np.maximum(init, values).astype(values.dtype)
    return (init + values).astype(values.dtype)


def _reference(mode: str, op, acc, host: np.ndarray, init):
    """numpy reference of an inclusive ('incl'), inclusive-with-init ('incl_init') or
    exclusive ('excl') scan."""
    if host.size == 0:
        return host.copy()
    inc = acc(host)
    if mode == "incl":
        return inc
    with np.errstate(over="ignore"):
        shifted = _combine(op, init, inc)
    if mode == "incl_init":
        return shifted
    return np.concatenate([np.array([init], dtype=host.dtype), shifted[:-1]])


def _scan(mode: str, x, out, op, init, n):
    if mode == "incl":
        inclusive_scan(d_in=x, d_out=out, op=op, num_items=n)
    elif mode == "incl_init":
        inclusive_scan(d_in=x, d_out=out, op=op, init_value=init, num_items=n)
    else:
        exclusive_scan(d_in=x, d_out=out, op=op, init_value=init, num_items=n)


@pytest.fixture(scope="module", autouse=True)
def prebuild():
    """Build the scans used below concurrently (NVRTC runs outside the GIL)."""
    from cuda.core import Program  # noqa: F401  (import once here, not racing in the pool's threads)

    cc = _cc()
    jobs = []
    for name in DTYPES:
        dt = np.dtype(name)
        op, _, _ = _op_for(dt)
        jobs.append((dt, op, "incl"))
        jobs.append((dt, op, "excl"))
    for name in ("int32", "float64"):
        jobs.append((np.dtype(name), OpKind.PLUS, "incl_init"))
    for op in INT_OPS:
        jobs.append((np.dtype(np.int32), op, "incl"))
    for src, dst in MIXED:
        jobs.append(((np.dtype(src), np.dtype(dst)), OpKind.PLUS, "excl"))
    jobs.append((np.dtype(np.int32), OpKind.PLUS, "excl_device"))
    jobs.append((np.dtype(np.float64), OpKind.PLUS, "incl_device"))

    def build(job):
        dt, op, mode = job
        src, dst = dt if isinstance(dt, tuple) else (dt, dt)
        P, V = cuprims.ProxyArray, cuprims.ProxyValue
        if mode == "incl":
            make_inclusive_scan(d_in=P(src), d_out=P(dst), op=op, compute_capability=cc)
        elif mode == "incl_init":
            make_inclusive_scan(d_in=P(src), d_out=P(dst), op=op, init_value=V(dst), compute_capability=cc)
        elif mode == "incl_device":
            make_inclusive_scan(d_in=P(src), d_out=P(dst), op=op, init_value=P(dst), compute_capability=cc)
        elif mode == "excl_device":
            make_exclusive_scan(d_in=P(src), d_out=P(dst), op=op, init_value=P(dst), compute_capability=cc)
        else:
            make_exclusive_scan(d_in=P(src), d_out=P(dst), op=op, init_value=V(dst), compute_capability=cc)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(build, jobs))


def _check_equal(got: np.ndarray, want: np.ndarray):
    assert got.shape == want.shape
    if got.dtype.kind == "f":
        bad = ~((got == want) | (np.isnan(got) & np.isnan(want)))
    else:
        bad = got != want
    if bad.any():
        i = int(np.argmax(bad))
        raise AssertionError(f"{int(bad.sum())} mismatches; first at {i}: got {got[i]!r}, want {want[i]!r}")


@pytest.mark.parametrize("mode", ["incl", "excl"])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", DTYPES)
def test_every_dtype_and_size(name, n, mode):
    dt = np.dtype(name)
    op, acc, _ = _op_for(dt)
    init = _init_for(dt)
    host = _host_data(n, dt, seed=n + dt.itemsize)
    x = cp.asarray(host)
    out = cp.full(n + 3, 1, dtype=dt)  # 3 sentinels past the end must stay untouched
    _scan(mode, x, out, op, init, n)
    got = cp.asnumpy(out)
    _check_equal(got[:n], _reference(mode, op, acc, host, init))
    assert (got[n:] == dt.type(1)).all(), "wrote past num_items"


@pytest.mark.parametrize("mode", ["incl", "incl_init", "excl"])
@pytest.mark.parametrize("name", ["int32", "float64"])
@pytest.mark.parametrize("n", [31, 1000, (1 << 20) + 7])
def test_inclusive_with_init(name, n, mode):
    dt = np.dtype(name)
    init = dt.type(-7)
    host = _host_data(n, dt, seed=3)
    x, out = cp.asarray(host), cp.empty(n, dt)
    _scan(mode, x, out, OpKind.PLUS, init, n)
    _check_equal(cp.asnumpy(out), _reference(mode, OpKind.PLUS, lambda a: np.cumsum(a, dtype=dt), host, init))


@pytest.mark.parametrize("mode", ["incl", "excl"])
@pytest.mark.parametrize("name", HUGE_DTYPES)
def test_huge(name, mode):
    """2^28 items (about 87k tiles): compared on the device against CuPy's cumsum."""
    dt = np.dtype(name)
    x = _device_data(HUGE, dt, seed=11)
    out = cp.empty(HUGE, dt)
    init = dt.type(5)
    _scan(mode, x, out, OpKind.PLUS, init, HUGE)
    ref = cp.cumsum(x, dtype=dt)
    if mode == "excl":
        ref = cp.concatenate([cp.asarray([init], dtype=dt), (ref[:-1] + init).astype(dt)])
    bad = cp.flatnonzero(out != ref)
    assert bad.size == 0, f"{int(bad.size)} mismatches; first at {int(bad[0])}"
    del x, out, ref


@pytest.mark.big_memory
def test_more_than_2_31_items():
    """64-bit offsets: 2^31 + 4099 uint8 ones, checked chunk by chunk on the device."""
    n = (1 << 31) + 4099
    x = cp.ones(n, cp.uint8)
    out = cp.empty(n, cp.uint8)
    chunk = 1 << 28
    inclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS, num_items=n)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        want = ((cp.arange(start, stop, dtype=cp.int64) + 1) & 255).astype(cp.uint8)
        assert bool((out[start:stop] == want).all()), f"inclusive mismatch in [{start}, {stop})"
    exclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS, init_value=np.uint8(5), num_items=n)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        want = ((cp.arange(start, stop, dtype=cp.int64) + 5) & 255).astype(cp.uint8)
        assert bool((out[start:stop] == want).all()), f"exclusive mismatch in [{start}, {stop})"
    del x, out


# ------------------------------------------------------------------ op kinds

INT_OPS = [OpKind.PLUS, OpKind.MULTIPLIES, OpKind.MINIMUM, OpKind.MAXIMUM, OpKind.BIT_AND, OpKind.BIT_OR,
           OpKind.BIT_XOR, OpKind.LOGICAL_AND, OpKind.LOGICAL_OR]


def _int_ref(op, a: np.ndarray) -> np.ndarray:
    ufunc = {OpKind.PLUS: np.add, OpKind.MULTIPLIES: np.multiply, OpKind.MINIMUM: np.minimum,
             OpKind.MAXIMUM: np.maximum, OpKind.BIT_AND: np.bitwise_and, OpKind.BIT_OR: np.bitwise_or,
             OpKind.BIT_XOR: np.bitwise_xor}.get(op)
    if ufunc is not None:
        return ufunc.accumulate(a, dtype=a.dtype)  # integer wrap-around is the same on both sides
    logical = np.logical_and if op is OpKind.LOGICAL_AND else np.logical_or
    out = logical.accumulate(a != 0).astype(a.dtype)
    out[0] = a[0]  # an inclusive scan without init passes the first item through unchanged
    return out


@pytest.mark.parametrize("op", INT_OPS, ids=lambda o: o.name)
@pytest.mark.parametrize("n", [1000, (1 << 20) + 7])
def test_integer_op_kinds(op, n):
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, n).astype(np.int32)
    if op is OpKind.LOGICAL_AND:
        a = np.where(rng.random(n) < 1e-4, 0, a + 10).astype(np.int32)
    x, out = cp.asarray(a), cp.empty(n, np.int32)
    inclusive_scan(d_in=x, d_out=out, op=op, num_items=n)
    _check_equal(cp.asnumpy(out), _int_ref(op, a))


# ------------------------------------------------------------------ Python and raw operators

def test_python_add_matches_builtin_plus():
    n = (1 << 20) + 7
    a = np.random.default_rng(4).integers(-1000, 1000, n).astype(np.int32)
    x = cp.asarray(a)
    o1, o2 = cp.empty(n, np.int32), cp.empty(n, np.int32)
    inclusive_scan(d_in=x, d_out=o1, op=OpKind.PLUS, num_items=n)
    inclusive_scan(d_in=x, d_out=o2, op=lambda p, q: p + q, num_items=n)
    assert bool((o1 == o2).all())
    _check_equal(cp.asnumpy(o2), np.cumsum(a, dtype=np.int32))


def test_python_closure_and_helpers():
    a = np.random.default_rng(5).integers(-1000, 1000, 50_000).astype(np.float64)
    x, out = cp.asarray(a), cp.empty(a.size, np.float64)
    for cap in (10.0, 500.0):
        def capped_max(p, q):
            return min(max(p, q), cap)
        exclusive_scan(d_in=x, d_out=out, op=capped_max, init_value=np.float64(-1e9), num_items=a.size)
        want = np.minimum(np.maximum.accumulate(np.concatenate([[-1e9], a[:-1]])), cap)
        _check_equal(cp.asnumpy(out), want)


def test_raw_op_from_numba_ltoir():
    from numba import cuda, types

    def add(pa, pb, pr):
        pr[0] = pa[0] + pb[0]

    ptr = types.CPointer(types.float64)
    cc = cp.cuda.Device().compute_capability
    ltoir, _ = cuda.compile(add, types.void(ptr, ptr, ptr), device=True, abi="c",
                            abi_info={"abi_name": "user_scan_raw_add"}, output="ltoir",
                            cc=(int(cc[:-1]), int(cc[-1])))
    op = cuprims.RawOp(ltoir=ltoir, name="user_scan_raw_add")
    a = np.random.default_rng(7).integers(0, 100, 10_000).astype(np.float64)
    x, out = cp.asarray(a), cp.empty(a.size, np.float64)
    exclusive_scan(d_in=x, d_out=out, op=op, init_value=np.float64(0.5), num_items=a.size)
    _check_equal(cp.asnumpy(out), np.concatenate([[0.5], np.cumsum(a)[:-1] + 0.5]))


# ------------------------------------------------------------------ structs

P_STRUCT = cuprims.gpu_struct({"r": np.int32, "g": np.float32}, name="ScanP")
Q_STRUCT = cuprims.gpu_struct({"c": np.int8, "d": np.float64, "p": P_STRUCT}, name="ScanQ")  # 24 bytes


def _struct_op(a, b):
    return Q_STRUCT(a.c + b.c, a.d + b.d, P_STRUCT(a.p.r + b.p.r, max(a.p.g, b.p.g)))


def _struct_data(n):
    rng = np.random.default_rng(n)
    h = np.zeros(n, Q_STRUCT.dtype)
    h["c"] = rng.integers(-3, 3, n)
    h["d"] = rng.integers(-50, 50, n)
    h["p"]["r"] = rng.integers(-50, 50, n)
    h["p"]["g"] = rng.integers(-1000, 1000, n)
    return h


def _struct_reference(h: np.ndarray, init, exclusive: bool) -> np.ndarray:
    out = np.zeros(h.size, Q_STRUCT.dtype)
    if h.size == 0:
        return out
    i0 = np.asarray(init)
    out["c"] = (np.cumsum(h["c"], dtype=np.int8) + i0["c"]).astype(np.int8)
    out["d"] = np.cumsum(h["d"]) + i0["d"]
    out["p"]["r"] = (np.cumsum(h["p"]["r"], dtype=np.int32) + i0["p"]["r"]).astype(np.int32)
    out["p"]["g"] = np.maximum(np.maximum.accumulate(h["p"]["g"]), i0["p"]["g"])
    if exclusive:
        out[1:] = out[:-1].copy()
        out[0] = i0
    return out


@pytest.mark.parametrize("exclusive", [False, True], ids=["incl_init", "excl"])
@pytest.mark.parametrize("n", [0, 1, 1000, (1 << 20) + 7])
def test_struct_scan(n, exclusive):
    h = _struct_data(max(n, 1))[:n]
    d_in = cp.asarray(h) if n else cp.zeros(0, Q_STRUCT.dtype)
    d_out = cp.zeros(max(n, 1), Q_STRUCT.dtype)
    init = Q_STRUCT(1, 0.5, (2, -5000.0))
    fn = exclusive_scan if exclusive else inclusive_scan
    fn(d_in=d_in, d_out=d_out, op=_struct_op, init_value=init, num_items=n)
    got = d_out.get()[:n]
    want = _struct_reference(h, np.asarray(init), exclusive)
    for field in ("c", "d"):
        _check_equal(got[field], want[field])
    for field in ("r", "g"):
        _check_equal(got["p"][field], want["p"][field])


def test_struct_scan_with_device_init():
    h = _struct_data(5000)
    d_in = cp.asarray(h)
    d_out = cp.empty(h.size, Q_STRUCT.dtype)
    init_host = np.asarray(Q_STRUCT(0, 1.0, (3, -5000.0))).reshape(1)
    d_init = cp.asarray(init_host)
    exclusive_scan(d_in=d_in, d_out=d_out, op=_struct_op, init_value=d_init, num_items=h.size)
    got = d_out.get()
    want = _struct_reference(h, init_host[0], True)
    _check_equal(got["d"], want["d"])
    _check_equal(got["p"]["r"], want["p"]["r"])


# ------------------------------------------------------------------ device-array init values

@pytest.mark.parametrize("n", [1, 1000, (1 << 20) + 7])
def test_device_init_read_when_the_kernel_runs(n):
    a = np.random.default_rng(8).integers(-3, 4, n).astype(np.int32)
    x, out = cp.asarray(a), cp.empty(n, np.int32)
    d_init = cp.asarray([7], dtype=np.int32)
    scan = make_exclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS, init_value=d_init)
    tmp = cp.empty(scan(temp_storage=None, d_in=x, d_out=out, op=OpKind.PLUS, init_value=d_init, num_items=n),
                   np.uint8)
    for value in (7, -100):
        d_init.fill(value)  # a device-side write, ordered before the scan on the same stream
        scan(temp_storage=tmp, d_in=x, d_out=out, op=OpKind.PLUS, init_value=d_init, num_items=n)
        want = np.concatenate([[value], np.cumsum(a, dtype=np.int32)[:-1] + value]).astype(np.int32)
        _check_equal(cp.asnumpy(out), want)


def test_device_init_computed_on_the_stream():
    """The init is the result of a reduction queued just before: no host round trip."""
    s = cp.cuda.Stream(non_blocking=True)
    n = 100_000
    with s:
        x = cp.asarray(np.random.default_rng(9).integers(0, 10, n).astype(np.float64))
        base = cp.arange(1000, dtype=np.float64)
        d_init = cp.empty(1, np.float64)
        out = cp.empty(n, np.float64)
    cuprims.reduce_into(d_in=base, d_out=d_init, num_items=base.size, op=OpKind.PLUS, h_init=np.float64(0),
                        stream=s)
    inclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS, init_value=d_init, num_items=n, stream=s)
    s.synchronize()
    want = np.cumsum(cp.asnumpy(x)) + 999 * 1000 / 2
    _check_equal(cp.asnumpy(out), want)


def test_device_init_errors():
    x, out = cp.zeros(10, np.int32), cp.empty(10, np.int32)
    with pytest.raises(ArgumentError, match="init_value"):
        exclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS, init_value=cp.zeros(2, np.int32), num_items=10)
    with pytest.raises(ArgumentError, match="init_value"):
        exclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS, init_value=cp.zeros(1, np.int64), num_items=10)


# ------------------------------------------------------------------ mixed types

MIXED = [("int8", "int32"), ("int32", "float64"), ("float32", "float64"), ("bool", "int32"), ("uint8", "int64"),
         ("int32", "int64")]


@pytest.mark.parametrize("src,dst", MIXED)
def test_mixed_input_and_output_types(src, dst):
    n = (1 << 20) + 7
    rng = np.random.default_rng(10)
    a = (rng.random(n) < 0.5) if src == "bool" else rng.integers(90, 120, n).astype(src)  # overflows int8 sums
    x, out = cp.asarray(a), cp.empty(n, dst)
    exclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS, init_value=np.dtype(dst).type(3), num_items=n)
    inc = np.cumsum(a.astype(dst), dtype=dst)
    _check_equal(cp.asnumpy(out), np.concatenate([[3], inc[:-1] + 3]).astype(dst))


# ------------------------------------------------------------------ API behaviour

def test_object_api_temp_storage_query_launches_nothing():
    n = 1 << 20
    x, out = cp.ones(n, np.int32), cp.full(n, -1, np.int32)
    scan = make_inclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS)
    nbytes = scan(temp_storage=None, d_in=x, d_out=out, op=OpKind.PLUS, init_value=None, num_items=n)
    assert isinstance(nbytes, int) and nbytes >= 1
    cp.cuda.Device().synchronize()
    assert int(out[0]) == -1 and int(out[-1]) == -1
    with pytest.raises(ArgumentError, match="temp_storage"):
        scan(temp_storage=cp.empty(max(1, nbytes // 2), np.uint8), d_in=x, d_out=out, op=OpKind.PLUS,
             init_value=None, num_items=n)
    tmp = cp.empty(nbytes, np.uint8)
    scan(temp_storage=tmp, d_in=x, d_out=out, op=OpKind.PLUS, init_value=None, num_items=n)
    assert bool((out == cp.arange(1, n + 1, dtype=np.int32)).all())
    # a smaller problem fits the same storage; one tile needs none at all
    assert scan(temp_storage=None, d_in=x, d_out=out, op=OpKind.PLUS, init_value=None, num_items=1000) <= nbytes
    scan(temp_storage=tmp, d_in=x, d_out=out, op=OpKind.PLUS, init_value=None, num_items=1000)
    assert int(out[999]) == 1000


def test_temp_storage_with_odd_offset():
    """The tile states are aligned inside the given storage, wherever it starts."""
    n = 500_000
    x, out = cp.ones(n, np.float64), cp.empty(n, np.float64)
    scan = make_exclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS, init_value=np.float64(0))
    nbytes = scan(temp_storage=None, d_in=x, d_out=out, op=OpKind.PLUS, init_value=np.float64(0), num_items=n)
    raw = cp.empty(nbytes + 8, np.uint8)
    scan(temp_storage=raw[3:3 + nbytes], d_in=x, d_out=out, op=OpKind.PLUS, init_value=np.float64(0), num_items=n)
    assert bool((out == cp.arange(n, dtype=np.float64)).all())


def test_in_place_scan():
    n = (1 << 20) + 7
    a = np.random.default_rng(12).integers(-3, 4, n).astype(np.int64)
    x = cp.asarray(a)
    inclusive_scan(d_in=x, d_out=x, op=OpKind.PLUS, num_items=n)
    _check_equal(cp.asnumpy(x), np.cumsum(a))


def test_partial_num_items_leaves_the_rest():
    x = cp.arange(10_000, dtype=cp.int32)
    out = cp.full(10_000, -5, cp.int32)
    exclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS, init_value=np.int32(0), num_items=5000)
    h = cp.asnumpy(out)
    _check_equal(h[:5000], np.concatenate([[0], np.cumsum(np.arange(4999, dtype=np.int32))]).astype(np.int32))
    assert (h[5000:] == -5).all()


def test_non_default_stream_orders_work():
    n = 1 << 22
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.ones(n, np.int32)
        out = cp.zeros(n, np.int32)
    for _ in range(3):
        inclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS, num_items=n, stream=s)
        with s:
            x += 1  # ordered after the scan on the same stream
    s.synchronize()
    assert int(out[-1]) == 3 * n and int(out[0]) == 3


def test_stream_kinds_accepted():
    import torch

    x = cp.ones(5000, np.int32)
    out = cp.zeros(5000, np.int32)
    cs = cp.cuda.Stream()
    ts = torch.cuda.Stream()

    class ProtocolStream:
        def __cuda_stream__(self):
            return (0, cs.ptr)

    for stream in (cs, ts, cs.ptr, ProtocolStream(), None):
        out.fill(0)
        cp.cuda.Device().synchronize()
        exclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS, init_value=np.int32(0), num_items=5000, stream=stream)
        cp.cuda.Device().synchronize()
        assert int(out[-1]) == 4999
    with pytest.raises(ArgumentError, match="stream"):
        inclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS, num_items=5000, stream="s0")


def test_torch_and_dlpack_arrays():
    import torch

    t = torch.arange(10_000, dtype=torch.float64, device="cuda")
    tout = torch.empty_like(t)
    inclusive_scan(d_in=t, d_out=tout, op=OpKind.PLUS, num_items=t.numel())
    assert torch.equal(tout, torch.cumsum(t, 0))

    class DLPackOnly:
        def __init__(self, arr):
            self._arr = arr

        def __dlpack__(self, stream=None):
            return self._arr.__dlpack__()

        def __dlpack_device__(self):
            return self._arr.__dlpack_device__()

    src = cp.arange(4096, dtype=cp.uint32)
    dst = cp.zeros(4096, cp.uint32)
    inclusive_scan(d_in=DLPackOnly(src), d_out=DLPackOnly(dst), op=OpKind.MAXIMUM, num_items=4096)
    assert bool((dst == src).all())


def test_aot_build_then_run_on_device():
    cc = _cc()
    scan = make_exclusive_scan(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32),
                               op=OpKind.MAXIMUM, init_value=cuprims.ProxyValue(np.float32), compute_capability=cc)
    a = np.random.default_rng(13).integers(-1000, 1000, 123_457).astype(np.float32)
    x, out = cp.asarray(a), cp.empty(a.size, np.float32)
    init = np.float32(-np.inf)
    tmp = cp.empty(scan(temp_storage=None, d_in=x, d_out=out, op=OpKind.MAXIMUM, init_value=init,
                        num_items=a.size), np.uint8)
    scan(temp_storage=tmp, d_in=x, d_out=out, op=OpKind.MAXIMUM, init_value=init, num_items=a.size)
    _check_equal(cp.asnumpy(out), np.concatenate([[-np.inf], np.maximum.accumulate(a)[:-1]]).astype(np.float32))


def test_bad_arguments_on_device():
    x = cp.arange(10, dtype=cp.float32)
    out = cp.zeros(10, cp.float32)
    with pytest.raises(ArgumentError, match="d_out"):
        inclusive_scan(d_in=x, d_out=cp.zeros(9, cp.float32), op=OpKind.PLUS, num_items=10)
    with pytest.raises(ArgumentError, match="d_in"):
        inclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS, num_items=11)
    with pytest.raises(ArgumentError, match="num_items"):
        inclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS, num_items=-1)
    with pytest.raises(ArgumentError, match="init_value"):
        exclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS, init_value=None, num_items=10)
    with pytest.raises(ArgumentError, match="contiguous"):
        inclusive_scan(d_in=cp.arange(20, dtype=cp.float32)[::2], d_out=out, op=OpKind.PLUS, num_items=10)
    scan = make_inclusive_scan(d_in=x, d_out=out, op=OpKind.PLUS)
    with pytest.raises(ArgumentError, match="d_in"):
        scan(temp_storage=None, d_in=cp.arange(10, dtype=cp.float64), d_out=out, op=OpKind.PLUS, init_value=None,
             num_items=10)


def test_int64_transform_iterator_scanned_into_int32():
    # numba types x * x of int32 as int64; the scan adds in its output's int32, the items converted to it
    h = np.random.default_rng(11).integers(0, 100, 200_003).astype(np.int32)
    out = cp.empty(h.size, np.int32)
    cuprims.inclusive_scan(d_in=cuprims.TransformIterator(cp.asarray(h), lambda x: x * x), d_out=out, op=OpKind.PLUS,
                           num_items=h.size)
    np.testing.assert_array_equal(out.get(), np.cumsum(h.astype(np.int64) ** 2).astype(np.int32))
