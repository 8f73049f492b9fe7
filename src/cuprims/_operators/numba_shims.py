"""numba-cuda's C++ shims, made weak in an operator's link inputs.

numba-cuda lowers float16, bfloat16 and fp8 arithmetic to calls of small ``extern "C"``
functions it writes into one C++ source per type (a *shim*) and compiles with NVRTC when
it links. An operator compiled by ``cuda.compile_all`` carries that shim, compiled, among
its codes. Linked beside anything else numba compiled with the same arithmetic (the
user's own kernel around a cooperative primitive, a second operator of one algorithm),
the two definitions of one function would be "multiply defined". So each shim among an
operator's codes is compiled again from the shim's text with every definition weak: the
linker then keeps one.

A shim is recognised by its code: the one numba's own compile of a shim's current text
gives (LTO-IR keeps no readable names), asked only when a code came from C++ source.
"""

from __future__ import annotations

import sys
from typing import Any

# numba-cuda's shim modules: each keeps its source in ``shim_stream`` (and the names of
# the functions written to it so far in ``shim_stream._keys``)
_SHIM_MODULES = ("numba.cuda._internal.cuda_fp16", "numba.cuda._internal.cuda_bf16",
                 "numba.cuda._internal.cuda_fp8")
_DEFINITION = 'extern "C" __device__'
_numba_compiles: dict[tuple[str, tuple[int, int]], bytes] = {}


def _shim_texts() -> list[str]:
    """The current text of every shim numba has written a function to."""
    texts = []
    for name in _SHIM_MODULES:
        stream = getattr(sys.modules.get(name), "shim_stream", None)
        if stream is not None and getattr(stream, "_keys", None):
            texts.append(stream.getvalue())
    return texts


def _as_numba_compiles(text: str, cc: tuple[int, int]) -> bytes:
    """The LTO-IR numba's ``compile_all`` makes of the C++ ``text`` (as it compiles a shim)."""
    key = (text, cc)
    if key not in _numba_compiles:
        from numba.cuda.cudadrv import nvrtc

        # mypy reads numba's own numba.cuda, which numba-cuda's redirect replaces at run time
        code, _ = nvrtc.compile(text, "<unnamed-cu>", cc, ltoir=True)  # type: ignore[call-arg]
        if len(_numba_compiles) >= 64:
            _numba_compiles.clear()
        _numba_compiles[key] = bytes(getattr(code, "code", code))
    return _numba_compiles[key]


def weak_shims(codes: list[Any], cc: tuple[int, int], as_bytes: Any) -> list[bytes]:
    """``codes`` (what ``cuda.compile_all`` returned for an operator, as bytes by
    ``as_bytes``) with each shim compiled again for ``cc`` with weak definitions."""
    out = [as_bytes(code) for code in codes]
    from_source = [i for i, code in enumerate(codes) if i and type(code).__name__ == "ObjectCode"]
    if not from_source:
        return out
    for text in _shim_texts():
        numba_code = _as_numba_compiles(text, cc)
        for i in from_source:
            if out[i] == numba_code:
                out[i] = _compile_weak(text, cc)
    return out


def _compile_weak(text: str, cc: tuple[int, int]) -> bytes:
    from cuprims._compile.nvrtc import compile_to_ltoir
    from cuprims._compile.source import Source

    weak = text.replace(_DEFINITION, f"{_DEFINITION} __attribute__((weak))")
    ltoir, _ = compile_to_ltoir(Source(weak, (), (), ()), cc[0] * 10 + cc[1])
    return ltoir
