"""Helpers of the cache-fault suite: where entries lie, a reader/writer of the entry frame
that is independent of cuprims' own (so a test can forge entries like an attacker), the
damaged cache layouts (``DAMAGED_LAYOUTS``) and a build of the maximum in a child process."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

import cuprims
from cuprims._build import build as jit_build
from cuprims._cache.entries import MAGIC
from cuprims._cache.disk import LAYOUT_VERSION
from cpu_helpers import ARCH, last_json, make_f4, run_python

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


# ----------------------------------------------------------------------------- processes

def without_dac_override() -> tuple[str, ...]:
    """A prefix that makes file modes bind a child process even when we are root."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: modes do not bind")
    return (setpriv, "--bounding-set=-dac_override,-dac_read_search")


BUILD_MAX_SCRIPT = r"""
import hashlib, json, os, time
import numpy as np, cuprims
from cuprims import ProxyArray, ProxyValue

t0 = time.perf_counter()
obj = cuprims.make_reduce_into(d_in=ProxyArray(np.float32), d_out=ProxyArray(np.float32), op=CHILD_MAX_OP,
                               h_init=ProxyValue(np.float32), compute_capability=90)
cubin = obj.cubin()
info = cuprims.cache_info()
info.update(seconds=time.perf_counter() - t0, sha=hashlib.sha256(cubin).hexdigest())
print(json.dumps(info))
""".replace("CHILD_MAX_OP", CHILD_MAX_OP)


def build_max_in_child(root: Path, tmp_path: Path, *, prefix: tuple[str, ...] = (), env: dict | None = None,
                       timeout: float = 120) -> tuple[dict, str]:
    """Build the maximum in a fresh process over the cache at ``root``: (its cache_info()
    with ``sha`` of the cubin and the build's ``seconds``, its stderr). Fails if it fails."""
    full = {"CUPRIMS_CACHE_DIR": str(root), **max_op_env(tmp_path), **(env or {})}
    proc = run_python(BUILD_MAX_SCRIPT, env=full, prefix=prefix, timeout=timeout)
    return last_json(proc.stdout), proc.stderr


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------- damaged layouts

@dataclass(frozen=True)
class Damage:
    """One damaged cache layout. ``plant(cache)`` damages the test's copy of the prebuilt
    cache (``cache.root``, ``cache.max``, ``cache.sum``) and returns the damaged path, which
    every report of it must name."""

    plant: Callable[[Any], Path]
    unprivileged: bool = False   # only binds a process that file modes bind (root without DAC override)
    keeps_entries: bool = True   # the cache still keeps new entries (the damage is beside them)
    clear_leaves: bool = True    # ``cache clear`` may not remove it (not ours to empty)


def _layout(root: Path) -> Path:
    return Path(root) / LAYOUT_VERSION


def _other_shard(cache) -> Path:
    """A cubin shard that is not the maximum's, holding another key's entry (the sum's)."""
    prefix = "ff" if cache.max.cubin_key[:2] != "ff" else "fe"
    key = prefix + cache.sum.cubin_key[2:]
    path = entry_path(cache.root, "cubin", key)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_bytes(entry_path(cache.root, "cubin", cache.sum.cubin_key).read_bytes())
    path.chmod(0o600)
    return path.parent


def _replace_with_file(path: Path) -> Path:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    path.write_bytes(b"not a directory")
    path.chmod(0o600)
    return path


def _root_a_file(cache) -> Path:
    return _replace_with_file(Path(cache.root))


def _layout_a_file(cache) -> Path:
    return _replace_with_file(_layout(cache.root))


def _shard_writable_by_others(cache) -> Path:
    shard = _other_shard(cache)
    shard.chmod(0o777)
    return shard


def _shard_of_another_user(cache) -> Path:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root to chown")
    shard = _other_shard(cache)
    for name in [shard, *shard.iterdir()]:
        os.lchown(name, 65534, 65534)
    return shard


def _shard_mode_000(cache) -> Path:
    shard = _other_shard(cache)
    shard.chmod(0)
    return shard


def _kernel_dir_writable_by_others(cache) -> Path:
    kernel = _layout(cache.root) / "kernel"
    kernel.chmod(0o777)
    return kernel


def _uses_a_symlink(cache) -> Path:
    outside = Path(cache.root).parent / "outside-uses"
    outside.mkdir(mode=0o700)
    (outside / f"cubin-{cache.max.cubin_key}").write_bytes(b"41")
    uses = _layout(cache.root) / "uses"
    if uses.exists():
        shutil.rmtree(uses)
    uses.symlink_to(outside)
    return uses


def _locks_a_file(cache) -> Path:
    return _replace_with_file(_layout(cache.root) / "locks")


def _locks_mode_000(cache) -> Path:
    locks = _layout(cache.root) / "locks"
    assert any(locks.iterdir()), "the prebuilt cache has no lock files"
    locks.chmod(0)
    return locks


DAMAGED_LAYOUTS: dict[str, Damage] = {
    "cache dir a file": Damage(_root_a_file, keeps_entries=False),
    "v2 a file": Damage(_layout_a_file, keeps_entries=False, clear_leaves=False),
    "another key's shard writable by others": Damage(_shard_writable_by_others),
    "another key's shard of another user": Damage(_shard_of_another_user),
    "another key's shard at mode 000": Damage(_shard_mode_000, unprivileged=True),
    "v2/kernel writable by others": Damage(_kernel_dir_writable_by_others),
    "v2/uses a symlink": Damage(_uses_a_symlink, clear_leaves=False),
    "v2/locks a regular file": Damage(_locks_a_file, clear_leaves=False),
    "v2/locks at mode 000": Damage(_locks_mode_000, unprivileged=True),
}
