"""Sorting benchmark: cuprims beside CuPy, PyTorch and cuda.compute, in one process.

Run on a GPU machine:  python bench/bench_sort.py [--out DIR] [--log2n 28] [--merge-log2n 26]
Writes bench/results/sort.json and sort.md (and copies to --out).

Targets (H200): radix uint32 keys 2^28 >= 1.2x cupy.sort; uint32 keys + int32 values
>= 1.0x cuda.compute and >= 1.4x torch.sort; merge sort int32 2^26 with a Python
comparator >= 0.95x cuda.compute (OpKind.LESS) and >= 0.95x torch.sort(stable=True).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import json
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import result_rows, add_extra_path, device_ms, host_us, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

BUILD_PROBE = textwrap.dedent("""
    import json, time
    import cupy as cp
    import numpy as np
    import cuprims
    from cuprims.algorithms.radix_sort.api import make_radix_sort
    from cuprims.algorithms.merge_sort.api import make_merge_sort
    x = cp.ones(1024, np.uint32); y = cp.empty_like(x); v = cp.ones(1024, np.int32); w = cp.empty_like(v)
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    make_radix_sort(d_in_keys=x, d_out_keys=y, d_in_values=v, d_out_values=w, order=cuprims.SortOrder.ASCENDING)
    t1 = time.perf_counter()
    def less(a, b):
        return a < b
    make_merge_sort(d_in_keys=v, d_out_keys=w, op=less)
    t2 = time.perf_counter()
    info = cuprims.cache_info()
    print(json.dumps({"radix": t1 - t0, "merge": t2 - t1, "nvrtc_compiles": info["nvrtc_compiles"],
                      "numba_compiles": info["numba_compiles"], "links": info["links"]}))
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
    parser.add_argument("--merge-log2n", type=int, default=26)
    parser.add_argument("--no-build-probe", action="store_true")
    args = parser.parse_args()
    add_extra_path()

    import cupy as cp
    import numpy as np
    import torch

    import cuprims
    from cuprims import OpKind, SortOrder
    from cuprims.algorithms.merge_sort.api import make_merge_sort, merge_sort
    from cuprims.algorithms.radix_sort.api import make_radix_sort, radix_sort
    from cuprims.algorithms.sort_common import DoubleBuffer

    try:
        import cuda.compute as ccomp
    except Exception as exc:  # noqa: BLE001
        ccomp = None
        print("cuda.compute not importable:", exc)


    rows, add = result_rows(40, 40)

    def torch_of(x):
        return torch.as_tensor(x, device="cuda")

    # --- radix sort, keys only ----------------------------------------------------------
    n = 1 << args.log2n
    keys = cp.asarray(np.random.default_rng(0).integers(0, 1 << 32, n, dtype=np.uint32))
    out = cp.empty_like(keys)
    asc = SortOrder.ASCENDING
    sorter = make_radix_sort(d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None, order=asc)
    tmp = cp.empty(sorter(temp_storage=None, d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None,
                          num_items=n), cp.uint8)
    run = lambda: sorter(temp_storage=tmp, d_in_keys=keys, d_out_keys=out, d_in_values=None,  # noqa: E731
                         d_out_values=None, num_items=n)
    run()
    assert bool(cp.all(out == cp.sort(keys)))
    t_obj = device_ms(run, inner=5, repeats=9)
    t_one = device_ms(lambda: radix_sort(d_in_keys=keys, d_out_keys=out, num_items=n, order=asc), inner=5, repeats=9)
    alt = cp.empty_like(keys)
    db_tmp = cp.empty(sorter(temp_storage=None, d_in_keys=DoubleBuffer(out, alt), d_out_keys=None, d_in_values=None,
                             d_out_values=None, num_items=n), cp.uint8)

    def run_db():
        # refill with the unsorted keys each time: re-sorting sorted data would flatter
        cp.copyto(out, keys)
        db = DoubleBuffer(out, alt)
        sorter(temp_storage=db_tmp, d_in_keys=db, d_out_keys=None, d_in_values=None, d_out_values=None, num_items=n)

    t_db = device_ms(run_db, inner=5, repeats=9) - device_ms(lambda: cp.copyto(out, keys), inner=5, repeats=9)
    t_cupy = device_ms(lambda: cp.sort(keys), inner=5, repeats=9)
    try:
        kt = torch_of(keys)
        t_torch = device_ms(lambda: torch.sort(kt), inner=5, repeats=9)
        torch_note = "uint32 tensor"
    except Exception:  # noqa: BLE001  (older torch: no uint32 sort)
        kt = torch_of(keys.view(cp.int32))
        t_torch = device_ms(lambda: torch.sort(kt), inner=5, repeats=9)
        torch_note = "int32 tensor (uint32 unsupported)"
    work = f"radix sort uint32 keys 2^{args.log2n}"
    add(work, "cuprims object API", t_obj, "ms", t_cupy / t_obj, "ratio = cupy.sort/cuprims (target >= 1.2)")
    add(work, "cuprims radix_sort (one-shot)", t_one, "ms", t_cupy / t_one, "ratio = cupy.sort/cuprims")
    add(work, "cuprims DoubleBuffer", t_db, "ms", t_cupy / t_db, "ratio = cupy.sort/cuprims; refill copy subtracted")
    add(work, "cupy.sort", t_cupy, "ms")
    add(work, "torch.sort", t_torch, "ms", t_torch / t_obj, f"ratio = torch/cuprims; {torch_note}")
    if ccomp is not None:
        try:
            c_obj = ccomp.make_radix_sort(d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None,
                                          order=ccomp.SortOrder.ASCENDING)
            c_args = dict(d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None, num_items=n)
            c_tmp = cp.empty(c_obj(temp_storage=None, **c_args), cp.uint8)
            t_cc = device_ms(lambda: c_obj(temp_storage=c_tmp, **c_args), inner=5, repeats=9)
            add(work, "cuda.compute object API", t_cc, "ms", t_cc / t_obj, "ratio = cuda.compute/cuprims")
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute radix sort (keys) failed:", exc)

    # --- radix sort, pairs ----------------------------------------------------------------
    vals = cp.arange(n, dtype=cp.int32)
    out_v = cp.empty_like(vals)
    pairs = make_radix_sort(d_in_keys=keys, d_out_keys=out, d_in_values=vals, d_out_values=out_v, order=asc)
    ptmp = cp.empty(pairs(temp_storage=None, d_in_keys=keys, d_out_keys=out, d_in_values=vals, d_out_values=out_v,
                          num_items=n), cp.uint8)
    prun = lambda: pairs(temp_storage=ptmp, d_in_keys=keys, d_out_keys=out, d_in_values=vals,  # noqa: E731
                         d_out_values=out_v, num_items=n)
    prun()
    assert bool(cp.all(keys[out_v] == out))
    t_pairs = device_ms(prun, inner=5, repeats=9)
    try:
        t_tpairs = device_ms(lambda: torch.sort(kt), inner=5, repeats=9)  # values + int64 indices
    except Exception:  # noqa: BLE001
        t_tpairs = float("nan")
    t_cupy_argsort = device_ms(lambda: cp.argsort(keys), inner=3, repeats=5)
    work = f"radix sort uint32 keys + int32 values 2^{args.log2n}"
    add(work, "cuprims object API", t_pairs, "ms")
    add(work, "torch.sort (values, indices)", t_tpairs, "ms", t_tpairs / t_pairs, "ratio = torch/cuprims (target >= 1.4)")
    add(work, "cupy.argsort", t_cupy_argsort, "ms", t_cupy_argsort / t_pairs, "ratio = cupy/cuprims")
    if ccomp is not None:
        try:
            c_pairs = ccomp.make_radix_sort(d_in_keys=keys, d_out_keys=out, d_in_values=vals, d_out_values=out_v,
                                            order=ccomp.SortOrder.ASCENDING)
            c_args = dict(d_in_keys=keys, d_out_keys=out, d_in_values=vals, d_out_values=out_v, num_items=n)
            c_ptmp = cp.empty(c_pairs(temp_storage=None, **c_args), cp.uint8)
            t_cc = device_ms(lambda: c_pairs(temp_storage=c_ptmp, **c_args), inner=5, repeats=9)
            add(work, "cuda.compute object API", t_cc, "ms", t_cc / t_pairs,
                "ratio = cuda.compute/cuprims (target >= 1.0)")
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute radix sort (pairs) failed:", exc)

    # --- merge sort ---------------------------------------------------------------------
    m = 1 << args.merge_log2n
    mk = cp.asarray(np.random.default_rng(1).integers(-(1 << 31), (1 << 31) - 1, m, dtype=np.int32))
    mout = cp.empty_like(mk)

    def less(a, b):
        return a < b

    msorter = make_merge_sort(d_in_keys=mk, d_out_keys=mout, op=less)
    mtmp = cp.empty(msorter(temp_storage=None, d_in_keys=mk, d_in_values=None, d_out_keys=mout, d_out_values=None,
                            num_items=m, op=less), cp.uint8)
    mrun = lambda: msorter(temp_storage=mtmp, d_in_keys=mk, d_in_values=None, d_out_keys=mout,  # noqa: E731
                           d_out_values=None, num_items=m, op=less)
    mrun()
    assert bool(cp.all(mout == cp.sort(mk)))
    t_m = device_ms(mrun, inner=5, repeats=9)
    mb = make_merge_sort(d_in_keys=mk, d_out_keys=mout, op=OpKind.LESS)
    mbtmp = cp.empty(mb(temp_storage=None, d_in_keys=mk, d_in_values=None, d_out_keys=mout, d_out_values=None,
                        num_items=m, op=OpKind.LESS), cp.uint8)
    t_mb = device_ms(lambda: mb(temp_storage=mbtmp, d_in_keys=mk, d_in_values=None, d_out_keys=mout,
                                d_out_values=None, num_items=m, op=OpKind.LESS), inner=5, repeats=9)
    t_m_one = device_ms(lambda: merge_sort(d_in_keys=mk, d_out_keys=mout, num_items=m, op=less), inner=5, repeats=9)
    mkt = torch_of(mk)
    t_tstable = device_ms(lambda: torch.sort(mkt, stable=True), inner=5, repeats=9)
    work = f"merge sort int32 2^{args.merge_log2n}"
    add(work, "cuprims Python comparator a < b", t_m, "ms", t_tstable / t_m,
        "ratio = torch.sort(stable)/cuprims (target >= 0.95)")
    add(work, "cuprims OpKind.LESS", t_mb, "ms", t_m / t_mb, "ratio = python/LESS")
    add(work, "cuprims merge_sort one-shot (Python)", t_m_one, "ms")
    add(work, "torch.sort(stable=True)", t_tstable, "ms")
    if ccomp is not None:
        try:
            c_m = ccomp.make_merge_sort(d_in_keys=mk, d_in_values=None, d_out_keys=mout, d_out_values=None,
                                        op=ccomp.OpKind.LESS)
            c_args = dict(d_in_keys=mk, d_in_values=None, d_out_keys=mout, d_out_values=None, num_items=m,
                          op=ccomp.OpKind.LESS)
            c_mtmp = cp.empty(c_m(temp_storage=None, **c_args), cp.uint8)
            t_cm = device_ms(lambda: c_m(temp_storage=c_mtmp, **c_args), inner=5, repeats=9)
            add(work, "cuda.compute OpKind.LESS", t_cm, "ms", t_cm / t_m,
                "ratio = cuda.compute/cuprims-python (target >= 0.95)")
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute merge sort failed:", exc)

    # --- host time per call, small problems ---------------------------------------------------
    s = cp.asarray(np.random.default_rng(2).integers(0, 1000, 1024, dtype=np.uint32))
    so = cp.empty_like(s)
    small = make_radix_sort(d_in_keys=s, d_out_keys=so, d_in_values=None, d_out_values=None, order=asc)
    stmp = cp.empty(16, cp.uint8)
    work = "host time per call, n=1024"
    add(work, "cuprims radix object API", host_us(lambda: small(
        temp_storage=stmp, d_in_keys=s, d_out_keys=so, d_in_values=None, d_out_values=None, num_items=1024)), "us")
    add(work, "cuprims radix_sort one-shot", host_us(lambda: radix_sort(
        d_in_keys=s, d_out_keys=so, num_items=1024, order=asc)), "us")
    add(work, "cupy.sort", host_us(lambda: cp.sort(s)), "us")

    # --- build times in fresh processes ----------------------------------------------------
    if not args.no_build_probe:
        with tempfile.TemporaryDirectory() as cache:
            first = _probe(cache)
            second = _probe(cache)
        work = "build (fresh process)"
        add(work, "radix pairs, empty cache", first["radix"], "s")
        add(work, "merge sort Python op, empty cache", first["merge"], "s")
        add(work, "radix pairs, warm disk cache", second["radix"], "s")
        add(work, "merge sort Python op, warm disk cache", second["merge"], "s", None,
            f"compiles: nvrtc {second['nvrtc_compiles']}, numba {second['numba_compiles']}")

    extra = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
             "cupy": cp.__version__, "torch": torch.__version__,
             "cuda.compute": _dist_version("cuda-cccl") if ccomp else None, "cuprims": cuprims.__version__}
    dirs = [ROOT / "bench" / "results"]
    if args.out:
        dirs.append(Path(args.out))
    print(write_results("sort", rows, extra, dirs))


if __name__ == "__main__":
    main()
