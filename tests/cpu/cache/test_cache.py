"""Both cache levels: single flight in memory and across processes, disk round trips,
corruption, switches, and that caches keep no user objects alive."""

from __future__ import annotations

import gc
import os
import shutil
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import cuprims
from cuprims import OpKind, ProxyArray, ProxyValue
from cuprims.errors import OperatorCompileError
from cuprims._base import stats
from cuprims._cache.memory import SingleFlightLRU
from cuprims._cache.entries import MAGIC, decode_entry, encode_entry
from cuprims._cache.disk import LAYOUT_VERSION, DiskCache
from cpu_helpers import WAIT_FOR_ALL, counters, delta, last_json, make_f4, run_python, spawn_builders

# These tests count numba's stages and share one kernel between Python operators: the
# numba path (tests/cpu/operators/test_py_expr.py covers operators written as C++).
pytestmark = pytest.mark.usefixtures("numba_ops")

ELF = b"\x7fELF"


def plus_op(a, b):
    return a + b


def _files(root: Path, kind: str | None = None) -> list[Path]:
    base = root / LAYOUT_VERSION / kind if kind else root
    return sorted(p for p in base.rglob("*") if p.is_file()) if base.exists() else []


@pytest.fixture(scope="session")
def pristine(tmp_path_factory):
    """A disk cache holding one build of ``plus_op`` (f4, sm_90): (directory, cubin bytes)."""
    root = tmp_path_factory.mktemp("pristine-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUPRIMS_CACHE_DIR", str(root))
        mp.delenv("CUPRIMS_DISK_CACHE", raising=False)
        mp.setenv("CUPRIMS_DIRECT_OPS", "0")
        cuprims.clear_all_caches()
        cubin = make_f4(plus_op).cubin()
        cuprims.clear_all_caches()
    assert _files(root, "cubin") and _files(root, "kernel")
    return root, cubin


@pytest.fixture
def pristine_copy(pristine, fresh_caches):
    root, cubin = pristine
    shutil.copytree(root, fresh_caches)
    return fresh_caches, cubin


# ----------------------------------------------------------------- SingleFlightLRU

def _wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for threads")
        time.sleep(0.001)


def _race(cache, key, builder, n=8):
    """Start n threads on one key, release the builder once all n are inside get_or_build."""
    release = threading.Event()
    base = stats.snapshot()

    def gated():
        release.wait(10)
        return builder()

    outcomes = [None] * n

    def worker(i):
        try:
            outcomes[i] = ("ok", cache.get_or_build(key, gated))
        except BaseException as exc:  # noqa: BLE001
            outcomes[i] = ("err", exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    # one owner (a miss) and n-1 waiters (counted as hits) before the build may finish
    _wait_for(lambda: stats.snapshot()["memory_misses"] - base["memory_misses"] == 1
              and stats.snapshot()["memory_hits"] - base["memory_hits"] == n - 1)
    release.set()
    for t in threads:
        t.join(10)
    return outcomes


def test_single_flight_builds_once():
    cache = SingleFlightLRU(4)
    calls = []

    def builder():
        calls.append(1)
        return object()

    outcomes = _race(cache, "k", builder)
    assert len(calls) == 1
    assert all(kind == "ok" for kind, _ in outcomes)
    values = [v for _, v in outcomes]
    assert all(v is values[0] for v in values)
    assert cache.get_or_build("k", builder) is values[0]
    assert len(calls) == 1


def test_single_flight_failure_reaches_every_waiter_and_is_not_cached():
    cache = SingleFlightLRU(4)
    calls = []

    class Boom(Exception):
        pass

    def failing():
        calls.append(1)
        raise Boom("no")

    outcomes = _race(cache, "k", failing)
    assert len(calls) == 1
    assert all(kind == "err" for kind, _ in outcomes)
    excs = [e for _, e in outcomes]
    assert all(isinstance(e, Boom) for e in excs)
    assert all(e is excs[0] for e in excs), "waiters must get the same exception"
    assert len(cache) == 0
    # a later call retries
    sentinel = object()
    assert cache.get_or_build("k", lambda: sentinel) is sentinel
    assert len(cache) == 1


def test_lru_bound_evicts_least_recently_used():
    cache = SingleFlightLRU(2)
    built = []

    def b(name):
        def f():
            built.append(name)
            return name
        return f

    cache.get_or_build("a", b("a"))
    cache.get_or_build("b", b("b"))
    cache.get_or_build("a", b("a"))   # touch a: b is now the oldest
    cache.get_or_build("c", b("c"))   # evicts b
    assert len(cache) == 2
    cache.get_or_build("a", b("a"))
    assert built == ["a", "b", "c"]
    cache.get_or_build("b", b("b"))   # was evicted: rebuilt (and evicts c)
    assert built == ["a", "b", "c", "b"]
    cache.clear()
    assert len(cache) == 0


def test_a_child_forked_while_another_thread_builds_a_key_builds_it_itself():
    # the building thread stays in the parent: the child must not wait for it forever
    import os
    import signal

    cache = SingleFlightLRU(4)
    inside, release = threading.Event(), threading.Event()

    def slow():
        inside.set()
        release.wait(30)
        return "parent's"

    builder = threading.Thread(target=cache.get_or_build, args=("k", slow))
    builder.start()
    assert inside.wait(10)
    pid = os.fork()
    if pid == 0:                                         # the child
        signal.alarm(30)                                 # a hang fails the test, not the suite
        ok = False
        try:
            ok = cache.get_or_build("k", lambda: "child's") == "child's"
            ok = ok and cache.get_or_build("k", lambda: "again") == "child's"
        finally:
            os._exit(0 if ok else 1)
    release.set()
    builder.join(10)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert cache.get_or_build("k", lambda: "other") == "parent's"


def test_memory_cache_bound_from_environment(warm_cache_dir):
    proc = run_python("""
        import json, numpy as np, cuprims
        from cuprims import OpKind, ProxyArray, ProxyValue
        for cc, dt, op in ((90, np.float32, OpKind.PLUS), (80, np.float32, OpKind.PLUS),
                           (90, np.int64, OpKind.MAXIMUM)):
            cuprims.make_reduce_into(d_in=ProxyArray(dt), d_out=ProxyArray(dt), op=op,
                                     h_init=ProxyValue(dt), compute_capability=cc)
        print(json.dumps(cuprims.cache_info()))
    """, env={"CUPRIMS_CACHE_DIR": str(warm_cache_dir), "CUPRIMS_MEMORY_CACHE": "2"})
    assert last_json(proc.stdout)["memory_entries"] == 2


def test_memory_cache_bound_read_when_asked(shared_cache, monkeypatch):
    monkeypatch.setenv("CUPRIMS_MEMORY_CACHE", "1")
    make_f4(OpKind.PLUS, cc=90)
    make_f4(OpKind.PLUS, cc=80)
    assert cuprims.cache_info()["memory_entries"] == 1


# ----------------------------------------------------------------- threads and processes

def test_threads_racing_on_make_reduce_into_compile_once():
    op = lambda a, b: a * 0.5 + b  # noqa: E731  (new recipe: cold everywhere)
    n = 8
    barrier = threading.Barrier(n)

    def work():
        barrier.wait()
        return make_f4(op)

    before = counters()
    with ThreadPoolExecutor(n) as pool:
        objs = [f.result() for f in [pool.submit(work) for _ in range(n)]]
    assert delta(before) == {"numba_compiles": 1, "nvrtc_compiles": 1, "links": 1}
    cubins = {o.cubin() for o in objs}
    assert len(cubins) == 1 and next(iter(cubins))[:4] == ELF
    # every thread's object holds the very same build result
    results = {id(o._builds.result(90)) for o in objs}
    assert len(results) == 1


BUILD_SCRIPT = r"""
import hashlib, json
import numpy as np, cuprims
""" + WAIT_FOR_ALL + r"""
t0 = time.perf_counter()
r = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32),
                             op=lambda a, b: a * 0.25 + b, h_init=cuprims.ProxyValue(np.float32),
                             compute_capability=90)
seconds = time.perf_counter() - t0
info = cuprims.cache_info()
info.update(seconds=seconds, sha=hashlib.sha256(r.cubin()).hexdigest(), elf=r.cubin()[:4] == b"\x7fELF",
            numba_loaded="numba" in sys.modules)
print(json.dumps(info))
"""


def _spawn(tmp_path: Path, cache_dir: Path, n: int, tag: str) -> list[dict]:
    # with bytecode, as an installed package has it: the warm build's time is ours, not
    # that of Python compiling our sources again in every process
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return spawn_builders(tmp_path, cache_dir, BUILD_SCRIPT, n, tag, env=env, replace_env=True)


def test_processes_racing_compile_once(tmp_path, fresh_caches):
    outs = _spawn(tmp_path, fresh_caches, 3, "race")
    assert sum(o["nvrtc_compiles"] for o in outs) == 1, outs
    assert sum(o["numba_compiles"] for o in outs) == 1, outs
    assert sum(o["links"] for o in outs) == 1, outs
    assert sum(o["disk_hits"] for o in outs) == 2, outs
    assert len({o["sha"] for o in outs}) == 1
    assert all(o["elf"] for o in outs)


def test_second_process_compiles_nothing(tmp_path, fresh_caches):
    (first,) = _spawn(tmp_path, fresh_caches, 1, "first")
    assert first["nvrtc_compiles"] == 1 and first["numba_compiles"] == 1 and first["links"] == 1
    (second,) = _spawn(tmp_path, fresh_caches, 1, "second")
    assert second["numba_compiles"] == 0
    assert second["nvrtc_compiles"] == 0
    assert second["links"] == 0
    assert second["disk_hits"] >= 1
    assert second["sha"] == first["sha"]
    assert second["numba_loaded"] is False, "a warm disk cache must not need numba"
    # the time of a warm build, the fastest of three processes: one run beside a loaded
    # machine's other work measures the machine
    best = min([second["seconds"]] + [_spawn(tmp_path, fresh_caches, 1, f"again{i}")[0]["seconds"] for i in range(2)])
    assert best <= 0.1, f"warm make_reduce_into took {best:.3f} s (fastest of three processes)"


def test_warm_disk_in_process_compiles_nothing(pristine_copy):
    root, cubin = pristine_copy
    before = counters()
    obj = make_f4(plus_op)
    assert delta(before) == {"numba_compiles": 0, "nvrtc_compiles": 0, "links": 0}
    assert cuprims.cache_info()["disk_hits"] >= 1
    assert obj.cubin() == cubin
    meta = obj._builds.result(90).meta
    assert meta["threads"] > 0 and meta["accum_size"] == 4


# ----------------------------------------------------------------- disk entries

def test_encode_decode_round_trip():
    meta = {"arch": 90, "kernels": {"a<b>": "_Z1a"}, "meta": {"x": 1}}
    blobs = {"cubin": b"\x7fELF" + bytes(range(256)) * 3, "empty": b"", "ltoir": b"\x00\x01"}
    raw = encode_entry(meta, blobs, kind="cubin", key="ab" * 32)
    assert raw.startswith(MAGIC)
    assert decode_entry(raw, kind="cubin", key="ab" * 32) == (meta, blobs)
    assert encode_entry(meta, blobs, kind="cubin", key="ab" * 32) == raw  # deterministic framing
    with pytest.raises(ValueError, match="another kind or key"):
        decode_entry(raw, kind="cubin", key="cd" * 32)
    with pytest.raises(ValueError, match="another kind or key"):
        decode_entry(raw, kind="kernel", key="ab" * 32)


def _damaged(raw: bytes):
    head = len(MAGIC) + 32 + 8
    yield "empty", b"", None
    yield "short", raw[:10], "bad magic"
    yield "bad magic", b"X" + raw[1:], "bad magic"
    yield "truncated", raw[:-5], "truncated"
    yield "appended", raw + b"junk", "truncated"
    flipped = bytearray(raw)
    flipped[head + 20] ^= 0xFF
    yield "flipped payload", bytes(flipped), "checksum"
    flipped = bytearray(raw)
    flipped[len(MAGIC) + 3] ^= 0x01
    yield "flipped digest", bytes(flipped), "checksum"


@pytest.mark.parametrize("case", ["empty", "short", "bad magic", "truncated", "appended", "flipped payload",
                                  "flipped digest"])
def test_decode_rejects_damage(case):
    raw = encode_entry({"k": 1}, {"blob": b"0123456789" * 10}, kind="kernel", key="ef" * 32)
    cases = {name: (data, msg) for name, data, msg in _damaged(raw)}
    data, msg = cases[case]
    with pytest.raises(ValueError) as info:
        decode_entry(data, kind="kernel", key="ef" * 32)
    if msg:
        assert msg in str(info.value)


def test_disk_cache_get_put_and_discard(tmp_path):
    disk = DiskCache(tmp_path / "c")
    assert disk.get("cubin", "ab" * 32) is None
    disk.put("cubin", "ab" * 32, {"m": 1}, {"cubin": b"xyz"})
    assert disk.get("cubin", "ab" * 32) == ({"m": 1}, {"cubin": b"xyz"})
    path = tmp_path / "c" / LAYOUT_VERSION / "cubin" / "ab" / ("ab" * 32)
    assert path.is_file()
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    path.write_bytes(path.read_bytes()[:-1])
    before = counters()
    assert disk.get("cubin", "ab" * 32) is None
    assert delta(before, ("disk_corrupt_discarded",)) == {"disk_corrupt_discarded": 1}
    assert not path.exists(), "a corrupt entry must be deleted"


def _truncate(p: Path):
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _flip(p: Path):
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x5A
    p.write_bytes(bytes(data))


def _empty(p: Path):
    p.write_bytes(b"")


def _garbage(p: Path):
    p.write_bytes(os.urandom(p.stat().st_size))


CORRUPTIONS = {"truncate": _truncate, "flip": _flip, "empty": _empty, "garbage": _garbage}


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_corrupt_entries_are_discarded_and_rebuilt(pristine_copy, how):
    root, original = pristine_copy
    damaged = _files(root, "cubin") + _files(root, "kernel")
    assert len(damaged) == 2
    for p in damaged:
        CORRUPTIONS[how](p)
    before = counters()
    obj = make_f4(plus_op)
    cubin = obj.cubin()
    assert cubin[:4] == ELF
    assert cubin == original
    d = delta(before, ("numba_compiles", "nvrtc_compiles", "links", "disk_corrupt_discarded"))
    assert d["disk_corrupt_discarded"] >= 1
    assert d["disk_corrupt_discarded"] == 2  # both the cubin and the kernel entry
    assert d["nvrtc_compiles"] == 1 and d["numba_compiles"] == 1 and d["links"] == 1
    # every damaged file was replaced by a good entry
    for p in damaged:
        assert p.is_file()
        meta, blobs = decode_entry(p.read_bytes(), kind=p.parent.parent.name, key=p.name)
        assert blobs
    cubin_path = _files(root, "cubin")[0]
    cubin_meta, cubin_blobs = decode_entry(cubin_path.read_bytes(), kind="cubin", key=cubin_path.name)
    assert cubin_blobs["cubin"] == original
    assert cubin_meta["arch"] == 90
    # and the repaired cache serves the next process-like cold start without compiling
    cuprims.clear_all_caches()
    before = counters()
    assert make_f4(plus_op).cubin() == original
    assert delta(before) == {"numba_compiles": 0, "nvrtc_compiles": 0, "links": 0}


def test_corrupt_cubin_with_good_kernel_relinks_only(pristine_copy):
    root, original = pristine_copy
    for p in _files(root, "cubin"):
        _flip(p)
    before = counters()
    assert make_f4(plus_op).cubin() == original
    assert delta(before) == {"numba_compiles": 1, "nvrtc_compiles": 0, "links": 1}


def test_disk_cache_off_writes_nothing(monkeypatch, fresh_caches):
    monkeypatch.setenv("CUPRIMS_DISK_CACHE", "0")
    assert cuprims.cache_info()["disk_enabled"] is False
    obj = make_f4(OpKind.PLUS)
    assert obj.cubin()[:4] == ELF
    info = cuprims.cache_info()
    assert info["disk_writes"] == 0 and info["disk_hits"] == 0
    assert _files(fresh_caches) == []


def test_clear_all_caches_disk_empties_the_directory(pristine_copy):
    root, original = pristine_copy
    make_f4(plus_op)
    assert _files(root)
    assert cuprims.cache_info()["memory_entries"] >= 1
    cuprims.clear_all_caches(disk=True)
    assert _files(root) == []
    assert cuprims.cache_info()["memory_entries"] == 0
    before = counters()
    assert make_f4(plus_op).cubin() == original
    assert delta(before) == {"numba_compiles": 1, "nvrtc_compiles": 1, "links": 1}


def test_clear_all_caches_memory_only_keeps_disk(pristine_copy):
    root, original = pristine_copy
    files = _files(root)
    make_f4(plus_op)
    cuprims.clear_all_caches()
    uses = root / LAYOUT_VERSION / "uses"
    assert [p for p in _files(root) if uses not in p.parents] == files   # entries and locks untouched
    assert [p.name.split("-")[0] for p in _files(uses)] == ["cubin"]       # the disk hit is recorded
    assert cuprims.cache_info()["memory_entries"] == 0
    before = counters()
    make_f4(plus_op)
    assert delta(before) == {"numba_compiles": 0, "nvrtc_compiles": 0, "links": 0}


def test_clear_all_caches_reaches_other_threads(shared_cache):
    op = lambda a, b: a + b * 0.125  # noqa: E731
    with ThreadPoolExecutor(1) as worker:
        first = worker.submit(make_f4, op).result()
        cuprims.clear_all_caches()
        before = counters()
        second = worker.submit(make_f4, op).result()
    assert second is not first
    assert delta(before, ("memory_misses",))["memory_misses"] >= 1


# ----------------------------------------------------------------- no user objects kept alive

def test_cache_does_not_keep_closure_over_array_alive(shared_cache):
    def make():
        arr = np.arange(4096, dtype=np.float32)

        def helper(x):
            return x * arr[3]

        def op(a, b):
            return helper(a) + b

        return op, weakref.ref(arr), weakref.ref(helper), weakref.ref(op)

    op, w_arr, w_helper, w_op = make()
    obj = make_f4(op)
    assert obj.cubin()[:4] == ELF
    del op
    gc.collect()
    assert w_op() is None, "the operator is kept alive"
    assert w_helper() is None, "a helper function of the operator is kept alive"
    assert w_arr() is None, "an array captured by the operator is kept alive"
    assert obj.cubin()[:4] == ELF  # the build itself stays usable


class _Plain:
    """An object the recipe cannot describe by content."""


def test_non_persistent_op_builds_without_disk_and_keeps_nothing_alive(fresh_caches):
    def make():
        thing = _Plain()

        def op(a, b):
            if False:  # keeps ``thing`` in the closure without numba having to type it
                return thing
            return a + b

        return op, weakref.ref(thing)

    op, w_thing = make()
    assert cuprims.op.op_spec(op).persistent is False
    before = counters()
    obj = make_f4(op)
    assert obj.cubin()[:4] == ELF
    assert delta(before)["numba_compiles"] == 1
    assert cuprims.cache_info()["disk_writes"] == 0
    assert _files(fresh_caches, "cubin") == []
    # never cached: asking again compiles the operator again
    make_f4(op)
    assert delta(before)["numba_compiles"] == 2
    del op, obj
    gc.collect()
    assert w_thing() is None


def test_failed_op_keeps_nothing_alive(shared_cache):
    def make():
        thing = _Plain()
        thing.scale = 2.0

        def op(a, b):
            return a + b * thing.scale  # numba cannot type _Plain

        return op, weakref.ref(thing)

    op, w_thing = make()
    try:
        make_f4(op)
    except OperatorCompileError:
        pass
    else:
        pytest.fail("expected OperatorCompileError")
    del op
    gc.collect()
    assert w_thing() is None


def test_reducer_keeps_no_placeholders_alive(shared_cache):
    d_in, d_out, h_init = ProxyArray(np.float32), ProxyArray(np.float32), ProxyValue(np.float32)
    refs = [weakref.ref(x) for x in (d_in, d_out, h_init)]
    obj = cuprims.make_reduce_into(d_in=d_in, d_out=d_out, op=OpKind.PLUS, h_init=h_init, compute_capability=90)
    del d_in, d_out, h_init
    gc.collect()
    assert [r() for r in refs] == [None, None, None]
    assert obj.cubin()[:4] == ELF


class _FakeDeviceArray:
    """A CUDA Array Interface producer (as a property, like CuPy and numba)."""

    def __init__(self, ptr, n):
        self._iface = {"data": (ptr, False), "shape": (n,), "typestr": "<f4", "version": 3, "strides": None}

    @property
    def __cuda_array_interface__(self):
        return self._iface


def test_reducer_keeps_no_device_arrays_alive(shared_cache):
    d_in, d_out = _FakeDeviceArray(0x7F0000000000, 100), _FakeDeviceArray(0x7F0000010000, 1)
    refs = [weakref.ref(d_in), weakref.ref(d_out)]
    obj = cuprims.make_reduce_into(d_in=d_in, d_out=d_out, op=plus_op, h_init=np.float32(0), compute_capability=90)
    del d_in, d_out
    gc.collect()
    assert [r() for r in refs] == [None, None]
    assert obj.cubin()[:4] == ELF
