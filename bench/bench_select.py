"""Select benchmark: the even values of 2^28 int32, beside PyTorch's x[x % 2 == 0], CuPy's
x[x % 2 == 0] and cuda.compute's select, in one process.

Run on a GPU machine:  python bench/bench_select.py [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import bench_arguments, device_ms, result_rows, save_results  # noqa: E402



def even(v):
    return v % 2 == 0


def main() -> None:
    args = bench_arguments()

    import cupy as cp
    import numpy as np
    import torch

    import cuprims

    n = 1 << args.log2n
    rows, add = result_rows(40, 40)
    x = cp.random.randint(0, 1 << 30, n, dtype=cp.int32)
    y, count = cp.empty(n, np.int32), cp.empty(1, np.int64)
    s = cuprims.make_select(d_in=x, d_out=y, d_num_selected_out=count, cond=even)
    tmp = cp.empty(s(temp_storage=None, d_in=x, d_out=y, d_num_selected_out=count, num_items=n), np.uint8)
    t_ours = device_ms(lambda: s(temp_storage=tmp, d_in=x, d_out=y, d_num_selected_out=count, cond=even, num_items=n))
    assert int(count.get()[0]) == int((x % 2 == 0).sum())
    work = f"select even int32, 2^{args.log2n}"
    add(work, "cuprims Python predicate", t_ours, "ms", note=f"{n * 4 * 1.5 / t_ours / 1e9:.2f} TB/s (r + w/2)")
    xt = torch.as_tensor(x, device="cuda")
    t_torch = device_ms(lambda: xt[xt % 2 == 0])
    add(work, "PyTorch x[x % 2 == 0]", t_torch, "ms", t_torch / t_ours, "ratio = torch/cuprims (target >= 3.0)")
    t_cupy = device_ms(lambda: x[x % 2 == 0])
    add(work, "CuPy x[x % 2 == 0]", t_cupy, "ms", t_cupy / t_ours, "ratio = cupy/cuprims")
    ccomp = None
    try:
        import cuda.compute as ccomp

        c = ccomp.make_select(d_in=x, d_out=y, d_num_selected_out=count, cond=even)
        ctmp = cp.empty(max(1, c(temp_storage=None, d_in=x, d_out=y, d_num_selected_out=count, cond=even,
                                 num_items=n)), np.uint8)
        t_cc = device_ms(lambda: c(temp_storage=ctmp, d_in=x, d_out=y, d_num_selected_out=count, cond=even,
                                   num_items=n))
        add(work, "cuda.compute Python predicate", t_cc, "ms", t_cc / t_ours, "ratio = cuda.compute/cuprims")
    except Exception as exc:  # noqa: BLE001
        print("cuda.compute select failed:", exc)
    save_results("select", rows, args.out, ccomp is not None)


if __name__ == "__main__":
    main()
