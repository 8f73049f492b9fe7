"""Scan benchmark: cuprims beside PyTorch, CuPy and cuda.compute, in one process.

Run on a GPU machine:  python bench/bench_scan.py [--out DIR] [--log2n 28]
Writes bench/results/scan.json and scan.md (and copies to --out).

Work: int32 PLUS scans of 2^28 items (inclusive and exclusive), a Python ``a + b``
beside OpKind.PLUS, cuprims with and without programmatic dependent launch, and host
time per call at n = 1024. Every timed cuprims variant is checked against CuPy first.
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
    import json, time
    import numpy as np
    import cuprims
    from cuprims.algorithms.scan.api import make_inclusive_scan
    def op(a, b):
        return a + b
    t0 = time.perf_counter()
    make_inclusive_scan(d_in=cuprims.ProxyArray(np.int32), d_out=cuprims.ProxyArray(np.int32), op=op,
                        compute_capability=90)
    dt = time.perf_counter() - t0
    info = cuprims.cache_info()
    print(json.dumps({"seconds": dt, "numba_compiles": info["numba_compiles"],
                      "nvrtc_compiles": info["nvrtc_compiles"], "links": info["links"]}))
""")


def _probe(cache_dir: str) -> dict:
    env = dict(os.environ, CUPRIMS_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", BUILD_PROBE], env=env, capture_output=True, text=True, check=True)
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
    from cuprims.algorithms.scan.api import exclusive_scan, inclusive_scan, make_exclusive_scan, make_inclusive_scan

    try:
        import cuda.compute as ccomp
    except Exception as exc:  # noqa: BLE001
        ccomp = None
        print("cuda.compute not importable:", exc)

    n = 1 << args.log2n
    x = cp.random.default_rng(0).integers(-100, 100, n, dtype=cp.int32)
    y = cp.empty(n, cp.int32)
    gbytes = n * 4 * 2 / 1e9  # read + write
    zero = np.int32(0)

    rows, add = result_rows(38, 36)

    ref_incl = cp.cumsum(x, dtype=cp.int32)
    ref_excl = cp.concatenate([cp.zeros(1, cp.int32), ref_incl[:-1]])

    def check(ref, what):
        assert bool((y == ref).all()), f"{what}: wrong result"
        y.fill(0)

    # --- cuprims: object API, storage allocated once ---------------------------------
    def py_add(a, b):
        return a + b

    s_incl = make_inclusive_scan(d_in=x, d_out=y, op=OpKind.PLUS)
    s_excl = make_exclusive_scan(d_in=x, d_out=y, op=OpKind.PLUS, init_value=zero)
    s_py = make_inclusive_scan(d_in=x, d_out=y, op=py_add)
    s_py_excl = make_exclusive_scan(d_in=x, d_out=y, op=py_add, init_value=zero)
    nbytes = max(s_incl(temp_storage=None, d_in=x, d_out=y, op=OpKind.PLUS, init_value=None, num_items=n),
                 s_excl(temp_storage=None, d_in=x, d_out=y, op=OpKind.PLUS, init_value=zero, num_items=n))
    tmp = cp.empty(nbytes, cp.uint8)

    def run_incl():
        s_incl(temp_storage=tmp, d_in=x, d_out=y, op=OpKind.PLUS, init_value=None, num_items=n)

    def run_excl():
        s_excl(temp_storage=tmp, d_in=x, d_out=y, op=OpKind.PLUS, init_value=zero, num_items=n)

    def run_py():
        s_py(temp_storage=tmp, d_in=x, d_out=y, op=py_add, init_value=None, num_items=n)

    def run_py_excl():
        s_py_excl(temp_storage=tmp, d_in=x, d_out=y, op=py_add, init_value=zero, num_items=n)

    for fn, ref, what in ((run_incl, ref_incl, "inclusive PLUS"), (run_excl, ref_excl, "exclusive PLUS"),
                          (run_py, ref_incl, "inclusive a+b"), (run_py_excl, ref_excl, "exclusive a+b")):
        fn()
        check(ref, what)

    t_incl = device_ms(run_incl)
    t_excl = device_ms(run_excl)
    t_py = device_ms(run_py)
    t_py_excl = device_ms(run_py_excl)
    # False if the PDL launch path fell back to plain launches on this device
    pdl_active = all(plan.pdl for plan in s_incl._plans.values())
    with cuprims.settings.override(pdl=False):
        t_incl_nopdl = device_ms(run_incl)
        t_excl_nopdl = device_ms(run_excl)
    run_incl()
    check(ref_incl, "inclusive PLUS after the PDL toggle")

    # --- others -----------------------------------------------------------------------
    xt = torch.as_tensor(x, device="cuda")
    yt = torch.as_tensor(y, device="cuda")
    t_torch = device_ms(lambda: torch.cumsum(xt, 0, dtype=torch.int32, out=yt))
    t_cupy = device_ms(lambda: cp.cumsum(x, dtype=cp.int32, out=y))
    t_cc_incl = t_cc_excl = None
    if ccomp is not None:
        try:
            cc_incl = ccomp.make_inclusive_scan(d_in=x, d_out=y, op=ccomp.OpKind.PLUS, init_value=None)
            cc_excl_init = np.zeros(1, np.int32)
            cc_excl = ccomp.make_exclusive_scan(d_in=x, d_out=y, op=ccomp.OpKind.PLUS, init_value=cc_excl_init)
            cc_bytes = max(cc_incl(temp_storage=None, d_in=x, d_out=y, op=ccomp.OpKind.PLUS, init_value=None,
                                   num_items=n),
                           cc_excl(temp_storage=None, d_in=x, d_out=y, op=ccomp.OpKind.PLUS,
                                   init_value=cc_excl_init, num_items=n))
            cc_tmp = cp.empty(max(1, cc_bytes), cp.uint8)

            def cc_run_incl():
                cc_incl(temp_storage=cc_tmp, d_in=x, d_out=y, op=ccomp.OpKind.PLUS, init_value=None, num_items=n)

            def cc_run_excl():
                cc_excl(temp_storage=cc_tmp, d_in=x, d_out=y, op=ccomp.OpKind.PLUS, init_value=cc_excl_init,
                        num_items=n)

            cc_run_incl()
            check(ref_incl, "cuda.compute inclusive")
            cc_run_excl()
            check(ref_excl, "cuda.compute exclusive")
            t_cc_incl = device_ms(cc_run_incl)
            t_cc_excl = device_ms(cc_run_excl)
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute scan failed:", exc)

    work = f"inclusive scan int32 2^{args.log2n}"
    add(work, "cuprims OpKind.PLUS", t_incl, "ms", t_torch / t_incl,
        f"{gbytes / t_incl:.2f} TB/s (r+w); ratio = torch/cuprims (target >= 1.15)")
    add(work, "cuprims lambda a+b", t_py, "ms", t_incl / t_py, "ratio = PLUS/lambda (target >= 0.95)")
    add(work, "cuprims OpKind.PLUS, no PDL", t_incl_nopdl, "ms", t_incl_nopdl / t_incl, "ratio = no-PDL/PDL")
    if t_cc_incl is not None:
        add(work, "cuda.compute OpKind.PLUS", t_cc_incl, "ms", t_cc_incl / t_incl,
            "ratio = cuda.compute/cuprims (target >= 1.0)")
    add(work, "PyTorch torch.cumsum(dtype=int32, out=)", t_torch, "ms")
    add(work, "CuPy cumsum(dtype=int32, out=)", t_cupy, "ms", t_cupy / t_incl, "ratio = CuPy/cuprims")

    work = f"exclusive scan int32 2^{args.log2n}"
    add(work, "cuprims OpKind.PLUS", t_excl, "ms", t_torch / t_excl,
        f"{gbytes / t_excl:.2f} TB/s (r+w); ratio = torch cumsum/cuprims")
    add(work, "cuprims lambda a+b", t_py_excl, "ms", t_excl / t_py_excl, "ratio = PLUS/lambda (target >= 0.95)")
    add(work, "cuprims OpKind.PLUS, no PDL", t_excl_nopdl, "ms", t_excl_nopdl / t_excl, "ratio = no-PDL/PDL")
    if t_cc_excl is not None:
        add(work, "cuda.compute OpKind.PLUS", t_cc_excl, "ms", t_cc_excl / t_excl,
            "ratio = cuda.compute/cuprims (target >= 1.0)")
    del x, y, xt, yt, tmp, ref_incl, ref_excl

    # --- host time per call, n = 1024 ---------------------------------------------------
    m = 1024
    sx = cp.random.default_rng(1).integers(-100, 100, m, dtype=cp.int32)
    sy = cp.empty(m, cp.int32)
    small = make_inclusive_scan(d_in=sx, d_out=sy, op=OpKind.PLUS)
    stmp = cp.empty(max(1, small(temp_storage=None, d_in=sx, d_out=sy, op=OpKind.PLUS, init_value=None,
                                 num_items=m)), cp.uint8)
    work = "host time per call, n=1024"
    add(work, "cuprims object API (inclusive)", host_us(lambda: small(
        temp_storage=stmp, d_in=sx, d_out=sy, op=OpKind.PLUS, init_value=None, num_items=m)), "us")
    add(work, "cuprims inclusive_scan (OpKind.PLUS)", host_us(lambda: inclusive_scan(
        d_in=sx, d_out=sy, op=OpKind.PLUS, num_items=m)), "us")
    add(work, "cuprims exclusive_scan (OpKind.PLUS)", host_us(lambda: exclusive_scan(
        d_in=sx, d_out=sy, op=OpKind.PLUS, init_value=zero, num_items=m)), "us")
    add(work, "cuprims inclusive_scan (lambda)", host_us(lambda: inclusive_scan(
        d_in=sx, d_out=sy, op=py_add, num_items=m)), "us")
    st, sty = torch.as_tensor(sx, device="cuda"), torch.as_tensor(sy, device="cuda")
    add(work, "PyTorch torch.cumsum", host_us(lambda: torch.cumsum(st, 0, dtype=torch.int32, out=sty)), "us")
    add(work, "CuPy cumsum", host_us(lambda: cp.cumsum(sx, dtype=cp.int32, out=sy)), "us")
    if ccomp is not None:
        try:
            add(work, "cuda.compute inclusive_scan", host_us(lambda: ccomp.inclusive_scan(
                d_in=sx, d_out=sy, op=ccomp.OpKind.PLUS, init_value=None, num_items=m)), "us")
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute host timing failed:", exc)

    # --- build times in fresh processes -------------------------------------------------
    with tempfile.TemporaryDirectory() as cache:
        first = _probe(cache)
        second = _probe(cache)
    work = "build, Python op inclusive scan (AOT sm_90)"
    add(work, "first process, empty cache", first["seconds"], "s", None, "target <= 3.0 s")
    add(work, "second process, warm disk", second["seconds"], "s", None,
        f"compiles: numba {second['numba_compiles']}, nvrtc {second['nvrtc_compiles']}, links {second['links']}")

    extra = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
             "cupy": cp.__version__, "torch": torch.__version__,
             "cuda.compute": _dist_version("cuda-cccl") if ccomp else None,
             "cuprims PDL active": pdl_active}
    dirs = [ROOT / "bench" / "results"]
    if args.out:
        dirs.append(Path(args.out))
    print(write_results("scan", rows, extra, dirs))


if __name__ == "__main__":
    main()
