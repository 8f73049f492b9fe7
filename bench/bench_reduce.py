"""Reduction benchmark: cuprims beside CuPy, PyTorch and cuda.compute, in one process.

Run on a GPU machine:  python bench/bench_reduce.py [--out DIR]
Writes bench/results/reduce.json and reduce.md (and copies to --out).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import result_rows, add_extra_path, device_ms, host_us, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

BUILD_PROBE = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    {setup}
    import cuprims
    def op(a, b):
        return a + b
    t0 = time.perf_counter()
    r = cuprims.make_reduce_into({args}, op=op, h_init={init}{cc})
    dt = time.perf_counter() - t0
    info = cuprims.cache_info()
    print(json.dumps({{"seconds": dt, "numba_compiles": info["numba_compiles"],
                      "nvrtc_compiles": info["nvrtc_compiles"], "links": info["links"]}}))
""")


def _probe(cache_dir: str, aot: bool) -> dict:
    if aot:
        code = BUILD_PROBE.format(setup="", args="d_in=cuprims.ProxyArray(np.float32), "
                                  "d_out=cuprims.ProxyArray(np.float32)",
                                  init="cuprims.ProxyValue(np.float32)", cc=", compute_capability=90")
    else:
        code = BUILD_PROBE.format(setup="import cupy as cp; x = cp.ones(1024, np.float32); "
                                  "o = cp.empty(1, np.float32); cp.cuda.Device().synchronize()",
                                  args="d_in=x, d_out=o", init="np.float32(0)", cc="")
    env = dict(os.environ, CUPRIMS_CACHE_DIR=cache_dir, CUPRIMS_TRACE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    print(out.stderr.strip())
    return json.loads(out.stdout.strip().splitlines()[-1])


def _dist_version(name: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # noqa: BLE001
        return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--log2n", type=int, default=28)
    args = parser.parse_args()
    add_extra_path()

    import cupy as cp
    import numpy as np
    import torch

    import cuprims
    from cuprims import OpKind

    try:
        import cuda.compute as ccomp
    except Exception as exc:  # noqa: BLE001
        ccomp = None
        print("cuda.compute not importable:", exc)

    n = 1 << args.log2n
    x = cp.random.random(n, dtype=cp.float32)
    out = cp.empty(1, cp.float32)
    init = np.float32(0)
    gbytes = n * 4 / 1e9

    rows, add = result_rows(38, 34)

    # --- throughput: 2^28 float32 sum -------------------------------------------------
    r_plus = cuprims.make_reduce_into(d_in=x, d_out=out, op=OpKind.PLUS, h_init=init)
    tmp = cp.empty(r_plus(temp_storage=None, d_in=x, d_out=out, num_items=n, h_init=init), cp.uint8)
    t_plus = device_ms(lambda: r_plus(temp_storage=tmp, d_in=x, d_out=out, num_items=n, h_init=init))
    r_py = cuprims.make_reduce_into(d_in=x, d_out=out, op=lambda a, b: a + b, h_init=init)
    t_py = device_ms(lambda: r_py(temp_storage=tmp, d_in=x, d_out=out, num_items=n, h_init=init))
    t_cupy = device_ms(lambda: x.sum())
    xt = torch.as_tensor(x, device="cuda")
    t_torch = device_ms(lambda: torch.sum(xt))
    ref = float(x.sum())
    r_plus(temp_storage=tmp, d_in=x, d_out=out, num_items=n, h_init=init)
    assert abs(float(out[0]) - ref) <= 1e-4 * abs(ref), (float(out[0]), ref)
    work = f"sum float32 2^{args.log2n}"
    add(work, "cuprims OpKind.PLUS", t_plus, "ms", t_cupy / t_plus, f"{gbytes / t_plus:.2f} TB/s; ratio = CuPy/cuprims")
    add(work, "cuprims lambda a+b", t_py, "ms", t_plus / t_py, "ratio = PLUS/lambda")
    add(work, "CuPy x.sum()", t_cupy, "ms")
    add(work, "PyTorch torch.sum", t_torch, "ms", t_torch / t_plus, "ratio = torch/cuprims")
    if ccomp is not None:
        try:
            cc_obj = ccomp.make_reduce_into(d_in=x, d_out=out, op=ccomp.OpKind.PLUS, h_init=np.zeros(1, np.float32))
            cc_tmp = cp.empty(cc_obj(temp_storage=None, d_in=x, d_out=out, num_items=n,
                                     op=ccomp.OpKind.PLUS, h_init=np.zeros(1, np.float32)), cp.uint8)
            h0 = np.zeros(1, np.float32)
            t_cc = device_ms(lambda: cc_obj(temp_storage=cc_tmp, d_in=x, d_out=out, num_items=n,
                                            op=ccomp.OpKind.PLUS, h_init=h0))
            add(work, "cuda.compute OpKind.PLUS", t_cc, "ms", t_cc / t_plus, "ratio = cuda.compute/cuprims")
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute reduce failed:", exc)
    del x, xt, tmp

    # --- host time per call, n = 1024 ---------------------------------------------------
    s = cp.random.random(1024, dtype=cp.float32)
    so = cp.empty(1, cp.float32)
    r_small = cuprims.make_reduce_into(d_in=s, d_out=so, op=OpKind.PLUS, h_init=init)
    stmp = cp.empty(max(1, r_small(temp_storage=None, d_in=s, d_out=so, num_items=1024, h_init=init)), cp.uint8)
    u_obj = host_us(lambda: r_small(temp_storage=stmp, d_in=s, d_out=so, num_items=1024, h_init=init))
    u_one = host_us(lambda: cuprims.reduce_into(d_in=s, d_out=so, num_items=1024, op=OpKind.PLUS, h_init=init))
    pyop = lambda a, b: a + b  # noqa: E731
    u_one_py = host_us(lambda: cuprims.reduce_into(d_in=s, d_out=so, num_items=1024, op=pyop, h_init=init))
    st = torch.as_tensor(s, device="cuda")
    u_cupy = host_us(lambda: s.sum())
    u_torch = host_us(lambda: torch.sum(st))
    work = "host time per call, n=1024"
    add(work, "cuprims object API", u_obj, "us", None, "target <= 10 us")
    add(work, "cuprims reduce_into (OpKind.PLUS)", u_one, "us", None, "target <= 20 us")
    add(work, "cuprims reduce_into (lambda)", u_one_py, "us")
    add(work, "CuPy x.sum()", u_cupy, "us")
    add(work, "PyTorch torch.sum", u_torch, "us")
    if ccomp is not None:
        try:
            h0 = np.zeros(1, np.float32)
            c_small = ccomp.make_reduce_into(d_in=s, d_out=so, op=ccomp.OpKind.PLUS, h_init=h0)
            c_tmp = cp.empty(max(1, c_small(temp_storage=None, d_in=s, d_out=so, num_items=1024,
                                            op=ccomp.OpKind.PLUS, h_init=h0)), cp.uint8)
            add(work, "cuda.compute object API", host_us(lambda: c_small(
                temp_storage=c_tmp, d_in=s, d_out=so, num_items=1024, op=ccomp.OpKind.PLUS, h_init=h0)), "us")
            add(work, "cuda.compute reduce_into", host_us(lambda: ccomp.reduce_into(
                d_in=s, d_out=so, num_items=1024, op=ccomp.OpKind.PLUS, h_init=h0)), "us")
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute host timing failed:", exc)

    # --- build times in fresh processes -------------------------------------------------
    with tempfile.TemporaryDirectory() as cache:
        first = _probe(cache, aot=False)
        second = _probe(cache, aot=False)
    with tempfile.TemporaryDirectory() as cache:
        aot_first = _probe(cache, aot=True)
        aot_second = _probe(cache, aot=True)
    work = "build, Python op reduce"
    add(work, "first process, empty cache", first["seconds"], "s", None, "target <= 3.0 s")
    add(work, "second process, warm disk", second["seconds"], "s", None,
        f"compiles: numba {second['numba_compiles']}, nvrtc {second['nvrtc_compiles']}, links {second['links']}")
    add(work, "AOT sm_90 first process", aot_first["seconds"], "s")
    add(work, "AOT sm_90 second process", aot_second["seconds"], "s", None,
        f"compiles: numba {aot_second['numba_compiles']}, nvrtc {aot_second['nvrtc_compiles']}, "
        f"links {aot_second['links']}")

    extra = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
             "cupy": cp.__version__, "torch": torch.__version__,
             "cuda.compute": _dist_version("cuda-cccl") if ccomp else None}
    dirs = [ROOT / "bench" / "results"]
    if args.out:
        dirs.append(Path(args.out))
    print(write_results("reduce", rows, extra, dirs))


if __name__ == "__main__":
    main()
