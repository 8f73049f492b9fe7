"""CUDA C++ source -> LTO-IR, or a unit with nothing to link straight to a cubin, through
NVRTC (via cuda.core's Program). Arch always explicit."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from .. import config
from ..errors import CompileError
from . import lazy, stats
from .private_files import UnsafeDirectory, open_private_dir, report_unusable, write_file_atomic
from .codegen import Source
from .pch import compile_with_pch
from .toolchain import KERNELS_DIR, cccl_include_dir, cuda_include_dir

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
    dirs = [str(KERNELS_DIR), cccl_include_dir()]
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
    from .toolchain import check_deferred_arch

    check_deferred_arch(arch)
    core = lazy.cuda_core()
    Program, ProgramOptions = core.Program, core.ProgramOptions

    dump = config.dump_dir()
    if dump is not None:
        write_source(source.text, dump)
    options = dict(arch=f"sm_{arch}", include_path=_include_dirs(), **mode_options, **dict(source.compile_options))

    def compile_unit(pch_options: dict, logs: object = None) -> object:
        program = Program(source.text, "c++", ProgramOptions(**options, **pch_options))
        return program.compile(output, name_expressions=list(source.name_expressions), logs=logs)

    stats.bump("nvrtc_compiles")
    try:
        obj = compile_with_pch(source.header_prefix, options, compile_unit)
    except Exception as exc:
        log = str(exc)
        path, why_not = save_source(source.text)
        message = f"NVRTC could not compile the generated code for sm_{arch}"
        if path is None:
            message += f"\n(the generated source could not be written for inspection: {why_not})"
        raise CompileError(message, log=log, source_path=path,
                           options=(f"-arch=sm_{arch}",) + shown_options) from None
    mapping = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in obj.symbol_mapping.items()}
    return bytes(obj.code), mapping
