"""Cold builds: where the first build of each algorithm spends its time, stage by stage.

Each case runs three fresh processes over one cache directory, with CUPRIMS_TRACE=1 (the
stages are the trace's: import, numba import, numba compile, source generation, the PCH
steps, NVRTC, link, load, plus each build's wall time). Each process makes the case's
first build and then a second, distinct build of the same algorithm (new types or
operator):
  1. over an empty cache: the machine's very first build, one-time costs (the PCH) included;
  2. over the warm cache: the second-process figure (nothing compiles);
  3. over the cache with only its PCH entries left: the headline "first build", a fresh
     process after the one-time cost was paid once on the machine (issue 10's reading).
On a machine with a GPU the builds are for the device (and loaded); without one they are
ahead of time for sm_90. cuda.compute's first and second builds of the same cases are
timed beside ours in a fresh process each when it is importable.

Run:  python bench/bench_cold_build.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import add_extra_path, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# case -> (first build, a later distinct build of the same algorithm[, environment]); `A(dtype)`
# makes an argument (a device array on a GPU, else a ProxyArray), `CC` the compute_capability
# keyword. Small Python operators (a + b, max(a, b), v * 2 + 1, a < b) are C++ in the unit by
# default (no numba); the "(numba)" case measures the same build with CUPRIMS_DIRECT_OPS=0.
CASES = {
    "reduce OpKind.PLUS": (
        "cuprims.make_reduce_into(d_in=A(f4), d_out=A(f4), op=OpKind.PLUS, h_init=np.float32(0), **CC)",
        "cuprims.make_reduce_into(d_in=A(f8), d_out=A(f8), op=OpKind.MAXIMUM, h_init=np.float64(0), **CC)"),
    "reduce lambda a+b": (
        "cuprims.make_reduce_into(d_in=A(f4), d_out=A(f4), op=lambda a, b: a + b, h_init=np.float32(0), **CC)",
        "cuprims.make_reduce_into(d_in=A(f4), d_out=A(f4), op=lambda a, b: max(a, b), h_init=np.float32(0), **CC)"),
    # the same with every Python operator compiled by numba (the C++ translation of small
    # expressions turned off): numba's import and first compile are back in the build
    "reduce lambda a+b (numba)": (
        "cuprims.make_reduce_into(d_in=A(f4), d_out=A(f4), op=lambda a, b: a + b, h_init=np.float32(0), **CC)",
        "cuprims.make_reduce_into(d_in=A(f4), d_out=A(f4), op=lambda a, b: max(a, b), h_init=np.float32(0), **CC)",
        {"CUPRIMS_DIRECT_OPS": "0"}),
    "inclusive_scan OpKind.PLUS": (
        "cuprims.make_inclusive_scan(d_in=A(i4), d_out=A(i4), op=OpKind.PLUS, **CC)",
        "cuprims.make_inclusive_scan(d_in=A(f4), d_out=A(f4), op=OpKind.PLUS, **CC)"),
    "unary_transform lambda": (
        "cuprims.make_unary_transform(d_in=A(f4), d_out=A(f4), op=lambda v: v * 2 + 1, **CC)",
        "cuprims.make_unary_transform(d_in=A(f4), d_out=A(f4), op=lambda v: v * 3 - 1, **CC)"),
    "radix_sort uint32 keys": (
        "cuprims.make_radix_sort(d_in_keys=A(u4), d_out_keys=A(u4), d_in_values=None, d_out_values=None, "
        "order=SortOrder.ASCENDING, **CC)",
        "cuprims.make_radix_sort(d_in_keys=A(i4), d_out_keys=A(i4), d_in_values=None, d_out_values=None, "
        "order=SortOrder.ASCENDING, **CC)"),
    # units with nothing to link, linked all the same (CUPRIMS_DIRECT_CUBIN=0): the path
    # every unit took before, measured beside the direct one in the same run
    "reduce OpKind.PLUS (LTO link)": (
        "cuprims.make_reduce_into(d_in=A(f4), d_out=A(f4), op=OpKind.PLUS, h_init=np.float32(0), **CC)",
        "cuprims.make_reduce_into(d_in=A(f8), d_out=A(f8), op=OpKind.MAXIMUM, h_init=np.float64(0), **CC)",
        {"CUPRIMS_DIRECT_CUBIN": "0"}),
    "inclusive_scan OpKind.PLUS (LTO link)": (
        "cuprims.make_inclusive_scan(d_in=A(i4), d_out=A(i4), op=OpKind.PLUS, **CC)",
        "cuprims.make_inclusive_scan(d_in=A(f4), d_out=A(f4), op=OpKind.PLUS, **CC)",
        {"CUPRIMS_DIRECT_CUBIN": "0"}),
    "radix_sort uint32 keys (LTO link)": (
        "cuprims.make_radix_sort(d_in_keys=A(u4), d_out_keys=A(u4), d_in_values=None, d_out_values=None, "
        "order=SortOrder.ASCENDING, **CC)",
        "cuprims.make_radix_sort(d_in_keys=A(i4), d_out_keys=A(i4), d_in_values=None, d_out_values=None, "
        "order=SortOrder.ASCENDING, **CC)",
        {"CUPRIMS_DIRECT_CUBIN": "0"}),
    "merge_sort Python comparator": (
        "cuprims.make_merge_sort(d_in_keys=A(i4), d_out_keys=A(i4), op=lambda a, b: a < b, **CC)",
        "cuprims.make_merge_sort(d_in_keys=A(i4), d_out_keys=A(i4), op=lambda a, b: a > b, **CC)"),
    "lower_bound int32": (
        "cuprims.make_lower_bound(d_data=A(i4), d_values=A(i4), d_out=A(u8), **CC)",
        "cuprims.make_lower_bound(d_data=A(f4), d_values=A(f4), d_out=A(u8), **CC)"),
}

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import cuprims
import_s = time.perf_counter() - t0
import numpy as np
from cuprims import OpKind, SortOrder
f4, f8, i4, u4, u8 = np.float32, np.float64, np.int32, np.uint32, np.uint64
try:
    import cupy as cp
    gpu = cp.cuda.runtime.getDeviceCount() > 0
except Exception:
    gpu = False
A = (lambda dt: cp.empty(16, dt)) if gpu else cuprims.ProxyArray
CC = {} if gpu else {"compute_capability": 90}
if gpu:   # the CUDA context exists before the timed builds, as it does when a user has arrays
    cp.empty(1, np.uint8); cp.cuda.Device().synchronize()
print("@@first", file=sys.stderr, flush=True)
t = time.perf_counter(); FIRST; first_s = time.perf_counter() - t
print("@@second", file=sys.stderr, flush=True)
t = time.perf_counter(); SECOND; second_s = time.perf_counter() - t
info = cuprims.cache_info()
print(json.dumps({"import": import_s, "first": first_s, "second": second_s, "gpu": gpu,
                  "compiles": {k: info[k] for k in ("numba_compiles", "nvrtc_compiles", "links")}}))
"""

CC_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np, cupy as cp
import cuda.compute as cuprims
from cuda.compute import OpKind, SortOrder
import_s = time.perf_counter() - t0
f4, f8, i4, u4, u8 = np.float32, np.float64, np.int32, np.uint32, np.uint64
A = lambda dt: cp.empty(16, dt)
CC = {}
cp.empty(1, np.uint8); cp.cuda.Device().synchronize()   # the context first, as for cuprims
t = time.perf_counter(); FIRST; first_s = time.perf_counter() - t
t = time.perf_counter(); SECOND; second_s = time.perf_counter() - t
print(json.dumps({"import": import_s, "first": first_s, "second": second_s}))
"""


def _median(items: list, key: Callable[[Any], float]) -> Any:
    """The item whose ``key`` is the median (the upper one of an even count)."""
    return sorted(items, key=key)[len(items) // 2]


def _keep_only_pchs(cache: str) -> None:
    """Leave the cache as a machine has it after its one-time cost is paid: the PCH
    entries stay, every compiled entry goes."""
    root = Path(cache) / "v2"
    for kind in root.iterdir() if root.is_dir() else ():
        if kind.name not in ("pch", "locks") and kind.is_dir():
            shutil.rmtree(kind)


def _run(code: str, cache: str, env_extra: dict[str, str] | None = None) -> tuple[dict, dict[str, dict[str, float]]]:
    # CUDA_CACHE_DISABLE: nvJitLink keeps the links it made in the driver's compute cache
    # (~20 ms instead of ~0.3 s for a link it has seen): a first build must not find the
    # link an earlier process of this benchmark made. Bytecode as an installed package has.
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUPRIMS_DISK_CACHE", "CUPRIMS_DIRECT_OPS", "CUPRIMS_DIRECT_CUBIN", "PYTHONDONTWRITEBYTECODE")}
    env.update({"CUPRIMS_CACHE_DIR": cache, "CUPRIMS_TRACE": "1", "CUDA_CACHE_DISABLE": "1", **(env_extra or {})})
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    stages: dict[str, dict[str, float]] = {"first": {}, "second": {}}
    part = "first"
    for line in proc.stderr.splitlines():
        if line.startswith("@@"):
            part = line[2:]
        elif line.startswith("[cuprims] "):
            name, seconds = line[10:24].strip(), float(line[24:].split()[0])
            stages[part][name] = stages[part].get(name, 0.0) + seconds
    return json.loads(proc.stdout.strip().splitlines()[-1]), stages


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--cases", default=None, help="comma-separated subset of the case names")
    parser.add_argument("--no-peer", action="store_true", help="skip cuda.compute's builds")
    parser.add_argument("--tag", default="", help="suffix of the result files' name")
    parser.add_argument("--repeat", type=int, default=1,
                        help="fresh processes per case with only the PCH cached, and with the whole cache "
                             "(the median of each is reported)")
    args = parser.parse_args()
    add_extra_path()

    rows = []
    cases = {k: v for k, v in CASES.items() if not args.cases or k in args.cases.split(",")}
    gpu = None
    for name, (first, second, *env) in cases.items():
        with tempfile.TemporaryDirectory(prefix="cuprims-cold-") as cache:
            code = CHILD.replace("FIRST", first).replace("SECOND", second)
            empty, empty_stages = _run(code, cache, *env)
            # the warm process takes ~20-30 ms, of which the host's noise is several: the
            # median of --repeat processes, as for the first build
            warms = sorted((_run(code, cache, *env)[0] for _ in range(args.repeat)), key=lambda w: w["first"])
            warm = _median(warms, key=lambda w: w["first"])
            runs = []
            for _ in range(args.repeat):
                _keep_only_pchs(cache)
                runs.append(_run(code, cache, *env))
        # the host's builds vary by +-30% from one process to the next: the median process,
        # for the first and for the later build each (its stages come from that same process)
        result, stages = _median(runs, key=lambda run: run[0]["first"])
        later, later_stages = _median(runs, key=lambda run: run[0]["second"])
        result = {**result, "second": later["second"]}
        stages = {**stages, "second": later_stages["second"]}
        runs.sort(key=lambda run: run[0]["first"])
        spread = (f"; median of {len(runs)} processes, first builds "
                  + ", ".join(f"{run[0]['first']:.2f}" for run in runs)) if len(runs) > 1 else ""
        gpu = result["gpu"]
        work = f"cold build: {name}"
        rows.append({"work": work, "variant": "import cuprims", "value": result["import"], "unit": "s"})
        for stage, seconds in stages["first"].items():
            rows.append({"work": work, "variant": f"stage: {stage}", "value": seconds, "unit": "s"})
        rows.append({"work": work, "variant": "cuprims first build (total)", "value": result["first"], "unit": "s",
                     "note": "fresh process, no compiled entry cached; the one-time PCH made by an earlier process"
                             + spread})
        rows.append({"work": work, "variant": "cuprims later distinct build", "value": result["second"], "unit": "s",
                     "note": ", ".join(f"{k} {v:.2f}" for k, v in stages["second"].items())})
        rows.append({"work": work, "variant": "cuprims very first build (empty cache)", "value": empty["first"],
                     "unit": "s", "note": "the one-time cost included: " + ", ".join(
                         f"{k} {v:.2f}" for k, v in empty_stages["first"].items() if k.startswith("pch"))})
        rows.append({"work": work, "variant": "cuprims second process (warm disk)", "value": warm["first"],
                     "unit": "s", "note": "compiles: " + ", ".join(f"{k} {v}" for k, v in warm["compiles"].items())
                     + (f"; median of {len(warms)} processes: " + ", ".join(f"{w['first'] * 1e3:.1f}" for w in warms)
                        + " ms" if len(warms) > 1 else "")})
        print(json.dumps(rows[-4:]), flush=True)
        if gpu and not args.no_peer and not env:   # the peer once per build, not per variant of ours
            try:
                with tempfile.TemporaryDirectory() as cache:
                    # cuda.compute 1.2.1 takes h_init as an array; its Python operators need
                    # numba-cuda-mlir (not installed there), so only OpKind cases run
                    cc_code = CC_CHILD.replace("FIRST", first).replace("SECOND", second)
                    for t in ("float32", "float64"):
                        cc_code = cc_code.replace(f"h_init=np.{t}(0)", f"h_init=np.zeros(1, np.{t})")
                    cc_result, _ = _run(cc_code, cache, {"PYTHONPATH": os.environ.get("CUPRIMS_BENCH_EXTRA_PATH", "")
                                                         + os.pathsep + os.environ.get("PYTHONPATH", "")})
                rows.append({"work": work, "variant": "cuda.compute first build", "value": cc_result["first"],
                             "unit": "s", "ratio": cc_result["first"] / result["first"],
                             "note": f"import {cc_result['import']:.2f} s; ratio = cuda.compute / cuprims"})
                rows.append({"work": work, "variant": "cuda.compute later distinct build", "value": cc_result["second"],
                             "unit": "s", "ratio": cc_result["second"] / result["second"]})
                print(json.dumps(rows[-2:]), flush=True)
            except Exception as exc:  # noqa: BLE001
                print(f"cuda.compute cold build of {name} failed:", str(exc)[-500:])
    extra = {"machine": "GPU (builds for the device, loaded)" if gpu else "no GPU (ahead of time for sm_90)",
             "cpus": os.cpu_count()}
    dirs = [ROOT / "bench" / "results"] + ([Path(args.out)] if args.out else [])
    suffix = "gpu-host" if gpu else "cpu"
    print(write_results(f"cold-build-{suffix}{args.tag}", rows, extra, dirs))


if __name__ == "__main__":
    main()
