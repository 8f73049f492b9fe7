"""cuprims demo: run reductions on the GPU, or build them ahead of time for sm_90 without one.

    bash scripts/demo
"""

from __future__ import annotations

import time

import numpy as np

import cuprims
from cuprims import OpKind, ProxyArray, ProxyValue


def have_gpu() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def run_on_gpu() -> None:
    import cupy as cp

    n = 1 << 24
    x = cp.random.random(n, dtype=cp.float32)
    out = cp.empty(1, cp.float32)
    for label, op in [("OpKind.PLUS", OpKind.PLUS), ("lambda a, b: a + b", lambda a, b: a + b)]:
        t0 = time.perf_counter()
        cuprims.reduce_into(d_in=x, d_out=out, num_items=n, op=op, h_init=np.float32(0))
        cp.cuda.Device().synchronize()
        print(f"sum with {label:20s} = {float(out[0]):.3f}  (cupy: {float(x.sum()):.3f}; "
              f"first call incl. build {time.perf_counter() - t0:.2f} s)")
    ints = cp.arange(1000, dtype=cp.int64)
    best = cp.empty(1, cp.int64)
    cuprims.reduce_into(d_in=ints, d_out=best, num_items=1000, op=lambda a, b: a if a > b else b,
                        h_init=np.int64(-1))
    print("max of arange(1000) =", int(best[0]))


def build_ahead_of_time() -> None:
    print("no GPU here: building ahead of time for sm_90")
    for label, op, dtype in [("float32 PLUS", OpKind.PLUS, np.float32),
                             ("float32 lambda a + b", lambda a, b: a + b, np.float32),
                             ("int64 MAXIMUM", OpKind.MAXIMUM, np.int64)]:
        t0 = time.perf_counter()
        reducer = cuprims.make_reduce_into(d_in=ProxyArray(dtype), d_out=ProxyArray(dtype), op=op,
                                           h_init=ProxyValue(dtype), compute_capability=90)
        print(f"  {label:22s} -> sm_{reducer.compute_capabilities[0]} cubin of {len(reducer.cubin())} bytes "
              f"in {time.perf_counter() - t0:.2f} s")


def main() -> None:
    if have_gpu():
        run_on_gpu()
    else:
        build_ahead_of_time()
    info = cuprims.cache_info()
    print("cache:", {k: info[k] for k in ("numba_compiles", "nvrtc_compiles", "links", "memory_hits", "disk_hits")},
          "at", info["cache_dir"])


if __name__ == "__main__":
    main()
