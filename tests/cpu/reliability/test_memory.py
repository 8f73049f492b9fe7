"""Memory over many builds: 300 distinct Python-operator builds, then clear_all_caches(),
leave resident memory within 50 MB of the figure after the first 25, and free every
device array an operator captured (in its closure or as a default argument).

Runs in its own process, so that the figures are this workload's alone."""

from __future__ import annotations

import json

from cpu_helpers import last_json, run_python

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
for k in range(25, 300):
    build(k)
cuprims.clear_all_caches()
gc.collect()
print(json.dumps({"after_25": after_25, "after_clear": rss_mb(),
                  "alive": sum(1 for r in captured if r() is not None),
                  "numba_compiles": cuprims.cache_info()["numba_compiles"]}))
"""


def test_300_builds_then_clear_stay_within_50_mb(tmp_path):
    probe = tmp_path / "probe.py"  # a file: operators capturing arrays are rewritten from their source
    probe.write_text(PROBE)
    out = run_python(f"exec(compile(open({str(probe)!r}).read(), {str(probe)!r}, 'exec'))",
                     env={"CUPRIMS_CACHE_DIR": str(tmp_path / "cache"), "CUPRIMS_DISK_CACHE": "0"}, timeout=900)
    figures = last_json(out.stdout)
    print(json.dumps(figures))
    assert figures["numba_compiles"] == 300           # every operator really was built
    assert figures["alive"] == 0                      # no captured array outlives its operator
    assert figures["after_clear"] - figures["after_25"] <= 50, figures
