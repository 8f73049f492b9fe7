"""Device-wide scans without a GPU: ahead-of-time builds (sm_90, sm_80), the exported
metadata, kernel parameter layouts read back from the cubin, golden sources, and
argument errors raised before any GPU is needed.

Distinct NVRTC builds here: six (see BUILDS). Regenerate the golden sources after an
intended codegen change with::

    CUPRIMS_UPDATE_GOLDENS=1 python -m pytest tests/cpu/algorithms/test_scan.py -k golden
"""

from __future__ import annotations

import inspect
import struct

import numpy as np
import pytest

import cuprims
from cuprims import OpKind, ProxyArray, ProxyValue
from cuprims._runtime import driver
from cuprims._runtime import launch as launch_module
from cuprims._value_types import value_type
from cuprims.algorithms.scan import api as scan_mod
from cuprims.algorithms.scan.api import exclusive_scan, inclusive_scan, make_exclusive_scan, make_inclusive_scan
from cuprims.algorithms.scan.source import SCAN_META_FIELDS, scan_source
from cuprims.errors import ArgumentError, ArgumentTypeError, CudaError, CuprimsError, NoDeviceError
from cuprims.op import OpSpec, op_spec
from cpu_helpers import check_golden, render_source
from cuprims._compile.elfmeta import kernel_param_layout

ELF = b"\x7fELF"

S16 = cuprims.gpu_struct({"a": np.int32, "b": np.float64}, name="ScanPair")  # 16 bytes: multi-word tile state


def pair_op(x, y):
    return S16(x.a + y.a, max(x.b, y.b))


def py_add(a, b):
    return a + b


def _names(exc: ArgumentError, name: str):
    assert isinstance(exc, CuprimsError)
    assert exc.argument == name, (exc.argument, str(exc))
    assert f"'{name}'" in str(exc)


# ------------------------------------------------------------------ builds

def _build(name: str):
    P, V = ProxyArray, ProxyValue
    if name == "i4-plus-incl-noinit-sm90":
        return make_inclusive_scan(d_in=P(np.int32), d_out=P(np.int32), op=OpKind.PLUS, compute_capability=90)
    if name == "i4-plus-excl-value-sm90":
        return make_exclusive_scan(d_in=P(np.int32), d_out=P(np.int32), op=OpKind.PLUS, init_value=V(np.int32),
                                   compute_capability=90)
    if name == "i4-python-incl-value-sm90":
        return make_inclusive_scan(d_in=P(np.int32), d_out=P(np.int32), op=py_add, init_value=V(np.int32),
                                   compute_capability=90)
    if name == "struct-python-excl-value-sm90":
        return make_exclusive_scan(d_in=P(S16.dtype), d_out=P(S16.dtype), op=pair_op, init_value=V(S16.dtype),
                                   compute_capability=90)
    if name == "i4-to-i8-plus-excl-device-sm90":
        return make_exclusive_scan(d_in=P(np.int32), d_out=P(np.int64), op=OpKind.PLUS, init_value=P(np.int64),
                                   compute_capability=90)
    if name == "i4-plus-incl-noinit-sm80":
        return make_inclusive_scan(d_in=P(np.int32), d_out=P(np.int32), op=OpKind.PLUS, compute_capability=80)
    raise KeyError(name)


BUILDS = ["i4-plus-incl-noinit-sm90", "i4-plus-excl-value-sm90", "i4-python-incl-value-sm90",
          "struct-python-excl-value-sm90", "i4-to-i8-plus-excl-device-sm90", "i4-plus-incl-noinit-sm80"]


def _kind_size(kind) -> int:
    return {"ptr": 8, "i64": 8, "i32": 4}.get(kind) if isinstance(kind, str) else max(int(kind), 1)


@pytest.mark.ci_sample(every=2)
@pytest.mark.parametrize("name", BUILDS)
def test_build(shared_cache, name):
    obj = _build(name)
    arch = int(name[-2:])
    assert obj.compute_capabilities == [arch]
    cubin = obj.cubin()
    assert cubin[:4] == ELF
    assert struct.unpack_from("<H", cubin, 0x12)[0] == 190  # EM_CUDA
    result = obj._builds.result(arch)
    meta = result.meta
    assert tuple(meta) == SCAN_META_FIELDS
    assert meta["threads"] > 0 and meta["threads"] % 32 == 0 and meta["items"] > 0
    assert meta["init_threads"] > 0
    assert meta["accum_size"] == obj._accum.size and meta["accum_align"] == obj._accum.alignment
    # storage for the look-back padding tiles is part of the fixed bytes
    assert meta["tile_bytes_per_tile"] > 0 and meta["tile_fixed_bytes"] >= meta["tile_bytes_per_tile"]
    assert 2**30 < meta["max_tiles"] < 2**31
    # both kernels are in the cubin, and their parameters are what the host packs
    source = obj._builds.source(arch)
    assert len(source.name_expressions) == 2
    for expr, kinds in zip(source.name_expressions, obj.desc.kernel_params()):
        lowered = result.kernels[expr]
        assert lowered.encode() in cubin
        sizes = [sz for _, sz in kernel_param_layout(cubin, lowered)]
        assert sizes == [_kind_size(k) for k in kinds], (expr, sizes, kinds)


def test_python_op_gets_the_builtin_tuning(shared_cache):
    """A Python `a + b` runs with the same tile shape as OpKind.PLUS (CUB's tuned policy)."""
    builtin = _build("i4-plus-incl-noinit-sm90")._builds.result(90).meta
    python = _build("i4-python-incl-value-sm90")._builds.result(90).meta
    assert (python["threads"], python["items"]) == (builtin["threads"], builtin["items"])


def test_tile_state_layouts(shared_cache):
    small = _build("i4-plus-incl-noinit-sm90")._builds.result(90).meta
    wide = _build("struct-python-excl-value-sm90")._builds.result(90).meta
    # a 16-byte struct does not fit one atomic word with its status: status + partial + inclusive
    assert wide["tile_bytes_per_tile"] >= 2 * 16 + 1
    assert small["tile_bytes_per_tile"] < wide["tile_bytes_per_tile"]


def test_sm80_and_sm90_differ(shared_cache):
    c80 = _build("i4-plus-incl-noinit-sm80").cubin()
    c90 = _build("i4-plus-incl-noinit-sm90").cubin()
    assert c80 != c90


def test_object_cache(shared_cache):
    a = _build("i4-plus-incl-noinit-sm90")
    assert _build("i4-plus-incl-noinit-sm90") is a
    b = _build("i4-plus-excl-value-sm90")
    assert b is not a
    # a device-array init is another build than a host value
    e = _build("i4-to-i8-plus-excl-device-sm90")
    assert e.desc.init_kind == "device" and b.desc.init_kind == "value" and a.desc.init_kind == "none"


def test_cubin_for_unbuilt_arch(shared_cache):
    with pytest.raises(ArgumentError) as info:
        _build("i4-plus-incl-noinit-sm90").cubin(80)
    _names(info.value, "compute_capability")


# ------------------------------------------------------------------ golden sources

PY_SPEC = OpSpec("python", "0" * 64, name="my_op")
RAW_SPEC = OpSpec("raw", "1" * 64, name="my_raw_add")

GOLDEN_SPECS = {
    "scan_i4_plus_inclusive_noinit_sm90": dict(in_type="i4", accum="i4", op=op_spec(OpKind.PLUS), init_kind="none",
                                               inclusive=True, arch=90),
    "scan_i4_plus_exclusive_value_sm90": dict(in_type="i4", accum="i4", op=op_spec(OpKind.PLUS), init_kind="value",
                                              inclusive=False, arch=90),
    "scan_f4_python_inclusive_value_sm90": dict(in_type="f4", accum="f4", op=PY_SPEC, init_kind="value",
                                                inclusive=True, arch=90),
    "scan_i4_to_i8_plus_exclusive_device_sm90": dict(in_type="i4", accum="i8", op=op_spec(OpKind.PLUS),
                                                     init_kind="device", inclusive=False, arch=90),
    "scan_f8_raw_inclusive_device_sm80": dict(in_type="f8", accum="f8", op=RAW_SPEC, init_kind="device",
                                              inclusive=True, arch=80),
    "scan_struct_python_exclusive_value_sm90": dict(in_type=S16.dtype, accum=S16.dtype, op=PY_SPEC,
                                                    init_kind="value", inclusive=False, arch=90),
    # 40 int8 fields: tiles accumulate in the struct's word form, the operator called
    # (cuprims._codegen.accumulators); the outputs and the device init value stay the struct
    "scan_struct_words_python_exclusive_device_sm90": dict(
        in_type=np.dtype([(f"f{i}", np.int8) for i in range(40)], align=True),
        accum=np.dtype([(f"f{i}", np.int8) for i in range(40)], align=True), op=PY_SPEC, init_kind="device",
        inclusive=False, arch=90),
}


def _generate(spec: dict):
    args = dict(spec)
    args["in_type"] = value_type(np.dtype(args["in_type"]))
    args["accum"] = value_type(np.dtype(args["accum"]))
    return scan_source(**args)


def test_source_shape():
    src = _generate(GOLDEN_SPECS["scan_f4_python_inclusive_value_sm90"])
    assert src.extern_symbols == ("cuprims_op_0",)
    assert 'extern "C" __device__ void cuprims_op_0(void*, void*, void*);' in src.text
    assert "::cuda::std::plus<>" in src.text  # the tuning stand-in, whatever the operator
    assert "0" * 64 not in src.text  # one kernel LTO-IR serves every Python operator over these types
    init, scan = src.name_expressions
    assert init.startswith("cuprims::scan::scan_init_kernel<")
    assert scan.endswith("cuprims_op_t, float, true>")
    raw = _generate(GOLDEN_SPECS["scan_f8_raw_inclusive_device_sm80"])
    assert raw.extern_symbols == ("my_raw_add",)
    assert "cuprims::device_init<double>" in raw.name_expressions[1]
    excl = _generate(GOLDEN_SPECS["scan_i4_plus_exclusive_value_sm90"])
    assert excl.name_expressions[1].endswith("cuprims_op_t, int, false>")


def test_codegen_rejects_exclusive_without_init():
    with pytest.raises(ValueError):
        _generate(dict(GOLDEN_SPECS["scan_i4_plus_exclusive_value_sm90"], init_kind="none"))
    with pytest.raises(ValueError):
        _generate(dict(GOLDEN_SPECS["scan_i4_plus_exclusive_value_sm90"], init_kind="bogus"))


# ------------------------------------------------------------------ public surface

def test_signatures_match_the_api_target():
    def shape(fn):
        sig = fn if isinstance(fn, inspect.Signature) else inspect.signature(fn)
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in sig.parameters.values()), fn
        return [(n, p.default is inspect.Parameter.empty) for n, p in sig.parameters.items()]

    assert shape(make_inclusive_scan) == [("d_in", True), ("d_out", True), ("op", True), ("init_value", False),
                                          ("compute_capability", False)]
    assert shape(make_exclusive_scan) == [("d_in", True), ("d_out", True), ("op", True), ("init_value", True),
                                          ("compute_capability", False)]
    assert shape(inclusive_scan) == [("d_in", True), ("d_out", True), ("op", True), ("init_value", False),
                                     ("num_items", True), ("stream", False)]
    assert shape(exclusive_scan) == [("d_in", True), ("d_out", True), ("op", True), ("init_value", True),
                                     ("num_items", True), ("stream", False)]
    call = inspect.signature(scan_mod.Scan.__call__)
    assert list(call.parameters)[0] == "self"
    assert shape(call.replace(parameters=list(call.parameters.values())[1:])) == [("temp_storage", True), ("d_in", True), ("d_out", True),
                                              ("op", True), ("init_value", True), ("num_items", True),
                                              ("stream", False)]
    for fn in (make_inclusive_scan, make_exclusive_scan, inclusive_scan, exclusive_scan):
        assert "Example::" in fn.__doc__


def test_positional_arguments_rejected():
    with pytest.raises(TypeError):
        make_inclusive_scan(ProxyArray(np.int32), ProxyArray(np.int32), OpKind.PLUS)  # noqa


# ------------------------------------------------------------------ build-time argument errors (no NVRTC)

def _incl(**overrides):
    args = dict(d_in=ProxyArray(np.int32), d_out=ProxyArray(np.int32), op=OpKind.PLUS, compute_capability=90)
    args.update(overrides)
    return make_inclusive_scan(**args)


def _excl(**overrides):
    args = dict(d_in=ProxyArray(np.int32), d_out=ProxyArray(np.int32), op=OpKind.PLUS,
                init_value=ProxyValue(np.int32), compute_capability=90)
    args.update(overrides)
    return make_exclusive_scan(**args)


def test_exclusive_scan_needs_an_init_value():
    with pytest.raises(ArgumentError) as info:
        _excl(init_value=None)
    _names(info.value, "init_value")
    assert "exclusive" in str(info.value)
    with pytest.raises(TypeError):
        make_exclusive_scan(d_in=ProxyArray(np.int32), d_out=ProxyArray(np.int32), op=OpKind.PLUS)  # noqa
    # the one-shot form checks it before looking for a GPU
    with pytest.raises(ArgumentError) as info:
        exclusive_scan(d_in=ProxyArray(np.int32), d_out=ProxyArray(np.int32), op=OpKind.PLUS, init_value=None,
                       num_items=10)
    _names(info.value, "init_value")


@pytest.mark.parametrize("op", [OpKind.MINUS, OpKind.DIVIDES, OpKind.LESS, OpKind.NEGATE, OpKind.IDENTITY],
                         ids=lambda o: o.name)
def test_builtin_that_is_no_associative_binary_op(op):
    with pytest.raises(ArgumentError) as info:
        _incl(op=op)
    _names(info.value, "op")


def test_builtin_on_struct_values():
    with pytest.raises(ArgumentError) as info:
        _incl(d_in=ProxyArray(S16.dtype), d_out=ProxyArray(S16.dtype), op=OpKind.PLUS)
    _names(info.value, "op")


@pytest.mark.parametrize("op", [OpKind.STATELESS, 42, "no_such_op"], ids=["STATELESS", "int", "bad-name"])
def test_op_value_rejected(op):
    with pytest.raises(ArgumentError) as info:
        _incl(op=op)
    _names(info.value, "op")


@pytest.mark.parametrize("d_in,d_out,name", [
    (ProxyArray(S16.dtype), ProxyArray(np.int32), "d_in"),
    (ProxyArray(np.int32), ProxyArray(S16.dtype), "d_in"),
    (ProxyArray(np.complex64), ProxyArray(np.float32), "d_out"),
    (ProxyArray(np.complex128), ProxyArray(np.float64), "d_out"),
], ids=["struct-to-scalar", "scalar-to-struct", "c8-to-f4", "c16-to-f8"])
def test_item_types_that_do_not_convert(d_in, d_out, name):
    with pytest.raises(ArgumentError) as info:
        _incl(d_in=d_in, d_out=d_out, op=lambda a, b: a)
    _names(info.value, name)


@pytest.mark.parametrize("init_value", [
    ProxyValue(np.complex64),                 # complex init, real output
    np.complex64(1 + 2j),
    ProxyValue(S16.dtype),                    # struct init, scalar output
    ProxyArray(np.int64),                     # device init of another type (no conversion on the device)
    ProxyArray(np.float32),
    "abc",
    object(),
], ids=["proxy-complex", "complex-scalar", "struct", "device-i8", "device-f4", "str", "object"])
def test_bad_init_value(init_value):
    with pytest.raises(ArgumentError) as info:
        _excl(init_value=init_value)
    _names(info.value, "init_value")


@pytest.mark.parametrize("dtype", ["U4", "M8[s]", "O", ">f4"], ids=str)
def test_unsupported_dtypes(dtype):
    with pytest.raises(ArgumentError) as info:
        _incl(d_in=ProxyArray(np.int32), d_out=FakeDeviceArray(10, np.dtype(dtype).str))
    _names(info.value, "d_out")


def test_host_arrays_rejected_at_build_time():
    with pytest.raises(ArgumentTypeError) as info:
        _incl(d_in=np.zeros(10, np.int32))
    _names(info.value, "d_in")
    with pytest.raises(ArgumentTypeError) as info:
        _incl(d_out=np.zeros(10, np.int32))
    _names(info.value, "d_out")


def test_bad_compute_capability():
    with pytest.raises(ArgumentError) as info:
        _incl(compute_capability="sm_abc")
    _names(info.value, "compute_capability")


def test_no_gpu_and_no_compute_capability():
    with pytest.raises(NoDeviceError, match="compute_capability"):
        make_inclusive_scan(d_in=ProxyArray(np.int32), d_out=ProxyArray(np.int32), op=OpKind.PLUS)
    with pytest.raises(NoDeviceError):
        inclusive_scan(d_in=ProxyArray(np.int32), d_out=ProxyArray(np.int32), op=OpKind.PLUS, num_items=5)


# ------------------------------------------------------------------ call-time argument errors (before the GPU)

class FakeDeviceArray:
    def __init__(self, n, typestr="<i4", ptr=0x7F0000000000):
        self._iface = {"data": (ptr, False), "shape": (n,), "typestr": typestr, "version": 3, "strides": None}

    @property
    def __cuda_array_interface__(self):
        return self._iface


@pytest.fixture
def incl(shared_cache):
    return _build("i4-plus-incl-noinit-sm90")


@pytest.fixture
def excl(shared_cache):
    return _build("i4-plus-excl-value-sm90")


@pytest.fixture
def excl_device(shared_cache):
    return _build("i4-to-i8-plus-excl-device-sm90")


def _call(obj, **overrides):
    args = dict(temp_storage=None, d_in=FakeDeviceArray(100), d_out=FakeDeviceArray(100), op=OpKind.PLUS,
                init_value=np.int32(0) if obj.desc.init_kind == "value" else None, num_items=100)
    if obj.desc.init_kind == "device":
        args.update(d_out=FakeDeviceArray(100, "<i8"), init_value=FakeDeviceArray(1, "<i8"))
    args.update(overrides)
    return obj(**args)


@pytest.mark.parametrize("overrides,name", [
    (dict(num_items=-1), "num_items"),
    (dict(num_items=2.5), "num_items"),
    (dict(d_in=FakeDeviceArray(100, "<f4")), "d_in"),
    (dict(d_in=FakeDeviceArray(99)), "d_in"),
    (dict(d_out=FakeDeviceArray(100, "<i8")), "d_out"),
    (dict(d_out=FakeDeviceArray(99)), "d_out"),       # too short: one result per item
    (dict(d_out=FakeDeviceArray(0)), "d_out"),
    (dict(init_value=np.int32(3)), "init_value"),    # built without one
], ids=["negative-n", "float-n", "in-dtype", "in-too-short", "out-dtype", "out-too-short", "out-empty",
        "unexpected-init"])
def test_inclusive_call_arguments(incl, overrides, name):
    with pytest.raises(ArgumentError) as info:
        _call(incl, **overrides)
    _names(info.value, name)


@pytest.mark.parametrize("overrides,name", [
    (dict(init_value=None), "init_value"),
    (dict(init_value="abc"), "init_value"),
    (dict(init_value=FakeDeviceArray(1)), "init_value"),  # built with a host value
    (dict(d_in=np.zeros(100, np.int32)), "d_in"),
    (dict(d_out=np.zeros(100, np.int32)), "d_out"),
], ids=["no-init", "str-init", "device-init", "host-in", "host-out"])
def test_exclusive_call_arguments(excl, overrides, name):
    with pytest.raises(ArgumentError) as info:
        _call(excl, **overrides)
    _names(info.value, name)


@pytest.mark.parametrize("init_value", [
    None, np.int64(3), FakeDeviceArray(1, "<i4"), FakeDeviceArray(2, "<i8"), FakeDeviceArray(0, "<i8"),
    FakeDeviceArray(1, "<f8"),
], ids=["none", "host-value", "wrong-dtype", "two-elements", "empty", "f8"])
def test_device_init_call_arguments(excl_device, init_value):
    with pytest.raises(ArgumentError) as info:
        _call(excl_device, init_value=init_value)
    _names(info.value, "init_value")


def test_valid_calls_without_gpu_raise_no_device(incl, excl, excl_device):
    for obj in (incl, excl, excl_device):
        with pytest.raises(NoDeviceError):
            _call(obj)
    with pytest.raises(NoDeviceError):
        _call(excl, init_value=np.int8(3))  # converted to the output type
    with pytest.raises(NoDeviceError):
        _call(incl, num_items=0, d_in=FakeDeviceArray(0), d_out=FakeDeviceArray(0))


# ------------------------------------------------------------------ launch plumbing

def test_launch_configs_are_built_without_a_gpu_and_kept_per_shape(monkeypatch):
    monkeypatch.setattr(launch_module, "_configs", {})
    address = launch_module.config_address(3, 128, 0, 0, True)
    cfg = launch_module._LaunchConfig.from_address(address)
    assert (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ) == (3, 1, 1, 128, 1, 1)
    assert cfg.numAttrs == 1 and cfg.attrs[0].id == 6 and cfg.attrs[0].value == 1  # programmatic serialization
    plain = launch_module._LaunchConfig.from_address(launch_module.config_address(3, 128, 0x1234, 64))
    assert plain.numAttrs == 0 and plain.hStream == 0x1234 and plain.sharedMemBytes == 64
    # one configuration per shape, made once
    assert launch_module.config_address(3, 128, 0, 0, True) == address
    assert launch_module.config_address(4, 128, 0, 0, True) != address
    # past the cap, a shape is written into the thread's own configuration at each launch
    monkeypatch.setattr(launch_module, "MAX_SHAPES", len(launch_module._configs))
    own = launch_module.config_address(7, 64, 0, 0)
    assert launch_module._LaunchConfig.from_address(own).gridDimX == 7
    assert launch_module.config_address(9, 32, 0, 0) == own
    assert launch_module._LaunchConfig.from_address(own).gridDimX == 9
    assert (7, 64, 0, 0, False) not in launch_module._configs


def test_pdl_launch_falls_back_to_plain_launches(monkeypatch):
    calls = []
    # the fallback is the plain launch of launch_pdl's own module (driver only re-exports both)
    monkeypatch.setattr(launch_module, "launch", lambda *args: calls.append(args))
    # the driver cannot launch with PDL here: a plain launch instead, reported to the caller
    monkeypatch.setattr(launch_module, "_launch_ex", lambda *args: 801)   # CUDA_ERROR_NOT_SUPPORTED
    assert driver.launch_pdl(0x5000, 3, 128, 0, 0x1000) is False
    assert calls == [(0x5000, 3, 128, 0, 0x1000)]
    # a failed PDL launch never turns the feature off for the whole process
    assert cuprims.settings.pdl is True
    # any other failure is an error naming the call
    monkeypatch.setattr(launch_module, "_launch_ex", lambda *args: 700)
    monkeypatch.setattr(launch_module.libcuda, "error_name", lambda code: f"CUDA_ERROR_{code}")
    with pytest.raises(CudaError, match="cuLaunchKernelEx.*CUDA_ERROR_700"):
        driver.launch_pdl(0x5000, 3, 128, 0, 0x1000)


def test_importing_scan_does_not_import_numba():
    import subprocess
    import sys

    code = "import sys, cuprims.algorithms.scan.api; assert 'numba' not in sys.modules, 'numba imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("name", sorted(GOLDEN_SPECS))
def test_golden_source(name):
    src = _generate(GOLDEN_SPECS[name])
    assert _generate(GOLDEN_SPECS[name]) == src  # deterministic
    check_golden(name, render_source(src))
