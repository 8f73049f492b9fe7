"""Unary and binary transforms on a GPU against numpy (and CuPy for the largest sizes):
edge sizes, more than 2^31 items, unaligned views (the bulk-copy kernel's head and tail
paths), built-in operators with mixed types, Python operators, structs, RawOps,
producers, streams and in-place use."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import cuprims
from cuprims import OpKind, ProxyArray
from cuprims.algorithms.transform.api import (binary_transform, make_binary_transform, make_unary_transform,
                                              unary_transform)
from side_streams import side_stream
from twins import Pixel

cp = pytest.importorskip("cupy")


def affine(x):
    return x * 2 + 1


def _bright(p):
    return Pixel(p.r + 1, p.g * 2)


def _add_pixels(p, q):
    return Pixel(p.r + q.r, p.g + q.g)


def _scale_half(v):
    return v * 0.5


def _inc(v):
    return v + 1


INT_BINARY = [OpKind.PLUS, OpKind.MINUS, OpKind.MULTIPLIES, OpKind.DIVIDES, OpKind.MODULUS, OpKind.EQUAL_TO,
              OpKind.NOT_EQUAL_TO, OpKind.GREATER, OpKind.LESS, OpKind.GREATER_EQUAL, OpKind.LESS_EQUAL,
              OpKind.MINIMUM, OpKind.MAXIMUM, OpKind.BIT_AND, OpKind.BIT_OR, OpKind.BIT_XOR, OpKind.LOGICAL_AND,
              OpKind.LOGICAL_OR]
BOOL_RESULT = {OpKind.EQUAL_TO, OpKind.NOT_EQUAL_TO, OpKind.GREATER, OpKind.LESS, OpKind.GREATER_EQUAL,
               OpKind.LESS_EQUAL, OpKind.LOGICAL_AND, OpKind.LOGICAL_OR}

MIXED = [  # (in1, in2, out, op)
    ("int8", "float32", "float64", OpKind.PLUS),
    ("uint16", "int16", "int64", OpKind.MINIMUM),
    ("float32", "float32", "bool", OpKind.LESS),
    ("complex64", "float32", "complex128", OpKind.MULTIPLIES),
    ("uint8", "uint8", "int32", OpKind.MINUS),  # wraps in uint8 (the common type), then widens
    ("float64", "float32", "float16", OpKind.DIVIDES),
]
UNARY = [  # (in, out, op)
    ("float32", "float32", OpKind.NEGATE),
    ("int8", "float32", OpKind.NEGATE),
    ("float64", "float32", OpKind.IDENTITY),
    ("uint8", "uint8", OpKind.BIT_NOT),
    ("bool", "bool", OpKind.BIT_NOT),
    ("int32", "bool", OpKind.LOGICAL_NOT),
    ("float16", "float16", OpKind.NEGATE),
    ("complex64", "complex64", OpKind.NEGATE),
]


def _arch() -> int:
    return int(cp.cuda.Device().compute_capability)


@pytest.fixture(scope="module", autouse=True)
def prebuild():
    """Build what the tests below use, concurrently (NVRTC runs outside the GIL)."""
    cc = _arch()
    P = ProxyArray
    jobs = [
        lambda: make_unary_transform(d_in=P(np.float32), d_out=P(np.float32), op=affine, compute_capability=cc),
        lambda: make_unary_transform(d_in=P(np.int8), d_out=P(np.int8), op=_inc, compute_capability=cc),
        lambda: make_unary_transform(d_in=P(np.int8), d_out=P(np.float32), op=_scale_half, compute_capability=cc),
        lambda: make_unary_transform(d_in=P(Pixel.dtype), d_out=P(Pixel.dtype), op=_bright, compute_capability=cc),
        lambda: make_binary_transform(d_in1=P(Pixel.dtype), d_in2=P(Pixel.dtype), d_out=P(Pixel.dtype),
                                      op=_add_pixels, compute_capability=cc),
    ]
    for op in INT_BINARY:
        out = np.bool_ if op in BOOL_RESULT else np.int32
        jobs.append(lambda op=op, out=out: make_binary_transform(d_in1=P(np.int32), d_in2=P(np.int32), d_out=P(out),
                                                                 op=op, compute_capability=cc))
    for a, b, out, op in MIXED:
        jobs.append(lambda a=a, b=b, out=out, op=op: make_binary_transform(
            d_in1=P(a), d_in2=P(b), d_out=P(out), op=op, compute_capability=cc))
    for a, out, op in UNARY:
        jobs.append(lambda a=a, out=out, op=op: make_unary_transform(d_in=P(a), d_out=P(out), op=op,
                                                                     compute_capability=cc))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda job: job(), jobs))


def _random(n, dtype, seed, lo=-100, hi=100):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(n) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(lo, info.min), min(hi, info.max), n, endpoint=True).astype(dt)
    if dt.kind == "c":
        return (rng.random(n) * 2 - 1 + 1j * (rng.random(n) * 2 - 1)).astype(dt)
    return (rng.random(n) * 2 - 1).astype(dt)


# ------------------------------------------------------------------ sizes

@pytest.mark.parametrize("n", [0, 1, 31, 1000, 256 * 6 + 1, (1 << 20) + 7, 1 << 28])
def test_unary_python_op_sizes(n):
    if n >= 1 << 22:
        x = cp.random.default_rng(n).random(n, dtype=cp.float32)
    else:
        x = cp.asarray(_random(n, np.float32, n))
    y = cp.full(n + 3, -7, np.float32)
    unary_transform(d_in=x, d_out=y, op=affine, num_items=n)
    # numba computes x * 2 + 1 in float64 and rounds once to float32; exact for these inputs
    want = (x.astype(cp.float64) * 2 + 1).astype(cp.float32)
    assert bool(cp.array_equal(y[:n], want))
    assert bool((y[n:] == -7).all())  # nothing written past num_items


@pytest.mark.big_memory
def test_int8_more_than_2_31_items():
    n = (1 << 31) + 4099
    x = cp.zeros(n, cp.int8)
    x[::(1 << 20)] = 5
    x[-3000:] = cp.arange(3000, dtype=cp.int32).astype(cp.int8)
    y = cp.full(n, 9, cp.int8)
    unary_transform(d_in=x, d_out=y, op=_inc, num_items=n)
    want = x + np.int8(1)
    assert bool(cp.array_equal(y, want))
    del want
    # a one-short call leaves the last item alone
    y[-1] = 100
    unary_transform(d_in=x, d_out=y, op=_inc, num_items=n - 1)
    assert int(y[-1]) == 100


@pytest.mark.parametrize("n", [1000, (1 << 22) + 5])
@pytest.mark.parametrize("shift_in,shift_out", [(1, 0), (0, 3), (5, 7), (31, 1)])
def test_unaligned_views(n, shift_in, shift_out):
    base_in = cp.asarray(_random(n + 64, np.float32, 11))
    base_out = cp.zeros(n + 64, np.float32)
    x, y = base_in[shift_in:shift_in + n], base_out[shift_out:shift_out + n]
    unary_transform(d_in=x, d_out=y, op=affine, num_items=n)
    assert bool(cp.array_equal(y, (x.astype(cp.float64) * 2 + 1).astype(cp.float32)))
    assert bool((base_out[:shift_out] == 0).all()) and bool((base_out[shift_out + n:] == 0).all())


def test_binary_unaligned_mixed_views():
    n = (1 << 21) + 77
    a = cp.asarray(_random(n + 16, np.int8, 12))[3:3 + n]
    b = cp.asarray(_random(n + 16, np.float32, 13))[5:5 + n]
    y = cp.empty(n + 1, np.float64)[1:]
    binary_transform(d_in1=a, d_in2=b, d_out=y, op=OpKind.PLUS, num_items=n)
    want = (a.astype(cp.float32) + b).astype(cp.float64)  # computed in float32 (the common type)
    assert bool(cp.array_equal(y, want))


# ------------------------------------------------------------------ built-in operators

def _int_reference(op, a, b):
    if op in (OpKind.DIVIDES, OpKind.MODULUS):
        rem = np.fmod(a, b)  # C semantics: truncating division, remainder takes the dividend's sign
        return ((a - rem) // b).astype(np.int32) if op is OpKind.DIVIDES else rem.astype(np.int32)
    fn = {OpKind.PLUS: np.add, OpKind.MINUS: np.subtract, OpKind.MULTIPLIES: np.multiply, OpKind.EQUAL_TO: np.equal,
          OpKind.NOT_EQUAL_TO: np.not_equal, OpKind.GREATER: np.greater, OpKind.LESS: np.less,
          OpKind.GREATER_EQUAL: np.greater_equal, OpKind.LESS_EQUAL: np.less_equal, OpKind.MINIMUM: np.minimum,
          OpKind.MAXIMUM: np.maximum, OpKind.BIT_AND: np.bitwise_and, OpKind.BIT_OR: np.bitwise_or,
          OpKind.BIT_XOR: np.bitwise_xor, OpKind.LOGICAL_AND: np.logical_and, OpKind.LOGICAL_OR: np.logical_or}[op]
    return fn(a, b)


@pytest.mark.parametrize("op", INT_BINARY, ids=lambda o: o.name)
def test_int32_binary_builtins(op):
    n = 100_003
    a = _random(n, np.int32, 1, -50_000, 50_000)
    b = _random(n, np.int32, 2, -50, 50)
    a[:50] = 0
    b[b == 0] = 7  # no division by zero
    out_dt = np.bool_ if op in BOOL_RESULT else np.int32
    y = cp.empty(n, out_dt)
    binary_transform(d_in1=cp.asarray(a), d_in2=cp.asarray(b), d_out=y, op=op, num_items=n)
    np.testing.assert_array_equal(cp.asnumpy(y), _int_reference(op, a, b).astype(out_dt))


@pytest.mark.parametrize("a_dt,b_dt,out_dt,op", MIXED, ids=lambda v: getattr(v, "name", str(v)))
def test_mixed_type_builtins(a_dt, b_dt, out_dt, op):
    n = 50_001
    a, b = _random(n, a_dt, 3), _random(n, b_dt, 4)
    if op is OpKind.DIVIDES:
        b[b == 0] = 1
    y = cp.empty(n, out_dt)
    binary_transform(d_in1=cp.asarray(a), d_in2=cp.asarray(b), d_out=y, op=op, num_items=n)
    c = np.result_type(a.dtype, b.dtype)
    ca, cb = a.astype(c), b.astype(c)
    fn = {OpKind.PLUS: np.add, OpKind.MINIMUM: np.minimum, OpKind.LESS: np.less, OpKind.MULTIPLIES: np.multiply,
          OpKind.MINUS: np.subtract, OpKind.DIVIDES: np.divide}[op]
    with np.errstate(over="ignore"):
        want = fn(ca, cb).astype(c).astype(out_dt)
    got = cp.asnumpy(y)
    if np.dtype(out_dt).kind in "fc":
        np.testing.assert_allclose(got, want, rtol=1e-3 if np.dtype(out_dt).itemsize <= 2 else 1e-6)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("in_dt,out_dt,op", UNARY, ids=lambda v: getattr(v, "name", str(v)))
def test_unary_builtins(in_dt, out_dt, op):
    n = 70_001
    a = _random(n, in_dt, 5, -128, 127)
    if np.dtype(in_dt) == np.int8:
        a[:3] = [-128, 127, 0]
    y = cp.empty(n, out_dt)
    unary_transform(d_in=cp.asarray(a), d_out=y, op=op, num_items=n)
    if op is OpKind.NEGATE:
        with np.errstate(over="ignore"):
            want = (-a).astype(out_dt)  # in the input's type first (int8: -(-128) wraps to -128)
    elif op is OpKind.BIT_NOT:
        want = ~a
    elif op is OpKind.LOGICAL_NOT:
        want = np.logical_not(a)
    else:
        want = a.astype(out_dt)
    np.testing.assert_array_equal(cp.asnumpy(y), want.astype(out_dt))


# ------------------------------------------------------------------ Python operators, structs, RawOp

def test_python_op_with_mixed_types():
    a = _random(123_457, np.int8, 6, -128, 127)
    y = cp.empty(a.size, np.float32)
    unary_transform(d_in=cp.asarray(a), d_out=y, op=_scale_half, num_items=a.size)
    np.testing.assert_array_equal(cp.asnumpy(y), a.astype(np.float32) * np.float32(0.5))


def test_closure_over_a_scalar():
    a = _random(10_000, np.float64, 7)
    x, y = cp.asarray(a), cp.empty(a.size, np.float64)
    for k in (2.0, -3.5):
        unary_transform(d_in=x, d_out=y, op=lambda v: v * k, num_items=a.size)
        np.testing.assert_array_equal(cp.asnumpy(y), a * k)


def _pixels(n, seed):
    rng = np.random.default_rng(seed)
    h = np.empty(n, Pixel.dtype)
    h["r"] = rng.integers(-1000, 1000, n)
    h["g"] = rng.random(n).astype(np.float32)
    return h


@pytest.mark.parametrize("n", [1, 1000, (1 << 20) + 3])
def test_struct_unary_and_binary(n):
    h, k = _pixels(n, 8), _pixels(n, 9)
    x, z = cp.asarray(h.view(np.uint8)).view(Pixel.dtype), cp.asarray(k.view(np.uint8)).view(Pixel.dtype)
    y = cp.empty(n, Pixel.dtype)
    unary_transform(d_in=x, d_out=y, op=_bright, num_items=n)
    got = cp.asnumpy(y.view(np.uint8)).view(Pixel.dtype)
    np.testing.assert_array_equal(got["r"], h["r"] + 1)
    np.testing.assert_array_equal(got["g"], h["g"] * np.float32(2))
    binary_transform(d_in1=x, d_in2=z, d_out=y, op=_add_pixels, num_items=n)
    got = cp.asnumpy(y.view(np.uint8)).view(Pixel.dtype)
    np.testing.assert_array_equal(got["r"], h["r"] + k["r"])
    np.testing.assert_array_equal(got["g"], h["g"] + k["g"])


def test_struct_identity_copy():
    h = _pixels(5000, 10)
    x = cp.asarray(h.view(np.uint8)).view(Pixel.dtype)
    y = cp.zeros(5000, Pixel.dtype)
    unary_transform(d_in=x, d_out=y, op=OpKind.IDENTITY, num_items=5000)
    assert bytes(cp.asnumpy(y.view(np.uint8))) == bytes(h.view(np.uint8))


def test_raw_ops_unary_binary_and_stateful():
    from numba import cuda, types

    cc = divmod(_arch(), 10)

    def neg(pa, pr):
        pr[0] = -pa[0]

    def sub(pa, pb, pr):
        pr[0] = pa[0] - pb[0]

    def scaled(ps, pa, pr):  # state: one float64 factor
        pr[0] = pa[0] * ps[0]

    f8p = types.CPointer(types.float64)
    neg_ir, _ = cuda.compile(neg, types.void(f8p, f8p), device=True, abi="c", abi_info={"abi_name": "t_neg"},
                             output="ltoir", cc=cc)
    sub_ir, _ = cuda.compile(sub, types.void(f8p, f8p, f8p), device=True, abi="c", abi_info={"abi_name": "t_sub"},
                             output="ltoir", cc=cc)
    sc_ir, _ = cuda.compile(scaled, types.void(f8p, f8p, f8p), device=True, abi="c",
                            abi_info={"abi_name": "t_scaled"}, output="ltoir", cc=cc)
    a, b = _random(9999, np.float64, 11), _random(9999, np.float64, 12)
    x, z, y = cp.asarray(a), cp.asarray(b), cp.empty(9999, np.float64)
    unary_transform(d_in=x, d_out=y, op=cuprims.RawOp(ltoir=neg_ir, name="t_neg"), num_items=a.size)
    np.testing.assert_array_equal(cp.asnumpy(y), -a)
    binary_transform(d_in1=x, d_in2=z, d_out=y, op=cuprims.RawOp(ltoir=sub_ir, name="t_sub"), num_items=a.size)
    np.testing.assert_array_equal(cp.asnumpy(y), a - b)
    op3 = cuprims.RawOp(ltoir=sc_ir, name="t_scaled", state=np.float64(3).tobytes(), state_alignment=8)
    obj = make_unary_transform(d_in=x, d_out=y, op=op3)
    obj(d_in=x, d_out=y, op=op3, num_items=a.size)
    np.testing.assert_array_equal(cp.asnumpy(y), a * 3)
    # new state at call time, same compiled code
    op4 = cuprims.RawOp(ltoir=sc_ir, name="t_scaled", state=np.float64(-2).tobytes(), state_alignment=8)
    obj(d_in=x, d_out=y, op=op4, num_items=a.size)
    np.testing.assert_array_equal(cp.asnumpy(y), a * -2)


# ------------------------------------------------------------------ API behaviour

def test_object_api_and_in_place():
    a = _random(300_001, np.float32, 13)
    x = cp.asarray(a)
    obj = make_unary_transform(d_in=x, d_out=x, op=affine)
    obj(d_in=x, d_out=x, op=affine, num_items=a.size)  # in place
    obj(d_in=x, d_out=x, op=affine, num_items=a.size)
    want = ((a.astype(np.float64) * 2 + 1).astype(np.float32).astype(np.float64) * 2 + 1).astype(np.float32)
    np.testing.assert_array_equal(cp.asnumpy(x), want)
    assert make_unary_transform(d_in=x, d_out=x, op=affine) is obj


def test_streams_and_producers():
    import torch

    n = 1 << 20
    t = torch.arange(n, dtype=torch.float32, device="cuda")
    tout = torch.empty_like(t)
    ts = torch.cuda.Stream()
    ts.wait_stream(torch.cuda.current_stream())  # t and tout were made on the current stream
    with torch.cuda.stream(ts):
        unary_transform(d_in=t, d_out=tout, op=affine, num_items=n, stream=ts)
    ts.synchronize()
    assert torch.equal(tout, t * 2 + 1)
    x = cp.zeros(n, np.float32)
    y = cp.empty(n, np.float32)
    s = side_stream()                               # x's zeros (on the current stream) come first
    with s:
        x += 1
        unary_transform(d_in=x, d_out=y, op=affine, num_items=n, stream=s)  # ordered after x += 1
        s.synchronize()
    assert bool((y == 3).all())
    for stream in (s.ptr, None):
        unary_transform(d_in=x, d_out=y, op=affine, num_items=n, stream=stream)
    cp.cuda.Device().synchronize()
    assert bool((y == 3).all())


def test_bad_arguments_on_device():
    x = cp.zeros(10, np.float32)
    with pytest.raises(cuprims.errors.ArgumentError, match="d_out"):
        unary_transform(d_in=x, d_out=cp.zeros(5, np.float32), op=affine, num_items=10)
    with pytest.raises(cuprims.errors.ArgumentError, match="d_in"):
        obj = make_unary_transform(d_in=x, d_out=x, op=affine)
        obj(d_in=cp.zeros(10, np.float64), d_out=x, op=affine, num_items=10)
