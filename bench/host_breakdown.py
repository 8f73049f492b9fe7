"""Where the host time of a call goes on a GPU machine: for each case of bench_defaults'
``host`` section (cuda.compute-style arguments, n = 1024), the host microseconds per call
as it is, with the launches replaced by no-ops (so the rest is cuprims' Python path and
the arguments' reads), the launches per call, and a profile of the costliest functions.

A diagnostic, not a benchmark: it prints, and writes nothing but its log.

    python bench/host_breakdown.py [--profile merge_sort,histogram_even] [--top 14]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import add_extra_path, host_us  # noqa: E402
from bench_defaults import host_cases  # noqa: E402


def _without_launches(fn: Callable[[], Any]) -> tuple[float, float]:
    """(host us per call, launches per call) with every launch a no-op."""
    from cuprims._runtime import driver

    count = [0]

    def launch(*args: Any, **kw: Any) -> None:
        count[0] += 1

    def launch_pdl(*args: Any, **kw: Any) -> bool:
        count[0] += 1
        return True

    saved = driver.launch, driver.launch_pdl
    driver.launch, driver.launch_pdl = launch, launch_pdl
    try:
        fn()               # the first call may build or plan: counted apart
        count[0] = 0
        fn()
        per_call = count[0]
        t = host_us(fn)
    finally:
        driver.launch, driver.launch_pdl = saved
    return t, float(per_call)


def _profile(fn: Callable[[], Any], top: int, calls: int = 3000) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    lines = [ln for ln in text.getvalue().splitlines() if ln.strip()]
    start = next((k for k, ln in enumerate(lines) if ln.lstrip().startswith("ncalls")), 0)
    return "\n".join(lines[start:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="merge_sort,histogram_even,segmented_reduce,radix_sort,exclusive_scan")
    parser.add_argument("--top", type=int, default=14)
    args = parser.parse_args()
    add_extra_path()
    import cuprims

    ours = host_cases(cuprims)
    try:
        import cuda.compute as cc
        theirs = host_cases(cc)
    except Exception as exc:  # noqa: BLE001
        print("cuda.compute not importable:", exc)
        theirs = {}
    print(f"{'case':34s} {'form':8s} {'full us':>8s} {'no-launch':>9s} {'launches':>8s} {'per launch':>10s} "
          f"{'cuda.compute':>12s}")
    for name, (run, one_shot) in ours.items():
        t_cc = host_us(theirs[name][0]) if name in theirs else float("nan")
        for form, fn in (("object", run), ("one-shot", one_shot)):
            if fn is None:
                continue
            full = host_us(fn)
            bare, launches = _without_launches(fn)
            per = (full - bare) / launches if launches else float("nan")
            print(f"{name:34s} {form:8s} {full:8.2f} {bare:9.2f} {launches:8.0f} {per:10.2f} "
                  f"{t_cc if form == 'object' else float('nan'):12.2f}", flush=True)
    for name in [s.strip() for s in args.profile.split(",") if s.strip()]:
        if name not in ours:
            continue
        for form, fn in (("object", ours[name][0]), ("one-shot", ours[name][1])):
            if fn is None:
                continue
            print(f"\n--- profile: {name} {form} (3000 calls, by own time)")
            print(_profile(fn, args.top), flush=True)


if __name__ == "__main__":
    main()
