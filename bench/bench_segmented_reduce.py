"""Segmented reduction benchmark: cuprims beside CuPy, PyTorch and cuda.compute, in one process.

* 2^20 segments of 256 float32 (fixed-size offsets from iterators, and as arrays) against
  CuPy's and PyTorch's reshape-and-sum and cuda.compute's segmented reduce;
* 2^16 segments of irregular lengths (1..8192) against cuda.compute;
* one segment of 2^28 float32 (the sliced dispatch) against our plain reduce.

Run on a GPU machine:  python bench/bench_segmented_reduce.py [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import bench_arguments, device_ms, result_rows, save_results  # noqa: E402



def main() -> None:
    args = bench_arguments(log2n=None)

    import cupy as cp
    import numpy as np
    import torch

    import cuprims
    from cuprims import CountingIterator, OpKind, TransformIterator

    try:
        import cuda.compute as ccomp
    except Exception:  # noqa: BLE001
        ccomp = None
    rows, add = result_rows(46, 44)
    init = np.float32(0)

    def ours(x, out, ns, starts, ends, hint=None):
        r = cuprims.make_segmented_reduce(d_in=x, d_out=out, start_offsets_in=starts, end_offsets_in=ends,
                                          op=OpKind.PLUS, h_init=init)
        kw = dict(d_in=x, d_out=out, num_segments=ns, start_offsets_in=starts, end_offsets_in=ends, h_init=init,
                  max_segment_size=hint)
        tmp = cp.empty(r(temp_storage=None, **kw), np.uint8)
        return device_ms(lambda: r(temp_storage=tmp, **kw))

    def theirs(x, out, ns, starts, ends):
        h0 = np.zeros(1, np.float32)
        r = ccomp.make_segmented_reduce(d_in=x, d_out=out, start_offsets_in=starts, end_offsets_in=ends,
                                        op=ccomp.OpKind.PLUS, h_init=h0)
        kw = dict(d_in=x, d_out=out, num_segments=ns, start_offsets_in=starts, end_offsets_in=ends,
                  op=ccomp.OpKind.PLUS, h_init=h0)
        tmp = cp.empty(max(1, r(temp_storage=None, **kw)), np.uint8)
        return device_ms(lambda: r(temp_storage=tmp, **kw))

    # --- fixed-size segments ---------------------------------------------------------------
    ns, size = 1 << 20, 256
    work = f"segmented sum float32, 2^20 x {size}"
    x = cp.random.random(ns * size, dtype=cp.float32)
    out = cp.empty(ns, np.float32)
    starts_it = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * 256)
    ends_it = TransformIterator(CountingIterator(np.int64(1)), lambda i: i * 256)
    t_it = ours(x, out, ns, starts_it, ends_it, hint=size)
    assert bool(cp.allclose(out, x.reshape(ns, size).sum(axis=1), rtol=1e-4))
    offsets = cp.arange(0, ns * size + 1, size, dtype=cp.int64)
    t_arr = ours(x, out, ns, offsets[:-1], offsets[1:], hint=size)
    t_cupy = device_ms(lambda: x.reshape(ns, size).sum(axis=1, out=out))
    xt, outt = torch.as_tensor(x, device="cuda"), torch.as_tensor(out, device="cuda")
    t_torch = device_ms(lambda: torch.sum(xt.view(ns, size), dim=1, out=outt))
    add(work, "cuprims offsets from iterators (hint 256)", t_it, "ms", t_cupy / t_it,
        "ratio = CuPy/cuprims (target >= 1.0)")
    add(work, "cuprims offset arrays (hint 256)", t_arr, "ms", t_cupy / t_arr, "ratio = CuPy/cuprims")
    add(work, "CuPy x.reshape(-1, 256).sum(axis=1)", t_cupy, "ms")
    add(work, "PyTorch sum(dim=1)", t_torch, "ms", t_torch / t_it, "ratio = torch/cuprims")
    if ccomp is not None:
        try:
            t_cc = theirs(x, out, ns, offsets[:-1], offsets[1:])
            add(work, "cuda.compute offset arrays", t_cc, "ms", t_cc / t_arr, "ratio = cuda.compute/cuprims")
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute fixed-size segmented reduce failed:", exc)
    x = xt = outt = None  # free the 1 GiB before the next section

    # --- irregular segments --------------------------------------------------------------
    ns = 1 << 16
    work = "segmented sum float32, 2^16 irregular (1..8192)"
    lengths = np.random.default_rng(1).integers(1, 8193, ns)
    ends_h = np.cumsum(lengths).astype(np.int64)
    starts_h = ends_h - lengths
    x = cp.random.random(int(ends_h[-1]), dtype=cp.float32)
    out = cp.empty(ns, np.float32)
    starts, ends = cp.asarray(starts_h), cp.asarray(ends_h)
    t_irr = ours(x, out, ns, starts, ends)
    t_irr_hint = ours(x, out, ns, starts, ends, hint=8192)
    add(work, "cuprims (no hint)", t_irr, "ms")
    add(work, "cuprims (hint 8192)", t_irr_hint, "ms")
    if ccomp is not None:
        try:
            t_cc = theirs(x, out, ns, starts, ends)
            add(work, "cuda.compute", t_cc, "ms", t_cc / min(t_irr, t_irr_hint),
                "ratio = cuda.compute/cuprims (target >= 1.0)")
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute irregular segmented reduce failed:", exc)
    del x

    # --- one huge segment ---------------------------------------------------------------
    n = 1 << 28
    work = "one segment of 2^28 float32"
    x = cp.random.random(n, dtype=cp.float32)
    out = cp.empty(1, np.float32)
    t_one = ours(x, out, 1, cp.zeros(1, cp.int64), cp.full(1, n, cp.int64))
    plain = cuprims.make_reduce_into(d_in=x, d_out=out, op=OpKind.PLUS, h_init=init)
    tmp = cp.empty(plain(temp_storage=None, d_in=x, d_out=out, num_items=n, h_init=init), np.uint8)
    t_plain = device_ms(lambda: plain(temp_storage=tmp, d_in=x, d_out=out, num_items=n, h_init=init))
    add(work, "cuprims segmented_reduce (sliced)", t_one, "ms", t_plain / t_one, "ratio = plain reduce/this")
    add(work, "cuprims reduce_into (reference)", t_plain, "ms")

    save_results("segmented_reduce", rows, args.out, ccomp is not None)


if __name__ == "__main__":
    main()
