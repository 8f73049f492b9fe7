"""numba-cuda's C++ shims, made mergeable in an operator's link inputs.

numba-cuda lowers float16, bfloat16 and fp8 arithmetic to calls of small ``extern "C"``
functions it writes into one C++ source per type (a *shim*) and compiles with NVRTC when
it links. An operator compiled by ``cuda.compile_all`` carries that shim, compiled, among
its codes. Linked beside anything else numba compiled with the same arithmetic (the
user's own kernel around a cooperative primitive, a second operator of one algorithm),
the two definitions of one function would be "multiply defined". So each shim among an
operator's codes is compiled again from the shim's text with every definition a C++
``inline`` one, kept by ``__attribute__((used))``: its linkage is LLVM's linkonce_odr,
which the linker merges with numba's own definition, in either order. (A weak definition
is not enough: nvJitLink 13.0 reports a weak and a strong one as multiply defined;
13.5 merges them.)

A shim is recognised by its source: while an operator compiles, numba's NVRTC calls are
recorded for the compiling thread (:func:`recording_cu_compiles`), and a code compiled
from the text of one of numba's shims is replaced.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, Iterator

# numba-cuda's shim modules: each keeps its source in ``shim_stream``
_SHIM_MODULES = ("._internal.cuda_fp16", "._internal.cuda_bf16", "._internal.cuda_fp8")
_DEFINITION = 'extern "C" __device__'
_lock = threading.Lock()
_recording: dict[int, list[tuple[str, Any]]] = {}     # thread -> (source, output) of each compile
_original: list[Any] = []


def _shim_streams() -> list[Any]:
    """numba's shim streams, under whichever name numba-cuda's redirect imported them."""
    streams: list[Any] = []
    for key, module in list(sys.modules.items()):
        if key.endswith(_SHIM_MODULES) and getattr(module, "shim_stream", None) is not None:
            if all(module.shim_stream is not s for s in streams):
                streams.append(module.shim_stream)
    return streams


def _is_shim(source: Any) -> bool:
    if isinstance(source, bytes):
        source = source.decode(errors="replace")
    return any(source == stream.getvalue() for stream in _shim_streams())


def _nvrtc_of_compile_all() -> Any:
    """The NVRTC module ``cuda.compile_all`` calls (numba-cuda's redirect can import a module
    under two names: patch the one its compiler holds)."""
    import importlib

    from numba import cuda

    # the compiler module of the numba.cuda package in use, whatever its name
    return importlib.import_module(cuda.__name__ + ".compiler").nvrtc


@contextlib.contextmanager
def recording_cu_compiles() -> Iterator[list[tuple[str, Any]]]:
    """Within the block, each C++ source numba-cuda compiles with NVRTC in this thread (the
    link inputs ``cuda.compile_all`` compiles) is recorded with its output."""
    nvrtc = _nvrtc_of_compile_all()
    me = threading.get_ident()
    with _lock:
        if not _recording:
            original = nvrtc.compile

            def compile_recorded(src: Any, name: Any, cc: Any, *args: Any, **kwargs: Any) -> Any:
                result = original(src, name, cc, *args, **kwargs)
                log = _recording.get(threading.get_ident())
                if log is not None:
                    log.append((src, result[0] if isinstance(result, tuple) else result))
                return result

            _original.append(original)
            nvrtc.compile = compile_recorded
        _recording[me] = []
    try:
        yield _recording[me]
    finally:
        with _lock:
            del _recording[me]
            if not _recording:
                nvrtc.compile = _original.pop()


def mergeable_shims(codes: list[Any], cc: tuple[int, int], as_bytes: Any,
                    compiled: list[tuple[str, Any]]) -> list[bytes]:
    """``codes`` (what ``cuda.compile_all`` returned for an operator, as bytes by
    ``as_bytes``) with each shim among them (by ``compiled``, the recorded NVRTC calls)
    compiled again for ``cc`` with mergeable (inline) definitions."""
    shims = {id(output): str(source if isinstance(source, str) else source.decode())
             for source, output in compiled if _is_shim(source)}
    return [_compile_mergeable(shims[id(code)], cc) if i and id(code) in shims else as_bytes(code)
            for i, code in enumerate(codes)]


def mergeable_text(text: str) -> str:
    """A shim's source with every ``extern "C"`` definition inline and kept (see the module)."""
    return text.replace(_DEFINITION, f"{_DEFINITION} inline __attribute__((used))")


def _compile_mergeable(text: str, cc: tuple[int, int]) -> bytes:
    from cuprims._compile.nvrtc import compile_to_ltoir
    from cuprims._compile.source import Source

    ltoir, _ = compile_to_ltoir(Source(mergeable_text(text), (), (), ()), cc[0] * 10 + cc[1])
    return ltoir
