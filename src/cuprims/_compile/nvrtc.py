"""CUDA C++ source -> LTO-IR, or a unit with nothing to link straight to a cubin, through
NVRTC (called through cuda.bindings). Arch always explicit."""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from cuprims import config
from cuprims._base import lazy, stats
from cuprims._cache.files import UnsafeDirectory, open_private_dir, report_unusable, write_file_atomic
from cuprims._compile.source import Source
from cuprims._compile.toolchain import KERNEL_INCLUDE_DIRS, cccl_include_dir, cuda_include_dir
from cuprims.errors import CompileError

# NVRTC options besides arch and include paths. They build the ProgramOptions below and
# their repr is part of every kernel cache key, so the key always matches the compile.
COMPILE_OPTIONS = {"std": "c++17", "relocatable_device_code": True, "link_time_optimization": True}
BASE_OPTIONS = tuple(f"{k}={v}" for k, v in sorted(COMPILE_OPTIONS.items()))
# A unit with nothing to link (no Python or raw operator) is compiled by NVRTC straight to
# an executable cubin: whole-program (-ewp keeps the device runtime's PDL intrinsics that
# CUB calls, which plain whole-program mode leaves undeclared) gives the same machine code
# as the LTO-IR + nvJitLink path (checked section by section by the tests) without the
# LTO link, which cost 0.5-0.9 s per build on the H200 host.
DIRECT_OPTIONS = {"std": "c++17", "extensible_whole_program": True}
DIRECT_BASE_OPTIONS = tuple(f"{k}={v}" for k, v in sorted(DIRECT_OPTIONS.items()))


def _include_dirs() -> list[str]:
    dirs = [*map(str, KERNEL_INCLUDE_DIRS), cccl_include_dir()]
    extra = cuda_include_dir()
    if extra:
        dirs.append(extra)
    return dirs


def source_name(text: str) -> str:
    return f"cuprims_{hashlib.sha256(text.encode()).hexdigest()[:16]}.cu"


def default_source_dir() -> Path:
    """Where generated source goes without CUPRIMS_DUMP_DIR: a private directory per user."""
    uid = os.geteuid() if hasattr(os, "geteuid") else os.getpid()
    return Path(tempfile.gettempdir()) / f"cuprims-sources-{uid}"


def save_source(text: str, directory: Path | None = None) -> tuple[str | None, str | None]:
    """Write generated source for inspection: ``(path, None)``, or ``(None, why not)``.

    The directory (``directory``, else CUPRIMS_DUMP_DIR, else :func:`default_source_dir`)
    must be a private directory of ours (created 0700); the file is written 0600 through a
    temp file with an unpredictable name, never following a symlink. A directory that
    cannot be used is reported once (a warning on the ``cuprims`` logger), never raised:
    the source is only a diagnostic aid."""
    directory = Path(directory or config.dump_dir() or default_source_dir())
    name = source_name(text)
    try:
        fd = open_private_dir(directory, create=True)
        try:
            write_file_atomic(fd, name, text.encode())
        finally:
            os.close(fd)
    except UnsafeDirectory as exc:
        reason = str(exc)
    except OSError as exc:
        reason = f"cannot write in {directory}: {exc.strerror or exc}"
    else:
        return str(directory / name), None
    report_unusable("generated-source directory", directory, reason)
    return None, reason


def write_source(text: str, directory: Path | None = None) -> str | None:
    """Write generated source for inspection; returns its path, or None if it could not be written."""
    return save_source(text, directory)[0]


def compile_to_ltoir(source: Source, arch: int) -> tuple[bytes, dict[str, str]]:
    """Compile ``source`` for ``sm_<arch>``; returns (LTO-IR, name expression -> lowered name)."""
    return _compile(source, arch, "ltoir", COMPILE_OPTIONS, BASE_OPTIONS)


def compile_to_cubin(source: Source, arch: int) -> tuple[bytes, dict[str, str]]:
    """Compile ``source`` (which references no external operator) straight to an
    executable ``sm_<arch>`` cubin; returns (cubin, name expression -> lowered name)."""
    if source.extern_symbols:
        raise ValueError(f"a unit that calls {source.extern_symbols} must be linked: compile it to LTO-IR")
    return _compile(source, arch, "cubin", DIRECT_OPTIONS, DIRECT_BASE_OPTIONS)


def _compile(source: Source, arch: int, output: str, mode_options: dict[str, object],
             shown_options: tuple[str, ...]) -> tuple[bytes, dict[str, str]]:
    from cuprims._compile.toolchain import check_deferred_arch

    check_deferred_arch(arch)
    dump = config.dump_dir()
    if dump is not None:
        write_source(source.text, dump)
    options = dict(arch=f"sm_{arch}", include_path=_include_dirs(), **mode_options, **dict(source.compile_options))
    text, names = source.text.encode(), list(source.name_expressions)

    def compile_unit(pch_options: dict, logs: Any = None) -> Compiled:
        return nvrtc_compile(text, {**options, **pch_options}, output, names, logs)

    # imported here: a process whose builds the disk cache serves never needs the PCH
    # machinery (~2 ms of imports on the CPU machine)
    from cuprims._compile.pch import compile_with_pch

    stats.bump("nvrtc_compiles")
    try:
        obj = compile_with_pch(source.header_prefix, options, compile_unit)
    except Exception as exc:
        raise _compile_error(source.text, arch, "the generated code", str(exc), shown_options) from None
    return obj.code, dict(obj.symbol_mapping)


def compile_operator(text: str, arch: int, what: str) -> bytes:
    """LTO-IR of a user's own C++ (``what`` names it in a CompileError: ``the C++ operator
    'f'``), compiled for ``sm_<arch>`` with the CCCL and CUDA headers on the include path.

    The text is compiled as written (no headers moved up) and without a precompiled
    header: a user's unit is small, its LTO-IR is cached whole, and its headers would make
    PCHs of their own."""
    from cuprims._compile.toolchain import check_deferred_arch

    check_deferred_arch(arch)
    dump = config.dump_dir()
    if dump is not None:
        write_source(text, dump)
    include = [cccl_include_dir(), *filter(None, [cuda_include_dir()])]
    options = dict(arch=f"sm_{arch}", include_path=include, **COMPILE_OPTIONS)
    stats.bump("nvrtc_compiles")
    try:
        return nvrtc_compile(text.encode(), options, "ltoir", []).code
    except Exception as exc:
        raise _compile_error(text, arch, what, str(exc), BASE_OPTIONS) from None


def _compile_error(text: str, arch: int, what: str, log: str, shown_options: tuple[str, ...]) -> CompileError:
    """The CompileError of a failed compile of ``text``: NVRTC's log, the options, and
    where the source was written for inspection (or why it could not be)."""
    path, why_not = save_source(text)
    message = f"NVRTC could not compile {what} for sm_{arch}"
    if path is None:
        message += f"\n(the source could not be written for inspection: {why_not})"
    return CompileError(message, log=log, source_path=path, options=(f"-arch=sm_{arch}",) + shown_options)


# ---------------------------------------------------------------------------- NVRTC itself
# NVRTC is called through cuda.bindings, not cuda.core's Program: importing cuda.core cost
# a fresh process's first build 0.11-0.16 s on the CPU machine (cuda.bindings.nvrtc, which
# the PCH steps import anyway, 0.03 s). The flags are those cuda.core's ProgramOptions
# makes for the same options (tests/cpu/compile/test_nvrtc_flags.py compares them).

@dataclass(frozen=True)
class Compiled:
    """What one NVRTC compile gave: the output and name expression -> lowered name."""

    code: bytes
    symbol_mapping: dict[str, str]


class NvrtcError(Exception):
    """An NVRTC call failed; the message is its log (or the failing call and result)."""


def nvrtc_flags(options: Mapping[str, Any]) -> list[bytes]:
    """NVRTC's command line for ``options`` (ProgramOptions' field names: those we use),
    in ProgramOptions' order."""
    unknown = sorted(set(options) - {"arch", "relocatable_device_code", "extensible_whole_program",
                                     "link_time_optimization", "include_path", "std",
                                     "device_as_default_execution_space", "time", "create_pch", "use_pch"})
    if unknown:
        raise ValueError(f"NVRTC options without a flag here: {unknown}")
    flags = [f"-arch={options['arch']}"]
    if options.get("relocatable_device_code"):
        flags.append("--relocatable-device-code=true")
    if options.get("extensible_whole_program"):
        flags.append("--extensible-whole-program")
    if options.get("link_time_optimization"):
        flags.append("--dlink-time-opt")
    flags += [f"--include-path={d}" for d in options.get("include_path") or ()]
    if options.get("std"):
        flags.append(f"--std={options['std']}")
    if options.get("device_as_default_execution_space"):
        flags.append("--device-as-default-execution-space")
    if options.get("time"):   # NVRTC's per-phase timing report, a CSV file (bench_nvrtc_phases.py)
        flags.append(f"--time={options['time']}")
    for name, flag in (("create_pch", "--create-pch"), ("use_pch", "--use-pch")):
        if options.get(name):
            flags.append(f"{flag}={options[name]}")
    return [f.encode() for f in flags]


def output_buffer(size: int) -> bytearray:
    """A buffer NVRTC may write ``size`` bytes into. Never a ``bytes`` object: those are
    immutable, and CPython shares small ones (``b" "`` is the one-byte singleton that
    ``bytes([32])`` returns), so a C write into one corrupts every user of it."""
    return bytearray(max(size, 1))


def nvrtc_compile(text: bytes, options: Mapping[str, Any], output: str, names: list[str],
                  logs: Any = None) -> Compiled:
    """One NVRTC compile of ``text`` to ``output`` ("ltoir" or "cubin"); NVRTC's log is
    written to ``logs`` (a text stream) when given, and is the message of the NvrtcError
    a failed compile raises."""
    nvrtc = lazy.nvrtc_bindings()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS

    def check(call: str, result: Any) -> Any:
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != ok:
            raise NvrtcError(f"{call}: {err}")
        return rest[0] if len(rest) == 1 else rest

    flags = nvrtc_flags(options)
    prog = check("nvrtcCreateProgram", nvrtc.nvrtcCreateProgram(text, b"default_program", 0, [], []))
    try:
        for name in names:
            check("nvrtcAddNameExpression", nvrtc.nvrtcAddNameExpression(prog, name.encode()))
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(flags), flags)
        size = check("nvrtcGetProgramLogSize", nvrtc.nvrtcGetProgramLogSize(prog))
        buf = output_buffer(size)
        check("nvrtcGetProgramLog", nvrtc.nvrtcGetProgramLog(prog, buf))
        log = bytes(buf).rstrip(b"\0").decode(errors="replace")
        if logs is not None and log.strip():
            logs.write(log)
        if err != ok:
            raise NvrtcError(f"{err}, compilation log:\n\n{log}")
        get_size, get = ((nvrtc.nvrtcGetLTOIRSize, nvrtc.nvrtcGetLTOIR) if output == "ltoir"
                         else (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN))
        size = check(get_size.__name__, get_size(prog))
        code = output_buffer(size)
        check(get.__name__, get(prog, code))
        mapping = {}
        for name in names:
            lowered = check("nvrtcGetLoweredName", nvrtc.nvrtcGetLoweredName(prog, name.encode()))
            mapping[name] = lowered.decode() if isinstance(lowered, bytes) else str(lowered)
        return Compiled(bytes(code), mapping)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
