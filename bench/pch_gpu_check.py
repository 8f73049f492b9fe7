"""On the GPU host: do persistent precompiled headers work beside a CUDA context?

Fresh processes, one shared empty cache directory (CUPRIMS_PCH_DISK=1):

1. ``context first, made``: CuPy creates a context and arrays, then the first reduce build
   (for the device): is the heap placed (``pch_heap``) and the PCH written?
2. ``context first, used``: the same, another reduce: is the PCH used (``pch_hits``)?
3. ``heap first, then context``: an ahead-of-time build (no context yet) places the heap,
   then a context, half the device's memory, 1 GiB of pinned host memory, and a reduce run
   on the device, checked against numpy.

Each prints what it found, the mappings near the heap's address, and the CUDA driver's
largest mappings. Run:  python bench/pch_gpu_check.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

COMMON = r"""
import json, numpy as np
def maps_near(lo=0x1f0000000000, hi=0x210000000000, big=1 << 36):
    near, large = [], []
    for line in open("/proc/self/maps"):
        p = line.split()
        a, b = (int(x, 16) for x in p[0].split("-"))
        item = f"{p[0]} {(b - a) >> 20} MiB {p[1]} {' '.join(p[5:])}"
        if a < hi and b > lo:
            near.append(item)
        if b - a >= big:
            large.append(item)
    return near, large
def report(name, **extra):
    import cuprims
    info = cuprims.cache_info()
    near, large = maps_near()
    print(json.dumps({"case": name, **{k: v for k, v in info.items() if k.startswith("pch")},
                      "near_heap": near, "mappings_over_64_GiB": large, **extra}))
"""

CASES = {
    "context first, made": r"""
import cupy as cp, cuprims
x = cp.ones(1 << 20, dtype=np.float32); out = cp.empty(1, np.float32)
cuprims.reduce_into(d_in=x, d_out=out, num_items=x.size, op=cuprims.OpKind.PLUS, h_init=np.float32(0))
report("context first, made", sum_ok=bool(float(out.get()[0]) == float(1 << 20)))
""",
    "context first, used": r"""
import cupy as cp, cuprims
x = cp.arange(1 << 20, dtype=np.float64); out = cp.empty(1, np.float64)
cuprims.reduce_into(d_in=x, d_out=out, num_items=x.size, op=cuprims.OpKind.MAXIMUM, h_init=np.float64(0))
report("context first, used", max_ok=bool(float(out.get()[0]) == (1 << 20) - 1))
""",
    "heap first, then context": r"""
import cuprims
cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.int32), d_out=cuprims.ProxyArray(np.int32),
                         op=cuprims.OpKind.MINIMUM, h_init=np.int32(0), compute_capability=90)
import cupy as cp
free, total = cp.cuda.runtime.memGetInfo()
block = cp.empty(free // 2, dtype=cp.uint8)          # half the device's memory
pinned = cp.cuda.alloc_pinned_memory(1 << 30)       # 1 GiB of pinned host memory
x = cp.arange(5, (1 << 24) + 5, dtype=cp.int32); out = cp.empty(1, cp.int32)
cuprims.reduce_into(d_in=x, d_out=out, num_items=x.size, op=cuprims.OpKind.MINIMUM, h_init=np.int32(1 << 30))
report("heap first, then context", device_bytes_held=int(block.nbytes), min_ok=bool(int(out.get()[0]) == 5))
""",
}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="cuprims-pch-gpu-") as cache:
        env = {**os.environ, "CUPRIMS_CACHE_DIR": cache, "CUPRIMS_PCH_DISK": "1", "CUPRIMS_DISK_CACHE": "1"}
        for name, code in CASES.items():
            proc = subprocess.run([sys.executable, "-c", COMMON + code], capture_output=True, text=True, env=env,
                                  timeout=600)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode or not lines:
                print(json.dumps({"case": name, "rc": proc.returncode, "stderr": proc.stderr[-3000:]}))
            else:
                print(json.dumps(json.loads(lines[-1]), indent=1))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
