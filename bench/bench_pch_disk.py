"""A fresh process's first build with and without a persistent precompiled header.

Each case is a fresh interpreter building one reduction ahead of time for sm_90 with
CUPRIMS_TRACE=1, with no kernel or cubin in its cache:

* ``in-process PCHs only``: CUPRIMS_PCH_DISK=0, empty cache (the behaviour before PCHs
  persisted: a first build compiles without one);
* ``PCH absent (made)``: empty cache: the build also makes the prefix's PCH and stores it;
* ``PCH present``: a cache holding only that PCH (kernel and cubin entries removed): the
  build places the heap, verifies the PCH and compiles with it.

Rounds are interleaved and the medians printed (stage times from the trace; "first
build" is make_reduce_into's wall time).

Run:  python bench/bench_pch_disk.py [--rounds 5] [--op PLUS]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, time
import numpy as np, cuprims
t = time.perf_counter()
cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32),
                         op=cuprims.OpKind.OP, h_init=np.float32(0), compute_capability=90)
first = time.perf_counter() - t
info = cuprims.cache_info()
print(json.dumps({"first build": first, **{k: v for k, v in info.items() if k.startswith("pch_")}}))
"""


def run(cache: Path, op: str, **env: str) -> tuple[dict, dict[str, float]]:
    full = {**os.environ, "CUPRIMS_CACHE_DIR": str(cache), "CUPRIMS_TRACE": "1", "CUPRIMS_DISK_CACHE": "1", **env}
    proc = subprocess.run([sys.executable, "-c", CHILD.replace("OP", op)], capture_output=True, text=True, env=full,
                          timeout=600)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    stages: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        if line.startswith("[cuprims] "):
            name, seconds = line[10:24].strip(), float(line[24:].split()[0])
            stages[name] = stages.get(name, 0.0) + seconds
    return json.loads(proc.stdout.strip().splitlines()[-1]), stages


def only_pch(cache: Path) -> None:
    for sub in ("kernel", "cubin", "uses"):
        shutil.rmtree(cache / "v2" / sub, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--op", default="PLUS")
    args = parser.parse_args()
    cases = ("in-process PCHs only", "PCH absent (made)", "PCH present")
    samples: dict[str, list[dict[str, float]]] = {c: [] for c in cases}
    with tempfile.TemporaryDirectory(prefix="cuprims-pch-bench-") as d:
        for r in range(args.rounds):
            old = Path(d) / f"old{r}"
            info, stages = run(old, args.op, CUPRIMS_PCH_DISK="0")
            samples[cases[0]].append({**stages, "first build": info["first build"]})
            shutil.rmtree(old)
            made = Path(d) / f"made{r}"
            info, stages = run(made, args.op, CUPRIMS_PCH_DISK="1")
            assert info["pch_writes"] == 1, info
            samples[cases[1]].append({**stages, "first build": info["first build"]})
            only_pch(made)
            info, stages = run(made, args.op, CUPRIMS_PCH_DISK="1")
            assert info["pch_hits"] == 1, info
            samples[cases[2]].append({**stages, "first build": info["first build"]})
            shutil.rmtree(made)
    names = sorted({n for c in cases for s in samples[c] for n in s}, key=lambda n: (n != "first build", n))
    print(f"median of {args.rounds} fresh processes, reduce OpKind.{args.op}, sm_90 ahead of time, "
          f"{os.cpu_count()} CPUs")
    print(f"{'stage':16s}" + "".join(f"{c:>24s}" for c in cases))
    for n in names:
        row = []
        for c in cases:
            vals = [s[n] for s in samples[c] if n in s]
            row.append(f"{statistics.median(vals):20.3f} s  " if vals else f"{'-':>22s}  ")
        print(f"{n:16s}" + "".join(row))


if __name__ == "__main__":
    main()
