"""Before/after: the main device figures and host time per call of two source trees,
measured in one run on one GPU.

A restructuring must keep every figure. This script runs the same public-API workloads
against two trees (``--before DIR`` and ``--after DIR``, each a folder holding
``src/cuprims``), alternating fresh processes (before, after, before, after, ...) so that
clock drift and thermal state fall on both alike, and reports, per workload, the median
over rounds of each tree's median and the ratio after/before.

    git archive layout-before src | tar -x -C .before      # the tree to compare with
    python bench/compare_trees.py --before .before --after . --out /tmp/res

Only public names are used (``cuprims.make_*``, ``cuprims.coop.block``), so both trees run
the same code here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import device_ms, host_us, write_results  # noqa: E402

N = 1 << 28


def _workloads() -> list[tuple[str, str, Callable[[], Any]]]:
    """(work, unit, zero-argument call) for every figure compared."""
    import cupy as cp
    import numpy as np

    import cuprims
    from cuprims import OpKind

    rng = np.random.default_rng(0)
    out: list[tuple[str, str, Callable[[], Any]]] = []

    def obj(maker: Callable[..., Any], build: dict[str, Any], call: dict[str, Any]) -> Callable[[], Any]:
        o = maker(**build)
        tmp = cp.empty(max(1, o(temp_storage=None, **call)), np.uint8)
        return lambda: o(temp_storage=tmp, **call)

    x = cp.asarray(rng.random(N, dtype=np.float32))
    s = cp.empty(1, np.float32)
    h0 = np.float32(0)
    red = obj(cuprims.make_reduce_into, dict(d_in=x, d_out=s, op=OpKind.PLUS, h_init=h0),
              dict(d_in=x, d_out=s, num_items=N, h_init=h0))
    out.append(("reduce sum float32 2^28", "ms", red))

    xi = cp.asarray(rng.integers(0, 100, N, dtype=np.int32))
    yi = cp.empty_like(xi)
    i0 = np.int32(0)
    out.append(("inclusive scan int32 2^28", "ms", obj(
        cuprims.make_inclusive_scan, dict(d_in=xi, d_out=yi, op=OpKind.PLUS, init_value=None),
        dict(d_in=xi, d_out=yi, op=OpKind.PLUS, num_items=N, init_value=None))))
    out.append(("exclusive scan int32 2^28", "ms", obj(
        cuprims.make_exclusive_scan, dict(d_in=xi, d_out=yi, op=OpKind.PLUS, init_value=i0),
        dict(d_in=xi, d_out=yi, op=OpKind.PLUS, num_items=N, init_value=i0))))

    y = cp.empty_like(x)
    ut = cuprims.make_unary_transform(d_in=x, d_out=y, op=OpKind.NEGATE)
    out.append(("unary transform negate float32 2^28", "ms", lambda: ut(d_in=x, d_out=y, num_items=N)))

    keys = cp.asarray(rng.integers(0, 1 << 32, N, dtype=np.uint32))
    kout = cp.empty_like(keys)
    out.append(("radix sort uint32 keys 2^28", "ms", obj(
        cuprims.make_radix_sort, dict(d_in_keys=keys, d_out_keys=kout, d_in_values=None, d_out_values=None,
                                      order=cuprims.SortOrder.ASCENDING),
        dict(d_in_keys=keys, d_out_keys=kout, d_in_values=None, d_out_values=None, num_items=N))))

    nm = 1 << 26
    mk = cp.asarray(rng.integers(-(1 << 31), 1 << 31, nm, dtype=np.int32))
    mout = cp.empty_like(mk)
    out.append(("merge sort int32 2^26", "ms", obj(
        cuprims.make_merge_sort, dict(d_in_keys=mk, d_in_values=None, d_out_keys=mout, d_out_values=None,
                                      op=OpKind.LESS),
        dict(d_in_keys=mk, d_in_values=None, d_out_keys=mout, d_out_values=None, op=OpKind.LESS, num_items=nm))))

    segs, seg = 1 << 16, 4096
    sk = cp.asarray(rng.integers(-(1 << 31), 1 << 31, segs * seg, dtype=np.int32))
    so = cp.empty_like(sk)
    offs = cp.arange(0, segs * seg + 1, seg, dtype=np.int32)
    out.append(("segmented sort 2^16 x 4096 int32", "ms", obj(
        cuprims.make_segmented_sort, dict(d_in_keys=sk, d_out_keys=so, d_in_values=None, d_out_values=None,
                                          start_offsets_in=offs[:-1], end_offsets_in=offs[1:],
                                          order=cuprims.SortOrder.ASCENDING),
        dict(d_in_keys=sk, d_out_keys=so, d_in_values=None, d_out_values=None, num_items=segs * seg,
             num_segments=segs, start_offsets_in=offs[:-1], end_offsets_in=offs[1:]))))

    # many short segments: where the segments' classification is a tenth of the time, with
    # CuPy's default int64 offsets beside int32 ones
    for segs, seg in ((1 << 22, 16), (1 << 20, 64)):
        for odt in (np.int64, np.int32):
            offs = cp.arange(0, segs * seg + 1, seg, dtype=odt)
            name = f"segmented sort 2^{segs.bit_length() - 1} x {seg} int32, {np.dtype(odt).name} offsets"
            out.append((name, "ms", obj(
                cuprims.make_segmented_sort, dict(d_in_keys=sk, d_out_keys=so, d_in_values=None, d_out_values=None,
                                                  start_offsets_in=offs[:-1], end_offsets_in=offs[1:],
                                                  order=cuprims.SortOrder.ASCENDING),
                dict(d_in_keys=sk, d_out_keys=so, d_in_values=None, d_out_values=None, num_items=segs * seg,
                     num_segments=segs, start_offsets_in=offs[:-1], end_offsets_in=offs[1:]))))

    count = cp.empty(1, np.int64)
    ys = cp.empty_like(xi)

    def even(v):
        return v % 2 == 0

    out.append(("select even int32 2^28", "ms", obj(
        cuprims.make_select, dict(d_in=xi, d_out=ys, d_num_selected_out=count, cond=even),
        dict(d_in=xi, d_out=ys, d_num_selected_out=count, cond=even, num_items=N))))

    samples = cp.asarray(rng.integers(0, 256, N, dtype=np.uint8))
    hist = cp.empty(256, np.int32)
    hargs = dict(d_samples=samples, d_histogram=hist, h_num_output_levels=257, h_lower_level=np.int32(0),
                 h_upper_level=np.int32(256), num_samples=N)
    out.append(("histogram even uint8 256 bins 2^28", "ms", obj(cuprims.make_histogram_even, hargs, hargs)))

    out.append(("coop block sum float32 2^28", "ms", _coop_block_sum(x)))

    small = x[:1024]
    rs = cuprims.make_reduce_into(d_in=small, d_out=s, op=OpKind.PLUS, h_init=h0)
    rtmp = cp.empty(max(1, rs(temp_storage=None, d_in=small, d_out=s, num_items=1024, h_init=h0)), np.uint8)
    out.append(("host: reduce object API n=1024", "us",
                lambda: rs(temp_storage=rtmp, d_in=small, d_out=s, num_items=1024, h_init=h0)))
    out.append(("host: reduce_into one-shot n=1024", "us",
                lambda: cuprims.reduce_into(d_in=small, d_out=s, num_items=1024, op=OpKind.PLUS, h_init=h0)))
    si, so_ = xi[:1024], yi[:1024]
    ss = cuprims.make_inclusive_scan(d_in=si, d_out=so_, op=OpKind.PLUS, init_value=None)
    stmp = cp.empty(max(1, ss(temp_storage=None, d_in=si, d_out=so_, op=OpKind.PLUS, num_items=1024, init_value=None)),
                    np.uint8)
    out.append(("host: inclusive scan object API n=1024", "us",
                lambda: ss(temp_storage=stmp, d_in=si, d_out=so_, op=OpKind.PLUS, num_items=1024, init_value=None)))
    return out


def _coop_block_sum(x: Any) -> Callable[[], Any]:
    """A numba kernel: each block loads tiles with ``coop.block.make_load``, adds them, and
    reduces with ``coop.block.make_sum``; one atomic per block."""
    import cupy as cp
    import numba
    import numpy as np
    from numba import cuda

    from cuprims import coop

    threads, items = 256, 16
    tile = threads * items
    f4 = numba.float32
    load = coop.block.make_load(f4, threads, items, "direct")
    block_sum = coop.block.make_sum(f4, threads, items)

    @cuda.jit(link=list({id(f): f for p in (load, block_sum) for f in p.files}.values()))
    def kernel(data, result, ntiles):
        acc = cuda.local.array(items, f4)
        buf = cuda.local.array(items, f4)
        for i in range(items):
            acc[i] = 0
        t = numba.int64(cuda.blockIdx.x)
        while t < ntiles:
            load(data[t * tile:], buf)
            for i in range(items):
                acc[i] += buf[i]
            t += cuda.gridDim.x
        total = block_sum(acc)
        if cuda.threadIdx.x == 0:
            cuda.atomic.add(result, 0, total)

    out = cp.zeros(1, np.float32)
    ntiles = x.size // tile
    blocks = cp.cuda.Device().attributes["MultiProcessorCount"] * 8
    launch = kernel[blocks, threads]
    return lambda: launch(x, out, ntiles)


def child() -> None:
    """Measure every workload in this process (the tree is whatever ``cuprims`` imports)."""
    import cuprims

    rows = []
    for work, unit, fn in _workloads():
        fn()      # build and load before timing
        value = device_ms(fn, inner=10, repeats=11) if unit == "ms" else host_us(fn)
        rows.append({"work": work, "unit": unit, "value": value})
        print(f"  {work:42s} {value:9.4f} {unit}", file=sys.stderr, flush=True)
    print(json.dumps({"cuprims": cuprims.__file__, "rows": rows}))


def run_tree(tree: Path, env: dict[str, str]) -> dict[str, Any]:
    e = dict(env, PYTHONPATH=os.pathsep.join([str(tree / "src"), env.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, __file__, "--child"], env=e, stdout=subprocess.PIPE, text=True)
    if proc.returncode:
        raise SystemExit(f"{tree}: the measuring process failed ({proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--before", type=Path, default=Path(".before"))
    parser.add_argument("--after", type=Path, default=Path("."))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.child:
        child()
        return 0
    env = dict(os.environ)
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for r in range(args.rounds):
        for name, tree in (("before", args.before), ("after", args.after)):
            print(f"round {r + 1}: {name} ({tree})", file=sys.stderr, flush=True)
            result = run_tree(tree.resolve(), env)
            assert Path(result["cuprims"]).resolve().is_relative_to(tree.resolve()), result["cuprims"]
            runs[name].append(result)
    rows, worst = [], 0.0
    works = [(r["work"], r["unit"]) for r in runs["after"][0]["rows"]]
    for work, unit in works:
        med = {name: statistics.median(next(x["value"] for x in run["rows"] if x["work"] == work)
                                       for run in runs[name]) for name in runs}
        ratio = med["after"] / med["before"]
        worst = max(worst, ratio)
        rows.append({"work": work, "variant": "cuprims before", "value": med["before"], "unit": unit, "ratio": None,
                     "note": ""})
        rows.append({"work": work, "variant": "cuprims after", "value": med["after"], "unit": unit, "ratio": ratio,
                     "note": "ratio = after/before (lower is better)"})
    import cupy as cp

    extra = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "rounds": args.rounds,
             "before": str(args.before), "after": str(args.after), "worst ratio": f"{worst:.3f}"}
    dirs = [HERE / "results"] + ([Path(args.out)] if args.out else [])
    print(write_results("compare-trees", rows, extra, dirs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
