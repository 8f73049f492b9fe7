"""NVRTC is called through cuda.bindings (importing cuda.core cost a fresh process's first
build 0.1-0.16 s): its command line must be the one cuda.core's ProgramOptions makes for
the same options, and a compile must give what Program gives."""

from __future__ import annotations

import io
import itertools

import pytest

from cuprims._compile import nvrtc
from cuprims.errors import CompileError

MODES = [nvrtc.COMPILE_OPTIONS, nvrtc.DIRECT_OPTIONS]
EXTRAS = [{}, {"device_as_default_execution_space": True}, {"time": "/tmp/phases.csv"}]
PCH = [{}, {"create_pch": "/tmp/x.pch"}, {"use_pch": "/proc/self/fd/7"}]


@pytest.mark.parametrize("mode,extra,pch", list(itertools.product(MODES, EXTRAS, PCH)))
def test_the_flags_are_cuda_cores(mode, extra, pch):
    from cuda.core import ProgramOptions

    options = dict(arch="sm_90", include_path=nvrtc._include_dirs(), **mode, **extra, **pch)
    assert nvrtc.nvrtc_flags(options) == ProgramOptions(**options).as_bytes("nvrtc")


def test_an_option_without_a_flag_is_refused():
    with pytest.raises(ValueError, match="use_fast_math"):
        nvrtc.nvrtc_flags({"arch": "sm_90", "use_fast_math": True})


UNIT = """
template <class T> __global__ void scale(T* p, T k) { p[threadIdx.x] *= k; }
extern "C" __device__ __attribute__((used)) const long long answer[1] = {42};
"""


@pytest.mark.parametrize("output,mode", [("ltoir", nvrtc.COMPILE_OPTIONS), ("cubin", nvrtc.DIRECT_OPTIONS)])
def test_a_compile_gives_what_cuda_cores_program_gives(output, mode):
    from cuda.core import Program, ProgramOptions

    options = dict(arch="sm_90", **mode)
    names = ["scale<float>", "scale<int>"]
    ours = nvrtc.nvrtc_compile(UNIT.encode(), options, output, names)
    theirs = Program(UNIT, "c++", ProgramOptions(**options)).compile(output, name_expressions=names)
    assert ours.code == bytes(theirs.code)
    assert ours.symbol_mapping == {k: (v.decode() if isinstance(v, bytes) else v)
                                   for k, v in theirs.symbol_mapping.items()}
    assert ours.symbol_mapping["scale<float>"].startswith("_Z5scaleIfEvPT_S0_")


def test_a_failed_compile_raises_with_nvrtcs_log_and_the_log_reaches_the_stream():
    logs = io.StringIO()
    with pytest.raises(nvrtc.NvrtcError, match="undefined_thing") as info:
        nvrtc.nvrtc_compile(b"__global__ void k() { undefined_thing(); }", dict(arch="sm_90", **nvrtc.DIRECT_OPTIONS),
                            "cubin", [], logs)
    assert "undefined_thing" in logs.getvalue() and "NVRTC_ERROR_COMPILATION" in str(info.value)


def test_a_generated_unit_that_does_not_compile_is_a_compile_error_with_the_log():
    from cuprims._compile.source import Source

    bad = Source(text="#include <cuda/std/cstdint>\nint broken(;\n", name_expressions=(), extern_symbols=(),
                 meta_fields=())
    with pytest.raises(CompileError) as info:
        nvrtc.compile_to_cubin(bad, 90)
    assert "broken" in str(info.value) and "-arch=sm_90" in str(info.value)
