"""What a RawOp holds, checked before it is linked: a symbol name C++ can call, LTO-IR
this nvJitLink can read at all (when the RawOp is made), and how many parameters its
function really takes (when a cubin is first built with it).

Readable: NVVM's container starts with a fixed magic, but nvJitLink reads only the
container's header when the module is added; a corrupt or truncated body shows only at
the link, as an error that names neither the operator nor the argument. So each distinct
module is linked once, alone, to PTX for the newest architecture this toolkit knows (any
older target's LTO-IR links there), which parses the whole of it: a few milliseconds.

LTO-IR is opaque (NVVM's container is not plain LLVM bitcode), and link-time optimisation
does not compare a C declaration with the definition it binds to: a unary function linked
where a binary one is called would read a pointer that was never passed. So, once per
RawOp, a tiny probe kernel that takes the function's address is linked with the RawOp's
LTO-IR into PTX, which keeps the function, and its PTX signature says how many
parameters it has. This runs only when a cubin has to be built (a cache hit skips it),
and costs a few milliseconds beside a build's seconds.
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import TYPE_CHECKING, Any

from cuprims._base import lazy, stats
from cuprims.errors import ArgumentError, ArgumentTypeError

if TYPE_CHECKING:
    from cuprims.op import RawOp

_PROBE_KERNEL = "cuprims_arity_probe"
# The first bytes of every LTO-IR module NVVM writes (numba-cuda's and NVRTC's alike).
LTOIR_MAGIC = b"\xedCN\x7f"
_CPP_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch template
this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t
while xor xor_eq main memcpy memset malloc free printf
""".split())
_counts: dict[str, int | None] = {}     # RawOp digest -> parameter count (None: not found in PTX)
_counts_lock = threading.Lock()


# nvJitLink results that mean "this is not LTO-IR that this nvJitLink can read". Others
# (an arch-specific module such as sm_90a's, which links only for its own target) are left
# for the real link to judge, with its full log.
_UNREADABLE = ("ERROR_OUTDATED_LIBRARY", "ERROR_NVVM_COMPILE", "ERROR_INVALID_INPUT",
               "ERROR_INCORRECT_INPUT_TYPE")
_readable: set[str] = set()        # sha256 of modules that linked alone
_FALLBACK_PROBE_ARCH = 90


def check_symbol_name(name: Any) -> None:
    """Refuse a RawOp ``name`` that is no C identifier, a C++ keyword, reserved (``__x``,
    ``_X``) or cuprims' own (``cuprims_*``)."""
    if not isinstance(name, str) or not name.isidentifier() or not name.isascii():
        raise ArgumentError("name", "a C identifier naming the operator's symbol", name)
    if name in _CPP_KEYWORDS or name.startswith("__") or (name[0] == "_" and name[1:2].isupper()) \
            or name.startswith("cuprims_"):
        raise ArgumentError("name", "a symbol name that is not a C++ keyword, not reserved (__x, _X) and not "
                            "cuprims' own (cuprims_*)", name)


def ltoir_bytes(code: Any, argument: str) -> bytes:
    """``code`` (bytes, or a holder with a ``.code`` of bytes: cuda.core's ObjectCode) as bytes."""
    if isinstance(code, (bytes, bytearray, memoryview)):
        return bytes(code)
    inner = getattr(code, "code", None)
    if isinstance(inner, (bytes, bytearray, memoryview)):
        return bytes(inner)
    raise ArgumentTypeError(argument, "LTO-IR as bytes (or an object with a .code bytes attribute)", code)


def check_ltoir(code: bytes, argument: str) -> None:
    """Refuse ``code`` unless it is NVVM's LTO-IR that this nvJitLink reads whole."""
    if not code.startswith(LTOIR_MAGIC):
        raise ArgumentError(argument, "LTO-IR (NVVM's output, as numba-cuda's output='ltoir' or NVRTC's "
                            "-dlto give)", f"{len(code)} bytes starting {code[:4]!r}")
    check_ltoir_readable(code, argument)


def _probe_arch() -> int:
    from cuprims._compile.toolchain import supported_archs

    archs = supported_archs()
    return max(archs) if archs else _FALLBACK_PROBE_ARCH


def check_ltoir_readable(code: bytes, argument: str) -> None:
    """Raise ArgumentError naming ``argument`` unless ``code`` is an LTO-IR module that
    this nvJitLink reads whole (see the module docstring)."""
    digest = hashlib.sha256(code).hexdigest()
    if digest in _readable:
        return
    nvjitlink = lazy.nvjitlink_bindings()
    stats.bump("raw_op_probes")
    handle = nvjitlink.create(3, [f"-arch=sm_{_probe_arch()}", "-lto", "-ptx"])
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.LTOIR, code, len(code), argument)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            if not any(name in str(exc) for name in _UNREADABLE):
                return
            size = nvjitlink.get_error_log_size(handle)
            log = bytearray(max(size, 1))
            nvjitlink.get_error_log(handle, log)
            why = bytes(log).rstrip(b"\0").decode(errors="replace").strip() or str(exc)
            major, minor = nvjitlink.version()
            raise ArgumentError(argument, f"LTO-IR that nvJitLink {major}.{minor} can read (NVVM's output, as "
                                "numba-cuda's output='ltoir' or NVRTC's -dlto give, from this CUDA version or "
                                "an older one)", f"{len(code)} bytes it cannot read: {why}") from None
    finally:
        nvjitlink.destroy(handle)
    _readable.add(digest)


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
    count = _defined_count(op.name, [op.ltoir, *op.extra_ltoirs], arch,
                           "the name of a function that the RawOp's ltoir defines")
    with _counts_lock:
        _counts[digest] = count
    return count


def check_defines(ltoir: bytes, name: str, arch: int) -> None:
    """Refuse ``name`` unless ``ltoir`` (compiled from a C++ operator) defines a function of
    that name for C to call."""
    _defined_count(name, [ltoir], arch, 'the name of an extern "C" __device__ function that the source defines')


def _defined_count(name: str, codes: list[bytes], arch: int, expected: str) -> int | None:
    """Parameters of ``name`` as ``codes`` define it, read from the PTX of a probe linked
    with them (None when the PTX does not show it); ArgumentError naming ``name`` when
    they do not define it."""
    core = lazy.cuda_core()
    stats.bump("raw_op_probes")
    objects = [core.ObjectCode.from_ltoir(_probe_ltoir(name, arch), name="probe")]
    objects += [core.ObjectCode.from_ltoir(code, name=f"op{i}") for i, code in enumerate(codes)]
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
            raise ArgumentError("name", expected, name) from None
        return None     # anything else is the real link's to report, with its full log
    count = _ptx_parameter_count(ptx, name)
    if count == -1:
        raise ArgumentError("name", expected, name)
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
