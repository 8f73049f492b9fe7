"""Where NVRTC's own time goes, per algorithm: the floor under every cold build.

For each algorithm of bench_cold_build.py this builds the object once (ahead of time for
sm_90, no PCH, nothing cached) to capture the unit cuprims hands NVRTC, then compiles that
unit again with NVRTC's ``-time`` report:

* with a PCH of its headers (made first, under the same options, as cuprims makes it):
  front end (parsing what the PCH does not hold, template instantiation, and the cost of
  using the PCH at all), NVVM's optimizer, PTX generation + ptxas; median of 3;
* a unit that is only the header prefix, with the same PCH: what using the PCH costs by
  itself (grows with the PCH's size, whatever the unit instantiates);
* without a PCH, once: the front end when every header is parsed.

Every compile gets a distinct trailing declaration and the process runs with
``CUDA_CACHE_DISABLE=1``, so nothing is served by the driver's compute cache (on the GPU
host NVRTC's code generation reuses it: repeated compiles showed NVVM 18 ms, ptxas 1 ms).
The host's cuprims layers (key, cache lookup, PCH steering and loading) are not in these
figures: bench_cold_build.py has them.

Run:  python bench/bench_nvrtc_phases.py [--out DIR] [--cases reduce,scan]
Writes nvrtc-phases-<cpu|gpu-host>.json / .md / .png to bench/results (and --out).
"""

from __future__ import annotations

import os

os.environ["CUDA_CACHE_DISABLE"] = "1"           # before any CUDA library is loaded
os.environ["CUPRIMS_PCH"] = "0"                  # capture the units as compiled without a PCH
os.environ.pop("CUPRIMS_DISK_CACHE", None)

import argparse   # noqa: E402
import statistics   # noqa: E402
import sys   # noqa: E402
import tempfile   # noqa: E402
import time   # noqa: E402
from pathlib import Path   # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import result_rows, write_results   # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

CASES = {
    "reduce OpKind.PLUS f4": "cuprims.make_reduce_into(d_in=A(f4), d_out=A(f4), op=OpKind.PLUS, "
                             "h_init=np.float32(0), compute_capability=90)",
    "inclusive_scan OpKind.PLUS i4": "cuprims.make_inclusive_scan(d_in=A(i4), d_out=A(i4), op=OpKind.PLUS, "
                                     "compute_capability=90)",
    "unary_transform v*2+1 f4": "cuprims.make_unary_transform(d_in=A(f4), d_out=A(f4), op=lambda v: v * 2 + 1, "
                                "compute_capability=90)",
    "radix_sort u4 keys": "cuprims.make_radix_sort(d_in_keys=A(u4), d_out_keys=A(u4), d_in_values=None, "
                          "d_out_values=None, order=SortOrder.ASCENDING, compute_capability=90)",
    "merge_sort a<b i4 keys": "cuprims.make_merge_sort(d_in_keys=A(i4), d_out_keys=A(i4), op=lambda a, b: a < b, "
                              "compute_capability=90)",
    "lower_bound i4": "cuprims.make_lower_bound(d_data=A(i4), d_values=A(i4), d_out=A(u8), compute_capability=90)",
}
PHASES = {"CUDA C++ Frontend": "front end", "NVVM Optimizer": "NVVM optimizer",
          "PTX Translation": "PTX + ptxas"}


def capture_units(code: str) -> list[tuple[bytes, dict, str, list[str], bytes]]:
    """The NVRTC compiles one build makes: (source, options, output kind, name expressions,
    the unit's header prefix as cuprims computes it for its PCH)."""
    import numpy as np

    import cuprims
    from cuprims import OpKind, SortOrder   # noqa: F401  (used by the case's code)
    from cuprims._compile import nvrtc as jit_nvrtc

    seen: list[tuple[bytes, dict, str, list[str], bytes]] = []
    prefix = [b""]
    real_compile, real_unit = jit_nvrtc.nvrtc_compile, jit_nvrtc._compile

    def unit(source, *args, **kwargs):
        prefix[0] = source.header_prefix.encode()
        return real_unit(source, *args, **kwargs)

    def recording(text, options, output, names, logs=None):
        seen.append((text, dict(options), output, list(names), prefix[0]))
        return real_compile(text, options, output, names, logs)

    jit_nvrtc.nvrtc_compile, jit_nvrtc._compile = recording, unit
    try:
        f4, i4, u4, u8 = np.float32, np.int32, np.uint32, np.uint64   # noqa: F841
        A = cuprims.ProxyArray   # noqa: F841
        with tempfile.TemporaryDirectory() as cache:
            os.environ["CUPRIMS_CACHE_DIR"] = cache
            exec(code)
    finally:
        jit_nvrtc.nvrtc_compile, jit_nvrtc._compile = real_compile, real_unit
    return seen


class Timed:
    """NVRTC compiles with ``-time``: wall seconds and the phases NVRTC reports, in seconds."""

    def __init__(self) -> None:
        from cuda.bindings import nvrtc

        nvrtc.nvrtcSetPCHHeapSize(1 << 30)
        self.dir = tempfile.mkdtemp(prefix="cuprims-nvrtc-phases-")
        self.salt = 0

    def compile(self, text: bytes, options: dict, output: str, names: list[str], pch: dict) -> dict:
        """One salted compile with the ``-time`` report; ``pch``: {"create_pch": path},
        {"use_pch": path} or {}."""
        import io

        from cuprims._compile.nvrtc import nvrtc_compile

        self.salt += 1
        text = text + f"\n__device__ int cuprims_phases_salt_{self.salt};\n".encode()
        report = os.path.join(self.dir, "time.csv")
        if os.path.exists(report):
            os.remove(report)
        log = io.StringIO()
        t = time.perf_counter()
        nvrtc_compile(text, {**options, "time": report, **pch}, output, names, log)
        wall = time.perf_counter() - t
        phases = {}
        for line in open(report).read().splitlines()[1:]:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 4 and parts[1] in PHASES:
                phases[PHASES[parts[1]]] = phases.get(PHASES[parts[1]], 0.0) + float(parts[2]) / 1e3
        return {"wall": wall, "phases": phases, "used_pch": "using precompiled header file" in log.getvalue()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--cases", default=None, help="comma-separated subset of the case names")
    args = parser.parse_args()
    rows, add = result_rows(32, 44)
    timed = Timed()
    cases = {k: v for k, v in CASES.items() if not args.cases or k in args.cases.split(",")}
    for name, code in cases.items():
        units = [u for u in capture_units(code) if u[3]]   # units with kernels (not the heap's trigger)
        for index, (text, options, output, names, prefix_text) in enumerate(units):
            work = f"NVRTC: {name}" + (f" (unit {index + 1} of {len(units)})" if len(units) > 1 else "")
            pch = os.path.join(timed.dir, f"u{timed.salt}.pch")
            made = timed.compile(text, options, output, names, {"create_pch": pch})
            pch_mb = os.path.getsize(pch) / 1e6 if os.path.exists(pch) else 0.0
            runs = [timed.compile(text, options, output, names, {"use_pch": pch}) for _ in range(3)]
            if not all(r["used_pch"] for r in runs):
                print(f"{name}: NVRTC did not use the PCH", file=sys.stderr)
            prefix = [timed.compile(prefix_text, options, output, [], {"use_pch": pch}) for _ in range(3)]
            plain = timed.compile(text, options, output, names, {})
            med = {p: statistics.median(r["phases"].get(p, 0.0) for r in runs) for p in PHASES.values()}
            total = statistics.median(r["wall"] for r in runs)
            add(work, "cuprims unit with its PCH: total", total, "s", None,
                f"to {output}; {len(names)} kernel name(s); PCH {pch_mb:.0f} MB, made in {made['wall']:.2f} s")
            for phase, seconds in med.items():
                add(work, f"  with PCH: {phase}", seconds, "s")
            add(work, "  header prefix alone with the PCH (using it)", statistics.median(r["wall"] for r in prefix), "s",
                None, "the part of the front end that only grows with the PCH's size")
            add(work, "cuprims unit without a PCH: total", plain["wall"], "s", None,
                ", ".join(f"{k} {v:.3f} s" for k, v in plain["phases"].items()))
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    gpu = False
    try:
        from cuda.bindings import runtime

        err, count = runtime.cudaGetDeviceCount()
        gpu = int(err) == 0 and count > 0
    except Exception:  # noqa: BLE001
        pass
    extra = {"machine": "GPU host" if gpu else "no GPU", "cpus": os.cpu_count(), "nvrtc": f"{major}.{minor}",
             "method": "NVRTC -time, CUDA_CACHE_DISABLE=1, every compile salted; with-PCH rows are medians of 3"}
    dirs = [ROOT / "bench" / "results"] + ([Path(args.out)] if args.out else [])
    print(write_results(f"nvrtc-phases-{'gpu-host' if gpu else 'cpu'}", rows, extra, dirs))


if __name__ == "__main__":
    main()
