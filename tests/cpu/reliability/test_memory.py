"""Memory over many builds: distinct Python-operator builds (30 in CI, 300 with the slow
tests), then clear_all_caches(), leave resident memory within 50 MB of the figure after
the first 25, and free every device array an operator captured (in its closure or as a
default argument). After clear_all_caches() nothing cuprims made for a build (operator
spec, description, algorithm object, build result, numba dispatcher or its numba type) is
reachable any more.

Each probe runs in its own process, so that the figures are its workload's alone."""

from __future__ import annotations

import json

import pytest

from cpu_helpers import last_json, run_python

pytestmark = pytest.mark.runs_long   # long tests: sent to the workers first

PROBE = r"""
import gc, json, os, weakref
import numpy as np
import cuprims
from cuprims import ProxyArray as P, ProxyValue as V


class DeviceArray:
    # a stand-in for a device array an operator captures (never dereferenced: no GPU here)
    def __init__(self, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (0x10000, False),
                                         "version": 3, "strides": None}


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


captured = []


def make(k):
    arr = DeviceArray(k + 1)
    captured.append(weakref.ref(arr))
    c = float(k)
    if k % 2:
        def op(a, b, arr=arr):          # captured as a default argument
            return a + b + c + arr[0]
    else:
        def op(a, b):                   # captured in the closure
            return a + b + c + arr[0]
    return op


def build(k):
    cuprims.make_reduce_into(d_in=P(np.float32), d_out=P(np.float32), op=make(k), h_init=V(np.float32),
                             compute_capability=90)


for k in range(25):
    build(k)
gc.collect()
after_25 = rss_mb()
for k in range(25, TOTAL_BUILDS):
    build(k)
cuprims.clear_all_caches()
gc.collect()
print(json.dumps({"after_25": after_25, "after_clear": rss_mb(),
                  "alive": sum(1 for r in captured if r() is not None),
                  "numba_compiles": cuprims.cache_info()["numba_compiles"]}))
"""


def _run_probe(tmp_path, text: str, timeout: float) -> dict:
    """Run ``text`` from a file (operators capturing arrays are rewritten from their source)
    in a fresh process with no disk cache; its last JSON line."""
    probe = tmp_path / "probe.py"
    probe.write_text(text)
    out = run_python(f"exec(compile(open({str(probe)!r}).read(), {str(probe)!r}, 'exec'))",
                     env={"CUPRIMS_CACHE_DIR": str(tmp_path / "cache"), "CUPRIMS_DISK_CACHE": "0"}, timeout=timeout)
    figures = last_json(out.stdout)
    print(json.dumps(figures))
    return figures


# CI builds 30 operators; the 300 of the full check run with the slow tests
@pytest.mark.parametrize("total_builds", [30, pytest.param(300, marks=pytest.mark.slow)])
def test_builds_then_clear_stay_within_50_mb(tmp_path, total_builds):
    figures = _run_probe(tmp_path, f"TOTAL_BUILDS = {total_builds}\n" + PROBE, timeout=900)
    assert figures["numba_compiles"] == total_builds  # every operator really was built
    assert figures["alive"] == 0                      # no captured array outlives its operator
    assert figures["after_clear"] - figures["after_25"] <= 50, figures


# After clear_all_caches() nothing of ours keeps a build alive: weak references to every
# operator, algorithm object, description, operator spec and build result, and to the numba
# dispatchers (and their numba types) compiled from the operators, are all dead. Three kinds
# of numba-compiled operator: an array captured in the closure, one captured as a default
# argument, and a closure over a scalar calling a plain Python helper (not one expression, so
# numba compiles it and the helper). Before them, clear_all_caches() is called with nothing
# built (numba is not imported for it), then from another thread while the first operators
# are built.
STRUCTURAL_PROBE = r"""
import gc, json, sys, threading, weakref
import numpy as np
import cuprims
from cuprims import ProxyArray as P, ProxyValue as V


class DeviceArray:
    # a stand-in for a device array an operator captures (never dereferenced: no GPU here)
    def __init__(self, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (0x10000, False),
                                         "version": 3, "strides": None}


def twice(x):
    return x * 2.0


def make(k):
    arr, c = DeviceArray(k + 1), float(k)
    if k % 3 == 0:
        def op(a, b):
            return a + b + c + arr[0]
    elif k % 3 == 1:
        def op(a, b, arr=arr):
            return a + b + c + arr[0]
    else:
        def op(a, b):
            s = twice(a) + b
            return s + c
    return op


def build(k):
    op = make(k)
    return op, cuprims.make_reduce_into(d_in=P(np.float32), d_out=P(np.float32), op=op, h_init=V(np.float32),
                                        compute_capability=90)


def collect():
    # numba unregisters a dispatcher's compiled functions from a finalizer, run by the first
    # collection; what that frees is collected by the next
    for _ in range(10):
        if not gc.collect():
            return


cuprims.clear_all_caches()         # with nothing built: no error, and numba is not imported for it
numba_before_builds = "numba" in sys.modules
stop, clears, clear_errors = threading.Event(), [], []


def clear_meanwhile():             # clear_all_caches() from another thread while the builds run
    while not stop.is_set():
        try:
            cuprims.clear_all_caches()
            clears.append(1)
        except Exception as exc:
            clear_errors.append(repr(exc))
        stop.wait(0.05)


clearer = threading.Thread(target=clear_meanwhile)
clearer.start()
for k in range(100, 103):          # loads numba, NVVM, NVRTC and nvJitLink
    build(k)
stop.set()
clearer.join()
cuprims.clear_all_caches()
collect()

from numba.core import types as numba_types
from numba.cuda.dispatcher import CUDADispatcher

NUMBA_KINDS = (CUDADispatcher, numba_types.Dispatcher)
earlier = [o for o in gc.get_objects() if isinstance(o, NUMBA_KINDS)]   # held, so their ids stay theirs
earlier_ids = {id(o) for o in earlier}
refs = {"operators": [], "algorithms": [], "descriptions": [], "specs": [], "build results": [],
        "numba dispatchers and their types": []}
for k in range(9):
    op, alg = build(k)
    refs["operators"].append(weakref.ref(op))
    refs["algorithms"].append(weakref.ref(alg))
    refs["descriptions"].append(weakref.ref(alg.desc))
    refs["specs"] += [weakref.ref(o.spec) for o in alg.desc.linked_ops()]
    refs["build results"] += [weakref.ref(r) for r in alg._builds._by_arch.values()]
    del op, alg
refs["numba dispatchers and their types"] = [weakref.ref(o) for o in gc.get_objects()
                                             if isinstance(o, NUMBA_KINDS) and id(o) not in earlier_ids]
found = {name: len(rs) for name, rs in refs.items()}
cuprims.clear_all_caches()
collect()
print(json.dumps({"found": found, "alive": {name: sum(r() is not None for r in rs) for name, rs in refs.items()},
                  "numba_compiles": cuprims.cache_info()["numba_compiles"],
                  "numba_before_builds": numba_before_builds, "clears_meanwhile": len(clears),
                  "clear_errors": clear_errors}))
"""


def test_clear_all_caches_leaves_nothing_of_a_build_reachable(tmp_path):
    figures = _run_probe(tmp_path, STRUCTURAL_PROBE, timeout=600)
    assert figures["numba_compiles"] == 12                       # every operator really was built by numba
    assert not figures["numba_before_builds"]
    assert figures["clears_meanwhile"] > 0 and figures["clear_errors"] == [], figures
    assert all(n >= 9 for n in figures["found"].values()), figures   # each kind of object was seen
    assert figures["alive"] == {name: 0 for name in figures["found"]}, figures
