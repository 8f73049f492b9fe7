"""How many parameters a RawOp's function really takes, read before it is linked.

LTO-IR is opaque (NVVM's container is not plain LLVM bitcode), and link-time optimisation
does not compare a C declaration with the definition it binds to: a unary function linked
where a binary one is called would read a pointer that was never passed. So, once per
RawOp, a tiny probe kernel that takes the function's address is linked with the RawOp's
LTO-IR into PTX, which keeps the function, and its PTX signature says how many
parameters it has. This runs only when a cubin has to be built (a cache hit skips it),
and costs a few milliseconds beside a build's seconds.
"""

from __future__ import annotations

import re
import threading

from ..errors import ArgumentError
from ..op import RawOp
from . import lazy, stats

_PROBE_KERNEL = "cuprims_arity_probe"
_counts: dict[str, int | None] = {}     # RawOp digest -> parameter count (None: not found in PTX)
_counts_lock = threading.Lock()


def _probe_ltoir(symbol: str, arch: int) -> bytes:
    core = lazy.cuda_core()
    # The declaration's own parameter list does not matter: only the address is taken.
    source = (f'extern "C" __device__ void {symbol}();\n'
              f'extern "C" __global__ void {_PROBE_KERNEL}(void** out) {{ *out = (void*)&{symbol}; }}\n')
    options = core.ProgramOptions(arch=f"sm_{arch}", relocatable_device_code=True, link_time_optimization=True)
    return bytes(core.Program(source, "c++", options).compile("ltoir").code)


def _ptx_parameter_count(ptx: str, symbol: str) -> int | None:
    """Parameters of ``symbol``'s definition in ``ptx``; -1 when it is only declared there."""
    pattern = r"(\.extern\s+)?\.func\s+(?:\([^)]*\)\s*)?" + re.escape(symbol) + r"\b\s*(\(([^)]*)\))?"
    match = re.search(pattern, ptx)
    if match is None:
        return None
    if match.group(1):
        return -1
    params = match.group(3)
    return 0 if not params or not params.strip() else params.count(".param")


def parameter_count(op: RawOp, arch: int) -> int | None:
    """The number of parameters of ``op.name`` as defined in its LTO-IR (None when the PTX
    does not show it). Raises ArgumentError when ``op.ltoir`` does not define ``op.name``."""
    digest = op.digest()
    with _counts_lock:
        if digest in _counts:
            return _counts[digest]
    core = lazy.cuda_core()
    stats.bump("raw_op_probes")
    objects = [core.ObjectCode.from_ltoir(_probe_ltoir(op.name, arch), name="probe"),
               core.ObjectCode.from_ltoir(op.ltoir, name="op")]
    objects += [core.ObjectCode.from_ltoir(code, name=f"extra{i}") for i, code in enumerate(op.extra_ltoirs)]
    try:
        linker = core.Linker(*objects, options=core.LinkerOptions(arch=f"sm_{arch}", link_time_optimization=True,
                                                                  ptx=True))
        try:
            ptx = bytes(linker.link("ptx").code).decode(errors="replace")
        finally:
            linker.close()
    except Exception as exc:
        log = str(exc)
        if "undefined" in log.lower() or "unresolved" in log.lower():
            raise ArgumentError("name", "the name of a function that the RawOp's ltoir defines",
                                op.name) from None
        return None     # anything else is the real link's to report, with its full log
    count = _ptx_parameter_count(ptx, op.name)
    if count == -1:
        raise ArgumentError("name", "the name of a function that the RawOp's ltoir defines", op.name)
    with _counts_lock:
        _counts[digest] = count
    return count


def check_arity(op: RawOp, expected: int, arch: int, argument: str = "op", context: str = "") -> None:
    """Refuse ``op`` (given as ``argument``; ``context``: where in it, for an operator
    inside an iterator) when its function does not take ``expected`` pointer parameters."""
    found = parameter_count(op, arch)
    if found is not None and found != expected:
        inputs = expected - 1 - bool(op.state)
        state = "the state's address, " if op.state else ""
        where = f" ({context})" if context else ""
        raise ArgumentError(
            argument, f"a RawOp{where} whose function '{op.name}' takes {expected} pointer parameters here ({state}"
                      f"{inputs} input address{'es' if inputs != 1 else ''}, then the result's)",
            f"'{op.name}' defined with {found} parameters")
