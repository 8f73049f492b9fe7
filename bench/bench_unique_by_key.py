"""Unique-by-key benchmark: 2^28 sorted int32 keys (about 2^20 distinct) with float32 items,
beside cuda.compute (OpKind.EQUAL_TO) and torch.unique_consecutive on the keys alone.

Run on a GPU machine:  python bench/bench_unique_by_key.py [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import bench_arguments, device_ms, result_rows, save_results  # noqa: E402



def main() -> None:
    args = bench_arguments()

    import cupy as cp
    import numpy as np
    import torch

    import cuprims
    from cuprims import OpKind

    n = 1 << args.log2n
    rows, add = result_rows(46, 40)
    keys = cp.sort(cp.random.randint(0, 1 << 20, n, dtype=cp.int32))
    items = cp.random.random(n, dtype=cp.float32)
    ko, io, count = cp.empty(n, np.int32), cp.empty(n, np.float32), cp.empty(1, np.int64)
    kw = dict(d_in_keys=keys, d_in_items=items, d_out_keys=ko, d_out_items=io, d_out_num_selected=count)
    u = cuprims.make_unique_by_key(op=OpKind.EQUAL_TO, **kw)
    tmp = cp.empty(u(temp_storage=None, num_items=n, **kw), np.uint8)
    t_ours = device_ms(lambda: u(temp_storage=tmp, num_items=n, **kw))
    m = int(count.get()[0])
    assert m == int(cp.unique(keys).size)
    heads = cp.flatnonzero(cp.concatenate([cp.ones(1, bool), keys[1:] != keys[:-1]]))
    assert bool((ko[:m] == keys[heads]).all()) and bool((io[:m] == items[heads]).all())  # each run's first item
    work = f"unique_by_key int32 keys + float32 items, 2^{args.log2n}"
    add(work, "cuprims OpKind.EQUAL_TO", t_ours, "ms", note=f"{m} runs")
    keys_t = torch.as_tensor(keys, device="cuda")
    t_torch = device_ms(lambda: torch.unique_consecutive(keys_t))
    add(work, "torch.unique_consecutive (keys only)", t_torch, "ms", t_torch / t_ours, "ratio = torch/cuprims")
    ccomp = None
    try:
        import cuda.compute as ccomp

        kw_cc = dict(kw)
        c = ccomp.make_unique_by_key(op=ccomp.OpKind.EQUAL_TO, **kw_cc)
        ctmp = cp.empty(max(1, c(temp_storage=None, op=ccomp.OpKind.EQUAL_TO, num_items=n, **kw_cc)), np.uint8)
        t_cc = device_ms(lambda: c(temp_storage=ctmp, op=ccomp.OpKind.EQUAL_TO, num_items=n, **kw_cc))
        add(work, "cuda.compute OpKind.EQUAL_TO", t_cc, "ms", t_cc / t_ours, "ratio = cuda.compute/cuprims (target >= 1.5)")
    except Exception as exc:  # noqa: BLE001
        print("cuda.compute unique_by_key failed:", exc)
    save_results("unique_by_key", rows, args.out, ccomp is not None)


if __name__ == "__main__":
    main()
