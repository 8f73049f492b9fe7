"""Unary and binary transforms without a GPU: generated source (goldens), which built-in
operators and type combinations are accepted, ahead-of-time builds for sm_90 and sm_80
(CUB's transform kernel, its exported policy and its parameter layout read back from the
cubin), the host dispatch's launch sizing, and argument errors.

Regenerate the golden sources after an intended codegen change with::

    CUPRIMS_UPDATE_GOLDENS=1 python -m pytest tests/cpu/algorithms/test_transform.py
"""

from __future__ import annotations


import numpy as np
import pytest

from cuprims import OpKind, ProxyArray
from cuprims._codegen.common import preamble
from cuprims._compile.source import Source
from cuprims._value_types import value_type
from cuprims.algorithms.skeleton import functor_size
from cuprims.algorithms.transform import source as cgt
from cuprims.algorithms.transform import api as tr
from cuprims.algorithms.transform.api import make_binary_transform, make_unary_transform, unary_transform
from cuprims.errors import ArgumentError, ArgumentTypeError, CuprimsError, NoDeviceError
from cuprims.op import OpSpec, op_spec
from cpu_helpers import counters, delta
from cpu_helpers import FakeDeviceArray, check_golden, kernel_param_sizes, pack_sizes, render_source
from twins import Pixel

ELF = b"\x7fELF"


def vt(x):
    return value_type(x)


# ------------------------------------------------------------------ reading cubins

# ------------------------------------------------------------------ golden sources

PY = OpSpec("python", "0" * 64, name="my_op")
RAW_STATE = OpSpec("raw", "1" * 64, state_size=12, state_alignment=4, name="my_raw_op")

SPECS = {
    "transform_unary_f4_python_sm90": dict(inputs=("f4",), out="f4", op=PY, arch=90),
    "transform_unary_i1_to_f4_negate_sm90": dict(inputs=("i1",), out="f4", op=op_spec(OpKind.NEGATE), arch=90),
    "transform_unary_b1_bit_not_sm90": dict(inputs=("b1",), out="b1", op=op_spec(OpKind.BIT_NOT), arch=90),
    "transform_unary_struct_python_sm90": dict(inputs=(Pixel,), out=Pixel, op=PY, arch=90),
    "transform_binary_i1_f4_to_f8_plus_sm90": dict(inputs=("i1", "f4"), out="f8", op=op_spec(OpKind.PLUS), arch=90),
    "transform_binary_f4_f4_to_b1_less_sm80": dict(inputs=("f4", "f4"), out="b1", op=op_spec(OpKind.LESS), arch=80),
    "transform_binary_i4_raw_state_sm90": dict(inputs=("i4", "i4"), out="i4", op=RAW_STATE, arch=90),
    "transform_binary_u2_i2_minimum_sm90": dict(inputs=("u2", "i2"), out="i8", op=op_spec(OpKind.MINIMUM),
                                                arch=90),
}


def _generate(spec: dict) -> Source:
    return cgt.transform_source(inputs=tuple(vt(x) for x in spec["inputs"]), out=vt(spec["out"]), op=spec["op"],
                                arch=spec["arch"])


def test_source_shape():
    src = _generate(SPECS["transform_unary_f4_python_sm90"])
    assert src.extern_symbols == ("cuprims_op_0",)
    assert 'extern "C" __device__ void cuprims_op_0(void*, void*);' in src.text
    assert src.meta_fields == cgt.META_FIELDS
    (name,) = src.name_expressions
    assert "transform_kernel<cuprims_selector_t, ::cuda::std::int64_t" in name  # 64-bit offsets
    assert name.endswith("float*, const float*>")
    binary = _generate(SPECS["transform_binary_i1_f4_to_f8_plus_sm90"])
    assert binary.extern_symbols == ()
    assert binary.name_expressions[0].endswith("double*, const signed char*, const float*>")
    # the common type of int8 and float32 is float32: both operands are converted to it
    assert "const float x = static_cast<float>(a);" in binary.text
    raw = _generate(SPECS["transform_binary_i4_raw_state_sm90"])
    assert raw.extern_symbols == ("my_raw_op",)
    assert 'extern "C" __device__ void my_raw_op(void*, void*, void*, void*);' in raw.text
    assert "unsigned char bytes[12]" in raw.text
    # a Python operator's recipe is not part of the source (one kernel per type signature)
    assert "0" * 64 not in _generate(SPECS["transform_unary_f4_python_sm90"]).text


def test_generation_is_deterministic():
    for spec in SPECS.values():
        assert _generate(spec) == _generate(spec)


# ------------------------------------------------------------------ built-in operators

SCALARS = ["b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]
UNARY = [OpKind.NEGATE, OpKind.IDENTITY, OpKind.BIT_NOT, OpKind.LOGICAL_NOT]
BINARY = [OpKind.PLUS, OpKind.MINUS, OpKind.MULTIPLIES, OpKind.DIVIDES, OpKind.MODULUS, OpKind.EQUAL_TO,
          OpKind.NOT_EQUAL_TO, OpKind.GREATER, OpKind.LESS, OpKind.GREATER_EQUAL, OpKind.LESS_EQUAL,
          OpKind.MINIMUM, OpKind.MAXIMUM, OpKind.BIT_AND, OpKind.BIT_OR, OpKind.BIT_XOR, OpKind.LOGICAL_AND,
          OpKind.LOGICAL_OR]


def _accepted(op, inputs, out) -> bool:
    try:
        cgt.check_transform_builtin(op_spec(op), tuple(vt(x) for x in inputs), vt(out))
        return True
    except ArgumentError:
        return False


@pytest.mark.parametrize("op,code,ok", [
    (OpKind.NEGATE, "f4", True), (OpKind.NEGATE, "u4", True), (OpKind.NEGATE, "c8", True),
    (OpKind.NEGATE, "b1", False),
    (OpKind.BIT_NOT, "i8", True), (OpKind.BIT_NOT, "b1", True), (OpKind.BIT_NOT, "f4", False),
    (OpKind.LOGICAL_NOT, "f2", True), (OpKind.LOGICAL_NOT, "c8", False),
    (OpKind.IDENTITY, "c16", True),
])
def test_unary_builtins(op, code, ok):
    out = code if op is not OpKind.LOGICAL_NOT else "b1"
    assert _accepted(op, (code,), out) is ok


@pytest.mark.parametrize("op,a,b,ok", [
    (OpKind.PLUS, "i1", "f4", True), (OpKind.PLUS, "b1", "b1", True), (OpKind.MINUS, "b1", "b1", False),
    (OpKind.DIVIDES, "i4", "i4", True), (OpKind.MODULUS, "i4", "u1", True), (OpKind.MODULUS, "f4", "f4", False),
    (OpKind.LESS, "c8", "c8", False), (OpKind.EQUAL_TO, "c8", "c16", True), (OpKind.MAXIMUM, "c8", "c8", False),
    (OpKind.MAXIMUM, "f2", "i1", True), (OpKind.BIT_XOR, "u8", "i8", False),  # uint64 with int64 is float64
    (OpKind.BIT_AND, "b1", "u1", True), (OpKind.LOGICAL_OR, "f4", "i4", True), (OpKind.LOGICAL_AND, "c8", "f4", False),
])
def test_binary_builtins(op, a, b, ok):
    out = "b1" if op in (OpKind.LESS, OpKind.EQUAL_TO, OpKind.LOGICAL_OR, OpKind.LOGICAL_AND) else "f8"
    if a == "c8" or b == "c8":
        out = "b1" if op is OpKind.EQUAL_TO else "c16"
    assert _accepted(op, (a, b), out) is ok


def test_arity_mismatch_explains_itself():
    with pytest.raises(ArgumentError, match="unary operator") as exc:
        cgt.check_transform_builtin(op_spec(OpKind.PLUS), (vt("f4"),), vt("f4"))
    assert exc.value.argument == "op"
    with pytest.raises(ArgumentError, match="binary operator"):
        cgt.check_transform_builtin(op_spec(OpKind.NEGATE), (vt("f4"), vt("f4")), vt("f4"))


def test_complex_result_needs_complex_output():
    with pytest.raises(ArgumentError) as exc:
        cgt.check_transform_builtin(op_spec(OpKind.PLUS), (vt("c8"), vt("f4")), vt("f4"))
    assert exc.value.argument == "d_out"
    assert _accepted(OpKind.PLUS, ("c8", "f4"), "c16")
    assert _accepted(OpKind.NOT_EQUAL_TO, ("c8", "c8"), "i4")  # bool converts to anything


def test_builtins_on_structs():
    s = vt(Pixel)
    cgt.check_transform_builtin(op_spec(OpKind.IDENTITY), (s,), s)  # a struct copy
    with pytest.raises(ArgumentError, match="struct"):
        cgt.check_transform_builtin(op_spec(OpKind.NEGATE), (s,), s)
    with pytest.raises(ArgumentError, match="struct"):
        cgt.check_transform_builtin(op_spec(OpKind.IDENTITY), (s,), vt("f4"))


def test_every_accepted_builtin_compiles(shared_cache):
    """One NVRTC unit holding the functor of every accepted (op, types) combination: each
    C++ expression the generator writes (conversions, half and complex arithmetic,
    common types) must compile. (The kernel itself is compiled by the builds below.)"""
    functors, types_used = [], set()
    outs = ["b1", "i1", "u8", "f2", "f8", "c8"]
    for i, op in enumerate(UNARY):
        for code in SCALARS:
            for out in outs:
                if _accepted(op, (code,), out):
                    functors.append(cgt.transform_functor(f"u{len(functors)}", op_spec(op), (vt(code),), vt(out),
                                                          "unused")[0])
                    types_used |= {code, out}
    pairs = [("i1", "f4"), ("u2", "i2"), ("b1", "b1"), ("f2", "f2"), ("f2", "i1"), ("c8", "f8"), ("u8", "u4"),
             ("i8", "u8"), ("c16", "c16"), ("u1", "b1")]
    for op in BINARY:
        for a, b in pairs:
            for out in outs:
                if _accepted(op, (a, b), out):
                    functors.append(cgt.transform_functor(f"b{len(functors)}", op_spec(op), (vt(a), vt(b)),
                                                          vt(out), "unused")[0])
                    types_used |= {a, b, out}
    assert len(functors) > 300
    text = preamble(tuple(vt(c) for c in sorted(types_used)), 90) + "\n".join(functors)
    from cuprims._compile.nvrtc import compile_to_ltoir

    ltoir, _ = compile_to_ltoir(Source(text, (), (), ()), 90)
    assert ltoir


# ------------------------------------------------------------------ ahead-of-time builds

def _unary_f4(cc=90, op=None):
    return make_unary_transform(d_in=ProxyArray(np.float32), d_out=ProxyArray(np.float32),
                                op=op if op is not None else (lambda x: x * 2 + 1), compute_capability=cc)


def _check_build(obj, arch, n_inputs):
    cubin = obj.cubin(arch)
    assert cubin[:4] == ELF
    result = obj._builds.result(arch)
    meta = result.meta
    assert set(meta) == set(cgt.META_FIELDS)
    assert meta["threads"] > 0 and meta["threads"] % 32 == 0
    assert 1 <= meta["min_ipt"] <= meta["max_ipt"]
    assert meta["min_bytes_in_flight"] > 0
    if meta["algorithm"] in (cgt.ALGO_UBLKCP, cgt.ALGO_LDGSTS):
        assert meta["copy_align"] in (16, 128)
        assert 0 < meta["smem_1"] < meta["smem_2"] <= meta["smem_cap"]
    ((expr, lowered),) = result.kernels.items()
    assert lowered.encode() in cubin
    # the kernel's parameters are exactly what the host packs
    sizes = kernel_param_sizes(cubin, lowered)
    kinds = ("i64", "i32", 1, 1, functor_size(obj.desc.op), "ptr") + (16,) * n_inputs
    assert obj.desc.kernel_params() == (kinds,)
    assert sizes == pack_sizes(kinds), (sizes, kinds)
    return meta


def test_unary_python_op_sm90(shared_cache):
    obj = _unary_f4()
    assert obj.compute_capabilities == [90]
    meta = _check_build(obj, 90, 1)
    # Hopper: CUB picks its bulk-copy (TMA) algorithm for a float32 -> float32 transform
    assert meta["algorithm"] == cgt.ALGO_UBLKCP
    assert meta["copy_align"] == 128
    assert meta["loaded_bytes"] == 4 and meta["out_size"] == 4 and meta["in2_size"] == 0


def test_unary_python_op_sm80(shared_cache):
    meta = _check_build(_unary_f4(cc=80), 80, 1)
    assert meta["algorithm"] == cgt.ALGO_LDGSTS
    assert meta["copy_align"] == 16


def _mixed_complex():
    """complex64 + float32 -> complex128: mixed types, a complex common type, a wider output."""
    return make_binary_transform(d_in1=ProxyArray(np.complex64), d_in2=ProxyArray(np.float32),
                                 d_out=ProxyArray(np.complex128), op=OpKind.PLUS, compute_capability=90)


def test_binary_mixed_builtin_sm90(shared_cache):
    meta = _check_build(_mixed_complex(), 90, 2)
    assert meta["loaded_bytes"] == 12 and (meta["in1_size"], meta["in2_size"], meta["out_size"]) == (8, 4, 16)


def test_struct_python_op_sm90(shared_cache):
    def brighter(p):
        return Pixel(p.r + 1, p.g * 2)

    obj = make_unary_transform(d_in=ProxyArray(Pixel.dtype), d_out=ProxyArray(Pixel.dtype), op=brighter,
                               compute_capability=90)
    meta = _check_build(obj, 90, 1)
    assert meta["loaded_bytes"] == 8 and meta["out_size"] == 8


def test_object_cache_and_no_rebuild(shared_cache, numba_ops):
    op = lambda x: x * 2 + 1  # noqa: E731
    first = _unary_f4(op=op)
    before = counters()
    again = _unary_f4(op=op)
    assert again is first  # the same object from this thread's cache
    other = _unary_f4(op=lambda x: x - 3)  # another Python op of the same types: one kernel LTO-IR
    assert other is not first
    assert delta(before) == {"numba_compiles": 1, "nvrtc_compiles": 0, "links": 1}


def test_several_compute_capabilities_at_once(shared_cache):
    obj = _unary_f4(cc=[80, 90])
    assert obj.compute_capabilities == [80, 90]
    assert obj.cubin(80) != obj.cubin(90)
    with pytest.raises(ArgumentError) as exc:
        obj.cubin(75)
    assert exc.value.argument == "compute_capability"


# ------------------------------------------------------------------ host dispatch (no GPU)

class _StubModule:
    def __init__(self, occupancy):
        self.occupancy = occupancy
        self.queries = []

    def max_active_blocks(self, name, threads, smem):
        self.queries.append(smem)
        return self.occupancy(threads, smem)


class _StubLoaded:
    def __init__(self, meta, occupancy):
        self.meta = meta
        self.names = ("kernel",)
        self.handles = ("handle",)
        self.module = _StubModule(occupancy)


UBLKCP_F4 = {"algorithm": 3, "threads": 256, "min_ipt": 1, "max_ipt": 32, "ipt_no_input": 2, "vec_ipt": 8,
             "vec_size": 4, "min_bytes_in_flight": 49152, "loaded_bytes": 4, "copy_align": 128, "smem_1": 1280,
             "smem_2": 2304, "smem_cap": 49152, "out_size": 4, "in1_size": 4, "in2_size": 0}


def test_async_plan_reaches_bytes_in_flight(monkeypatch):
    monkeypatch.setattr(tr.driver, "sm_count", lambda device: 132)
    # 8 blocks of 256 threads per SM while shared memory allows (228 KiB per SM)
    loaded = _StubLoaded(UBLKCP_F4, lambda threads, smem: min(8, (228 * 1024) // smem))
    plan = tr._Plan(loaded, 0)
    # 8 blocks x 256 threads x ipt x 4 bytes >= 48 KiB  ->  ipt = 6
    assert plan.cfg_ipt == 6 and plan.is_async and plan.align_mask == 127
    n = 1 << 28
    ipt, grid, smem, flag = plan.config(n, 0, (0,))
    assert (ipt, grid, smem, flag) == (6, -(-n // (256 * 6)), 1280 + 5 * 1024, b"\x00")
    # small problems spread over every SM with fewer items per thread
    assert plan.config(100_000, 0, (0,))[:2] == (1, -(-100_000 // 256))
    assert plan.config(1, 0, (0,))[:3] == (1, 1, 1280)
    # more than 2^31 int8 items: the grid still fits
    ipt, grid, _, _ = plan.config((1 << 31) + 5, 0, (0,))
    assert grid * 256 * ipt >= (1 << 31) + 5 and grid < (1 << 31)


def test_async_plan_stops_where_shared_memory_ends(monkeypatch):
    monkeypatch.setattr(tr.driver, "sm_count", lambda device: 2)
    meta = dict(UBLKCP_F4, smem_1=20_000, smem_2=40_000)
    loaded = _StubLoaded(meta, lambda threads, smem: 1)
    plan = tr._Plan(loaded, 0)
    assert plan.cfg_ipt == 2  # ipt 3 would need 60,000 bytes, beyond the 48 KiB cap
    assert max(loaded.module.queries) <= 49152


def test_vectorized_plan_needs_aligned_pointers(monkeypatch):
    monkeypatch.setattr(tr.driver, "sm_count", lambda device: 108)
    meta = dict(UBLKCP_F4, algorithm=1, in1_size=1, in2_size=1, out_size=1, loaded_bytes=2, vec_ipt=16,
                vec_size=8, copy_align=0, smem_1=0, smem_2=0, min_bytes_in_flight=16384)
    plan = tr._Plan(_StubLoaded(meta, lambda threads, smem: 8), 0)
    assert not plan.is_async and plan.vectorized
    assert plan.config(1 << 20, 0x1000, (0x2000, 0x3000)) == (16, (1 << 20) // (256 * 16), 0, b"\x01")
    ipt, _, smem, flag = plan.config(1 << 20, 0x1000, (0x2001, 0x3000))  # misaligned input: prefetch path
    assert flag == b"\x00" and smem == 0 and ipt == 4  # ceil(16384 / (8 * 256 * 2))


# ------------------------------------------------------------------ argument errors

def _names(exc, name):
    assert isinstance(exc.value, CuprimsError)
    assert exc.value.argument == name, exc.value


def test_build_time_errors():
    with pytest.raises(ArgumentError) as exc:
        make_unary_transform(d_in=ProxyArray(np.float32), d_out=ProxyArray(np.float32), op=OpKind.PLUS,
                             compute_capability=90)
    _names(exc, "op")
    with pytest.raises(ArgumentError) as exc:
        make_binary_transform(d_in1=ProxyArray(np.complex64), d_in2=ProxyArray(np.float32),
                              d_out=ProxyArray(np.float32), op=OpKind.PLUS, compute_capability=90)
    _names(exc, "d_out")
    with pytest.raises(ArgumentError) as exc:
        make_unary_transform(d_in=ProxyArray(np.float32), d_out=ProxyArray(np.float32), op=OpKind.STATELESS,
                             compute_capability=90)
    _names(exc, "op")
    with pytest.raises(ArgumentTypeError) as exc:
        make_unary_transform(d_in=np.zeros(4, np.float32), d_out=ProxyArray(np.float32), op=OpKind.NEGATE,
                             compute_capability=90)
    _names(exc, "d_in")
    with pytest.raises(ArgumentError) as exc:
        make_binary_transform(d_in1=ProxyArray(np.float32), d_in2=FakeDeviceArray(4, "<U3"),
                              d_out=ProxyArray(np.float32), op=OpKind.PLUS, compute_capability=90)
    _names(exc, "d_in2")
    with pytest.raises(ArgumentError) as exc:
        _unary_f4(cc="sm_x")
    _names(exc, "compute_capability")
    with pytest.raises(TypeError):
        make_unary_transform(ProxyArray(np.float32), ProxyArray(np.float32), OpKind.NEGATE)  # keyword-only


def test_no_gpu_without_compute_capability():
    with pytest.raises(NoDeviceError, match="compute_capability"):
        unary_transform(d_in=FakeDeviceArray(4), d_out=FakeDeviceArray(4), op=OpKind.NEGATE, num_items=4)


@pytest.fixture
def negate(shared_cache):
    # (a Python op: it reuses the kernel compiled for test_unary_python_op_sm90)
    return _unary_f4(op=lambda x: -x)


@pytest.mark.parametrize("overrides,name", [
    (dict(d_in=FakeDeviceArray(10, "<f8")), "d_in"),          # dtype differs from the build
    (dict(d_in=FakeDeviceArray(5)), "d_in"),                  # too short
    (dict(d_out=FakeDeviceArray(5)), "d_out"),                # too short
    (dict(d_out=FakeDeviceArray(10, "<i4")), "d_out"),
    (dict(d_in=np.zeros(10, np.float32)), "d_in"),            # host memory
    (dict(num_items=-1), "num_items"),
    (dict(num_items=2.5), "num_items"),
    (dict(stream="default"), "stream"),
])
def test_call_arguments_checked(negate, overrides, name):
    args = dict(d_in=FakeDeviceArray(10), d_out=FakeDeviceArray(10), op=None, num_items=10)
    args.update(overrides)
    with pytest.raises(ArgumentError) as exc:
        negate(**args)
    _names(exc, name)


def test_empty_call_launches_nothing(negate):
    # no GPU here: a call with no items must not touch the driver
    negate(d_in=FakeDeviceArray(0), d_out=FakeDeviceArray(0), op=None, num_items=0)
    with pytest.raises(NoDeviceError):
        negate(d_in=FakeDeviceArray(1), d_out=FakeDeviceArray(1), op=None, num_items=1)


def test_binary_call_arguments(shared_cache):
    obj = _mixed_complex()
    args = dict(d_in1=FakeDeviceArray(8, "<c8"), d_in2=FakeDeviceArray(8, "<f4"), d_out=FakeDeviceArray(8, "<c16"),
                op=OpKind.PLUS, num_items=8)
    with pytest.raises(ArgumentError) as exc:
        obj(**dict(args, d_in2=FakeDeviceArray(8, "|i1")))
    _names(exc, "d_in2")
    with pytest.raises(ArgumentError) as exc:
        obj(**dict(args, d_in1=FakeDeviceArray(3, "<c8")))
    _names(exc, "d_in1")
    # cuda::std::complex<T> is aligned to its whole size (numpy's only to T's)
    with pytest.raises(ArgumentError, match="aligned to 8") as exc:
        obj(**dict(args, d_in1=FakeDeviceArray(8, "<c8", ptr=0x7F0000000004)))
    _names(exc, "d_in1")
    with pytest.raises(ArgumentError, match="aligned to 16") as exc:
        obj(**dict(args, d_out=FakeDeviceArray(8, "<c16", ptr=0x7F0000000008)))
    _names(exc, "d_out")
    obj(**dict(args, num_items=0))  # nothing to do: no GPU needed


@pytest.mark.parametrize("name", sorted(SPECS))
def test_golden_source(name):
    src = _generate(SPECS[name])
    assert _generate(SPECS[name]) == src  # deterministic
    check_golden(name, render_source(src))
