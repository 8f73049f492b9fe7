"""Helpers of the cache-fault suite: where entries lie, and a reader/writer of the entry
frame that is independent of cuprims' own (so a test can forge entries like an attacker)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import cuprims
from cuprims._jit import build as jit_build
from cuprims._jit.cache_entries import MAGIC
from cuprims._jit.disk_cache import LAYOUT_VERSION
from cpu_helpers import ARCH, make_f4

ELF = b"\x7fELF"


def plus_op(a, b):
    return a + b


@dataclass(frozen=True)
class Built:
    """One prebuilt algorithm: its keys and what a correct build gives."""

    name: str
    cubin_key: str
    kernel_key: str
    cubin: bytes
    kernels: dict
    meta: dict


def keys_of(obj) -> tuple[str, str]:
    """(cubin key, kernel key) of a built algorithm object for ARCH."""
    source = obj._builds.source(ARCH)
    return (jit_build.build_key(source, ARCH, obj._builds._ops), jit_build.kernel_key(source, ARCH))


def describe(name: str, obj) -> Built:
    result = obj._builds.result(ARCH)
    cubin_key, kernel_key = keys_of(obj)
    return Built(name, cubin_key, kernel_key, result.cubin, dict(result.kernels), dict(result.meta))


# The maximum's operator: raw LTO-IR that NVRTC makes from C++ (no numba), so the build
# links it (a built-in maximum has nothing to link and no kernel entry: it compiles
# straight to its cubin).
MAX_SOURCE = 'extern "C" __device__ void fault_victim_max(const float* a, const float* b, float* r) { *r = *a > *b ? *a : *b; }'


@functools.lru_cache(maxsize=None)
def max_ltoir() -> bytes:
    from cuda.core import Program, ProgramOptions

    options = ProgramOptions(arch=f"sm_{ARCH}", std="c++17", relocatable_device_code=True,
                             link_time_optimization=True)
    return bytes(Program(MAX_SOURCE, "c++", options).compile("ltoir").code)


def max_op() -> cuprims.RawOp:
    return cuprims.RawOp(ltoir=max_ltoir(), name="fault_victim_max")


def max_op_env(tmp_path: Path) -> dict[str, str]:
    """Environment for a child that builds the maximum: its operator's LTO-IR in a file
    (the child reads it back as ``VICTIM_LTOIR``)."""
    path = Path(tmp_path) / "fault_victim_max.ltoir"
    path.write_bytes(max_ltoir())
    return {"VICTIM_LTOIR": str(path)}


# The child scripts' way to the maximum's operator (see max_op_env).
CHILD_MAX_OP = 'cuprims.RawOp(ltoir=open(os.environ["VICTIM_LTOIR"], "rb").read(), name="fault_victim_max")'


# The two prebuilt algorithms: a maximum with that raw operator (the usual victim: it
# rebuilds from its kernel entry with a link only) and a Python sum (the usual source of
# foreign entries).
def make_max():
    return make_f4(max_op())


def make_sum():
    """The sum, its operator compiled by numba and linked (it is small enough to be C++ in
    the unit otherwise, and then it would have no kernel entry to be foreign with)."""
    with cuprims.settings.override(direct_ops=False):
        return make_f4(plus_op)


def entry_path(root: Path, kind: str, key: str) -> Path:
    return Path(root) / LAYOUT_VERSION / kind / key[:2] / key


def lock_path(root: Path, kind: str, key: str) -> Path:
    return Path(root) / LAYOUT_VERSION / "locks" / f"{kind}-{key}.lock"


def all_files(root: Path) -> dict[str, bytes]:
    """Relative path -> content of every regular file under root (symlinks not followed)."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            if p.is_file() and not p.is_symlink():
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


def copy_cache(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


# ----------------------------------------------------------------------------- the frame

def unframe(raw: bytes) -> tuple[dict, dict[str, bytes]]:
    """(header, blobs) of an entry: ``MAGIC | sha256 | u64 len | u64 hlen | JSON | blobs``."""
    payload = raw[len(MAGIC) + 40:]
    (hlen,) = struct.unpack_from("<Q", payload, 0)
    header = json.loads(payload[8:8 + hlen])
    blobs, pos = {}, 8 + hlen
    for name, size in header["blobs"]:
        blobs[name] = payload[pos:pos + size]
        pos += size
    return header, blobs


def frame_raw(header_json: bytes, blob_bytes: bytes = b"") -> bytes:
    """An entry with a valid checksum around arbitrary header bytes and blob bytes."""
    payload = struct.pack("<Q", len(header_json)) + header_json + blob_bytes
    return MAGIC + hashlib.sha256(payload).digest() + struct.pack("<Q", len(payload)) + payload


def reframe(header: dict, blobs: dict[str, bytes]) -> bytes:
    """Re-encode a (possibly modified) header and blobs, checksum recomputed."""
    names = sorted(blobs)
    header = dict(header, blobs=[[n, len(blobs[n])] for n in names])
    return frame_raw(json.dumps(header, sort_keys=True).encode(), b"".join(blobs[n] for n in names))


def clear_memory() -> None:
    cuprims.clear_all_caches()
