"""Per-kernel device time of cuprims calls, read from PyTorch's profiler (CUPTI sees every
kernel this process launches, cuprims' included): which kernel of an algorithm an argument
type or a change moves. A diagnostic beside the benchmarks: no peers and no chart.

    python bench/profile_kernels.py [--only segsort] [--repeats 20]

Each case runs each variant once (its build and warm-up), then ``--repeats`` times under
the profiler. The table gives, per case and variant, each kernel (its name without
namespaces and template arguments, and a hash of the whole), its launches per call, its
mean time and its share of the variant's device time; a last row per variant sums them.
Written to ``--out`` (default ``$CUPRIMS_RESULTS`` or /tmp/cuprims-results) as
profile-kernels.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import sized_call  # noqa: E402

CASES = ("segsort",)


def kernel_times(call: Callable[[], Any], repeats: int) -> dict[str, tuple[float, float]]:
    """``{kernel: (launches per call, mean microseconds)}`` over ``repeats`` calls."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            call()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text()).get("traceEvents", [])
    durations: dict[str, list[float]] = defaultdict(list)
    for event in events:
        if event.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            durations[short_name(event["name"])].append(float(event["dur"]))
    return {name: (len(d) / repeats, statistics.fmean(d)) for name, d in durations.items()}


def short_name(name: str) -> str:
    """A kernel's name without namespaces and template arguments, and a short hash of the
    whole name, which tells two instantiations of one template apart."""
    import zlib

    if "::" not in name and "<" not in name:     # a copy or a set, or a C kernel: its name as it is
        return name[:60]
    base = name.partition("<")[0].split("(")[0].split()[-1].split("::")[-1]
    return f"{base[:60]} #{zlib.crc32(name.encode()) & 0xffff:04x}"


def segsort_variants() -> list[tuple[str, str, Callable[[], Any]]]:
    """Segmented sorts of int32 keys in equal segments: int32 and int64 offset arrays."""
    import cupy as cp

    import cuprims
    from cuprims import SortOrder

    out = []
    for segments, size in ((1 << 22, 16), (1 << 20, 64), (1 << 16, 4096)):
        n = segments * size
        keys = cp.random.randint(0, 1 << 30, n, dtype=cp.int32)
        result = cp.empty_like(keys)
        for offsets in (cp.arange(0, n + 1, size, dtype=cp.int64), cp.arange(0, n + 1, size, dtype=cp.int32)):
            starts, ends = offsets[:-1], offsets[1:]
            sorter = cuprims.make_segmented_sort(d_in_keys=keys, d_out_keys=result, start_offsets_in=starts,
                                                 end_offsets_in=ends, order=SortOrder.ASCENDING)
            call = sized_call(sorter, d_in_keys=keys, d_out_keys=result, d_in_values=None, d_out_values=None,
                              num_items=n, num_segments=segments, start_offsets_in=starts, end_offsets_in=ends)
            out.append((f"segmented sort int32 keys, 2^{segments.bit_length() - 1} x {size}",
                        f"{offsets.dtype} offset arrays", call))
    return out


VARIANTS = {"segsort": segsort_variants}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(CASES), help="comma list of: " + ", ".join(CASES))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", default=os.environ.get("CUPRIMS_RESULTS", "/tmp/cuprims-results"),
                        help="folder for profile-kernels.md and .json")
    args = parser.parse_args()
    rows: list[dict] = []
    for case in args.only.split(","):
        for work, variant, call in VARIANTS[case]():
            times = kernel_times(call, args.repeats)
            total = sum(count * mean for count, mean in times.values())
            for name, (count, mean) in sorted(times.items(), key=lambda kv: -kv[1][0] * kv[1][1]):
                rows.append({"work": work, "variant": variant, "kernel": name, "launches": count,
                             "mean_us": mean, "share": count * mean / total if total else 0.0})
            rows.append({"work": work, "variant": variant, "kernel": "(all kernels)", "launches": None,
                         "mean_us": total, "share": 1.0})
    lines = ["| work | variant | kernel | launches per call | mean us | share |", "|---|---|---|---|---|---|"]
    for r in rows:
        launches = "" if r["launches"] is None else f"{r['launches']:g}"
        kernel = r["kernel"].replace("|", "\\|")
        lines.append(f"| {r['work']} | {r['variant']} | `{kernel}` | {launches} | {r['mean_us']:.2f} | "
                     f"{r['share']:.3f} |")
    table = "\n".join(lines) + "\n"
    print(table)
    results = Path(args.out)
    results.mkdir(parents=True, exist_ok=True)
    (results / "profile-kernels.md").write_text(table)
    (results / "profile-kernels.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
