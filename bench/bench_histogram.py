"""Histogram benchmark: cuprims' histogram_even beside cuda.compute, CuPy and PyTorch, in one process.

Run on a GPU machine:  python bench/bench_histogram.py [--out DIR] [--log2n 28]
Writes bench/results/histogram.json and histogram.md (and copies to --out).

Work: 2^28 uint8 samples into 256 bins (cuprims, cuda.compute's make_histogram_even,
``cp.bincount``, ``torch.bincount``); 2^28 float32 samples into 256 even bins over [0, 1)
(cuprims, cuda.compute, ``torch.histc``, ``cp.histogram``); int32 samples into 1024 bins
(privatized counters in global memory); host time per call at n = 1024.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import bench_arguments, device_ms, host_us, result_rows, save_results  # noqa: E402



class _Histograms:
    """One even-bin histogram problem run by cuprims (object API and one-shot) and, where
    importable, cuda.compute's object API; both object APIs sized once, outside the timing."""

    def __init__(self, x, bins: int, lower, upper, ccomp):
        import cupy as cp
        import numpy as np

        import cuprims

        self.x, self.bins = x, bins
        self.hist = cp.empty(bins, cp.int32)
        self.args = dict(d_samples=x, d_histogram=self.hist, h_num_output_levels=np.array([bins + 1], np.int32),
                         h_lower_level=np.array([lower]), h_upper_level=np.array([upper]), num_samples=x.size)
        self.lower, self.upper = lower, upper
        self.obj = cuprims.make_histogram_even(**self.args)
        self.tmp = cp.empty(self.obj(temp_storage=None, **self.args), cp.uint8)
        self.cc_obj = self.cc_tmp = None
        if ccomp is not None:
            try:
                self.cc_obj = ccomp.make_histogram_even(**self.args)
                self.cc_tmp = cp.empty(max(1, self.cc_obj(temp_storage=None, **self.args)), cp.uint8)
            except Exception as exc:  # noqa: BLE001
                print("cuda.compute make_histogram_even failed:", exc)
                self.cc_obj = None

    def run(self) -> None:
        self.obj(temp_storage=self.tmp, **self.args)

    def one_shot(self) -> None:
        import cuprims

        cuprims.histogram_even(d_samples=self.x, d_histogram=self.hist, num_output_levels=self.bins + 1,
                               lower_level=self.lower, upper_level=self.upper, num_samples=self.x.size)

    def run_cc(self) -> None:
        self.cc_obj(temp_storage=self.cc_tmp, **self.args)

    def result(self):
        import cupy as cp

        self.run()
        return cp.asnumpy(self.hist)


def main() -> None:
    args = bench_arguments()

    import cupy as cp
    import numpy as np
    import torch

    try:
        import cuda.compute as ccomp
    except Exception as exc:  # noqa: BLE001
        ccomp = None
        print("cuda.compute not importable:", exc)

    n = 1 << args.log2n
    rows, add = result_rows(40, 36)

    # --- 2^28 uint8 samples into 256 bins -------------------------------------------------
    x = cp.random.randint(0, 256, n, dtype=cp.uint8)
    h = _Histograms(x, 256, np.int32(0), np.int32(256), ccomp)
    want = cp.asnumpy(cp.bincount(x, minlength=256))
    assert (h.result() == want).all(), "cuprims uint8 histogram differs from cp.bincount"
    work = f"uint8 2^{args.log2n} -> 256 bins"
    t = device_ms(h.run)
    add(work, "cuprims object API", t, "ms", None, f"{n / 1e9 / t:.2f} TB/s")
    add(work, "cuprims histogram_even", device_ms(h.one_shot), "ms")
    import cuprims
    with cuprims.settings.override(pdl=False):
        t_plain = device_ms(h.run)
    add(work, "cuprims object API, no PDL", t_plain, "ms", t_plain / t, "ratio = no-PDL/PDL")
    if h.cc_obj is not None:
        h.cc_obj(temp_storage=h.cc_tmp, **h.args)
        assert (cp.asnumpy(h.hist) == want).all(), "cuda.compute differs"
        t_cc = device_ms(h.run_cc)
        add(work, "cuda.compute make_histogram_even", t_cc, "ms", t_cc / t, "ratio = cuda.compute/cuprims")
    t_cupy = device_ms(lambda: cp.bincount(x, minlength=256))
    add(work, "CuPy cp.bincount", t_cupy, "ms", t_cupy / t, "ratio = CuPy/cuprims")
    xt = torch.as_tensor(x, device="cuda")
    try:
        t_torch = device_ms(lambda: torch.bincount(xt, minlength=256))
        add(work, "PyTorch torch.bincount", t_torch, "ms", t_torch / t, "ratio = torch/cuprims")
    except Exception as exc:  # noqa: BLE001
        print("torch.bincount on uint8 failed:", exc)
    del h

    # --- 2^28 float32 samples into 256 bins over [0, 1) -----------------------------------
    xf = cp.random.random(n, dtype=cp.float32)
    h = _Histograms(xf, 256, np.float32(0), np.float32(1), ccomp)
    ref = cp.asnumpy(cp.histogram(xf, bins=256, range=(0, 1))[0])
    got = h.result()
    assert got.sum() == n and np.abs(got - ref).sum() <= n // 10**5, "cuprims float32 histogram far from cupy's"
    work = f"float32 2^{args.log2n} -> 256 bins [0, 1)"
    t = device_ms(h.run)
    add(work, "cuprims object API", t, "ms", None, f"{n * 4 / 1e9 / t:.2f} TB/s")
    add(work, "cuprims histogram_even", device_ms(h.one_shot), "ms")
    if h.cc_obj is not None:
        t_cc = device_ms(h.run_cc)
        add(work, "cuda.compute make_histogram_even", t_cc, "ms", t_cc / t, "ratio = cuda.compute/cuprims")
    xft = torch.as_tensor(xf, device="cuda")
    t_torch = device_ms(lambda: torch.histc(xft, bins=256, min=0, max=1))
    add(work, "PyTorch torch.histc", t_torch, "ms", t_torch / t, "ratio = torch/cuprims")
    t_cupy = device_ms(lambda: cp.histogram(xf, bins=256, range=(0, 1)))
    add(work, "CuPy cp.histogram", t_cupy, "ms", t_cupy / t, "ratio = CuPy/cuprims")
    del h

    # --- int32 samples into 1024 bins: privatized counters in global memory ----------------
    xi = cp.random.randint(0, 1 << 20, n // 4, dtype=cp.int32)
    h = _Histograms(xi, 1024, np.int32(0), np.int32(1 << 20), ccomp)
    assert (h.result() == cp.asnumpy(cp.bincount(xi >> 10, minlength=1024))).all(), "cuprims int32 differs"
    work = f"int32 2^{args.log2n - 2} -> 1024 bins"
    t = device_ms(h.run)
    add(work, "cuprims object API", t, "ms", None, f"{xi.size * 4 / 1e9 / t:.2f} TB/s")
    if h.cc_obj is not None:
        t_cc = device_ms(h.run_cc)
        add(work, "cuda.compute make_histogram_even", t_cc, "ms", t_cc / t, "ratio = cuda.compute/cuprims")
    t_cupy = device_ms(lambda: cp.bincount(xi >> 10, minlength=1024))
    add(work, "CuPy cp.bincount(x >> 10)", t_cupy, "ms", t_cupy / t, "ratio = CuPy/cuprims")
    del h

    # --- host time per call, n = 1024 -------------------------------------------------------
    s = cp.random.randint(0, 256, 1024, dtype=cp.uint8)
    h = _Histograms(s, 256, np.int32(0), np.int32(256), ccomp)
    work = "host time per call, uint8 n=1024"
    add(work, "cuprims object API", host_us(h.run), "us")
    add(work, "cuprims histogram_even", host_us(h.one_shot), "us")
    if h.cc_obj is not None:
        add(work, "cuda.compute object API", host_us(h.run_cc), "us")
    st = torch.as_tensor(s, device="cuda")
    add(work, "CuPy cp.bincount", host_us(lambda: cp.bincount(s, minlength=256)), "us")
    try:
        add(work, "PyTorch torch.bincount", host_us(lambda: torch.bincount(st, minlength=256)), "us")
    except Exception as exc:  # noqa: BLE001
        print("torch.bincount on uint8 failed:", exc)

    save_results("histogram", rows, args.out, ccomp is not None)


if __name__ == "__main__":
    main()
