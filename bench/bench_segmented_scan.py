"""Segmented scans of float32 values beside what PyTorch and CuPy users write today and our
own plain scan (the floor for one pass over the data):

* 2^20 segments x 256 with int64 offset arrays (CuPy's default integer): against
  ``torch.cumsum(x.view(-1, 256), 1)`` and ``cupy.cumsum(x.reshape(-1, 256), axis=1)``;
* 2^16 irregular segments (1..8192 items), int64 offsets: against our plain inclusive
  scan of the same number of items;
* one segment of every item, and 2^24 segments x 16: against the plain scan.

Each ratio is the peer's figure over cuprims' (higher is better for cuprims), or cuprims'
over the plain scan (1.0: a segmented scan costs what a scan costs).

Run on a GPU machine:  python bench/bench_segmented_scan.py [--out DIR]
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

    rows, add = result_rows(52, 60)
    rng = np.random.default_rng(0)

    def plain_scan_ms(x, y):
        scan = cuprims.make_inclusive_scan(d_in=x, d_out=y, op=OpKind.PLUS)
        tmp = cp.empty(scan(temp_storage=None, d_in=x, d_out=y, op=OpKind.PLUS, init_value=None, num_items=x.size),
                       np.uint8)
        return device_ms(lambda: scan(temp_storage=tmp, d_in=x, d_out=y, op=OpKind.PLUS, init_value=None,
                                      num_items=x.size))

    def segmented_ms(x, y, offsets, check):
        kw = dict(d_in=x, d_out=y, start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:])
        s = cuprims.make_segmented_inclusive_scan(op=OpKind.PLUS, **kw)
        segments = offsets.size - 1
        tmp = cp.empty(s(temp_storage=None, num_segments=segments, **kw), np.uint8)
        call = lambda: s(temp_storage=tmp, num_segments=segments, **kw)  # noqa: E731
        call()
        check(y)
        return device_ms(call)

    def check_against_numpy(x, offsets, samples=64):
        host, o = cp.asnumpy(x), cp.asnumpy(offsets)
        picks = rng.integers(0, o.size - 1, samples)

        def check(y):
            got = cp.asnumpy(y)
            for s in picks:
                b, e = o[s], o[s + 1]
                assert np.allclose(got[b:e], np.cumsum(host[b:e], dtype=np.float64), rtol=1e-3, atol=1e-3), s
        return check

    # --- 2^20 x 256: the reshape-able case
    work = "segmented inclusive sum float32, 2^20 x 256"
    n = 1 << 28
    x = cp.random.random(n, dtype=cp.float32)
    y = cp.empty_like(x)
    offsets = cp.arange(0, n + 1, 256, dtype=cp.int64)
    t_ours = segmented_ms(x, y, offsets, check_against_numpy(x, offsets))
    add(work, "cuprims, int64 offset arrays", t_ours, "ms")
    xt = torch.as_tensor(x, device="cuda")
    t_torch = device_ms(lambda: torch.cumsum(xt.view(-1, 256), 1))
    add(work, "torch.cumsum(x.view(-1, 256), 1)", t_torch, "ms", t_torch / t_ours,
        "ratio = torch/cuprims (target >= 1.0)")
    t_cupy = device_ms(lambda: cp.cumsum(x.reshape(-1, 256), axis=1))
    add(work, "cupy.cumsum(x.reshape(-1, 256), axis=1)", t_cupy, "ms", t_cupy / t_ours, "ratio = cupy/cuprims")
    t_plain = plain_scan_ms(x, y)
    add(work, "cuprims plain inclusive_scan (the floor)", t_plain, "ms", t_ours / t_plain,
        "ratio = segmented/plain")

    # --- 2^16 irregular segments
    lengths = rng.integers(1, 8193, 1 << 16)
    offsets = cp.asarray(np.r_[0, np.cumsum(lengths)].astype(np.int64))
    m = int(lengths.sum())
    work = f"segmented inclusive sum float32, 2^16 irregular (1..8192), {m} items"
    xi, yi = x[:m], y[:m]
    t_irr = segmented_ms(xi, yi, offsets, check_against_numpy(xi, offsets))
    add(work, "cuprims, int64 offset arrays", t_irr, "ms")
    t_plain_irr = plain_scan_ms(xi, yi)
    add(work, "cuprims plain inclusive_scan", t_plain_irr, "ms", t_irr / t_plain_irr,
        "ratio = segmented/plain (target <= 1.2)")

    # --- one segment, and 2^24 x 16
    for label, step in (("one segment of 2^28", n), ("2^24 x 16", 16)):
        work = f"segmented inclusive sum float32, {label}"
        offsets = cp.arange(0, n + 1, step, dtype=cp.int64)
        t = segmented_ms(x, y, offsets, check_against_numpy(x, offsets, 1 if step == n else 64))
        add(work, "cuprims, int64 offset arrays", t, "ms")
        add(work, "cuprims plain inclusive_scan", t_plain, "ms", t / t_plain, "ratio = segmented/plain")
    save_results("segmented_scan", rows, args.out, False)


if __name__ == "__main__":
    main()
