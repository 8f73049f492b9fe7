"""Provider builds: the cache keys' axes, the memory and disk caches (a second build
compiles nothing), the dump directory, and one NVRTC unit for many providers."""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")

from cuprims import coop  # noqa: E402
from cuprims._base import stats  # noqa: E402
from cuprims._value_types import value_type  # noqa: E402
from cuprims.coop import _build  # noqa: E402
from cuprims.coop._arguments import combiner  # noqa: E402
from cuprims.coop._codegen import entry_points, unit_source  # noqa: E402
from cuprims.coop._spec import ProviderSpec  # noqa: E402
from cuprims.op import OpKind, op_spec  # noqa: E402

PLUS = op_spec(OpKind.PLUS)


def _spec(**changes) -> ProviderSpec:
    base = dict(kind="reduce", vt=value_type("i4"), dims=(128, 1, 1), items=1, algorithm="warp_reductions",
                op=PLUS)
    base.update(changes)
    return ProviderSpec(**base)


@pytest.mark.parametrize("change", [
    dict(vt=value_type("f4")), dict(vt=value_type("u4")), dict(items=2), dict(dims=(64, 2, 1)),
    dict(dims=(128, 1, 2)), dict(algorithm="raking"), dict(op=op_spec(OpKind.MAXIMUM)),
    dict(kind="scan", mode="inclusive", algorithm="raking"),
    dict(kind="warp_scan", mode="exclusive", dims=(32, 1, 1), algorithm=""),
])
def test_every_axis_changes_key_and_symbol(change):
    a, b = _spec(), _spec(**change)
    assert _build.unit_key([a], 90) != _build.unit_key([b], 90)
    assert a.symbol != b.symbol
    assert _build.unit_key([a], 90) != _build.unit_key([a], 80)


def test_python_operator_recipe_is_in_the_key():
    add = combiner(lambda a, b: a + b, value_type("i4"), "op")
    sub = combiner(lambda a, b: a - b, value_type("i4"), "op")
    assert _build.unit_key([_spec(op=add)], 90) != _build.unit_key([_spec(op=sub)], 90)


def test_second_build_compiles_nothing(fresh_caches):
    with coop.target((9, 0)):
        first = coop.block.make_sum(numba.float32, (32, 4), 4)
        assert stats.snapshot()["nvrtc_compiles"] == 1
        again = coop.block.make_sum(numba.float32, (32, 4), 4)        # memory hit
        assert stats.snapshot()["nvrtc_compiles"] == 1
        _build.clear_memory()                                        # as a new process: disk hit
        third = coop.block.make_sum(numba.float32, (32, 4), 4)
    counts = stats.snapshot()
    assert counts["nvrtc_compiles"] == 1 and counts.get("links", 0) == 1   # one probe link in all
    assert [f.data for f in third.files] == [f.data for f in first.files] == [f.data for f in again.files]
    assert third.temp_storage_bytes == first.temp_storage_bytes > 1
    assert any(p.parts[-2:-1] == ("coop",) or "coop" in p.parts for p in fresh_caches.rglob("*") if p.is_file())


def test_python_operator_is_cached_on_disk_too(fresh_caches):
    def mul(a, b):
        return a * b

    with coop.target((9, 0)):
        first = coop.block.make_reduce(numba.int64, 128, mul)
        _build.clear_memory()
        stats.reset()
        second = coop.block.make_reduce(numba.int64, 128, mul)
    counts = stats.snapshot()
    assert counts.get("nvrtc_compiles", 0) == 0 and counts.get("numba_compiles", 0) == 0
    assert [f.data for f in second.files] == [f.data for f in first.files]


def test_corrupt_entry_is_rebuilt(fresh_caches):
    with coop.target((9, 0)):
        first = coop.warp.make_sum(numba.int32)
        assert first.files[0].data                # its build (on a worker thread) is done and kept
        for path in fresh_caches.rglob("*"):
            if path.is_file() and "coop" in path.parts:
                path.write_bytes(b"garbage")
        _build.clear_memory()
        prim = coop.warp.make_sum(numba.int32)
    assert stats.snapshot()["nvrtc_compiles"] == 2
    assert prim.files[0].data[:4] != b"garb"


def test_many_providers_in_one_unit(fresh_caches):
    specs = [_spec(), _spec(kind="load", op=None, algorithm="transpose", items=4),
             _spec(kind="scan", mode="exclusive", algorithm="warp_scans", items=8, vt=value_type("f8")),
             _spec(kind="warp_reduce", dims=(16, 1, 1), algorithm="", vt=value_type("u2"))]
    unit = _build.build_unit(specs, 90)
    assert stats.snapshot()["nvrtc_compiles"] == 1
    assert set(unit.temp) == {sp.symbol for sp in specs}
    text = unit_source(specs, 90).text
    for sp in specs:
        for entry in entry_points(sp):
            assert f" {entry}(" in text


def test_dump_dir_gets_provider_sources(fresh_caches, tmp_path, monkeypatch):
    dump = tmp_path / "dump"
    monkeypatch.setenv("CUPRIMS_DUMP_DIR", str(dump))
    with coop.target((9, 0)):
        prim = coop.block.make_sum(numba.int16, 64)
    texts = [p.read_text() for p in dump.glob("*.cu")]
    assert any(prim.spec.symbol in t and "cub::BlockReduce" in t for t in texts)


def test_import_cuprims_coop_does_not_import_numba():
    import subprocess
    import sys

    code = "import sys, cuprims, cuprims.coop; assert 'numba' not in sys.modules, 'numba imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.fixture
def held_build(monkeypatch):
    """Provider builds wait (at most 30 s) until the test sets the returned event (set
    again at teardown); ``held_build.real`` is the real compile."""
    import threading

    gate = threading.Event()
    real = _build._compile

    def held(*args, **kwargs):
        gate.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(_build, "_compile", held)
    gate.real = real
    yield gate
    gate.set()


def test_a_builtin_operators_provider_builds_beside_the_callers_work(fresh_caches, held_build):
    # the factory returns before NVRTC is done; the files numba links, the storage layout
    # and the counters all wait for the one build
    from numba import cuda, types

    from coop_helpers import link_kernel

    with coop.target((9, 0)):
        prim = coop.block.make_sum(numba.float64, 96)       # returns with its build held
        again = coop.block.make_sum(numba.float64, 96)
        files = prim.files
        assert not prim._unit.done() and again._unit is prim._unit   # one build for both
        held_build.set()

        @cuda.jit(link=files)
        def kernel(x, out):
            s = prim(x[cuda.threadIdx.x])
            if cuda.threadIdx.x == 0:
                out[0] = s

        f8 = types.Array(types.float64, 1, "C")
        cubin = link_kernel(kernel, (f8, f8), [prim])
    assert cubin[:4] == b"\x7fELF"
    assert files[0].data == prim.files[0].data == again.files[0].data
    assert prim.temp_storage_bytes > 1 and prim.temp_storage_alignment >= 8
    assert stats.snapshot()["nvrtc_compiles"] == 1


def test_a_failed_background_build_raises_where_it_is_waited_for(fresh_caches, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("NVRTC broke")

    monkeypatch.setattr(_build, "_compile", broken)
    with coop.target((9, 0)):
        prim = coop.block.make_sum(numba.int16, 160)
        info = stats.snapshot()                   # waits for the build, keeps its error to itself
        with pytest.raises(RuntimeError, match="NVRTC broke"):
            prim.temp_storage_bytes
        with pytest.raises(RuntimeError, match="NVRTC broke"):
            prim.files[0].data
    monkeypatch.undo()
    with coop.target((9, 0)):
        retried = coop.block.make_sum(numba.int16, 160)   # a failure is not kept: built again
        assert retried._unit is not prim._unit
        assert retried.temp_storage_bytes > 1 and retried.files[0].data
    assert info["nvrtc_compiles"] == 0                    # the failed build compiled nothing


def test_a_child_forked_while_a_build_runs_builds_it_itself(fresh_caches, held_build):
    # the build's thread stays in the parent: the child must neither wait for it forever
    # (a hang) nor for the counters' in-flight builds
    import os
    import signal

    with coop.target((9, 0)):
        prim = coop.block.make_sum(numba.uint16, 224)
        pid = os.fork()
        if pid == 0:                                     # the child
            signal.alarm(60)                             # a hang fails the test, not the suite
            _build._compile = held_build.real
            ok = False
            try:
                stats.snapshot()
                ok = bool(prim.files[0].data) and prim.temp_storage_bytes > 1
            finally:
                os._exit(0 if ok else 1)
        held_build.set()
        _, status = os.waitpid(pid, 0)
        assert prim.temp_storage_bytes > 1               # the parent's own build finishes too
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


_BUILD_EVERY_NEW_KIND = """
import json, numba, cuprims
from cuprims import coop
with coop.target((9, 0)):
    made = [coop.block.make_histogram(numba.int16, (8, 16), 2, "atomic", bins=100, counter_dtype="uint64"),
            coop.block.make_run_length_decode(numba.float32, 128, 2, 4),
            coop.block.make_shuffle(numba.int64, 256, 3, coop.block.BlockShuffleType.Down),
            coop.warp.make_shuffle_xor(numba.complex64, threads_in_warp=16),
            coop.block.make_radix_sort_pairs(numba.uint32, numba.float32, 128, 4, blocked_to_striped=True),
            coop.block.make_discontinuity(numba.int32, 128, 2)]
    sizes = [p.temp_storage_bytes for p in made]
info = cuprims.cache_info()
print(json.dumps({"nvrtc": info["nvrtc_compiles"], "links": info["links"], "sizes": sizes}))
"""


def test_a_second_process_builds_the_new_primitives_with_no_compile_and_no_link(tmp_path):
    from cpu_helpers import last_json, run_python

    env = {"CUPRIMS_CACHE_DIR": str(tmp_path / "cache"), "CUPRIMS_DISK_CACHE": "1"}
    first = last_json(run_python(_BUILD_EVERY_NEW_KIND, env=env).stdout)
    second = last_json(run_python(_BUILD_EVERY_NEW_KIND, env=env).stdout)
    assert first["nvrtc"] >= 6 and first["links"] >= 6
    assert (second["nvrtc"], second["links"]) == (0, 0), second
    assert second["sizes"] == first["sizes"]
