"""NVRTC writes its log and its output into buffers we hand it: they must be writable
buffers of our own (bytearray), never ``bytes``. A ``bytes`` object is immutable and
CPython shares small ones: a one-byte log buffer ``b" "`` is the singleton that
``bytes([32])`` returns everywhere, and a NUL written into it changed that value for the
whole process."""

from __future__ import annotations

import io
import json

import pytest

from cuprims._compile import nvrtc
from cpu_helpers import last_json, run_python

# sources whose NVRTC log is empty, and ones with a warning in it
SOURCES = {
    "empty log": b"__global__ void k() {}\n",
    "warning in the log": b'#warning "cuprims buffer test"\n__global__ void k() {}\n',
}
OUTPUTS = {
    "ltoir": dict(arch="sm_90", std="c++17", relocatable_device_code=True, link_time_optimization=True),
    "cubin": dict(arch="sm_90", std="c++17"),
}
# the calls that fill a buffer of ours
FILLING_CALLS = ("nvrtcGetProgramLog", "nvrtcGetLTOIR", "nvrtcGetCUBIN")


def _single_bytes_intact() -> bool:
    return all(bytes([i])[0] == i for i in range(256))


@pytest.mark.parametrize("output", sorted(OUTPUTS))
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_every_buffer_nvrtc_fills_is_a_bytearray(source, output, monkeypatch):
    from cuprims._base import lazy

    bindings = lazy.nvrtc_bindings()
    seen: list[tuple[str, type]] = []

    class Spy:
        """The NVRTC bindings, recording the type of each buffer a filling call gets."""

        def __getattr__(self, name):
            real = getattr(bindings, name)
            if name not in FILLING_CALLS:
                return real

            def call(prog, buf):
                seen.append((name, type(buf)))
                return real(prog, buf)
            return call

    monkeypatch.setattr(lazy, "nvrtc_bindings", lambda: Spy())
    logs = io.StringIO()
    compiled = nvrtc.nvrtc_compile(SOURCES[source], OUTPUTS[output], output, [], logs)
    assert compiled.code[:4] in (b"\x7fELF", b"\xedCN\x7f")
    assert isinstance(compiled.code, bytes)
    assert ("warning" in logs.getvalue()) == (source == "warning in the log")
    assert {name for name, _ in seen} == {"nvrtcGetProgramLog",
                                          "nvrtcGetLTOIR" if output == "ltoir" else "nvrtcGetCUBIN"}
    assert all(kind is bytearray for _, kind in seen), seen
    assert _single_bytes_intact()


PROBE = r"""
import json
import numpy as np
import cuprims
from cuprims._compile import nvrtc

def constants():
    # every bytes constant of the NVRTC module's functions, by value
    out = {}
    for name, fn in vars(nvrtc).items():
        code = getattr(fn, "__code__", None)
        if code is not None:
            out[name] = [list(c) for c in code.co_consts if isinstance(c, bytes)]
    return out

before = constants()
cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32),
                         op=cuprims.OpKind.PLUS, h_init=cuprims.ProxyValue(np.float32), compute_capability=90)
print(json.dumps({"singles": all(bytes([i])[0] == i for i in range(256)), "space": bytes([32]) == b" ",
                  "constants": constants() == before,
                  "compiles": cuprims.cache_info()["nvrtc_compiles"]}))
"""


@pytest.mark.parametrize("pch", ["0", "1"])
def test_a_cold_build_leaves_every_bytes_object_as_it_was(pch, tmp_path):
    """A whole cold build in a fresh process (NVRTC's log is empty without a PCH), then the
    256 one-byte objects and the NVRTC module's byte constants still hold their values."""
    out = run_python(PROBE, env={"CUPRIMS_CACHE_DIR": str(tmp_path / "cache"), "CUPRIMS_PCH": pch})
    figures = last_json(out.stdout)
    print(json.dumps(figures))
    assert figures["compiles"] >= 1
    assert figures == {"singles": True, "space": True, "constants": True, "compiles": figures["compiles"]}
