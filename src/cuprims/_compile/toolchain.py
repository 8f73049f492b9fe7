"""Where the compilers and headers are, and their versions (all part of cache keys)."""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
# Kernel templates live beside the algorithm that uses them and are included by home:
# ``#include <reduce/cuprims_reduce.cuh>``; the iterator template, shared by all, by name.
KERNEL_INCLUDE_DIRS = (_PACKAGE_DIR / "algorithms", _PACKAGE_DIR / "iterators")


def _wheel_cccl_dirs() -> list[Path]:
    """CCCL include dirs of the pinned ``nvidia-cuda-cccl`` wheel (``nvidia/cu*/include/cccl``)."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    found = []
    for root in spec.submodule_search_locations:
        for cu in sorted(Path(root).glob("cu*"), reverse=True):
            cand = cu / "include" / "cccl"
            if (cand / "cuda" / "std" / "__cccl" / "version.h").exists():
                found.append(cand)
    return found


@functools.lru_cache(maxsize=None)
def cccl_include_dir() -> str:
    """The pinned wheel's CCCL headers. A CUDA toolkit's own (older) CCCL must not win:
    our kernel templates name CUB internals of exactly the pinned release."""
    dirs = _wheel_cccl_dirs()
    if dirs:
        return str(dirs[0])
    import cuda.pathfinder as pf

    found = pf.locate_nvidia_header_directory("cccl")
    if found is None:
        from cuprims.errors import CuprimsError

        raise CuprimsError("the CCCL headers were not found: install the 'nvidia-cuda-cccl' wheel")
    return found.abs_path


@functools.lru_cache(maxsize=None)
def cuda_include_dir() -> str | None:
    """The CUDA runtime headers (cuda_fp16.h and friends) shipped beside CCCL in the wheels."""
    cccl = Path(cccl_include_dir())
    candidates = [cccl.parent] + [d.parent for d in _wheel_cccl_dirs()]
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations if spec and spec.submodule_search_locations else []):
        candidates += sorted(Path(root).glob("cu*/include"), reverse=True)
        candidates += sorted(Path(root).glob("cuda_runtime/include"))
    for cand in candidates:
        if (cand / "cuda_fp16.h").exists():
            return str(cand)
    try:
        import cuda.pathfinder as pf

        found = pf.locate_nvidia_header_directory("cudart")
        return found.abs_path if found else None
    except Exception:
        return None


@functools.lru_cache(maxsize=None)
def cccl_version() -> str:
    text = (Path(cccl_include_dir()) / "cuda" / "std" / "__cccl" / "version.h").read_text()
    m = re.search(r"#define\s+CCCL_VERSION\s+(\d+)", text)
    return m.group(1) if m else "unknown"


def wheel_version(*names: str) -> str | None:
    """Version of the first installed distribution among ``names``, read from the name of
    its ``.dist-info`` directory on ``sys.path``, the first path entry that has one winning,
    as ``importlib.metadata.version`` decides. No library load (a cache hit must not pay
    for mapping the ~100 MB NVRTC library just to learn its version) and no
    importlib.metadata either: its import and metadata parsing cost a warm process's first
    build ~20 ms of its ~50 ms on the CPU machine."""
    for name in names:
        found = _dist_info_version(name)
        if found:
            return found
    from importlib.metadata import PackageNotFoundError, version  # egg-info and other finders

    for name in names:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return None


def _dist_info_version(name: str) -> str | None:
    # a wheel installs "<name, runs of -_. as _>-<version>.dist-info" holding a METADATA file
    import os
    import sys

    wanted = re.sub(r"[-_.]+", "_", name).lower()
    for entry in sys.path:
        folder = entry or "."
        try:
            listing = os.listdir(folder)
        except OSError:
            continue
        for item in listing:
            if not item.endswith(".dist-info"):
                continue
            dist, _, version = item[: -len(".dist-info")].partition("-")
            if (version and re.sub(r"[-_.]+", "_", dist).lower() == wanted
                    and os.path.isfile(os.path.join(folder, item, "METADATA"))):
                return version
    return None


@functools.lru_cache(maxsize=None)
def nvrtc_version() -> str:
    wheel = wheel_version("nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu12")
    if wheel:
        return "wheel-" + wheel
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


@functools.lru_cache(maxsize=None)
def nvjitlink_version() -> str:
    wheel = wheel_version("nvidia-nvjitlink", "nvidia-nvjitlink-cu12")
    if wheel:
        return "wheel-" + wheel
    from cuda.bindings import nvjitlink

    major, minor = nvjitlink.version()
    return f"{major}.{minor}"


@functools.lru_cache(maxsize=None)
def own_sources_digest() -> str:
    """Hash of this package's Python sources and kernel templates: any change to how we
    generate, compile, wrap or link code changes every key. Once per process, in every
    process that builds (a warm one too): os.walk and plain strings, ~2 ms on the CPU
    machine (pathlib's objects had made it 4-28 ms)."""
    import os

    h = hashlib.sha256()
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = []
    for root, dirs, names in os.walk(package):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = os.path.relpath(root, package).replace(os.sep, "/")
        rel = "" if rel == "." else rel + "/"
        for name in names:
            if name.endswith((".py", ".cuh")):
                files.append((name.endswith(".cuh"), rel + name))
    for _, relpath in sorted(files):
        h.update(relpath.encode())
        with open(os.path.join(package, relpath), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:24]


def build_contract() -> tuple[tuple[str, str], ...]:
    """The fingerprint's parts that fix how the host lays out kernel parameters and reads
    exported metadata: code generator, our own sources, CCCL (not the compilers' versions,
    which a loaded cubin no longer depends on; asking for them costs a package-metadata scan).
    Its parts are cached each, so this costs nothing after the first call."""
    from cuprims._compile.source import CODEGEN_VERSION

    return (("codegen", str(CODEGEN_VERSION)), ("own", own_sources_digest()), ("cccl", cccl_version()))


@functools.lru_cache(maxsize=None)
def toolchain_fingerprint() -> str:
    """Versions of everything that turns our source into a cubin."""
    contract = ";".join(f"{k}={v}" for k, v in build_contract())
    return f"{contract};nvrtc={nvrtc_version()};nvjitlink={nvjitlink_version()}"


# arch -> (argument, given) of a check left for the first compile for that arch
_deferred_archs: dict[int, tuple[str, Any]] = {}


def check_arch_supported(arch: int, argument: str, given: Any) -> None:
    """Raise ArgumentError (naming ``argument`` and the value ``given``) unless this NVRTC
    builds for ``sm_<arch>``. Asked at once when NVRTC's list is known already; else left
    for the first compile for that arch (:func:`check_deferred_arch`): a build that the
    cache serves needs no NVRTC, and loading it just to ask cost a warm process 50-90 ms
    of its build (measured on the 2-core machine). A cached build for an arch was compiled
    by this same toolchain (the key holds its fingerprint), so the arch is one it builds."""
    if supported_archs.cache_info().currsize:
        _raise_unless_supported(arch, argument, given)
    else:
        _deferred_archs.setdefault(arch, (argument, given))


def check_deferred_arch(arch: int) -> None:
    """Before compiling for ``sm_<arch>``: the check :func:`check_arch_supported` left."""
    pending = _deferred_archs.get(arch)
    if pending is not None:
        _raise_unless_supported(arch, *pending)
        _deferred_archs.pop(arch, None)


def _raise_unless_supported(arch: int, argument: str, given: Any) -> None:
    archs = supported_archs()
    if archs is not None and arch not in archs:
        from cuprims.errors import ArgumentError

        shown = ", ".join(f"{a // 10}.{a % 10}" for a in archs)
        raise ArgumentError(argument, f"a compute capability this NVRTC builds for ({shown})", given)


@functools.lru_cache(maxsize=None)
def supported_archs() -> tuple[int, ...] | None:
    """The architectures this NVRTC can compile for (e.g. 75 .. 121), or None where it
    cannot be asked (then builds are left to report unsupported targets themselves)."""
    try:
        import cuda.pathfinder as pf

        pf.load_nvidia_dynamic_lib("nvrtc")
        from cuda.bindings import nvrtc

        err, archs = nvrtc.nvrtcGetSupportedArchs()
        if int(err) != 0:
            return None
        return tuple(int(a) for a in archs)
    except Exception:  # noqa: BLE001 - an old or odd NVRTC: no up-front check
        return None
