"""Concurrent builds: processes building different Python operators over the same types
share one NVRTC compile of their kernel (the kernel entry has its own per-key lock, taken
inside the cubin lock), threads on one key compile each stage once, and a lock held by a
stopped process delays a build by the lock wait bound only."""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import cuprims
from cpu_helpers import WAIT_FOR_ALL, counters, delta, make_f4, spawn_builders
from cuprims._build import build as jit_build
from cuprims._cache.disk import DiskCache
from cuprims.errors import ArgumentError, ArgumentTypeError
from fault_helpers import ELF, build_max_in_child, entry_path, lock_path, sha

pytestmark = pytest.mark.runs_long   # long tests: sent to the workers first

LOCK_WAIT = 2.0   # seconds: the bound the lock tests set (the default, 60 s, would make them slow)

DIFFERENT_OPS_SCRIPT = r"""
import hashlib, json, sys
import numpy as np, cuprims
from cuprims._build import build as jit_build
scale = float(sys.argv[3])
ns = {}
exec(f"def op(a, b):\n    return a * {scale!r} + b\n", ns)
""" + WAIT_FOR_ALL + r"""
r = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32),
                             op=ns["op"], h_init=cuprims.ProxyValue(np.float32), compute_capability=90)
source = r._builds.source(90)
info = cuprims.cache_info()
info.update(sha=hashlib.sha256(r.cubin()).hexdigest(), elf=r.cubin()[:4] == b"\x7fELF",
            kernel_key=jit_build.kernel_key(source, 90), cubin_key=jit_build.build_key(source, 90, r._builds._ops))
print(json.dumps(info))
"""


# numba's stages counted, one kernel shared by several Python operators: the numba path
@pytest.mark.usefixtures("numba_ops")
def test_processes_with_different_operators_compile_the_kernel_once(tmp_path, fresh_caches):
    n = 8
    outs = spawn_builders(tmp_path, fresh_caches, DIFFERENT_OPS_SCRIPT, n, "different-ops",
                          args=lambda i: (1.0 + i / 8,), timeout=240)
    assert len({o["kernel_key"] for o in outs}) == 1, "the operators do not share one kernel"
    assert len({o["cubin_key"] for o in outs}) == n
    assert len({o["sha"] for o in outs}) == n and all(o["elf"] for o in outs)
    assert sum(o["nvrtc_compiles"] for o in outs) == 1, [o["nvrtc_compiles"] for o in outs]
    assert sum(o["numba_compiles"] for o in outs) == n
    assert sum(o["links"] for o in outs) == n


@pytest.mark.usefixtures("numba_ops")
def test_threads_on_one_key_compile_each_stage_once():
    op = lambda a, b: a * 0.375 + b  # noqa: E731  (a recipe no other test builds: cold)
    n = 16
    barrier = threading.Barrier(n)

    def work():
        barrier.wait()
        return make_f4(op)

    before = counters()
    with ThreadPoolExecutor(n) as pool:
        objs = [f.result(timeout=240) for f in [pool.submit(work) for _ in range(n)]]
    assert delta(before) == {"numba_compiles": 1, "nvrtc_compiles": 1, "links": 1}
    cubins = {o.cubin() for o in objs}
    assert len(cubins) == 1 and next(iter(cubins))[:4] == ELF
    assert len({id(o._builds.result(90)) for o in objs}) == 1


# ----------------------------------------------------------------------------- a stopped lock holder

HOLD_LOCK_SCRIPT = r"""
import sys, time
from pathlib import Path
from cuprims._cache.disk import DiskCache
with DiskCache(Path(sys.argv[1])).lock(sys.argv[2], sys.argv[3]):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_stopped_lock_holder_delays_a_build_by_the_wait_bound_only(cache, tmp_path):
    """A process holding the maximum's cubin lock is stopped (SIGSTOP): a second process
    building the maximum waits the bound, then builds without the lock -- the right cubin,
    its entry written (it was absent), the wait logged once."""
    entry = entry_path(cache.root, "cubin", cache.max.cubin_key)
    entry.unlink()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK_SCRIPT, str(cache.root), "cubin", cache.max.cubin_key],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGSTOP)
        out, stderr = build_max_in_child(cache.root, tmp_path, env={"CUPRIMS_CACHE_LOCK_TIMEOUT": str(LOCK_WAIT)},
                                         timeout=LOCK_WAIT + 90)
    finally:
        holder.kill()
        holder.wait()
    assert out["sha"] == sha(cache.max.cubin)
    assert LOCK_WAIT <= out["seconds"] < LOCK_WAIT + 45, out["seconds"]
    assert out["disk_writes"] == 1 and entry.is_file(), "the entry was not written"
    waits = [ln for ln in stderr.splitlines() if "waited" in ln and str(lock_path(cache.root, "cubin",
                                                                                 cache.max.cubin_key)) in ln]
    assert len(waits) == 1, stderr


def test_a_build_without_its_lock_keeps_an_entry_written_meanwhile(tmp_path, caplog):
    """Past the wait bound the build runs unlocked; an entry another process writes while
    it builds is kept (the unlocked build's own is not written over it)."""
    caplog.set_level(logging.WARNING, logger="cuprims")
    cache = DiskCache(tmp_path / "c", lock_timeout=0.2)
    key = "ab" * 32
    with cache.lock("cubin", key):
        pass
    other = os.open(lock_path(cache.root, "cubin", key), os.O_RDWR)   # another open file: held as by another process
    fcntl.flock(other, fcntl.LOCK_EX)
    try:
        def build():
            DiskCache(cache.root).put("cubin", key, {"by": "the other process"}, {"cubin": b"theirs"})
            theirs = os.stat(entry_path(cache.root, "cubin", key)).st_ino
            cache.put("cubin", key, {"by": "us"}, {"cubin": b"ours"})
            return theirs

        theirs = cache.get_or_build("cubin", key, lambda meta, blobs: meta, build)
    finally:
        os.close(other)
    assert os.stat(entry_path(cache.root, "cubin", key)).st_ino == theirs
    assert cache.get("cubin", key)[0] == {"by": "the other process"}
    assert sum("waited 0.2 s" in r.getMessage() for r in caplog.records) == 1
    with cache.lock("cubin", key):   # free again: a locked build writes over a stale entry as before
        cache.put("cubin", key, {"by": "us"}, {"cubin": b"ours"})
    assert cache.get("cubin", key)[0] == {"by": "us"}


def test_the_lock_wait_bound_is_a_setting(monkeypatch):
    assert cuprims.settings.cache_lock_timeout == 60.0 and jit_build.disk_cache().lock_timeout == 60.0
    monkeypatch.setenv("CUPRIMS_CACHE_LOCK_TIMEOUT", "2.5")
    assert jit_build.disk_cache().lock_timeout == 2.5
    for bad in ("0", "-1", "soon", "inf", "nan"):   # refused, naming the variable: never ignored in silence
        monkeypatch.setenv("CUPRIMS_CACHE_LOCK_TIMEOUT", bad)
        with pytest.raises(ArgumentError) as info:
            cuprims.settings.cache_lock_timeout
        assert info.value.argument == "CUPRIMS_CACHE_LOCK_TIMEOUT", bad
    monkeypatch.setenv("CUPRIMS_CACHE_LOCK_TIMEOUT", "")
    assert cuprims.settings.cache_lock_timeout == 60.0
    with cuprims.settings.override(cache_lock_timeout=5):
        assert jit_build.disk_cache().lock_timeout == 5.0
    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ArgumentError):
            cuprims.settings.cache_lock_timeout = bad
    for bad in ("5", True, None):
        with pytest.raises(ArgumentTypeError):
            cuprims.settings.cache_lock_timeout = bad
