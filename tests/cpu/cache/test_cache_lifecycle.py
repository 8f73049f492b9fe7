"""The disk cache's lifecycle: a size cap with least-recently-used eviction (several writer
processes and a reader that must never see a torn or half-evicted entry), use records
and hit counts, debris left by crashed writers and idle locks, private modes, the
``python -m cuprims cache`` command line, and compile events on the ``cuprims`` logger."""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cuprims
from cpu_helpers import make_f4, run_python
from cuprims import config
from cuprims._cache.lifecycle import STALE_SECONDS
from cuprims._cache.disk import LAYOUT_VERSION, DiskCache

pytestmark = pytest.mark.runs_long   # long tests: sent to the workers first


def plus_op(a, b):
    return a + b


def _blob(key: str, size: int) -> bytes:
    """Deterministic bytes for ``key``: a reader can tell a whole entry from any other."""
    seed = hashlib.sha256(key.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def _key(i: int, tag: str = "") -> str:
    return hashlib.sha256(f"{tag}{i}".encode()).hexdigest()


def _all_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_byte_sizes_parse_with_units():
    assert config._bytes("20M") == 20 << 20 and config._bytes("2G") == 2 << 30 and config._bytes("1000") == 1000
    assert config._bytes("512KiB") == 512 << 10 and config._bytes("3g") == 3 << 30
    for unset in (None, "", "  "):
        assert config._bytes(unset) == 2 << 30, unset
    for bad in ("lots", "-5", "0", "1.5G"):
        with pytest.raises(ValueError):
            config._bytes(bad)


@pytest.mark.parametrize("bad", ["lots", "-5", "0", "1.5G", "12X"])
def test_a_cache_cap_variable_it_cannot_take_is_an_error_naming_it(monkeypatch, bad):
    """As settings.cache_max_bytes = "lots" is: never ignored in silence."""
    import cuprims
    from cuprims.errors import ArgumentError

    monkeypatch.setenv("CUPRIMS_CACHE_MAX_BYTES", bad)
    with pytest.raises(ArgumentError) as info:
        cuprims.settings.cache_max_bytes
    assert info.value.argument == "CUPRIMS_CACHE_MAX_BYTES" and bad in str(info.value)
    with pytest.raises(ArgumentError):
        cuprims.settings.cache_max_bytes = bad


def test_lru_entries_survive_and_the_oldest_go(tmp_path):
    cache = DiskCache(tmp_path / "c", max_bytes=10 * 100_000)
    keys = [_key(i) for i in range(9)]
    for i, key in enumerate(keys[:8]):
        cache.put("cubin", key, {"i": i}, {"cubin": _blob(key, 100_000)})
        path = cache._path("cubin", key)
        os.utime(path, (1000 + i, 1000 + i))   # written in order, a second apart
    assert cache.get("cubin", keys[0]) is not None   # the oldest entry is used again
    cache.put("cubin", keys[8], {"i": 8}, {"cubin": _blob(keys[8], 300_000)})   # over the cap
    left = {e.key for e in cache.scan()[0]}
    assert keys[0] in left and keys[8] in left      # just used, just written
    assert keys[1] not in left and keys[2] not in left  # least recently used: evicted
    assert sum(e.size for e in cache.scan()[0]) <= 0.9 * 10 * 100_000
    hits = {e.key: e.hits for e in cache.scan()[0]}
    assert hits[keys[0]] == 1 and hits[keys[8]] == 0
    assert not (tmp_path / "c" / LAYOUT_VERSION / "uses" / f"cubin-{keys[1]}").exists()


WRITER = '''
import hashlib, json, sys
from pathlib import Path
from cuprims._cache.disk import DiskCache
root, first, count, cap = sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
cache = DiskCache(Path(root), max_bytes=cap)
def blob(key, size):
    seed = hashlib.sha256(key.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]
for i in range(first, first + count):
    key = hashlib.sha256(str(i).encode()).hexdigest()
    size = 150_000 + (i * 7919) % 200_000
    cache.put("cubin", key, {"size": size}, {"cubin": blob(key, size)})
print(json.dumps({"wrote": count}))
'''

READER = '''
import hashlib, json, sys, time
from pathlib import Path
from cuprims._base import stats
from cuprims._cache.disk import DiskCache
root, total = sys.argv[3], int(sys.argv[4])
cache = DiskCache(Path(root))
def blob(key, size):
    seed = hashlib.sha256(key.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]
whole = torn = 0
deadline = time.time() + 60
i = 0
while time.time() < deadline and i < 4000:
    key = hashlib.sha256(str(i % total).encode()).hexdigest()
    i += 1
    got = cache.get("cubin", key)
    if got is None:
        continue
    meta, blobs = got
    if blobs["cubin"] == blob(key, meta["size"]):
        whole += 1
    else:
        torn += 1
print(json.dumps({"whole": whole, "torn": torn, "discarded": stats.snapshot()["disk_corrupt_discarded"]}))
'''


def test_a_size_cap_holds_under_several_writers_and_readers_see_whole_entries(tmp_path):
    # 300 distinct entries of 150-350 KB (about 75 MB) from four processes, a 20 MB cap, and
    # two processes reading all the while
    root, cap = tmp_path / "capped", 20 << 20
    script_w = tmp_path / "w.py"
    script_w.write_text(WRITER)
    script_r = tmp_path / "r.py"
    script_r.write_text(READER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    procs = [subprocess.Popen([sys.executable, str(script_w), "-", "-", str(root), str(k * 75), "75", str(cap)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(4)]
    readers = [subprocess.Popen([sys.executable, str(script_r), "-", "-", str(root), "300"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    results = []
    for p in readers:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["torn"] == 0 and r["discarded"] == 0 for r in results), results
    assert sum(r["whole"] for r in results) > 0, results   # the readers did read while eviction ran
    entries = DiskCache(root).scan()[0]
    assert 0 < sum(e.size for e in entries) <= cap
    assert sum(p.stat().st_size for p in _all_files(root)) < cap   # entries, use records, locks
    assert len(entries) < 300


def test_debris_of_crashed_writers_and_idle_locks_is_removed(tmp_path):
    cache = DiskCache(tmp_path / "c")
    key = _key(1)
    cache.put("cubin", key, {}, {"cubin": b"\x7fELF" + bytes(100)})
    with cache.lock("kernel", _key(2)):
        pass
    leaf = cache._path("cubin", key).parent
    locks = tmp_path / "c" / LAYOUT_VERSION / "locks"
    old = time.time() - STALE_SECONDS - 60
    stale_tmp, fresh_tmp = leaf / f".{key}.{'a' * 16}.tmp", leaf / f".{key}.{'b' * 16}.tmp"
    for p in (stale_tmp, fresh_tmp):
        p.write_bytes(b"half an entry")
        p.chmod(0o600)
    os.utime(stale_tmp, (old, old))
    idle, held = locks / f"kernel-{_key(2)}.lock", locks / f"kernel-{_key(3)}.lock"
    held.touch(mode=0o600)
    for p in (idle, held):
        os.utime(p, (old, old))
    holder = os.open(held, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)   # a build under way in another process
    try:
        evicted, removed = cache.prune(2 << 30)
    finally:
        os.close(holder)
    assert (evicted, removed) == (0, 2)
    assert not stale_tmp.exists() and not idle.exists()
    assert fresh_tmp.exists() and held.exists() and cache.get("cubin", key) is not None


def test_directories_are_0700_and_files_0600(tmp_path):
    old_umask = os.umask(0)
    try:
        cache = DiskCache(tmp_path / "c")
        key = _key(4)
        cache.put("cubin", key, {}, {"cubin": b"x" * 10})
        assert cache.get("cubin", key) is not None   # writes a use record too
        with cache.lock("cubin", key):
            pass
    finally:
        os.umask(old_umask)
    paths = [tmp_path / "c", *(tmp_path / "c").rglob("*")]
    assert {stat.S_IMODE(p.stat().st_mode) for p in paths if p.is_dir()} == {0o700}
    files = [p for p in paths if p.is_file()]
    assert len(files) == 3 and {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o600}


def _cli(*args, cache_dir: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full = dict(os.environ, CUPRIMS_CACHE_DIR=str(cache_dir), **(env or {}))
    proc = subprocess.run([sys.executable, "-m", "cuprims", *args], capture_output=True, text=True, env=full,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_command_line_info_prune_clear(tmp_path):
    root = tmp_path / "c"
    cache = DiskCache(root)
    sizes = {}
    for i in range(6):
        key = _key(i, "cli")
        kind = "cubin" if i % 2 else "kernel"
        cache.put(kind, key, {}, {"x": _blob(key, 50_000 * (i + 1))})
        sizes[key] = cache._path(kind, key).stat().st_size
    cache.get("cubin", _key(1, "cli"))
    cache.get("cubin", _key(1, "cli"))
    info = json.loads(_cli("cache", "info", "--json", "--entries", cache_dir=root).stdout)
    assert info["location"] == str(root) and info["status"] == "ok" and info["max_bytes"] == 2 << 30
    assert info["entries"] == 6 and info["bytes"] == sum(sizes.values()) and info["hits"] == 2
    assert info["kinds"]["cubin"]["entries"] == 3 and info["kinds"]["cubin"]["hits"] == 2
    assert info["items"][0]["key"] == _key(1, "cli")   # most recently used first
    table = _cli("cache", "info", cache_dir=root).stdout
    assert str(root) in table and "kernel" in table and "total" in table
    pruned = json.loads(_cli("cache", "prune", "--max-bytes", "400K", "--json", cache_dir=root).stdout)
    assert pruned["bytes"] <= 400 << 10 and pruned["evicted_entries"] >= 1
    assert pruned["entries"] == len(DiskCache(root).scan()[0])
    cleared = json.loads(_cli("cache", "clear", "--json", cache_dir=root).stdout)
    assert cleared["removed_entries"] == pruned["entries"]
    assert DiskCache(root).scan()[0] == []
    no_numba = run_python("""
        import sys
        from cuprims._cache.cli import main
        main(["cache", "info", "--json"])
        print("numba" in sys.modules, "cupy" in sys.modules)
    """, env={"CUPRIMS_CACHE_DIR": str(root)})
    assert no_numba.stdout.strip().splitlines()[-1] == "False False"


def test_bad_command_lines_fail_with_usage(tmp_path):
    for args in (("cache", "explode"), ("nothing",)):   # (`cache` alone prints its help: test_discoverability)
        proc = subprocess.run([sys.executable, "-m", "cuprims", *args], capture_output=True, text=True,
                              env=dict(os.environ, CUPRIMS_CACHE_DIR=str(tmp_path)), timeout=120)
        assert proc.returncode == 2 and "usage" in proc.stderr, args


@pytest.mark.usefixtures("numba_ops")   # a linked build: NVRTC, numba and link stages
def test_compiles_are_logged_with_stage_timings(caplog):
    with caplog.at_level(logging.DEBUG, logger="cuprims"):
        make_f4(plus_op)
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    debugs = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("compiled" in m and "for sm_90 in" in m for m in infos), infos
    assert any(m.startswith("cuprims: nvrtc ") for m in debugs) and any(m.startswith("cuprims: link ") for m in debugs)


@pytest.mark.usefixtures("numba_ops")   # a linked build: a kernel and a cubin entry
def test_a_cap_from_the_environment_reaches_builds(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPRIMS_CACHE_MAX_BYTES", "1K")
    make_f4(plus_op)
    root = config.cache_dir()
    assert DiskCache(root).scan()[0] == []   # every entry is larger than the cap: evicted at once
    cuprims.clear_all_caches()
    monkeypatch.delenv("CUPRIMS_CACHE_MAX_BYTES")
    make_f4(plus_op)
    assert len(DiskCache(root).scan()[0]) == 2


REAL_BUILDER = '''
import json, sys
import numpy as np
import cuprims
from cuprims import ProxyArray as P, ProxyValue as V
first, count = int(sys.argv[1]), int(sys.argv[2])
def op_for(k):
    c = np.float32(k)
    return lambda a, b: a + b + c
for k in range(first, first + count):   # distinct operators: one cubin entry each, one shared NVRTC entry
    cuprims.make_reduce_into(d_in=P(np.float32), d_out=P(np.float32), op=op_for(k), h_init=V(np.float32),
                             compute_capability=90)
print(json.dumps({"built": count, "links": cuprims.cache_info()["links"]}))
'''


# (builds per process, cap): each case writes about two and a half times its cap in cubins
# (~170 KB each), so the cap evicts again and again while the processes write. CI runs the
# smaller case; the 300 builds under 20 MB run with the slow tests.
REAL_BUILD_CASES = [pytest.param(7, 1400 << 10, id="21-builds-1.4mb"),
                    pytest.param(100, 20 << 20, id="300-builds-20mb", marks=pytest.mark.slow)]


@pytest.mark.parametrize("per_process, cap", REAL_BUILD_CASES)
def test_real_builds_from_three_processes_stay_under_the_cap(tmp_path, per_process, cap):
    # three processes build distinct reductions under the cap, while a fourth reads entries
    # back and checks every one it gets
    root, total_builds = tmp_path / "real", 3 * per_process
    script = tmp_path / "build.py"
    script.write_text(REAL_BUILDER)
    reader = tmp_path / "read.py"
    reader.write_text('''
import json, sys, time
from pathlib import Path
from cuprims._base import stats
from cuprims._cache.entries import decode_entry
from cuprims._cache.disk import DiskCache
cache, deadline, seen = DiskCache(Path(sys.argv[1])), time.time() + 240, 0
while time.time() < deadline and not Path(sys.argv[2]).exists():
    for entry in cache.scan(remove_debris=False)[0]:
        got = cache.get(entry.kind, entry.key)
        if got is not None:
            seen += 1
            assert got[1] and all(blob for blob in got[1].values())
    time.sleep(0.05)
print(json.dumps({"seen": seen, "discarded": stats.snapshot()["disk_corrupt_discarded"]}))
''')
    done = tmp_path / "done"
    # numba's operators, so all the builds share one NVRTC entry (written as C++, each
    # constant would make a unit of its own: one NVRTC compile per build)
    env = dict(os.environ, CUPRIMS_CACHE_DIR=str(root), CUPRIMS_CACHE_MAX_BYTES=str(cap),
               PYTHONPATH=os.pathsep.join(sys.path), CUPRIMS_DIRECT_OPS="0")
    read = subprocess.Popen([sys.executable, str(reader), str(root), str(done)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    builders = [subprocess.Popen([sys.executable, str(script), str(k * per_process), str(per_process)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(3)]
    try:
        for p in builders:
            out, err = p.communicate(timeout=900)
            assert p.returncode == 0, err
            assert json.loads(out.strip().splitlines()[-1])["built"] == per_process
    finally:
        done.touch()
    out, err = read.communicate(timeout=300)
    assert read.returncode == 0, err
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["discarded"] == 0 and seen["seen"] > 0, seen
    total = sum(p.stat().st_size for p in _all_files(root))
    assert total < cap, total
    assert 0 < len(DiskCache(root).scan()[0]) < total_builds
