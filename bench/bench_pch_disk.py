"""A fresh process's first build with and without a persistent precompiled header, and
what the PCH takes on disk.

Each case is a fresh interpreter building one algorithm ahead of time for sm_90 with
CUPRIMS_TRACE=1, with no kernel or cubin in its cache:

* ``in-process PCHs only``: CUPRIMS_PCH_DISK=0, empty cache (a first build compiles
  without a PCH); left out with ``--no-in-process``;
* ``PCH absent (made)``: empty cache: the build also makes the prefix's PCH and stores it;
* ``PCH present``: a cache holding only that PCH (kernel and cubin entries removed): the
  build places the heap, checks and unpacks the PCH and compiles with it.

Rounds are interleaved and the medians printed (stage times from the trace; "first
build" is the make_* call's wall time), with the bytes on disk of the PCH entry and of the
whole cache after the ``made`` build (``du``'s apparent sizes of every file in it).

``--src DIR`` (repeatable) runs every case once per source tree (``DIR`` is put first on
PYTHONPATH), alternating the order each round: an A/B comparison of two versions of cuprims.

Run:  python bench/bench_pch_disk.py [--rounds 7] [--algorithm reduce|scan|radix_sort] [--src A --src B]
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

BUILDS = {
    "reduce": "cuprims.make_reduce_into(d_in=P(np.float32), d_out=P(np.float32), op=cuprims.OpKind.PLUS, "
              "h_init=np.float32(0), compute_capability=90)",
    "scan": "cuprims.make_inclusive_scan(d_in=P(np.int32), d_out=P(np.int32), op=cuprims.OpKind.PLUS, "
            "compute_capability=90)",
    "radix_sort": "cuprims.make_radix_sort(d_in_keys=P(np.uint32), d_out_keys=P(np.uint32), d_in_values=None, "
                  "d_out_values=None, order=cuprims.SortOrder.ASCENDING, compute_capability=90)",
}

CHILD = r"""
import json, time
import numpy as np, cuprims
from cuprims import ProxyArray as P
t = time.perf_counter()
BUILD
first = time.perf_counter() - t
info = cuprims.cache_info()
print(json.dumps({"first build": first, **{k: v for k, v in info.items() if k.startswith("pch_")}}))
"""


def run(cache: Path, algorithm: str, src: str | None = None, **env: str) -> tuple[dict, dict[str, float]]:
    full = {**os.environ, "CUPRIMS_CACHE_DIR": str(cache), "CUPRIMS_TRACE": "1", "CUPRIMS_DISK_CACHE": "1", **env}
    if src is not None:
        full["PYTHONPATH"] = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-c", CHILD.replace("BUILD", BUILDS[algorithm])], capture_output=True,
                          text=True, env=full, timeout=600)
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


def bytes_on_disk(root: Path, under: str = "") -> int:
    """The sizes of the files under ``root/under`` (what ``du -sb`` counts, directories aside)."""
    return sum(p.stat().st_size for p in (root / under).rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--algorithm", choices=sorted(BUILDS), default="reduce")
    parser.add_argument("--src", action="append", help="a source tree to run (repeatable: A/B, interleaved)")
    parser.add_argument("--no-in-process", action="store_true", help="leave out the in-process-only case")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    trees = args.src or [None]
    cases = (() if args.no_in_process else ("in-process PCHs only",)) + ("PCH absent (made)", "PCH present")
    samples: dict[tuple, list[dict[str, float]]] = {(t, c): [] for t in trees for c in cases}
    with tempfile.TemporaryDirectory(prefix="cuprims-pch-bench-") as d:
        for r in range(args.rounds):
            for t in (trees if r % 2 == 0 else trees[::-1]):
                if not args.no_in_process:
                    old = Path(d) / f"old{r}"
                    info, stages = run(old, args.algorithm, t, CUPRIMS_PCH_DISK="0")
                    samples[t, cases[0]].append({**stages, "first build": info["first build"]})
                    shutil.rmtree(old)
                made = Path(d) / f"made{r}"
                info, stages = run(made, args.algorithm, t, CUPRIMS_PCH_DISK="1")
                assert info["pch_writes"] == 1, info
                sizes = {"cache MB on disk": bytes_on_disk(made) / 1e6, "PCH MB on disk": bytes_on_disk(made, "v2/pch")
                         / 1e6}
                samples[t, "PCH absent (made)"].append({**stages, "first build": info["first build"], **sizes})
                only_pch(made)
                info, stages = run(made, args.algorithm, t, CUPRIMS_PCH_DISK="1")
                assert info["pch_hits"] == 1, info
                samples[t, "PCH present"].append({**stages, "first build": info["first build"]})
                shutil.rmtree(made)
    columns = [(t, c) for t in trees for c in cases]
    names = sorted({n for col in columns for s in samples[col] for n in s},
                   key=lambda n: (n != "first build", "MB" in n, n))
    print(f"median of {args.rounds} fresh processes, {args.algorithm}, sm_90 ahead of time, {os.cpu_count()} CPUs, "
          f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    for t in trees:
        if t is not None:
            print(f"  {'AB'[trees.index(t)] if len(trees) > 1 else ' '}: {t}")
    header = [c if t is None or len(trees) == 1 else f"{'AB'[trees.index(t)]}: {c}" for t, c in columns]
    print(f"{'stage':16s}" + "".join(f"{h:>26s}" for h in header))
    for n in names:
        row = []
        for col in columns:
            vals = [s[n] for s in samples[col] if n in s]
            unit = "  " if "MB" in n else " s"
            row.append(f"{statistics.median(vals):22.3f}{unit}  " if vals else f"{'-':>24s}  ")
        print(f"{n:16s}" + "".join(row))


if __name__ == "__main__":
    main()
