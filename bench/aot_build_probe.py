"""Ahead-of-time build timing on any machine (no GPU needed): run it twice with the same
CUPRIMS_CACHE_DIR; the first run compiles, the second must compile nothing.

    rm -rf /tmp/c; CUPRIMS_CACHE_DIR=/tmp/c python bench/aot_build_probe.py   # cold
    CUPRIMS_CACHE_DIR=/tmp/c python bench/aot_build_probe.py                  # warm disk cache
"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np, cuprims
t_import = time.perf_counter() - t0
numba_loaded = "numba" in sys.modules
def op(a, b):
    return a + b
t0 = time.perf_counter()
r = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32), op=op,
                             h_init=cuprims.ProxyValue(np.float32), compute_capability=90)
dt = time.perf_counter() - t0
i = cuprims.cache_info()
print(json.dumps({"import_s": round(t_import, 3), "numba_after_import": numba_loaded, "make_s": round(dt, 3),
                  "numba_compiles": i["numba_compiles"], "nvrtc_compiles": i["nvrtc_compiles"], "links": i["links"],
                  "disk_hits": i["disk_hits"]}))
