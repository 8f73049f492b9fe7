"""The disk cache's paths under a hostile neighbour and a clumsy user: symlinks planted at
every path it writes or reads, directories that are not ours, not writable, not
directories at all, and a permissive umask.

A write must never follow a link (the link's target is unchanged or not created), a
directory that is not a private one of ours is neither read nor written, builds always
work, and an unusable directory is reported once, by the ``cuprims`` logger and by
``cache_info()["disk_status"]``. A damaged directory beside a build's own (each layout of
``DAMAGED_LAYOUTS``) costs that build nothing: it keeps its entry and the damage is
reported once."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import threading
import uuid
from pathlib import Path

import pytest

import cuprims
from cpu_helpers import ARCH, counters, delta, last_json, run_python
from fault_helpers import (CHILD_MAX_OP, DAMAGED_LAYOUTS, all_files, build_max_in_child, copy_cache, entry_path,
                           lock_path, make_max, max_op_env, sha, without_dac_override)

STAGES = ("numba_compiles", "nvrtc_compiles", "links", "disk_corrupt_discarded")


def _build_max(cache) -> dict:
    before = counters()
    result = make_max()._builds.result(ARCH)
    assert result.cubin == cache.max.cubin
    assert result.kernels == cache.max.kernels and result.meta == cache.max.meta
    return delta(before, STAGES)


def _warnings(caplog, path) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "cuprims" and r.levelno == logging.WARNING and str(path) in r.getMessage()]


def _status() -> str | None:
    return cuprims.cache_info().get("disk_status")


# ----------------------------------------------------------------------------- symlinks

def test_symlink_at_entry_path_is_neither_served_nor_followed(cache, tmp_path):
    """A link at the entry path to a (valid!) entry elsewhere: rejected and replaced, its
    target untouched."""
    path = entry_path(cache.root, "cubin", cache.max.cubin_key)
    target = tmp_path / "outside-entry"
    target.write_bytes(path.read_bytes())
    original = target.read_bytes()
    path.unlink()
    path.symlink_to(target)
    d = _build_max(cache)
    assert d["disk_corrupt_discarded"] == 1 and d["links"] == 1, "an entry was read through a symlink"
    assert target.read_bytes() == original
    assert path.is_file() and not path.is_symlink()


def test_symlinks_at_predictable_temp_names_are_not_followed(cache, tmp_path):
    """Links at the temp names an attacker could predict (``.<key>.<pid>.<tid>.tmp``) for
    both entries written: their targets must not be created."""
    victims = []
    for kind, key in (("cubin", cache.max.cubin_key), ("kernel", cache.max.kernel_key)):
        path = entry_path(cache.root, kind, key)
        path.unlink()
        victim = tmp_path / f"victim-{kind}"
        (path.parent / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp").symlink_to(victim)
        victims.append(victim)
    d = _build_max(cache)
    assert d["nvrtc_compiles"] == 1 and d["links"] == 1
    for victim in victims:
        assert not os.path.lexists(victim), f"{victim.name} was created through a planted symlink"
    for kind, key in (("cubin", cache.max.cubin_key), ("kernel", cache.max.kernel_key)):
        path = entry_path(cache.root, kind, key)
        assert path.is_file() and not path.is_symlink()


def test_symlinks_at_lock_paths_are_not_followed(cache, tmp_path):
    victims = []
    for kind, key in (("cubin", cache.max.cubin_key), ("kernel", cache.max.kernel_key)):
        entry_path(cache.root, kind, key).unlink()
        lock = lock_path(cache.root, kind, key)
        lock.parent.mkdir(mode=0o700, exist_ok=True)
        if os.path.lexists(lock):
            lock.unlink()
        victim = tmp_path / f"victim-{kind}.lock"
        lock.symlink_to(victim)
        victims.append(victim)
    d = _build_max(cache)
    assert d["nvrtc_compiles"] == 1 and d["links"] == 1
    for victim in victims:
        assert not os.path.lexists(victim), f"{victim.name} was created through a planted symlink"
    lock = lock_path(cache.root, "cubin", cache.max.cubin_key)
    assert lock.is_file() and not lock.is_symlink()


def test_symlinked_subdirectory_is_neither_read_nor_written(cache, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="cuprims")
    prefix_dir = entry_path(cache.root, "cubin", cache.max.cubin_key).parent
    outside = tmp_path / "outside-dir"
    shutil.move(str(prefix_dir), str(outside))
    prefix_dir.symlink_to(outside)
    before = all_files(outside)
    d = _build_max(cache)
    assert d["links"] == 1, "an entry was read from a symlinked directory"
    assert all_files(outside) == before, "the symlinked directory was written"
    status = _status()
    assert status and status != "ok" and "symbolic link" in status
    assert len(_warnings(caplog, cache.root)) == 1


def test_symlinked_cache_root_is_refused(prebuilt, tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="cuprims")
    outside = copy_cache(prebuilt.root, tmp_path / "outside-cache")
    before = all_files(outside)
    link = tmp_path / "linked-cache"
    link.symlink_to(outside)
    monkeypatch.setenv("CUPRIMS_CACHE_DIR", str(link))
    d = _build_max(prebuilt)
    assert d["nvrtc_compiles"] == 1 and d["links"] == 1, "entries were read through a symlinked cache dir"
    assert all_files(outside) == before
    status = _status()
    assert status and "symbolic link" in status
    assert len(_warnings(caplog, link)) == 1


# ----------------------------------------------------------------------------- directories not ours

def test_world_writable_cache_dir_is_refused(cache, caplog):
    caplog.set_level(logging.WARNING, logger="cuprims")
    cache.root.chmod(0o777)
    before = all_files(cache.root)
    d = _build_max(cache)
    assert d["nvrtc_compiles"] == 1 and d["links"] == 1, "entries read from a directory anyone can write"
    assert all_files(cache.root) == before, "wrote into a directory anyone can write"
    status = _status()
    assert status and "writable by group or others" in status
    assert len(_warnings(caplog, cache.root)) == 1


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
def test_cache_dir_of_another_user_is_refused(cache, caplog):
    caplog.set_level(logging.WARNING, logger="cuprims")
    for dirpath, dirs, files in os.walk(cache.root):
        for name in [dirpath, *(os.path.join(dirpath, f) for f in dirs + files)]:
            os.lchown(name, 65534, 65534)
    before = all_files(cache.root)
    d = _build_max(cache)
    assert d["nvrtc_compiles"] == 1 and d["links"] == 1, "entries read from another user's directory"
    assert all_files(cache.root) == before
    status = _status()
    assert status and "owned by uid 65534" in status
    assert len(_warnings(caplog, cache.root)) == 1


# ----------------------------------------------------------------------------- unusable directories

def test_cache_dir_that_is_a_file_is_reported_once(prebuilt, tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="cuprims")
    bogus = tmp_path / "not-a-dir"
    bogus.write_bytes(b"a file where the cache should be")
    monkeypatch.setenv("CUPRIMS_CACHE_DIR", str(bogus))
    d = _build_max(prebuilt)  # several lookups, locks and writes fail inside this one build
    assert d["nvrtc_compiles"] == 1 and d["links"] == 1
    assert bogus.read_bytes() == b"a file where the cache should be"
    status = _status()
    assert status and "not a directory" in status
    _status()
    msgs = _warnings(caplog, bogus)
    assert len(msgs) == 1, msgs
    assert "not being cached" in msgs[0]
    # once per directory: another unusable directory is reported on its own
    other = tmp_path / "another-file"
    other.write_bytes(b"")
    monkeypatch.setenv("CUPRIMS_CACHE_DIR", str(other))
    assert "not a directory" in (_status() or "")
    assert len(_warnings(caplog, other)) == 1 and len(_warnings(caplog, bogus)) == 1


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_cache_dir_under_proc_is_reported(prebuilt, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="cuprims")
    where = Path("/proc/self") / f"cuprims-cache-{uuid.uuid4().hex}"
    monkeypatch.setenv("CUPRIMS_CACHE_DIR", str(where))
    d = _build_max(prebuilt)
    assert d["nvrtc_compiles"] == 1 and d["links"] == 1
    status = _status()
    assert status and status != "ok"
    assert len(_warnings(caplog, where)) == 1


def test_usable_cache_reports_ok(cache):
    assert _status() == "ok"
    _build_max(cache)
    assert _status() == "ok"


READ_ONLY_SCRIPT = r"""
import hashlib, json, os
import numpy as np, cuprims
from cuprims import ProxyArray, ProxyValue

def make():
    return cuprims.make_reduce_into(d_in=ProxyArray(np.float32), d_out=ProxyArray(np.float32), op=CHILD_MAX_OP,
                                    h_init=ProxyValue(np.float32), compute_capability=90)

first = make().cubin()
cuprims.clear_all_caches()
second = make().cubin()
info = cuprims.cache_info()
info.update(sha=hashlib.sha256(first).hexdigest(), same=first == second)
print(json.dumps(info))
"""
READ_ONLY_SCRIPT = READ_ONLY_SCRIPT.replace("CHILD_MAX_OP", CHILD_MAX_OP)


def test_read_only_cache_dir_serves_hits_and_is_reported_once(cache, tmp_path):
    import hashlib

    prefix = without_dac_override()
    entry_path(cache.root, "cubin", cache.max.cubin_key).unlink()
    modes = {}
    for dirpath, dirs, files in os.walk(cache.root, topdown=False):
        for name in [*(os.path.join(dirpath, f) for f in files), dirpath]:
            modes[name] = stat.S_IMODE(os.stat(name).st_mode)
            os.chmod(name, modes[name] & ~0o222)
    try:
        before = all_files(cache.root)
        env = {"CUPRIMS_CACHE_DIR": str(cache.root), **max_op_env(tmp_path)}
        proc = run_python(READ_ONLY_SCRIPT, env=env, prefix=prefix, timeout=120)
        after = all_files(cache.root)
    finally:
        for name, mode in modes.items():
            os.chmod(name, mode)
    out = last_json(proc.stdout)
    assert out["sha"] == hashlib.sha256(cache.max.cubin).hexdigest() and out["same"]
    assert out["nvrtc_compiles"] == 0, "the readable kernel entry was not used"
    assert out["links"] == 2 and out["disk_writes"] == 0
    assert out.get("disk_status") not in (None, "ok")
    assert after == before
    warnings = [ln for ln in proc.stderr.splitlines() if "cuprims: the disk cache at" in ln]
    assert len(warnings) == 1, proc.stderr


# ----------------------------------------------------------------------------- damage beside the build

@pytest.mark.ci_sample(every=2)
@pytest.mark.parametrize("layout", sorted(n for n, d in DAMAGED_LAYOUTS.items() if d.keeps_entries))
def test_damage_beside_a_build_neither_fails_it_nor_loses_its_entry(cache, tmp_path, layout):
    """A new key is built in a cache damaged elsewhere: the build gives the right cubin, its
    entry is kept (eviction and use records skip the damage), and the damage is logged once."""
    damage = DAMAGED_LAYOUTS[layout]
    entry = entry_path(cache.root, "cubin", cache.max.cubin_key)
    entry.unlink()
    damaged = damage.plant(cache)
    prefix = without_dac_override() if damage.unprivileged else ()
    out, stderr = build_max_in_child(cache.root, tmp_path, prefix=prefix)
    assert out["sha"] == sha(cache.max.cubin)
    assert out["disk_writes"] >= 1 and entry.is_file() and not entry.is_symlink(), "the build's entry was not kept"
    assert "Traceback" not in stderr
    skips = [ln for ln in stderr.splitlines() if "skipping part of the disk cache" in ln and str(damaged) in ln]
    assert len(skips) == 1, stderr


# ----------------------------------------------------------------------------- modes

def test_umask_000_still_creates_private_dirs_and_files(fresh_caches, tmp_path, monkeypatch):
    dump = tmp_path / "dump" / "nested"
    monkeypatch.setenv("CUPRIMS_DUMP_DIR", str(dump))
    old = os.umask(0)
    try:
        assert make_max().cubin()[:4] == b"\x7fELF"
    finally:
        os.umask(old)
    seen = {"dirs": 0, "files": 0}
    for top in (fresh_caches, dump.parent):
        assert stat.S_IMODE(top.stat().st_mode) == 0o700, top
        for dirpath, dirs, files in os.walk(top):
            for d in dirs:
                mode = stat.S_IMODE(os.lstat(os.path.join(dirpath, d)).st_mode)
                assert mode == 0o700, (os.path.join(dirpath, d), oct(mode))
                seen["dirs"] += 1
            for f in files:
                mode = stat.S_IMODE(os.lstat(os.path.join(dirpath, f)).st_mode)
                assert mode == 0o600, (os.path.join(dirpath, f), oct(mode))
                seen["files"] += 1
    # cubin + kernel entries, their two lock files, one generated source
    assert seen["files"] >= 5 and seen["dirs"] >= 6, seen
