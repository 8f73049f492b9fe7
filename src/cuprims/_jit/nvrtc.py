"""CUDA C++ source -> LTO-IR through NVRTC (via cuda.core's Program). Arch always explicit."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from .. import config
from ..errors import CompileError
from . import lazy, stats
from .codegen import Source
from .toolchain import KERNELS_DIR, cccl_include_dir, cuda_include_dir

# NVRTC options besides arch and include paths. They build the ProgramOptions below and
# their repr is part of every kernel cache key, so the key always matches the compile.
COMPILE_OPTIONS = {"std": "c++17", "relocatable_device_code": True, "link_time_optimization": True}
BASE_OPTIONS = tuple(f"{k}={v}" for k, v in sorted(COMPILE_OPTIONS.items()))


def _include_dirs() -> list[str]:
    dirs = [str(KERNELS_DIR), cccl_include_dir()]
    extra = cuda_include_dir()
    if extra:
        dirs.append(extra)
    return dirs


def source_name(text: str) -> str:
    return f"cuprims_{hashlib.sha256(text.encode()).hexdigest()[:16]}.cu"


def write_source(text: str, directory: Path | None = None) -> str:
    """Write generated source for inspection; returns its path."""
    directory = directory or config.dump_dir()
    if directory is None:
        directory = Path(tempfile.gettempdir()) / "cuprims-sources"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / source_name(text)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return str(path)


def compile_to_ltoir(source: Source, arch: int) -> tuple[bytes, dict[str, str]]:
    """Compile ``source`` for ``sm_<arch>``; returns (LTO-IR, name expression -> lowered name)."""
    core = lazy.cuda_core()
    Program, ProgramOptions = core.Program, core.ProgramOptions

    dump = config.dump_dir()
    if dump is not None:
        write_source(source.text, dump)
    options = ProgramOptions(arch=f"sm_{arch}", include_path=_include_dirs(), **COMPILE_OPTIONS,
                             **dict(source.compile_options))
    stats.bump("nvrtc_compiles")
    try:
        program = Program(source.text, "c++", options)
        obj = program.compile("ltoir", name_expressions=list(source.name_expressions))
    except Exception as exc:
        path = write_source(source.text)
        log = str(exc)
        raise CompileError(f"NVRTC could not compile the generated code for sm_{arch}", log=log,
                           source_path=path, options=(f"-arch=sm_{arch}",) + BASE_OPTIONS) from None
    mapping = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in obj.symbol_mapping.items()}
    return bytes(obj.code), mapping
