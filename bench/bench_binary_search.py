"""Binary search benchmark: cuprims lower/upper bound beside PyTorch, CuPy and cuda.compute.

Work: 2^24 random int32 values looked up in 2^28 sorted int32 (1 GiB), the case where
almost every deep probe misses L2. Also reports the two launch-time settings swept over a
few values, so their defaults can be checked on a device: `hot_levels` (the kernel reads
the top levels of the search tree through the caching path and deeper levels
evict-first) and the prefetch window (the last levels' lines are prefetched together).

Run on a GPU machine:  python bench/bench_binary_search.py [--out DIR] [--log2n 28] [--log2m 24]
Writes bench/results/binary_search.json and binary_search.md (and copies to --out).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import result_rows, add_extra_path, device_ms, host_us, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _dist_version(name: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # noqa: BLE001
        return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--log2n", type=int, default=28, help="log2 of the sorted data size")
    parser.add_argument("--log2m", type=int, default=24, help="log2 of the number of values")
    args = parser.parse_args()
    add_extra_path()

    import cupy as cp
    import numpy as np
    import torch

    import cuprims
    from cuprims.algorithms.binary_search.api import (_l2_bytes, hot_levels, lower_bound, make_lower_bound,
                                                      make_upper_bound)

    try:
        import cuda.compute as ccomp
    except Exception as exc:  # noqa: BLE001
        ccomp = None
        print("cuda.compute not importable:", exc)


    rows, add = result_rows(44, 40)

    n, m = 1 << args.log2n, 1 << args.log2m
    rng = cp.random.default_rng(1)
    data = cp.sort(rng.integers(-(1 << 31), (1 << 31) - 1, n, dtype=cp.int32))
    values = rng.integers(-(1 << 31), (1 << 31) - 1, m, dtype=cp.int32)
    out64 = cp.empty(m, cp.int64)
    outu64 = cp.empty(m, cp.uint64)
    cp.cuda.Device().synchronize()
    work = f"lower_bound 2^{args.log2m} int32 in 2^{args.log2n}"

    dt = torch.as_tensor(data, device="cuda")
    vt = torch.as_tensor(values, device="cuda")
    t_torch = device_ms(lambda: torch.searchsorted(dt, vt), inner=5, repeats=9)
    want = cp.searchsorted(data, values, side="left")

    lower = make_lower_bound(d_data=data, d_values=values, d_out=out64)
    t_lower = device_ms(lambda: lower(d_data=data, num_items=n, d_values=values, num_values=m, d_out=out64,
                                      comp=None), inner=5, repeats=9)
    assert bool(cp.array_equal(out64, want)), "cuprims lower_bound differs from cupy.searchsorted"
    device = cp.cuda.Device().id
    default_hot = 64  # every level through the cache (binary_search._ALL_LEVELS)
    l2_hot = hot_levels(n, 4, _l2_bytes(device))  # the L2-sized alternative that lost on the H200
    add(work, "cuprims lower_bound (int64 out)", t_lower, "ms", t_torch / t_lower,
        f"hot_levels=all, window={lower._window_bytes} B; ratio = torch/cuprims (target >= 1.0)")
    lower_u = make_lower_bound(d_data=data, d_values=values, d_out=outu64)
    t_lower_u = device_ms(lambda: lower_u(d_data=data, num_items=n, d_values=values, num_values=m, d_out=outu64,
                                          comp=None), inner=5, repeats=9)
    add(work, "cuprims lower_bound (uint64 out)", t_lower_u, "ms", t_torch / t_lower_u, "ratio = torch/cuprims")
    add(work, "PyTorch torch.searchsorted", t_torch, "ms")
    t_cupy = device_ms(lambda: cp.searchsorted(data, values), inner=5, repeats=9)
    add(work, "CuPy cp.searchsorted", t_cupy, "ms", t_cupy / t_lower, "ratio = CuPy/cuprims")
    if ccomp is not None:
        try:
            c_obj = ccomp.make_lower_bound(d_data=data, d_values=values, d_out=outu64)
            t_cc = device_ms(lambda: c_obj(d_data=data, num_items=n, d_values=values, num_values=m, d_out=outu64,
                                           comp=None), inner=5, repeats=9)
            add(work, "cuda.compute lower_bound", t_cc, "ms", t_cc / t_lower, "ratio = cuda.compute/cuprims")
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute lower_bound failed:", exc)

    # the cached-levels setting, swept (same build; only a launch argument changes)
    work_sweep = f"lower_bound 2^{args.log2m} in 2^{args.log2n}, hot_levels"
    for hot in sorted({0, 8, 14, 17, l2_hot - 1, l2_hot, l2_hot + 1, l2_hot + 3, default_hot}):
        lower._hot_levels_override = hot
        t = device_ms(lambda: lower(d_data=data, num_items=n, d_values=values, num_values=m, d_out=out64, comp=None),
                      inner=5, repeats=9)
        add(work_sweep, f"hot_levels={hot}" + (" (default)" if hot == default_hot else ""), t, "ms", t_torch / t,
            "ratio = torch/cuprims")
    lower._hot_levels_override = None
    work_sweep = f"lower_bound 2^{args.log2m} in 2^{args.log2n}, prefetch window"
    default_window = lower._window_bytes
    for window in (0, 64, 128, 256, 512, 1024):
        lower._window_bytes = window
        t = device_ms(lambda: lower(d_data=data, num_items=n, d_values=values, num_values=m, d_out=out64, comp=None),
                      inner=5, repeats=9)
        add(work_sweep, f"window={window} bytes" + (" (default)" if window == default_window else ""), t, "ms",
            t_torch / t, "ratio = torch/cuprims")
    lower._window_bytes = default_window

    upper = make_upper_bound(d_data=data, d_values=values, d_out=out64)
    t_upper = device_ms(lambda: upper(d_data=data, num_items=n, d_values=values, num_values=m, d_out=out64,
                                      comp=None), inner=5, repeats=9)
    t_torch_r = device_ms(lambda: torch.searchsorted(dt, vt, right=True), inner=5, repeats=9)
    work = f"upper_bound 2^{args.log2m} int32 in 2^{args.log2n}"
    add(work, "cuprims upper_bound (int64 out)", t_upper, "ms", t_torch_r / t_upper, "ratio = torch/cuprims")
    add(work, "PyTorch torch.searchsorted(right=True)", t_torch_r, "ms")
    assert bool(cp.array_equal(out64, cp.searchsorted(data, values, side="right")))

    # sorted values (the easy case for caches)
    svalues = cp.sort(values)
    svt = torch.as_tensor(svalues, device="cuda")
    work = f"lower_bound 2^{args.log2m} sorted int32 values in 2^{args.log2n}"
    t_sorted = device_ms(lambda: lower(d_data=data, num_items=n, d_values=svalues, num_values=m, d_out=out64,
                                       comp=None), inner=5, repeats=9)
    t_torch_s = device_ms(lambda: torch.searchsorted(dt, svt), inner=5, repeats=9)
    add(work, "cuprims lower_bound", t_sorted, "ms", t_torch_s / t_sorted, "ratio = torch/cuprims")
    add(work, "PyTorch torch.searchsorted", t_torch_s, "ms")

    # values from iterators, against materialising them first (cupy) and searching an array
    work = f"lower_bound 2^{args.log2m} values from an iterator in 2^{args.log2n}"
    stride = (1 << 32) // m
    start = -(1 << 31)
    counting = cuprims.TransformIterator(cuprims.CountingIterator(np.int32(0)),
                                         lambda i: i * stride - 2147483648, np.int32)
    it_search = make_lower_bound(d_data=data, d_values=counting, d_out=out64)
    t_it = device_ms(lambda: it_search(d_data=data, num_items=n, d_values=counting, num_values=m, d_out=out64,
                                       comp=None), inner=5, repeats=9)
    grid_values = (cp.arange(m, dtype=cp.int64) * stride + start).astype(cp.int32)
    assert bool(cp.array_equal(out64, cp.searchsorted(data, grid_values))), "iterator values differ"
    gvt = torch.as_tensor(grid_values, device="cuda")
    t_torch_grid = device_ms(lambda: torch.searchsorted(dt, torch.arange(m, device="cuda", dtype=torch.int64)
                                                        .mul_(stride).add_(start).to(torch.int32)),
                             inner=5, repeats=9)
    t_torch_grid_only = device_ms(lambda: torch.searchsorted(dt, gvt), inner=5, repeats=9)
    add(work, "cuprims TransformIterator(CountingIterator)", t_it, "ms", t_torch_grid / t_it,
        "ratio = torch (arange + searchsorted)/cuprims")
    add(work, "PyTorch arange*stride+start, searchsorted", t_torch_grid, "ms")
    add(work, "PyTorch searchsorted of the materialised values", t_torch_grid_only, "ms")

    # smaller range that fits in L2
    small_n = 1 << 20
    work = f"lower_bound 2^{args.log2m} int32 in 2^20 (fits in L2)"
    t_small = device_ms(lambda: lower(d_data=data, num_items=small_n, d_values=values, num_values=m, d_out=out64,
                                      comp=None), inner=5, repeats=9)
    dts = dt[:small_n]
    t_torch_small = device_ms(lambda: torch.searchsorted(dts, vt), inner=5, repeats=9)
    add(work, "cuprims lower_bound", t_small, "ms", t_torch_small / t_small, "ratio = torch/cuprims")
    add(work, "PyTorch torch.searchsorted", t_torch_small, "ms")

    # host time per call
    d_small = cp.arange(1024, dtype=cp.int32)
    v_small = cp.arange(256, dtype=cp.int32)
    o_small = cp.empty(256, cp.int64)
    s_obj = make_lower_bound(d_data=d_small, d_values=v_small, d_out=o_small)
    work = "host time per call, 256 values in 1024"
    add(work, "cuprims object API", host_us(lambda: s_obj(d_data=d_small, num_items=1024, d_values=v_small,
                                                          num_values=256, d_out=o_small, comp=None)), "us")
    add(work, "cuprims lower_bound", host_us(lambda: lower_bound(d_data=d_small, num_items=1024, d_values=v_small,
                                                                 num_values=256, d_out=o_small)), "us")
    dst, vst = torch.as_tensor(d_small, device="cuda"), torch.as_tensor(v_small, device="cuda")
    add(work, "PyTorch torch.searchsorted", host_us(lambda: torch.searchsorted(dst, vst)), "us")

    extra = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
             "L2 bytes": _l2_bytes(device), "cupy": cp.__version__, "torch": torch.__version__,
             "cuprims": cuprims.__version__, "numpy": np.__version__,
             "cuda.compute": _dist_version("cuda-cccl") if ccomp else None}
    dirs = [ROOT / "bench" / "results"]
    if args.out:
        dirs.append(Path(args.out))
    print(write_results("binary_search", rows, extra, dirs))


if __name__ == "__main__":
    main()
