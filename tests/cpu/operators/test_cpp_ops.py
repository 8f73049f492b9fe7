"""RawOp.from_cpp: C++ operators compiled by the project's NVRTC stage for sm_90 (no GPU),
used where a RawOp goes, cached in memory and on disk (a second process compiles nothing),
and their mistakes named."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

import cuprims
from cuprims import RawOp, types
from cuprims.errors import ArgumentError, ArgumentTypeError, CompileError, NoDeviceError
from cpu_helpers import ARCH, counters, delta, last_json, run_python

MAX = """
extern "C" __device__ void cpp_max(void* a, void* b, void* out) {
    const int x = *static_cast<int*>(a), y = *static_cast<int*>(b);
    *static_cast<int*>(out) = x > y ? x : y;
}
"""
SQUARE = """
#include <cuda/std/cstdint>
extern "C" __device__ void cpp_square(void* in, void* out) {
    const int32_t v = *static_cast<int32_t*>(in);
    *static_cast<int32_t*>(out) = v * v;
}
"""
HEAVIER = """
struct Pair { int key; float weight; };
extern "C" __device__ void cpp_heavier(void* a, void* b, void* out) {
    const Pair& x = *static_cast<Pair*>(a);
    const Pair& y = *static_cast<Pair*>(b);
    *static_cast<Pair*>(out) = x.weight >= y.weight ? x : y;
}
"""
SCALED = """
extern "C" __device__ void cpp_scaled(void* state, void* in, void* out) {
    *static_cast<float*>(out) = *static_cast<float*>(in) * *static_cast<float*>(state);
}
"""
P = cuprims.ProxyArray


def _reduce(op, d_in=None, dtype=types.int32, out=None, cc=ARCH):
    out = dtype if out is None else out
    return cuprims.make_reduce_into(d_in=P(dtype) if d_in is None else d_in, d_out=P(out), op=op,
                                    h_init=cuprims.ProxyValue(out), compute_capability=cc)


def test_a_reduce_by_a_cpp_operator_builds(shared_cache):
    op = RawOp.from_cpp(MAX, "cpp_max", compute_capability=ARCH)
    assert isinstance(op, RawOp) and op.name == "cpp_max" and op.ltoir[:4] == b"\xedCN\x7f"
    obj = _reduce(op)
    assert obj.cubin().startswith(b"\x7fELF") and "op=RawOp cpp_max" in repr(obj)


def test_a_transform_iterator_by_a_cpp_operator_with_a_type_object(shared_cache):
    square = RawOp.from_cpp(SQUARE, "cpp_square", compute_capability=ARCH)
    it = cuprims.TransformIterator(P(np.int32), square, value_type=types.int32)
    obj = _reduce(cuprims.OpKind.PLUS, d_in=it, out=types.int64)
    assert obj.cubin().startswith(b"\x7fELF") and "transform iterator of int32" in repr(obj)
    transform = cuprims.make_unary_transform(d_in=P(types.int32), d_out=P(types.int32), op=square,
                                             compute_capability=ARCH)
    assert transform.cubin().startswith(b"\x7fELF")


@pytest.mark.slow       # a whole build more; CI builds the reduce and the iterator above
def test_a_cpp_operator_over_a_struct_type(shared_cache):
    Pair = types.struct({"key": types.int32, "weight": types.float32}, name="Pair")
    op = RawOp.from_cpp(HEAVIER, "cpp_heavier", compute_capability=ARCH)
    assert _reduce(op, dtype=Pair).cubin().startswith(b"\x7fELF")


@pytest.mark.slow       # a whole build more; CI builds the reduce and the iterator above
def test_a_stateful_cpp_operator_keeps_its_state(shared_cache):
    op = RawOp.from_cpp(SCALED, "cpp_scaled", compute_capability=ARCH, state=struct.pack("<f", 2.5),
                        state_alignment=4)
    assert op.state == struct.pack("<f", 2.5) and op.state_alignment == 4
    it = cuprims.TransformIterator(cuprims.ConstantIterator(np.float32(4)), op, value_type=types.float32)
    assert it._state(1, "d_in") == struct.pack("<ff", 4, 2.5)
    assert _reduce(cuprims.OpKind.PLUS, d_in=it, dtype=types.float32).cubin().startswith(b"\x7fELF")


def test_a_coop_primitive_by_a_cpp_operator(sm90):
    from cuprims import coop

    prim = coop.block.make_reduce(types.int32, 128, RawOp.from_cpp(MAX, "cpp_max", compute_capability=ARCH))
    assert any("cuprims_raw_" in f.name for f in prim.files)


@pytest.mark.slow       # a whole build more; CI builds the reduce and the iterator above
def test_the_lowest_target_is_compiled_and_builds_for_the_others(shared_cache):
    op = RawOp.from_cpp(MAX, "cpp_max", compute_capability=[90, 80])
    assert op.ltoir == RawOp.from_cpp(MAX, "cpp_max", compute_capability=80).ltoir
    assert op.ltoir != RawOp.from_cpp(MAX, "cpp_max", compute_capability=90).ltoir
    assert _reduce(op, cc=[80, 90]).compute_capabilities == [80, 90]


def test_compiled_once_in_memory_and_once_on_disk(fresh_caches):
    before = counters()
    first = RawOp.from_cpp(MAX, "cpp_max", compute_capability=ARCH)
    assert delta(before) == {"numba_compiles": 0, "nvrtc_compiles": 1, "links": 0}
    again = RawOp.from_cpp(MAX, "cpp_max", compute_capability=ARCH)
    assert again.ltoir == first.ltoir and delta(before)["nvrtc_compiles"] == 1
    entries = list((fresh_caches / "v2" / "rawop").rglob("*"))
    assert [p for p in entries if p.is_file()], entries
    _reduce(first).cubin()
    child = run_python(f"""
        import json, cuprims
        op = cuprims.RawOp.from_cpp({MAX!r}, "cpp_max", compute_capability=90)
        r = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(cuprims.types.int32),
                                     d_out=cuprims.ProxyArray(cuprims.types.int32), op=op,
                                     h_init=cuprims.ProxyValue(cuprims.types.int32), compute_capability=90)
        info = cuprims.cache_info()
        print(json.dumps({{k: info[k] for k in ("nvrtc_compiles", "links", "numba_compiles", "disk_hits")}}))
    """, env={"CUPRIMS_CACHE_DIR": str(fresh_caches)})
    out = last_json(child.stdout)
    assert out["nvrtc_compiles"] == out["links"] == out["numba_compiles"] == 0 and out["disk_hits"] >= 2, out


def test_another_name_or_source_is_another_entry(fresh_caches):
    from cuprims._operators.cpp_ops import cpp_key

    keys = {cpp_key(MAX, "cpp_max", 90), cpp_key(MAX, "cpp_max", 80), cpp_key(MAX + "\n", "cpp_max", 90),
            cpp_key(MAX, "other", 90)}
    assert len(keys) == 4


def test_a_compile_error_shows_nvrtcs_log_and_the_source(fresh_caches):
    source = 'extern "C" __device__ void broken(void* a, void* out) { *(int*)out = undeclared_name; }\n'
    with pytest.raises(CompileError) as info:
        RawOp.from_cpp(source, "broken", compute_capability=ARCH)
    err = info.value
    assert "C++ operator 'broken'" in str(err) and "sm_90" in str(err)
    assert "undeclared_name" in err.log and "undeclared_name" in str(err)
    assert err.source_path and os.path.isfile(err.source_path) and err.source_path in str(err)
    with open(err.source_path) as f:
        assert f.read() == source
    assert not (fresh_caches / "v2" / "rawop").exists() or not any(
        p.is_file() for p in (fresh_caches / "v2" / "rawop").rglob("*"))


@pytest.mark.parametrize("source, name", [
    (MAX, "cpp_min"),                                                               # not in the source
    ('__device__ void cpp_plain(void* a, void* b, void* o) {}', "cpp_plain"),       # C++ linkage: mangled
])
def test_a_name_the_source_does_not_define_is_named(fresh_caches, source, name):
    with pytest.raises(ArgumentError, match='extern "C"') as info:
        RawOp.from_cpp(source, name, compute_capability=ARCH)
    assert info.value.argument == "name"


@pytest.mark.parametrize("call, error, argument", [
    (lambda: RawOp.from_cpp(MAX, "class", compute_capability=ARCH), ArgumentError, "name"),
    (lambda: RawOp.from_cpp(MAX, "cuprims_max", compute_capability=ARCH), ArgumentError, "name"),
    (lambda: RawOp.from_cpp(MAX, 3, compute_capability=ARCH), ArgumentError, "name"),
    (lambda: RawOp.from_cpp(MAX.encode(), "cpp_max", compute_capability=ARCH), ArgumentTypeError, "source"),
    (lambda: RawOp.from_cpp(MAX, "cpp_max", compute_capability="sm_9x"), ArgumentError, "compute_capability"),
    (lambda: RawOp.from_cpp(MAX, "cpp_max", compute_capability=ARCH, state_alignment=3), ArgumentError,
     "state_alignment"),
])
def test_bad_arguments_are_named_before_anything_compiles(call, error, argument):
    before = counters()
    with pytest.raises(error) as info:
        call()
    assert info.value.argument == argument
    if argument != "state_alignment":      # checked by the RawOp made from the compiled LTO-IR
        assert delta(before)["nvrtc_compiles"] == 0


def test_no_target_and_no_gpu_says_what_to_pass(monkeypatch):
    from cuprims._runtime import driver

    def no_device():
        raise NoDeviceError("no CUDA device")

    monkeypatch.setattr(driver, "current_device", no_device)
    with pytest.raises(NoDeviceError, match="compute_capability="):
        RawOp.from_cpp(MAX, "cpp_max")


def test_an_operator_of_the_wrong_arity_is_refused_at_the_build(shared_cache):
    binary = RawOp.from_cpp(MAX, "cpp_max", compute_capability=ARCH)
    it = cuprims.TransformIterator(P(np.int32), binary, value_type=types.int32)
    with pytest.raises(ArgumentError, match="takes 2 pointer parameters") as info:
        _reduce(cuprims.OpKind.PLUS, d_in=it)
    assert info.value.argument == "d_in"
