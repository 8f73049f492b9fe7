"""Timing helpers shared by the benchmarks: CUDA-event medians and host time per call."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable


def add_extra_path() -> None:
    """Make cuda.compute importable when the runner installed it in a side directory."""
    extra = os.environ.get("CUPRIMS_BENCH_EXTRA_PATH")
    if extra and extra not in sys.path:
        sys.path.append(extra)


def device_ms(fn: Callable[[], Any], *, inner: int = 20, repeats: int = 15, warmup: int = 3) -> float:
    """Median device milliseconds per call: events around `inner` back-to-back calls."""
    import cupy as cp

    for _ in range(warmup):
        fn()
    cp.cuda.get_current_stream().synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    samples = []
    for _ in range(repeats):
        start.record()
        for _ in range(inner):
            fn()
        stop.record()
        stop.synchronize()
        samples.append(cp.cuda.get_elapsed_time(start, stop) / inner)
    return statistics.median(samples)


def sized_call(obj: Any, **kw: Any) -> Callable[[], Any]:
    """A call of algorithm object ``obj`` (cuprims' or cuda.compute's) with ``kw``, its
    temporary storage sized once by the ``temp_storage=None`` query, outside any timing."""
    import cupy as cp
    import numpy as np

    tmp = cp.empty(max(1, obj(temp_storage=None, **kw)), np.uint8)
    return lambda: obj(temp_storage=tmp, **kw)


def read_ms(x: Any) -> float:
    """Device milliseconds of one read of device array ``x``: our max-reduce of it, the floor
    of an algorithm that reads ``x`` once."""
    import cupy as cp

    import cuprims

    largest, op, init = cp.empty(1, x.dtype), cuprims.OpKind.MAXIMUM, x.dtype.type(0)
    read = cuprims.make_reduce_into(d_in=x, d_out=largest, op=op, h_init=init)
    return device_ms(sized_call(read, d_in=x, d_out=largest, op=op, num_items=x.size, h_init=init))


def host_us(fn: Callable[[], Any], *, calls: int = 200, repeats: int = 40) -> float:
    """Median host microseconds per call.

    Calls go in bursts of ``calls`` with the device drained between bursts (not timed):
    a longer burst fills the launch queue, after which every launch waits for the GPU
    and the figure becomes the GPU's kernel rate, not the host's cost per call."""
    import cupy as cp

    for _ in range(100):
        fn()
    cp.cuda.Device().synchronize()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
        cp.cuda.Device().synchronize()
    return statistics.median(samples)


def result_rows(work_width: int = 40, variant_width: int = 40) -> tuple[list[dict[str, Any]], Callable[..., None]]:
    """A list of result rows and ``add(work, variant, value, unit, ratio=None, note="")``,
    which appends a row and prints it as it is measured."""
    rows: list[dict[str, Any]] = []

    def add(work: str, variant: str, value: float, unit: str, ratio: float | None = None, note: str = "") -> None:
        rows.append({"work": work, "variant": variant, "value": value, "unit": unit, "ratio": ratio, "note": note})
        shown = "" if ratio is None else f"{ratio:.3f}"
        print(f"{work:{work_width}s} {variant:{variant_width}s} {value:10.4f} {unit:6s} {shown} {note}", flush=True)

    return rows, add


def dist_version(name: str) -> str | None:
    """Installed version of distribution ``name``, or None."""
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # noqa: BLE001
        return None


def _chart(name: str, rows: list[dict[str, Any]], path: Path) -> None:
    """One horizontal bar panel per kind of work (its variants' values), as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    works: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        works.setdefault(r["work"], []).append(r)
    fig, axes = plt.subplots(len(works), 1, figsize=(10, 1.0 + sum(0.35 * len(v) + 0.6 for v in works.values())),
                             squeeze=False)
    for ax, (work, group) in zip(axes[:, 0], works.items()):
        labels = [g["variant"] for g in group]
        values = [g["value"] for g in group]
        colors = ["tab:green" if lab.startswith("cuprims") else "tab:gray" for lab in labels]
        ax.barh(range(len(values)), values, color=colors)
        ax.set_yticks(range(len(values)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"{work} ({group[0]['unit']}, lower is better)", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle(name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_results(name: str, rows: list[dict[str, Any]], extra: dict[str, Any], out_dirs: list[Path]) -> str:
    """Write JSON, a markdown table and (where matplotlib is installed) a PNG chart;
    returns the markdown."""
    lines = [f"# {name}", ""]
    for key, value in extra.items():
        lines.append(f"- {key}: {value}")
    lines += ["", "| work | variant | value | unit | ratio | note |", "|---|---|---|---|---|---|"]
    for r in rows:
        ratio = r.get("ratio")
        lines.append(f"| {r['work']} | {r['variant']} | {r['value']:.4g} | {r['unit']} | "
                     f"{'' if ratio is None else f'{ratio:.3f}'} | {r.get('note', '')} |")
    md = "\n".join(lines) + "\n"
    payload = {"name": name, "rows": rows, **extra}
    for d in out_dirs:
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{name}.json").write_text(json.dumps(payload, indent=2, default=str))
        (d / f"{name}.md").write_text(md)
        try:
            _chart(name, rows, d / f"{name}.png")
        except ImportError:
            print("matplotlib is not installed (pip install -e '.[bench]'): no chart", file=sys.stderr)
    return md


RESULTS = Path(__file__).resolve().parent / "results"


def bench_arguments(log2n: int | None = 28) -> argparse.Namespace:
    """A benchmark's command line (``--out DIR``, and ``--log2n`` when it takes a size), with
    cuda.compute's side directory put on the path."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    if log2n is not None:
        parser.add_argument("--log2n", type=int, default=log2n)
    args = parser.parse_args()
    add_extra_path()
    return args


def save_results(name: str, rows: list[dict[str, Any]], out: str | None, cuda_compute_ran: bool) -> None:
    """Write the results to bench/results (and to ``out``) with the device and the peers'
    versions beside them (JAX's where the benchmark imported it), and print the markdown table."""
    import cupy as cp
    import torch

    extra = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "cupy": cp.__version__,
             "torch": torch.__version__, "cuda.compute": dist_version("cuda-cccl") if cuda_compute_ran else None}
    if "jax" in sys.modules:
        extra["jax"] = dist_version("jax")
    print(write_results(name, rows, extra, [RESULTS] + ([Path(out)] if out else [])))


def argmax_pieces():
    """What an argmax through ``ZipIterator(x, CountingIterator(0))`` reduces with: the
    (value, index) struct, the max-op keeping numpy's first index on ties, and its
    initial value."""
    import numpy as np

    import cuprims

    pair = cuprims.gpu_struct({"value": np.float32, "index": np.int64})

    def better(a, b):
        if a[0] > b[0] or (a[0] == b[0] and a[1] < b[1]):
            return a
        return b

    return pair, better, pair(-np.inf, np.iinfo(np.int64).max)
