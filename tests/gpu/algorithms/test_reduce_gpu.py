"""Reduction results on a GPU against numpy: every dtype, edge sizes, op kinds, Python ops,
array producers and streams."""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import cuprims
from cuprims import OpKind

cp = pytest.importorskip("cupy")

SIZES = [0, 1, 31, 1000, (1 << 20) + 7, 1 << 28]
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


def _op_for(dtype: np.dtype):
    """The op checked at every size for this dtype, and its numpy reference."""
    if dtype.kind == "b":
        return OpKind.LOGICAL_OR, lambda a: np.logical_or.reduce(a), np.bool_(False)
    if dtype.kind == "f" and dtype.itemsize == 2:
        return OpKind.MAXIMUM, lambda a: a.max(), np.float16(-np.inf)
    return OpKind.PLUS, lambda a: a.sum(dtype=dtype), dtype.type(0)


def _random(n: int, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    if dtype.kind == "b":
        return rng.random(n) < (1.0 / max(n, 1))  # sparse trues: OR is not trivially True
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = max(info.min, -1000), min(info.max, 1000)
        return rng.integers(lo, hi, n, endpoint=True).astype(dtype)
    if dtype.kind == "f":
        return (rng.random(n) * 2 - 1).astype(dtype)
    return ((rng.random(n) * 2 - 1) + 1j * (rng.random(n) * 2 - 1)).astype(dtype)


def _device_random(n: int, dtype: np.dtype, seed: int) -> "cp.ndarray":
    """Large inputs are generated on the device (host RNG at 2^28 is slow)."""
    if n < (1 << 22):
        return cp.asarray(_random(n, dtype, np.random.default_rng(seed)))
    r = cp.random.default_rng(seed)
    if dtype.kind == "b":
        return r.random(n, dtype=cp.float32) < (1.0 / n)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = max(int(info.min), -1000), min(int(info.max), 1000)
        return r.integers(lo, hi + 1, n, dtype=cp.int64).astype(dtype)
    if dtype.kind == "f":
        return (r.random(n, dtype=cp.float32) * 2 - 1).astype(dtype)
    re = r.random(n, dtype=cp.float32) * 2 - 1
    im = r.random(n, dtype=cp.float32) * 2 - 1
    return (re + 1j * im).astype(dtype)


def _check(got, want, dtype: np.dtype, host: np.ndarray) -> None:
    if dtype.kind in "biu" or (dtype.kind == "f" and dtype.itemsize == 2):
        assert got == want, (got, want)
        return
    component = dtype.itemsize if dtype.kind == "f" else dtype.itemsize // 2
    eps = {4: 1e-6, 8: 1e-14}[component]
    # a reduction tree's rounding error is bounded by eps * depth * sum|x|; this is looser
    # than that bound's typical value but catches any wrong or missing partial sum.
    bound = eps * 64 * (float(np.abs(host).sum(dtype=np.float64)) + 1.0)
    assert abs(complex(got) - complex(want)) <= bound, (got, want, bound)


def op_ref_with_init(op, ref, host, init, dt):
    if host.size == 0:
        return init
    if op is OpKind.PLUS and dt.kind in "fc":
        return host.astype(np.complex128 if dt.kind == "c" else np.float64).sum() + init
    return ref(host)  # init is the op's identity for the other cases


@pytest.fixture(scope="module", autouse=True)
def prebuild():
    """Build the reductions used below concurrently (NVRTC runs outside the GIL)."""
    x = cp.zeros(1, np.float32)
    jobs = []
    for name in DTYPES:
        dt = np.dtype(name)
        op, _, init = _op_for(dt)
        jobs.append((dt, op, init))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda j: cuprims.make_reduce_into(
            d_in=cuprims.ProxyArray(j[0]), d_out=cuprims.ProxyArray(j[0]), op=j[1],
            h_init=cuprims.ProxyValue(j[0]), compute_capability=90), jobs))
    del x


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", DTYPES)
def test_every_dtype_and_size(name, n):
    dt = np.dtype(name)
    op, ref, init = _op_for(dt)
    x = _device_random(n, dt, seed=n + dt.itemsize)
    out = cp.full(1, 7 if dt.kind != "b" else True, dtype=dt)
    cuprims.reduce_into(d_in=x, d_out=out, num_items=n, op=op, h_init=init)
    host = cp.asnumpy(x)
    want = op_ref_with_init(op, ref, host, init, dt)
    _check(cp.asnumpy(out)[0], want, dt, host)


INT_OPS = [OpKind.PLUS, OpKind.MULTIPLIES, OpKind.MINIMUM, OpKind.MAXIMUM, OpKind.BIT_AND, OpKind.BIT_OR,
           OpKind.BIT_XOR, OpKind.LOGICAL_AND, OpKind.LOGICAL_OR]


def _int_ref(op, a: np.ndarray, init):
    fn = {
        OpKind.PLUS: lambda x, y: x + y, OpKind.MULTIPLIES: lambda x, y: x * y,
        OpKind.MINIMUM: min, OpKind.MAXIMUM: max, OpKind.BIT_AND: lambda x, y: x & y,
        OpKind.BIT_OR: lambda x, y: x | y, OpKind.BIT_XOR: lambda x, y: x ^ y,
        OpKind.LOGICAL_AND: lambda x, y: int(bool(x) and bool(y)),
        OpKind.LOGICAL_OR: lambda x, y: int(bool(x) or bool(y)),
    }[op]
    ufunc = {OpKind.PLUS: np.add, OpKind.MULTIPLIES: np.multiply, OpKind.MINIMUM: np.minimum,
             OpKind.MAXIMUM: np.maximum, OpKind.BIT_AND: np.bitwise_and, OpKind.BIT_OR: np.bitwise_or,
             OpKind.BIT_XOR: np.bitwise_xor}.get(op)
    if ufunc is not None:
        return ufunc(ufunc.reduce(a, dtype=a.dtype), init).astype(a.dtype)
    return functools.reduce(fn, (int(v) for v in a), int(init))


@pytest.mark.parametrize("op", INT_OPS, ids=lambda o: o.name)
@pytest.mark.parametrize("n", [1000, (1 << 20) + 7])
def test_integer_op_kinds(op, n):
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, n).astype(np.int32)
    if op in (OpKind.LOGICAL_AND, OpKind.LOGICAL_OR) and n > 1000:
        a = a[:1000]
        n = 1000
    if op is OpKind.MULTIPLIES:
        a = np.where(a == 0, 1, a).astype(np.int32)
    if op is OpKind.LOGICAL_AND:
        a = np.where(a == 0, 2, a).astype(np.int32)
    init = np.int32({OpKind.MULTIPLIES: 1, OpKind.BIT_AND: -1, OpKind.LOGICAL_AND: 1}.get(op, 0))
    x = cp.asarray(a)
    out = cp.zeros(1, np.int32)
    cuprims.reduce_into(d_in=x, d_out=out, num_items=n, op=op, h_init=init)
    assert int(out[0]) == int(np.int32(_int_ref(op, a, init))), op


@pytest.mark.parametrize("op", [OpKind.PLUS, OpKind.MULTIPLIES, OpKind.MINIMUM, OpKind.MAXIMUM],
                         ids=lambda o: o.name)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_op_kinds(op, dtype):
    n = 100_003
    rng = np.random.default_rng(2)
    a = (1 + (rng.random(n) - 0.5) * 1e-5).astype(dtype) if op is OpKind.MULTIPLIES else rng.random(n).astype(dtype)
    x = cp.asarray(a)
    out = cp.zeros(1, dtype)
    init = np.dtype(dtype).type({OpKind.MULTIPLIES: 1, OpKind.MINIMUM: np.inf, OpKind.MAXIMUM: -np.inf}.get(op, 0))
    cuprims.reduce_into(d_in=x, d_out=out, num_items=n, op=op, h_init=init)
    want = {OpKind.PLUS: a.sum(dtype=np.float64), OpKind.MULTIPLIES: np.prod(a, dtype=np.float64),
            OpKind.MINIMUM: a.min(), OpKind.MAXIMUM: a.max()}[op]
    # float32 products drift by ~1e-3 over 1e5 factors whatever the order (numpy's too)
    rel = (2e-3 if op is OpKind.MULTIPLIES else 1e-5) if dtype == "float32" else 1e-10
    assert float(out[0]) == pytest.approx(float(want), rel=rel)


@pytest.mark.parametrize("op", [OpKind.LOGICAL_AND, OpKind.LOGICAL_OR, OpKind.BIT_XOR, OpKind.EQUAL_TO,
                                OpKind.NOT_EQUAL_TO, OpKind.MINIMUM, OpKind.MAXIMUM], ids=lambda o: o.name)
def test_bool_op_kinds(op):
    rng = np.random.default_rng(3)
    a = rng.random(5000) < 0.5
    x = cp.asarray(a)
    out = cp.zeros(1, np.bool_)
    init = np.bool_(op in (OpKind.LOGICAL_AND, OpKind.EQUAL_TO, OpKind.MINIMUM))
    cuprims.reduce_into(d_in=x, d_out=out, num_items=a.size, op=op, h_init=init)
    ufunc = {OpKind.LOGICAL_AND: np.logical_and, OpKind.LOGICAL_OR: np.logical_or, OpKind.BIT_XOR: np.logical_xor,
             OpKind.EQUAL_TO: np.equal, OpKind.NOT_EQUAL_TO: np.not_equal, OpKind.MINIMUM: np.minimum,
             OpKind.MAXIMUM: np.maximum}[op]
    want = ufunc(ufunc.reduce(a), init)
    assert bool(out[0]) == bool(want)


def test_mixed_input_and_output_types():
    a = np.arange(100_000, dtype=np.int32)
    x = cp.asarray(a)
    out = cp.zeros(1, np.int64)
    cuprims.reduce_into(d_in=x, d_out=out, num_items=a.size, op=OpKind.PLUS, h_init=np.int64(5))
    assert int(out[0]) == int(a.sum(dtype=np.int64)) + 5


# ------------------------------------------------------------------ Python operators

def _helper_max(a, b):
    return a if a > b else b


def _calls_helper(a, b):
    return _helper_max(a, b)


@pytest.mark.parametrize("n", [1, 1000, (1 << 20) + 7])
def test_python_lambda_sum(n):
    a = np.random.default_rng(4).random(n).astype(np.float32)
    x, out = cp.asarray(a), cp.zeros(1, np.float32)
    cuprims.reduce_into(d_in=x, d_out=out, num_items=n, op=lambda p, q: p + q, h_init=np.float32(1))
    assert float(out[0]) == pytest.approx(float(a.sum(dtype=np.float64)) + 1, rel=1e-4)


def test_python_closure_over_scalars_and_helpers():
    a = np.random.default_rng(5).integers(-1000, 1000, 50_000).astype(np.int64)
    x, out = cp.asarray(a), cp.zeros(1, np.int64)
    for cap in (10, 500):
        def capped_min(p, q, cap=cap):
            return min(p, q, cap)
        cuprims.reduce_into(d_in=x, d_out=out, num_items=a.size, op=capped_min, h_init=np.int64(10**9))
        assert int(out[0]) == min(int(a.min()), cap)
        k = cap

        def closure_max(p, q):
            return max(p, q, -k)
        cuprims.reduce_into(d_in=x, d_out=out, num_items=a.size, op=closure_max, h_init=np.int64(-10**9))
        assert int(out[0]) == max(int(a.max()), -k)
    cuprims.reduce_into(d_in=x, d_out=out, num_items=a.size, op=_calls_helper, h_init=np.int64(-10**9))
    assert int(out[0]) == int(a.max())


def test_python_op_on_every_scalar_kind():
    for name in ["bool", "int8", "uint16", "int64", "float16", "float64", "complex64"]:
        dt = np.dtype(name)
        a = _random(777, dt, np.random.default_rng(6))
        x, out = cp.asarray(a), cp.zeros(1, dt)
        if dt.kind == "b":
            op, want = (lambda p, q: p or q), bool(a.any())
        elif dt.kind == "c":
            op, want = (lambda p, q: p + q), a.sum()
        else:
            op, want = (lambda p, q: p if p > q else q), a.max()
        init = dt.type(0) if dt.kind != "f" else dt.type(-np.inf)
        if dt.kind in "iu":
            init = np.iinfo(dt).min
        cuprims.reduce_into(d_in=x, d_out=out, num_items=a.size, op=op, h_init=dt.type(init))
        got = cp.asnumpy(out)[0]
        if dt.kind == "c":
            assert abs(got - want) < 1e-3, name
        else:
            assert got == want, name


def test_raw_op_from_numba_ltoir():
    from numba import cuda, types

    def add(pa, pb, pr):
        pr[0] = pa[0] + pb[0]

    ptr = types.CPointer(types.float64)
    ltoir, _ = cuda.compile(add, types.void(ptr, ptr, ptr), device=True, abi="c",
                            abi_info={"abi_name": "user_raw_add"}, output="ltoir", cc=(9, 0))
    op = cuprims.RawOp(ltoir=ltoir, name="user_raw_add")
    a = np.random.default_rng(7).random(10_000)
    x, out = cp.asarray(a), cp.zeros(1, np.float64)
    cuprims.reduce_into(d_in=x, d_out=out, num_items=a.size, op=op, h_init=np.float64(0))
    assert float(out[0]) == pytest.approx(a.sum(), rel=1e-12)


# ------------------------------------------------------------------ API behaviour

def test_object_api_temp_storage_query_launches_nothing():
    a = np.arange(1 << 20, dtype=np.float32)
    x, out = cp.asarray(a), cp.full(1, -1, np.float32)
    reducer = cuprims.make_reduce_into(d_in=x, d_out=out, op=OpKind.PLUS, h_init=np.float32(0))
    nbytes = reducer(temp_storage=None, d_in=x, d_out=out, num_items=a.size, h_init=np.float32(0))
    assert isinstance(nbytes, int) and nbytes >= 1
    cp.cuda.Device().synchronize()
    assert float(out[0]) == -1
    tmp = cp.empty(nbytes, np.uint8)
    reducer(temp_storage=tmp, d_in=x, d_out=out, num_items=a.size, h_init=np.float32(0))
    assert float(out[0]) == pytest.approx(float(a.sum(dtype=np.float64)), rel=1e-6)
    with pytest.raises(cuprims.errors.ArgumentError, match="temp_storage"):
        reducer(temp_storage=cp.empty(max(1, nbytes // 4), np.uint8), d_in=x, d_out=out, num_items=a.size,
                h_init=np.float32(0))


def test_without_init_empty_leaves_output():
    x = cp.arange(10, dtype=cp.int32)
    out = cp.full(1, 123, np.int32)
    cuprims.reduce_into(d_in=x, d_out=out, num_items=0, op=OpKind.PLUS)
    assert int(out[0]) == 123
    cuprims.reduce_into(d_in=x, d_out=out, num_items=10, op=OpKind.MAXIMUM)
    assert int(out[0]) == 9
    big = cp.arange(3_000_000, dtype=cp.int64)
    out64 = cp.zeros(1, np.int64)
    cuprims.reduce_into(d_in=big, d_out=out64, num_items=big.size, op=OpKind.PLUS)
    assert int(out64[0]) == 3_000_000 * 2_999_999 // 2


def test_non_default_stream_orders_work():
    n = 1 << 24
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.ones(n, np.float32)
        out = cp.zeros(1, np.float32)
    for _ in range(3):
        cuprims.reduce_into(d_in=x, d_out=out, num_items=n, op=OpKind.PLUS, h_init=np.float32(0), stream=s)
        with s:
            x += 1  # ordered after the reduction on the same stream
    s.synchronize()
    assert float(out[0]) == pytest.approx(3.0 * n, rel=1e-6)


def test_stream_kinds_accepted():
    import torch

    x = cp.ones(5000, np.int32)
    out = cp.zeros(1, np.int32)
    cs = cp.cuda.Stream()
    ts = torch.cuda.Stream()
    for stream in (cs, ts, cs.ptr, None):
        out.fill(0)
        cp.cuda.Device().synchronize()      # torch's stream does not wait for the fill
        cuprims.reduce_into(d_in=x, d_out=out, num_items=5000, op=OpKind.PLUS, h_init=np.int32(0), stream=stream)
        cp.cuda.Device().synchronize()
        assert int(out[0]) == 5000
    with pytest.raises(cuprims.errors.ArgumentError, match="stream"):
        cuprims.reduce_into(d_in=x, d_out=out, num_items=5000, op=OpKind.PLUS, h_init=np.int32(0), stream="s0")


def test_torch_numba_and_dlpack_inputs():
    import torch
    from numba import cuda as ncuda

    t = torch.arange(10_000, dtype=torch.float64, device="cuda")
    tout = torch.zeros(1, dtype=torch.float64, device="cuda")
    cuprims.reduce_into(d_in=t, d_out=tout, num_items=t.numel(), op=OpKind.PLUS, h_init=np.float64(0))
    assert float(tout[0]) == float(np.arange(10_000).sum())

    nd = ncuda.to_device(np.arange(1000, dtype=np.int32))
    nout = ncuda.to_device(np.zeros(1, np.int32))
    cuprims.reduce_into(d_in=nd, d_out=nout, num_items=1000, op=OpKind.MAXIMUM, h_init=np.int32(-1))
    assert int(nout.copy_to_host()[0]) == 999

    class DLPackOnly:
        def __init__(self, arr):
            self._arr = arr

        def __dlpack__(self, stream=None):
            return self._arr.__dlpack__()

        def __dlpack_device__(self):
            return self._arr.__dlpack_device__()

    src = cp.arange(4096, dtype=cp.uint32)
    dst = cp.zeros(1, cp.uint32)
    cuprims.reduce_into(d_in=DLPackOnly(src), d_out=DLPackOnly(dst), num_items=4096, op=OpKind.PLUS,
                        h_init=np.uint32(0))
    assert int(dst[0]) == 4095 * 4096 // 2


def test_determinism_modes_reproducible():
    a = np.random.default_rng(8).standard_normal(1 << 22).astype(np.float32)
    x = cp.asarray(a)
    results = {}
    for det in cuprims.Determinism:
        out = cp.zeros(1, np.float32)
        vals = set()
        for _ in range(3):
            cuprims.reduce_into(d_in=x, d_out=out, num_items=a.size, op=OpKind.PLUS, h_init=np.float32(0),
                                determinism=det)
            vals.add(cp.asnumpy(out)[0].tobytes())
        assert len(vals) == 1, det
        results[det] = float(out[0])
    for v in results.values():
        assert v == pytest.approx(float(a.sum(dtype=np.float64)), abs=1e-2)


def test_aot_build_then_run_on_device():
    reducer = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32),
                                       op=OpKind.MAXIMUM, h_init=cuprims.ProxyValue(np.float32),
                                       compute_capability=90)
    a = np.random.default_rng(9).random(123_457).astype(np.float32)
    x, out = cp.asarray(a), cp.zeros(1, np.float32)
    tmp = cp.empty(reducer(temp_storage=None, d_in=x, d_out=out, num_items=a.size, h_init=np.float32(0)), np.uint8)
    reducer(temp_storage=tmp, d_in=x, d_out=out, num_items=a.size, h_init=np.float32(0))
    assert float(out[0]) == a.max()


def test_bad_arguments_on_device():
    x = cp.arange(10, dtype=cp.float32)
    out = cp.zeros(1, cp.float32)
    with pytest.raises(cuprims.errors.ArgumentError, match="d_in"):
        cuprims.reduce_into(d_in=x, d_out=out, num_items=11, op=OpKind.PLUS, h_init=np.float32(0))
    with pytest.raises(cuprims.errors.ArgumentError, match="num_items"):
        cuprims.reduce_into(d_in=x, d_out=out, num_items=-1, op=OpKind.PLUS, h_init=np.float32(0))
    with pytest.raises(cuprims.errors.ArgumentError, match="d_in"):
        cuprims.reduce_into(d_in=np.arange(10, dtype=np.float32), d_out=out, num_items=10, op=OpKind.PLUS,
                            h_init=np.float32(0))
    with pytest.raises(cuprims.errors.ArgumentError, match="contiguous"):
        cuprims.reduce_into(d_in=cp.arange(20, dtype=cp.float32)[::2], d_out=out, num_items=10,
                            op=OpKind.PLUS, h_init=np.float32(0))
    reducer = cuprims.make_reduce_into(d_in=x, d_out=out, op=OpKind.PLUS, h_init=np.float32(0))
    with pytest.raises(cuprims.errors.ArgumentError, match="d_in"):
        reducer(temp_storage=None, d_in=cp.arange(10, dtype=cp.float64), d_out=out, num_items=10,
                h_init=np.float32(0))


# ------------------------------------------------------------------ structs

P_STRUCT = cuprims.gpu_struct({"r": np.int32, "g": np.float32}, name="P")
Q_STRUCT = cuprims.gpu_struct({"c": np.int8, "d": np.float64, "p": P_STRUCT}, name="Q")  # padding after c


def _struct_op(a, b):
    return Q_STRUCT(a.c + b.c, a.d + b.d, P_STRUCT(a.p.r + b.p.r, max(a.p.g, b.p.g)))


def _struct_data(n):
    rng = np.random.default_rng(n)
    h = np.zeros(n, Q_STRUCT.dtype)
    h["c"] = rng.integers(-3, 3, n)
    h["d"] = rng.random(n)
    h["p"]["r"] = rng.integers(-50, 50, n)
    h["p"]["g"] = rng.random(n, dtype=np.float32)
    return h


def _check_struct(r, h):
    assert r["c"] == h["c"].sum(dtype=np.int8)  # int8 wraps the same way on both sides
    assert np.isclose(r["d"], h["d"].sum())
    assert r["p"]["r"] == h["p"]["r"].sum(dtype=np.int32)
    assert r["p"]["g"] == h["p"]["g"].max()


@pytest.mark.parametrize("n", [0, 1, 1000, (1 << 20) + 7])
def test_struct_reduce_matches_numpy(n):
    h = _struct_data(max(n, 1))[:n]
    d_in = cp.asarray(h) if n else cp.zeros(0, Q_STRUCT.dtype)
    d_out = cp.empty(1, Q_STRUCT.dtype)
    init = Q_STRUCT(0, 0.0, (0, -np.inf))
    cuprims.reduce_into(d_in=d_in, d_out=d_out, num_items=n, op=_struct_op, h_init=init)
    r = d_out.get()[0]
    if n == 0:
        assert r["c"] == 0 and r["d"] == 0.0 and r["p"]["r"] == 0 and r["p"]["g"] == -np.inf
    else:
        _check_struct(r, h)


def test_struct_reduce_through_cuda_array_interface():
    from numba import cuda as ncuda

    h = _struct_data(5000)
    d_in = ncuda.to_device(h)  # read through __cuda_array_interface__ (descr with padding entries)
    d_out = ncuda.device_array(1, Q_STRUCT.dtype)
    cuprims.reduce_into(d_in=d_in, d_out=d_out, num_items=h.size, op=_struct_op,
                        h_init=Q_STRUCT(0, 0.0, (0, -np.inf)))
    _check_struct(d_out.copy_to_host()[0], h)


def test_cuda_stream_protocol_object():
    s = cp.cuda.Stream()

    class ProtocolStream:
        def __cuda_stream__(self):
            return (0, s.ptr)

    x = cp.ones(10_000, np.int64)
    out = cp.zeros(1, np.int64)
    cuprims.reduce_into(d_in=x, d_out=out, num_items=x.size, op=OpKind.PLUS, h_init=np.int64(1),
                        stream=ProtocolStream())
    s.synchronize()
    assert int(out[0]) == 10_001


def test_int64_transform_iterator_reduced_into_int32():
    # numba types x * x of int32 as int64; the reduction adds in its output's int32 (the sum stays below 2^31)
    h = np.random.default_rng(12).integers(0, 100, 500_003).astype(np.int32)
    out = cp.empty(1, np.int32)
    cuprims.reduce_into(d_in=cuprims.TransformIterator(cp.asarray(h), lambda x: x * x), d_out=out, op=OpKind.PLUS,
                        num_items=h.size, h_init=np.int32(0))
    assert int(out.get()[0]) == int((h.astype(np.int64) ** 2).sum())
