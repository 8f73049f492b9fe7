"""Compile + link without a GPU: NVRTC -> LTO-IR, numba-cuda -> LTO-IR, nvJitLink -> cubin."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import cuprims
from cuprims import Determinism, OpKind
from cuprims.errors import CompileError, CuprimsError, OperatorCompileError
from cuprims._build import build as jit_build
from cuprims._compile import nvrtc
from cpu_helpers import bad_source, counters, delta, make_f4

ELF = b"\x7fELF"



def _key(obj, arch=90):
    return jit_build.build_key(obj._builds.source(arch), arch, obj._builds._ops)


def _check_meta(obj, arch, dtype=np.float32):
    result = obj._builds.result(arch)
    assert result.arch == arch
    meta = result.meta
    for name in ("threads", "items"):
        assert meta[name] > 0, (name, meta)
    assert meta["threads"] % 32 == 0
    assert meta["accum_size"] == np.dtype(dtype).itemsize
    align = meta["accum_align"]
    assert align > 0 and align & (align - 1) == 0 and meta["accum_size"] % align == 0
    assert len(result.kernels) >= 1  # one kernel template serves both passes when the types agree
    for lowered in result.kernels.values():
        assert lowered.encode() in result.cubin, lowered


def _elf_machine_is_cuda(cubin: bytes) -> bool:
    import struct
    (machine,) = struct.unpack_from("<H", cubin, 0x12)
    return machine == 190  # EM_CUDA


@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("op", [pytest.param(lambda a, b: a + b, id="python"),
                                pytest.param(OpKind.PLUS, id="builtin")])
def test_build_for_arch(shared_cache, op, arch):
    obj = make_f4(op, cc=arch)
    cubin = obj.cubin()
    assert cubin[:4] == ELF
    assert _elf_machine_is_cuda(cubin)
    assert obj.compute_capabilities == [arch]
    assert obj.cubin(arch) == cubin
    _check_meta(obj, arch)


def test_cold_python_op_build_compiles_each_stage_once(numba_ops):
    before = counters()
    obj = make_f4(lambda a, b: a + b)
    assert obj.cubin()[:4] == ELF
    assert delta(before) == {"numba_compiles": 1, "nvrtc_compiles": 1, "links": 1}
    # the same op again in this thread: the wrapper object itself comes from memory
    assert make_f4(lambda a, b: a + b) is obj
    assert delta(before) == {"numba_compiles": 1, "nvrtc_compiles": 1, "links": 1}


@pytest.mark.ci_sample(every=3)
@pytest.mark.parametrize("op,dtype,h_init", [
    (OpKind.MAXIMUM, np.int64, False),
    (OpKind.BIT_XOR, np.uint32, True),
    (OpKind.MINIMUM, np.float64, True),
    (OpKind.PLUS, np.float16, True),
    (OpKind.PLUS, np.complex64, True),
    (OpKind.LOGICAL_OR, np.bool_, False),
], ids=["i8-max-noinit", "u4-xor-init", "f8-min-init", "f2-plus-init", "c8-plus-init", "b1-or-noinit"])
def test_builtin_builds(shared_cache, op, dtype, h_init):
    obj = make_f4(op, dtype=dtype, h_init=h_init)
    assert obj.cubin()[:4] == ELF
    _check_meta(obj, 90, dtype)


def test_gpu_to_gpu_determinism_builds(shared_cache):
    portable = make_f4(OpKind.PLUS, determinism=Determinism.GPU_TO_GPU)
    assert portable.cubin()[:4] == ELF
    _check_meta(portable, 90)
    default = make_f4(OpKind.PLUS)
    assert _key(portable) != _key(default)
    # the portable policy is CUB's sm_60 one, whatever the target
    assert "fixed_arch_selector" in portable._builds.source(90).text


def test_mixed_input_and_output_types(shared_cache):
    obj = make_f4(OpKind.PLUS, dtype=np.int32, out_dtype=np.float64)
    assert obj.cubin()[:4] == ELF
    _check_meta(obj, 90, np.float64)


@pytest.mark.parametrize("cc", [90, (9, 0), "9.0", "sm_90", "SM_90", [90]],
                         ids=["int", "tuple", "dotted", "sm_", "SM_", "list"])
def test_compute_capability_forms(shared_cache, cc):
    obj = make_f4(OpKind.PLUS, cc=cc)
    assert obj.compute_capabilities == [90]
    assert obj.cubin()[:4] == ELF


def test_compute_capability_list_builds_each(shared_cache):
    obj = make_f4(OpKind.PLUS, cc=[80, 90])
    assert obj.compute_capabilities == [80, 90]
    c80, c90 = obj.cubin(80), obj.cubin(90)
    assert c80[:4] == ELF and c90[:4] == ELF
    assert c80 != c90
    assert obj.cubin("sm_90") == c90 and obj.cubin((8, 0)) == c80
    _check_meta(obj, 80)
    _check_meta(obj, 90)
    # each arch is the same build as asking for it alone
    assert make_f4(OpKind.PLUS, cc=80).cubin() == c80


def test_cubin_for_unbuilt_arch_names_the_argument(shared_cache):
    obj = make_f4(OpKind.PLUS, cc=90)
    with pytest.raises(cuprims.errors.ArgumentError, match="compute_capability"):
        obj.cubin(80)


@pytest.mark.parametrize("cc", [60, (6, 1), 2000])
@pytest.mark.parametrize("nvrtc_asked_already", [False, True])
def test_an_arch_this_nvrtc_cannot_build_is_an_argument_error_before_any_compile(shared_cache, cc,
                                                                                 nvrtc_asked_already):
    from cuprims._compile import toolchain

    toolchain.supported_archs.cache_clear()
    toolchain._deferred_archs.clear()
    if nvrtc_asked_already:
        assert 90 in toolchain.supported_archs()
    before = counters()
    with pytest.raises(cuprims.errors.ArgumentError, match="compute_capability") as info:
        make_f4(OpKind.PLUS, cc=cc)
    assert isinstance(info.value, ValueError)
    assert ("between 5.0 and 20.0" if cc == 2000 else "this NVRTC builds for (") in str(info.value)
    assert delta(before)["nvrtc_compiles"] == 0
    # the check is not used up by failing: asking again fails the same way
    with pytest.raises(cuprims.errors.ArgumentError, match="compute_capability"):
        make_f4(OpKind.PLUS, cc=cc)


_WARM_BUILD = """
    import json, sys, numpy as np, cuprims
    from cuprims import OpKind, ProxyArray
    cuprims.make_reduce_into(d_in=ProxyArray(np.float32), d_out=ProxyArray(np.float32), op=OpKind.PLUS,
                             h_init=np.float32(0), compute_capability=90)
    with open("/proc/self/maps") as f:
        nvrtc_mapped = any("libnvrtc" in line for line in f)
    print(json.dumps({"nvrtc_mapped": nvrtc_mapped, "nvrtc_compiles": cuprims.cache_info()["nvrtc_compiles"]}))
"""


def test_a_build_the_disk_cache_serves_does_not_load_nvrtc(tmp_path):
    from cpu_helpers import last_json, run_python

    env = {"CUPRIMS_CACHE_DIR": str(tmp_path)}
    first = last_json(run_python(_WARM_BUILD, env=env).stdout)
    assert first == {"nvrtc_mapped": True, "nvrtc_compiles": 1}
    assert last_json(run_python(_WARM_BUILD, env=env).stdout) == {"nvrtc_mapped": False, "nvrtc_compiles": 0}


@pytest.mark.ci_sample(every=3)
@pytest.mark.parametrize("dtype", [
    np.float32, np.int64, np.float16,
    np.complex64,
    np.complex128,
])
def test_host_alignment_agrees_with_compiled_code(shared_cache, dtype):
    obj = make_f4(OpKind.PLUS, dtype=dtype)
    # reduce.py checks temp_storage alignment against _accum.alignment; the kernels store
    # AccumT partials at the alignment the compiled code reports.
    assert obj._builds.result(90).meta["accum_align"] == obj._accum.alignment


# ------------------------------------------------------------------ Python operators

def _helper_scale(x):
    return x * 3.0


def _helper_outer(x):
    return _helper_scale(x) + 1.0


def op_calls_helpers(a, b):
    return _helper_outer(a) + b


def op_uses_math(a, b):
    return math.sqrt(a * a + b * b) + math.fabs(math.sin(a))


def _closure(k):
    def op(a, b):
        return a + b * k
    return op


@pytest.mark.ci_sample(every=3)
@pytest.mark.parametrize("op", [
    pytest.param(lambda a, b: a if a > b else b, id="lambda-max"),
    pytest.param(op_calls_helpers, id="plain-helpers"),
    pytest.param(op_uses_math, id="math"),
    pytest.param(_closure(2.5), id="closure"),
])
def test_python_op_variants_build(shared_cache, numba_ops, op):
    before = counters()
    obj = make_f4(op)
    assert obj.cubin()[:4] == ELF
    _check_meta(obj, 90)
    assert delta(before)["numba_compiles"] == 1 and delta(before)["links"] == 1


def test_closure_values_give_different_builds(shared_cache):
    o1 = make_f4(_closure(2.0))
    o2 = make_f4(_closure(3.0))
    o1b = make_f4(_closure(2.0))
    assert o1 is not o2
    assert _key(o1) != _key(o2)
    assert o1.cubin() != o2.cubin()
    # an equal closure value is the same recipe: the same object comes back
    assert o1b is o1
    assert _key(o1b) == _key(o1)


@pytest.mark.ci_sample(every=3)
@pytest.mark.parametrize("op,dtype", [
    (lambda a, b: a ^ b, np.int64),
    (lambda a, b: a + b, np.float16),
    (lambda a, b: a or b, np.bool_),
    (lambda a, b: a * b, np.complex128),
], ids=["i8-xor", "f2-plus", "b1-or", "c16-times"])
def test_python_op_other_types_build(shared_cache, op, dtype):
    obj = make_f4(op, dtype=dtype)
    assert obj.cubin()[:4] == ELF
    _check_meta(obj, 90, dtype)


def op_returns_string(a, b):
    return "not a number"


def op_calls_undefined(a, b):
    return this_function_does_not_exist(a) + b  # noqa: F821


def op_wrong_arity(a):
    return a


@pytest.mark.parametrize("op", [op_returns_string, op_calls_undefined, op_wrong_arity])
def test_operator_typing_failure(shared_cache, op):
    with pytest.raises(OperatorCompileError) as info:
        make_f4(op)
    assert op.__name__ in str(info.value)
    assert info.value.op_name == op.__name__
    assert "float32" in info.value.signature
    assert isinstance(info.value, CuprimsError)


def test_operator_failures_are_not_cached(shared_cache):
    before = counters()
    for _ in range(2):
        with pytest.raises(OperatorCompileError):
            make_f4(op_calls_undefined)
    assert delta(before)["numba_compiles"] == 2
    assert delta(before)["links"] == 0


# ------------------------------------------------------------------ NVRTC errors, dumps

def test_nvrtc_failure_raises_compile_error():
    src = bad_source()
    with pytest.raises(CompileError) as info:
        nvrtc.compile_to_ltoir(src, 90)
    err = info.value
    assert isinstance(err, CuprimsError)
    assert err.log.strip()
    assert "error" in err.log.lower()
    assert err.source_path and Path(err.source_path).is_file()
    assert Path(err.source_path).read_text() == src.text
    assert err.source_path in str(err)
    assert any("sm_90" in o for o in err.options)


def test_nvrtc_failure_source_lands_in_dump_dir(tmp_path, monkeypatch):
    dump = tmp_path / "dump"
    monkeypatch.setenv("CUPRIMS_DUMP_DIR", str(dump))
    with pytest.raises(CompileError) as info:
        nvrtc.compile_to_ltoir(bad_source(), 90)
    assert Path(info.value.source_path).parent == dump


def test_dump_dir_receives_generated_source(tmp_path, monkeypatch):
    dump = tmp_path / "dump"
    monkeypatch.setenv("CUPRIMS_DUMP_DIR", str(dump))
    obj = make_f4(OpKind.PLUS)
    files = sorted(dump.glob("*.cu"))
    assert len(files) == 1, files
    assert files[0].read_text() == obj._builds.source(90).text
    assert not list(dump.glob("*.tmp")), "temporary files left behind"


def test_no_dump_without_dump_dir(tmp_path, shared_cache, monkeypatch):
    # the source is dumped on a cache hit too (when asked), so a shared build tells as much;
    # the default source directory (for a failed compile's source) is under tmp_path here
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    obj = make_f4(OpKind.PLUS)
    assert obj.cubin()[:4] == ELF
    assert nvrtc.default_source_dir().parent == tmp_path
    assert not list(tmp_path.rglob("*.cu"))


# ------------------------------------------------------------------ stale code (known gaps)

def _nested_global_op():
    ns = {"K": 2.0}
    exec("def op(a, b):\n    def inner(x):\n        return x * K\n    return inner(a) + b\n", ns)
    return ns["op"], (lambda v: ns.__setitem__("K", v))


def _module_attribute_op():
    import types
    cfg = types.ModuleType("cuprims_test_cfg_build")
    cfg.K = 2.0
    ns = {"cfg": cfg}
    exec("def op(a, b):\n    return a * cfg.K + b\n", ns)
    return ns["op"], (lambda v: setattr(cfg, "K", v))


@pytest.mark.parametrize("factory", [_nested_global_op, _module_attribute_op], ids=["nested-global", "module-attr"])
def test_changed_constant_is_recompiled(shared_cache, factory):
    op, set_k = factory()
    old = make_f4(op).cubin()
    set_k(3.0)
    assert make_f4(op).cubin() != old, "stale code served after the operator's constant changed"
