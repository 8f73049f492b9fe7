"""Cooperative primitives benchmark (cuprims.coop inside numba-cuda kernels), in one process.

The issue's targets, measured on one GPU in one run:

1. block sum of 2^28 float32: a user kernel with ``coop.block.make_load`` +
   ``coop.block.make_sum`` (256 threads x 16 items, one ``cuda.atomic.add`` per block;
   grid-stride over SMs x occupancy blocks, and one tile per block; vectorized and striped
   loads) against ``cuprims.make_reduce_into`` (OpKind.PLUS, preallocated temporary
   storage). Ratio = throughput coop / reduce_into (target >= 0.90). The same kernel in
   CUB C++ is timed beside it (what the design itself reaches). The atomic target is
   zeroed before the checked launch only: timed launches add onto it.
2. block radix sort: 2^20 tiles of 1024 int32 keys, ``make_radix_sort_keys(int32, 256, 4)``
   with ``make_load``/``make_store`` (blocked), against the same kernel in CUDA C++ with
   ``cub::BlockRadixSort`` compiled by NVRTC and launched through cuda.core. Ratio =
   throughput coop / C++ (target >= 0.95).
3. block scan: 2^18 tiles of 128 threads x 8 int32, ``make_inclusive_sum(int32, 128, 8)``
   against ``cub::BlockScan::InclusiveSum`` (target >= 0.95).
4. the newer block primitives (adjacent difference, discontinuity heads, shuffle up,
   histogram, run-length decode; bench/_coop_tile_ops.py): 128 threads x 8 int32 a tile,
   each against its CUB C++ twin (target >= 0.95).
5. cold build: a fresh process builds ``make_sum`` and compiles and launches a kernel
   calling it, over a cache that holds the PCH of the provider's headers (made once per
   machine, by an earlier process building another block size) but not this provider
   (target <= 1.5 s); the same over an empty cache, PCH included (the machine's very first
   build: the one-time cost is the difference); a fresh process over the warm cache must
   compile no provider (``cuprims.cache_info()``: no NVRTC compile, no link, no numba
   operator compile); one more times the same kernel shape without coop (numba's own share).

Sort and scan run once per load/store algorithm and numba variant (the primitives' own
shared memory, or one ``temp_storage=`` buffer with the barriers a C++ union needs); each
C++ twin uses the same CUB algorithms, layout and grid. Every result is checked: the sum
against reduce_into's (relative 1e-4), sorts and scans against numpy on sampled tiles.
Times are medians of CUDA-event windows after warmup (bench/_harness.py), every launch
on the legacy default stream (CuPy's null stream, numba's and cuda.core's default).

Run on a GPU machine:  python bench/bench_coop.py [--out DIR] [--quick] [--only sum,sort,scan,primitives,cold]
  (--quick: small sizes, a smoke run whose short kernels are launch-bound; written as coop-quick.*,
  to --out only)
Without a GPU:         python bench/bench_coop.py --compile-only [--out DIR]
  (every numba kernel compiled for sm_90 and linked with its primitives' LTO-IR, every
  C++ twin compiled by NVRTC for sm_90; registers, stack frame and shared memory of each)
Writes coop.json / .md / .png to bench/results and --out (compile-only: coop-compile.* to --out).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import RESULTS, add_extra_path, device_ms, dist_version, result_rows, write_results  # noqa: E402

SECTIONS = ("sum", "sort", "scan", "primitives", "cold")
TARGETS = {"sum": 0.90, "sort": 0.95, "scan": 0.95, "primitives": 0.95, "cold": 1.5}


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--quick", action="store_true", help="small sizes and few repetitions (a smoke run)")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated subset of " + ",".join(SECTIONS))
    parser.add_argument("--compile-only", action="store_true",
                        help="no GPU: compile and link every kernel for sm_90 and report its resources")
    args = parser.parse_args()
    args.only = [s for s in args.only.split(",") if s]
    unknown = set(args.only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}")
    add_extra_path()
    return args


def _sizes(quick: bool) -> dict[str, int]:
    if quick:
        return {"sum_log2n": 24, "sort_log2_tiles": 12, "scan_log2_tiles": 12, "inner": 5, "repeats": 5}
    return {"sum_log2n": 28, "sort_log2_tiles": 20, "scan_log2_tiles": 18, "inner": 20, "repeats": 15}


def _gpu_ready() -> str | None:
    """None when CuPy sees a GPU, else why not."""
    try:
        import cupy as cp

        if cp.cuda.runtime.getDeviceCount() > 0:
            return None
        return "CuPy sees no CUDA device"
    except Exception as exc:  # noqa: BLE001
        return f"CuPy/CUDA not usable ({type(exc).__name__}: {exc})"


# ------------------------------------------------------------------ GPU measurement

class Run:
    """What every section shares: rows, failed checks, the device."""

    def __init__(self, sizes: dict[str, int]):
        import cupy as cp

        self.sizes = sizes
        self.rows, self.add = result_rows(46, 58)
        self.failures: list[str] = []
        self.checks: dict[str, str] = {}
        self.targets: dict[str, Any] = {}
        props = cp.cuda.runtime.getDeviceProperties(0)
        self.device_name = props["name"].decode()
        self.sms = int(props["multiProcessorCount"])
        self.arch = int(props["major"]) * 10 + int(props["minor"])

    def time(self, fn, scale: float = 1.0) -> float:
        inner = max(1, int(self.sizes["inner"] * scale))
        return device_ms(fn, inner=inner, repeats=self.sizes["repeats"], warmup=3)

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.checks[name] = "ok" if ok else f"FAILED {detail}"
        if not ok:
            self.failures.append(f"{name}: {detail}")
            print(f"CHECK FAILED: {name}: {detail}", flush=True)


def _overload(kernel):
    """The compiled ``_Kernel`` of a dispatcher launched once (its one signature)."""
    return next(iter(kernel.overloads.values()))


def _numba_resources(kernel) -> str:
    ov = _overload(kernel)
    return f"{ov.regs_per_thread} regs, {ov.shared_mem_per_block} B smem, {ov.local_mem_per_thread} B local"


def _twin_resources(twin) -> str:
    r = twin.resources()
    return f"{r['regs']} regs, {r['shared']} B smem, {r['local']} B local"


def _build_twin(run: Run, twin):
    import _coop_kernels as K

    t = time.perf_counter()
    loaded = K.LoadedTwin(twin, K.compile_twin(twin, run.arch))
    return loaded, time.perf_counter() - t


def bench_sum(run: Run) -> None:
    import cupy as cp
    import numpy as np
    from numba import cuda

    import _coop_kernels as K
    import cuprims
    from cuprims import OpKind

    log2n = run.sizes["sum_log2n"]
    n = 1 << log2n
    tile = K.SUM_THREADS * K.SUM_ITEMS
    ntiles = n // tile
    assert n % tile == 0
    work = f"block sum float32 2^{log2n}"
    gbytes = n * 4 / 1e9

    x = cp.random.random(n, dtype=cp.float32)
    out = cp.empty(1, cp.float32)
    init = np.float32(0)
    reducer = cuprims.make_reduce_into(d_in=x, d_out=out, op=OpKind.PLUS, h_init=init)
    tmp = cp.empty(max(1, reducer(temp_storage=None, d_in=x, d_out=out, num_items=n, h_init=init)), cp.uint8)

    def ref_call():
        reducer(temp_storage=tmp, d_in=x, d_out=out, num_items=n, h_init=init)

    ref_call()
    reference = float(out.get()[0])
    exact = float(x.sum(dtype=cp.float64))
    run.check("sum reduce_into vs float64 sum", abs(reference - exact) <= 1e-4 * abs(exact),
              f"reduce_into {reference} vs {exact}")
    t_ref = run.time(ref_call)
    run.add(work, "cuprims.reduce_into object API (OpKind.PLUS)", t_ref, "ms", None,
            f"{gbytes / t_ref:.2f} TB/s; the reference of this work")

    x_nb, acc_nb = cuda.as_cuda_array(x), cuda.as_cuda_array(out)
    n_tiles = np.int64(ntiles)
    best = 0.0
    for load_alg in K.SUM_LOADS:
        twin, twin_s = _build_twin(run, K.sum_twin(load_alg))
        twin_args = (np.uint64(x.data.ptr), np.uint64(out.data.ptr), n_tiles)
        for vname, builder in K.SUM_VARIANTS.items():
            t0 = time.perf_counter()
            nk = builder(load_alg)
            factories_s = time.perf_counter() - t0
            kernel = nk.kernel
            kernel[1, K.SUM_THREADS](x_nb, acc_nb, np.int64(0))     # compile, link, load (adds 0)
            cuda.synchronize()
            build_s = time.perf_counter() - t0
            occupancy = _overload(kernel).max_cooperative_grid_blocks(K.SUM_THREADS) // run.sms
            twin_occupancy = twin.blocks_per_sm(K.SUM_THREADS)
            geometries = {"grid-stride, SMs x occupancy": max(1, min(ntiles, run.sms * occupancy)),
                          "one tile per block": ntiles}
            for gname, grid in geometries.items():
                def coop_call(grid=grid):
                    kernel[grid, K.SUM_THREADS](x_nb, acc_nb, n_tiles)

                out.fill(0)
                coop_call()
                got = float(out.get()[0])
                ok = abs(got - reference) <= 1e-4 * abs(reference)
                run.check(f"sum {vname} {load_alg} {gname}", ok, f"coop {got} vs reduce_into {reference}")
                t_coop = run.time(coop_call)

                def twin_call(grid=grid):
                    twin.launch(grid, K.SUM_THREADS, *twin_args)

                out.fill(0)
                twin_call()
                got_t = float(out.get()[0])
                run.check(f"sum C++ twin {load_alg} {gname}", abs(got_t - reference) <= 1e-4 * abs(reference),
                          f"twin {got_t} vs reduce_into {reference}")
                t_twin = run.time(twin_call)
                ratio = t_ref / t_coop
                best = max(best, ratio)
                label = f"{nk.label} [{load_alg} load, {gname}]"
                run.add(work, label, t_coop, "ms", ratio,
                        f"ratio = throughput coop/reduce_into (target >= {TARGETS['sum']}); "
                        f"{gbytes / t_coop:.2f} TB/s; grid {grid} ({occupancy} blocks/SM); throughput coop/C++ twin "
                        f"{t_twin / t_coop:.3f}; {_numba_resources(kernel)}; factories {factories_s:.2f} s, "
                        f"build+first launch {build_s:.2f} s")
                run.add(work, f"{twin.twin.label} [{load_alg} load, {gname}]", t_twin, "ms", t_ref / t_twin,
                        f"ratio = throughput C++/reduce_into; same grid ({twin_occupancy} blocks/SM for this kernel "
                        f"alone); {_twin_resources(twin)}; NVRTC+load {twin_s:.2f} s")
    run.targets["sum: coop/reduce_into (best variant)"] = round(best, 3)


def _sample_tiles(ntiles: int) -> Any:
    import numpy as np

    rng = np.random.default_rng(7)
    return np.unique(np.concatenate([[0, ntiles - 1], rng.integers(0, ntiles, 62)]))


def bench_tiles(run: Run, op: str) -> None:
    import cupy as cp
    import numpy as np
    from numba import cuda

    import _coop_kernels as K

    if op == "radix_sort":
        threads, items, loads = K.SORT_THREADS, K.SORT_ITEMS, K.SORT_LOADS
        log2_tiles, key, scale = run.sizes["sort_log2_tiles"], "sort", 0.25
        work_name = "block radix sort int32"
    else:
        threads, items, loads = K.SCAN_THREADS, K.SCAN_ITEMS, K.SCAN_LOADS
        log2_tiles, key, scale = run.sizes["scan_log2_tiles"], "scan", 1.0
        work_name = "block inclusive sum int32"
    tile = threads * items
    ntiles = 1 << log2_tiles
    n = ntiles * tile
    work = f"{work_name}, 2^{log2_tiles} tiles x {tile} ({threads} thr x {items})"
    if op == "radix_sort":
        try:
            x = cp.random.randint(-(1 << 31), (1 << 31) - 1, size=n, dtype=cp.int32)   # sign bits too
        except Exception:  # noqa: BLE001
            x = cp.random.randint(-(1 << 30), 1 << 30, size=n, dtype=cp.int32)
    else:
        x = cp.random.randint(-1000, 1000, size=n, dtype=cp.int32)
    y = cp.empty_like(x)
    sample = _sample_tiles(ntiles)
    src = x.reshape(ntiles, tile)[cp.asarray(sample)].get()
    expected = np.sort(src, axis=1) if op == "radix_sort" else np.cumsum(src, axis=1, dtype=np.int32)

    def verify(name: str) -> None:
        got = y.reshape(ntiles, tile)[cp.asarray(sample)].get()
        bad = np.flatnonzero((got != expected).any(axis=1))
        run.check(f"{key} {name}", bad.size == 0, f"{bad.size} of {sample.size} sampled tiles differ from numpy "
                  f"(first: tile {sample[bad[0]] if bad.size else -1})")

    x_nb, y_nb = cuda.as_cuda_array(x), cuda.as_cuda_array(y)
    gkeys = n / 1e9
    ratios = {}
    for load_alg in loads:
        twin, twin_s = _build_twin(run, K.tile_twin(op, load_alg))
        twin_args = (np.uint64(x.data.ptr), np.uint64(y.data.ptr))

        def twin_call():
            twin.launch(ntiles, threads, *twin_args)

        y.fill(0)
        twin_call()
        verify(f"C++ twin {load_alg}")
        t_twin = run.time(twin_call, scale)
        run.add(work, f"{twin.twin.label} [{load_alg} load/store]", t_twin, "ms", None,
                f"{gkeys / (t_twin / 1e3):.1f} G items/s; {_twin_resources(twin)}; NVRTC+load {twin_s:.2f} s")
        for vname, builder in K.TILE_VARIANTS.items():
            t0 = time.perf_counter()
            nk = builder(op, load_alg)
            factories_s = time.perf_counter() - t0
            kernel = nk.kernel

            def coop_call(kernel=kernel):
                kernel[ntiles, threads](x_nb, y_nb)

            y.fill(0)
            coop_call()
            cuda.synchronize()
            build_s = time.perf_counter() - t0
            verify(f"{vname} {load_alg}")
            t_coop = run.time(coop_call, scale)
            ratio = t_twin / t_coop
            ratios[f"{vname}, {load_alg}"] = round(ratio, 3)
            run.add(work, f"{nk.label} [{load_alg} load/store]", t_coop, "ms", ratio,
                    f"ratio = throughput coop/C++ (target >= {TARGETS[key]}); {gkeys / (t_coop / 1e3):.1f} G items/s; "
                    f"{_numba_resources(kernel)}; factories {factories_s:.2f} s, build+first launch {build_s:.2f} s")
    run.targets[f"{key}: coop/C++ per variant"] = ratios


def bench_primitives(run: Run) -> None:
    """The newer block primitives (bench/_coop_tile_ops.py) against their CUB C++ twins."""
    import cupy as cp
    import numpy as np
    from numba import cuda

    import _coop_tile_ops as T

    log2_tiles = run.sizes["scan_log2_tiles"]
    ntiles = 1 << log2_tiles
    n = ntiles * T.TILE
    sample = _sample_tiles(ntiles)
    ratios = {}
    for op in T.OPS:
        work = f"block {op.replace('_', ' ')} int32, 2^{log2_tiles} tiles x {T.TILE} ({T.THREADS} thr x {T.ITEMS})"
        x = T.inputs(op, n)
        y = cp.empty_like(x)
        cols = T.COMPARED[op]
        expected = T.reference(op, x.reshape(ntiles, T.TILE)[cp.asarray(sample)].get())[:, :cols]

        def verify(name: str, op: str = op, cols: int = cols, expected: Any = expected, y: Any = y) -> None:
            got = y.reshape(ntiles, T.TILE)[cp.asarray(sample)].get()[:, :cols]
            bad = np.flatnonzero((got != expected).any(axis=1))
            run.check(f"{op} {name}", bad.size == 0, f"{bad.size} of {sample.size} sampled tiles differ from numpy")

        twin, twin_s = _build_twin(run, T.twin(op))
        args = (np.uint64(x.data.ptr), np.uint64(y.data.ptr))

        def twin_call(twin: Any = twin, args: tuple = args) -> None:
            twin.launch(ntiles, T.THREADS, *args)

        y.fill(0)
        twin_call()
        verify("C++ twin")
        t_twin = run.time(twin_call)
        run.add(work, twin.twin.label, t_twin, "ms", None, f"{_twin_resources(twin)}; NVRTC+load {twin_s:.2f} s")
        t0 = time.perf_counter()
        nk = T.kernel(op)
        x_nb, y_nb = cuda.as_cuda_array(x), cuda.as_cuda_array(y)

        def coop_call(kernel: Any = nk.kernel, x_nb: Any = x_nb, y_nb: Any = y_nb) -> None:
            kernel[ntiles, T.THREADS](x_nb, y_nb)

        y.fill(0)
        coop_call()
        cuda.synchronize()
        verify(nk.label)
        t_coop = run.time(coop_call)
        ratios[op] = round(t_twin / t_coop, 3)
        run.add(work, nk.label, t_coop, "ms", t_twin / t_coop,
                f"ratio = throughput coop/C++ (target >= {TARGETS['primitives']}); {_numba_resources(nk.kernel)}; "
                f"build+first launch {time.perf_counter() - t0:.2f} s")
    run.targets["primitives: coop/C++ per primitive"] = ratios


# ------------------------------------------------------------------ cold build (subprocesses)

COLD_CHILD = r"""
import json, sys, time
mode, with_coop = sys.argv[1], sys.argv[2] == "coop"     # mode: "gpu" (launch) or "aot" (sm_90, no GPU)
threads = int(sys.argv[3]) if len(sys.argv) > 3 else 128  # another block size: another provider, same headers
t0 = time.perf_counter()
import numpy as np
import numba
from numba import cuda
import cuprims
from cuprims import coop
import_s = time.perf_counter() - t0
t0 = time.perf_counter()
if mode == "gpu":
    x = cuda.to_device(np.arange(threads, dtype=np.float32))
    out = cuda.to_device(np.zeros(1, np.float32))
    cuda.synchronize()
context_s = time.perf_counter() - t0
print("@@build", file=sys.stderr, flush=True)
t0 = time.perf_counter()
if with_coop:
    if mode == "aot":
        with coop.target((9, 0)):
            block_sum = coop.block.make_sum(numba.float32, threads)
    else:
        block_sum = coop.block.make_sum(numba.float32, threads)
    factory_s = time.perf_counter() - t0   # a provider of a built-in operator builds on beside the kernel

    @cuda.jit(link=block_sum.files)
    def kernel(x, out):
        s = block_sum(x[cuda.threadIdx.x])
        if cuda.threadIdx.x == 0:
            out[0] = s
    files = block_sum.files                # read when linked, as numba does
else:
    factory_s = 0.0

    @cuda.jit
    def kernel(x, out):
        cuda.atomic.add(out, 0, x[cuda.threadIdx.x])
    files = []
t1 = time.perf_counter()
if mode == "gpu":
    kernel[1, threads](x, out)
    cuda.synchronize()
    value = float(out.copy_to_host()[0])
else:
    from numba import types
    from cuprims._compile.link import link_cubin
    from cuprims._operators.numba_device import target_capability
    f4a = types.Array(types.float32, 1, "C")
    with target_capability((9, 0)):
        codes, _ = cuda.compile_all(kernel.py_func, types.void(f4a, f4a), device=False, cc=(9, 0),
                                    output="ltoir", abi="numba")
    link_cubin(bytes(codes[0]), [bytes(c) for c in codes[1:]] + [bytes(f.data) for f in files], 90)
    value = threads * (threads - 1) / 2
kernel_s = time.perf_counter() - t1
build_s = time.perf_counter() - t0
provider_info = cuprims.cache_info()   # the AOT kernel link is counted too
keys = ("nvrtc_compiles", "links", "numba_compiles", "disk_hits", "disk_misses", "disk_writes")
print(json.dumps({"import": import_s, "context": context_s, "factory": factory_s, "kernel": kernel_s,
                  "build": build_s, "value": value, "expected": threads * (threads - 1) / 2, "counters": {k: provider_info[k] for k in keys}}))
"""


def _cold_child(mode: str, what: str, cache: str, threads: int = 128) -> tuple[dict[str, Any], dict[str, float]]:
    # CUDA_CACHE_DISABLE: on the H200 host nvJitLink (numba's links and ours) and NVRTC's
    # code generation reuse the driver's compute cache, so a repeated run would time cache hits
    env = {**os.environ, "CUPRIMS_CACHE_DIR": cache, "CUPRIMS_TRACE": "1", "CUDA_CACHE_DISABLE": "1"}
    env.pop("CUPRIMS_DISK_CACHE", None)
    env.pop("CUPRIMS_DUMP_DIR", None)
    proc = subprocess.run([sys.executable, "-c", COLD_CHILD, mode, what, str(threads)], capture_output=True,
                          text=True, env=env, timeout=300)
    if proc.returncode:
        raise RuntimeError(f"cold-build child ({mode}, {what}) failed:\n{proc.stderr[-3000:]}")
    stages: dict[str, float] = {}
    building = False
    for line in proc.stderr.splitlines():
        if line.startswith("@@build"):
            building = True
        elif building and line.startswith("[cuprims] "):
            name, seconds = line[10:24].strip(), float(line[24:].split()[0])
            stages[name] = stages.get(name, 0.0) + seconds
    return json.loads(proc.stdout.strip().splitlines()[-1]), stages


def bench_cold(add, check, targets: dict[str, Any], mode: str) -> None:
    """Fresh processes: an empty cache (the machine's very first build, PCH included), the
    same cache warm, a first build of this kernel on a machine whose cache holds the PCH
    (made by an earlier process for another block size: the one-time cost paid), and numba
    alone."""
    work = "cold build: make_sum(float32, 128) + first launch" if mode == "gpu" else \
        "cold build (AOT sm_90, no GPU): make_sum(float32, 128) + compile + link"
    with tempfile.TemporaryDirectory(prefix="cuprims-coop-cold-") as cache:
        first, stages = _cold_child(mode, "coop", cache)
        second, _ = _cold_child(mode, "coop", cache)
    with tempfile.TemporaryDirectory(prefix="cuprims-coop-cold-") as cache:
        primer, _ = _cold_child(mode, "coop", cache, threads=256)   # makes the PCH of the same headers
        after_pch, pch_stages = _cold_child(mode, "coop", cache)
    with tempfile.TemporaryDirectory(prefix="cuprims-coop-cold-") as cache:
        plain, _ = _cold_child(mode, "plain", cache)

    def stage_text(st: dict[str, float]) -> str:
        return ", ".join(f"{k} {v:.2f} s" for k, v in st.items())

    add(work, "cuprims first build, PCH made once on this machine: total", after_pch["build"], "s", None,
        f"target <= {TARGETS['cold']} s; the cache holds the headers' PCH (an earlier process built "
        f"make_sum(float32, 256)), not this provider; stages: {stage_text(pch_stages)}; "
        f"counters: {after_pch['counters']}")
    add(work, "cuprims very first build on a machine (empty cache): total", first["build"], "s", None,
        f"PCH made here, once per machine and header set: +{first['build'] - after_pch['build']:.2f} s "
        f"over the row above; import {first['import']:.2f} s and CUDA context {first['context']:.2f} s "
        "before it, not counted")
    add(work, "cuprims first process: make_sum returns", first["factory"], "s", None,
        "its provider (a built-in operator) builds on a worker thread beside numba's compile of the kernel; "
        "stages: " + stage_text(stages))
    kernel_step = "kernel compile + link + first launch" if mode == "gpu" else "kernel compile + link"
    add(work, f"cuprims first process: {kernel_step}", first["kernel"], "s", None,
        "numba-cuda's compile of the kernel and nvJitLink's LTO link with the provider (waiting for it)")
    c = second["counters"]
    add(work, "cuprims second process, warm cache: total", second["build"], "s", None,
        f"make_sum {second['factory']:.3f} s, kernel {second['kernel']:.2f} s; cuprims.cache_info() after "
        "the build: " + ", ".join(f"{k} {v}" for k, v in c.items()))
    add(work, "numba alone (same kernel, an atomic instead of coop)", plain["build"], "s", None,
        f"numba-cuda's own first {kernel_step} in a fresh process (all of numba's target setup falls here; "
        "with coop, part of it falls in make_sum's device function)")
    for name, result in (("first process", first), ("PCH primer (256 threads)", primer),
                         ("first build after the PCH", after_pch)):
        check(f"cold: {name} result", abs(result["value"] - result["expected"]) < 1e-3,
              f"block sum {result['value']} != {result['expected']}")
    a = after_pch["counters"]
    check("cold: the build after the PCH compiled its provider", a["nvrtc_compiles"] == 1, f"counters {a}")
    check("cold: second process compiled no provider",
          c["nvrtc_compiles"] == 0 and c["links"] == (1 if mode == "aot" else 0)    # aot: the kernel's own link
          and c["numba_compiles"] == 0 and c["disk_hits"] >= 1,
          f"counters {c}")
    targets["cold: first build s, PCH made once (target <= 1.5)"] = round(after_pch["build"], 3)
    targets["cold: very first build s, empty cache"] = round(first["build"], 3)
    targets["cold: warm cache, make_sum + kernel s"] = round(second["build"], 3)


# ------------------------------------------------------------------ compile only (no GPU)

def compile_only(args: argparse.Namespace) -> int:
    """Every numba kernel compiled for sm_90 and LTO-linked with its primitives' files,
    every C++ twin compiled by NVRTC for sm_90: what would fail on the GPU host before any
    launch, and each kernel's registers, stack frame and shared memory."""
    import _coop_kernels as K
    from cuprims import coop

    rows, add = result_rows(40, 64)
    failures: list[str] = []
    checks: dict[str, str] = {}

    def check(name: str, ok: bool, detail: str = "") -> None:
        checks[name] = "ok" if ok else f"FAILED {detail}"
        if not ok:
            failures.append(f"{name}: {detail}")

    def report(work: str, label: str, cubin: bytes, seconds: float, what: str) -> dict[str, Any]:
        r = K.cubin_resources(cubin)
        add(work, label, seconds, "s", None,
            f"{what}; {r['regs']} regs, frame {r['frame']} B, smem {r['shared']} B, {r['functions']} function(s)")
        check(f"{work} {label}: all inlined", r["functions"] == 1, f"{r['functions']} functions in the cubin")
        check(f"{work} {label}: no stack frame", r["frame"] == 0, f"frame {r['frame']} B (local memory)")
        return r

    def numba_case(work: str, nk: K.NumbaKernel, factories_s: float) -> dict[str, Any]:
        t = time.perf_counter()
        try:
            cubin = K.aot_link(nk, 90)
        except Exception as exc:  # noqa: BLE001
            check(f"{work} {nk.label}: compiles", False, f"{type(exc).__name__}: {exc}")
            return {}
        return report(work, nk.label, cubin, time.perf_counter() - t, f"factories {factories_s:.2f} s; compile+link")

    def twin_case(work: str, twin: K.Twin) -> dict[str, Any]:
        t = time.perf_counter()
        try:
            cubin = K.compile_twin(twin, 90)
        except Exception as exc:  # noqa: BLE001
            check(f"{work} {twin.label}: compiles", False, f"{type(exc).__name__}: {exc}")
            return {}
        return report(work, twin.label, cubin, time.perf_counter() - t, "NVRTC to cubin")

    with coop.target((9, 0)):
        if "sum" in args.only:
            for load_alg in K.SUM_LOADS:
                work = f"sm_90 block sum [{load_alg} load]"
                for builder in K.SUM_VARIANTS.values():
                    t = time.perf_counter()
                    nk = builder(load_alg)
                    numba_case(work, nk, time.perf_counter() - t)
                twin_case(work, K.sum_twin(load_alg))
        for op, key, loads in (("radix_sort", "sort", K.SORT_LOADS), ("inclusive_sum", "scan", K.SCAN_LOADS)):
            if key not in args.only:
                continue
            for load_alg in loads:
                work = f"sm_90 {op} [{load_alg} load/store]"
                for builder in K.TILE_VARIANTS.values():
                    t = time.perf_counter()
                    nk = builder(op, load_alg)
                    numba_case(work, nk, time.perf_counter() - t)
                twin_case(work, K.tile_twin(op, load_alg))
        if "primitives" in args.only:
            import _coop_tile_ops as T

            for op in T.OPS:
                work = f"sm_90 block {op.replace('_', ' ')}"
                t = time.perf_counter()
                nk = T.kernel(op)
                numba_case(work, nk, time.perf_counter() - t)
                twin_case(work, T.twin(op))
    targets: dict[str, Any] = {}
    if "cold" in args.only:
        try:
            bench_cold(add, check, targets, "aot")
        except Exception as exc:  # noqa: BLE001
            check("cold build", False, str(exc)[-2000:])
    extra = {"machine": "no GPU: ahead of time for sm_90", "cpus": os.cpu_count(),
             "numba-cuda": dist_version("numba-cuda"), "cccl headers": _cccl_version(), "targets": targets,
             **_check_summary(checks)}
    md = write_results("coop-compile", rows, extra, [Path(args.out)] if args.out else [])
    print(md)
    if failures:
        print("FAILED CHECKS:\n  " + "\n  ".join(failures))
        return 1
    print(f"compile-only: {len(checks)} checks passed")
    return 0


def _check_summary(checks: dict[str, str]) -> dict[str, Any]:
    failed = {k: v for k, v in checks.items() if v != "ok"}
    out: dict[str, Any] = {"checks": f"{len(checks) - len(failed)} of {len(checks)} passed"}
    if failed:
        out["failed checks"] = failed
    return out


def _cccl_version() -> str | None:
    try:
        from cuprims._compile.toolchain import cccl_version

        return cccl_version()
    except Exception:  # noqa: BLE001
        return None


def main() -> int:
    args = _arguments()
    if args.compile_only:
        return compile_only(args)
    why = _gpu_ready()
    if why is not None:
        print(f"bench_coop: needs a CUDA GPU with CuPy and numba-cuda: {why}.\n"
              "Without a GPU, `python bench/bench_coop.py --compile-only` compiles every kernel for sm_90.")
        return 0
    import cupy as cp

    run = Run(_sizes(args.quick))
    if "cold" in args.only:   # first: fresh processes, before this one holds GPU memory
        try:
            bench_cold(run.add, run.check, run.targets, "gpu")
        except Exception as exc:  # noqa: BLE001
            run.check("cold build", False, str(exc)[-2000:])
    for section, fn in (("sum", lambda: bench_sum(run)), ("sort", lambda: bench_tiles(run, "radix_sort")),
                        ("scan", lambda: bench_tiles(run, "inclusive_sum")), ("primitives", lambda: bench_primitives(run))):
        if section not in args.only:
            continue
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - the other sections still run and are written
            import traceback

            traceback.print_exc()
            run.check(f"{section} section", False, f"{type(exc).__name__}: {exc}")
        gc.collect()   # the section's arrays are unreachable once it returns
        cp.get_default_memory_pool().free_all_blocks()
    extra = {"device": run.device_name, "sms": run.sms, "quick": args.quick, "sizes": run.sizes,
             "cupy": cp.__version__, "numba-cuda": dist_version("numba-cuda"), "cuda-core": dist_version("cuda-core"),
             "cccl headers": _cccl_version(), "targets": run.targets, **_check_summary(run.checks)}
    name = "coop-quick" if args.quick else "coop"
    dirs = ([] if args.quick else [RESULTS]) + ([Path(args.out)] if args.out else [])
    print(write_results(name, run.rows, extra, dirs))
    if run.failures:
        print("FAILED CHECKS:\n  " + "\n  ".join(run.failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
