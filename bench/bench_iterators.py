"""Iterator benchmark: fused work through iterators beside PyTorch (eager and compiled),
CuPy and cuda.compute, in one process.

* sum of squares: reduce over TransformIterator(x, v * v) against our plain sum of x and
  torch's (x * x).sum(), eager and torch.compile;
* sum of 0..n-1 as int64 over a CountingIterator (n = 2^30) against cuda.compute's;
* argmax through ZipIterator(x, CountingIterator(0)) and a struct max-op against
  torch.argmax and cupy.argmax (same index on ties);
* unary transform writing through a TransformOutputIterator against the same transform
  into a plain array.

Run on a GPU machine:  python bench/bench_iterators.py [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import argmax_pieces, bench_arguments, device_ms, result_rows, save_results  # noqa: E402



def main() -> None:
    args = bench_arguments()

    import cupy as cp
    import numpy as np
    import torch

    import cuprims
    from cuprims import CountingIterator, OpKind, TransformIterator, TransformOutputIterator, ZipIterator

    try:
        import cuda.compute as ccomp
    except Exception as exc:  # noqa: BLE001
        ccomp = None
        print("cuda.compute not importable:", exc)

    n = 1 << args.log2n
    rows, add = result_rows(44, 44)
    x = cp.random.random(n, dtype=cp.float32)
    xt = torch.as_tensor(x, device="cuda")
    out = cp.empty(1, cp.float32)
    zero = np.float32(0)

    def reducer_timing(d_in, d_out, op, h_init, items):
        r = cuprims.make_reduce_into(d_in=d_in, d_out=d_out, op=op, h_init=h_init)
        tmp = cp.empty(max(1, r(temp_storage=None, d_in=d_in, d_out=d_out, num_items=items, h_init=h_init)), cp.uint8)
        run = lambda: r(temp_storage=tmp, d_in=d_in, d_out=d_out, num_items=items, h_init=h_init)  # noqa: E731
        run()
        return device_ms(run)

    # --- sum of squares ----------------------------------------------------------------
    work = f"sum of squares float32 2^{args.log2n}"
    t_plain = reducer_timing(x, out, OpKind.PLUS, zero, n)
    t_sq = reducer_timing(TransformIterator(x, lambda v: v * v), out, OpKind.PLUS, zero, n)
    ref = float(cp.sum(x.astype(cp.float64) ** 2))
    assert abs(float(out[0]) - ref) <= 1e-3 * ref, (float(out[0]), ref)
    t_eager = device_ms(lambda: (xt * xt).sum())
    compiled = torch.compile(lambda t: (t * t).sum())
    compiled(xt)
    t_compiled = device_ms(lambda: compiled(xt))
    add(work, "cuprims reduce over TransformIterator(v*v)", t_sq, "ms", t_plain / t_sq,
        "ratio = our plain sum/this (target >= 0.95)")
    add(work, "cuprims plain sum of x (reference)", t_plain, "ms")
    add(work, "PyTorch eager (x * x).sum()", t_eager, "ms", t_eager / t_sq, "ratio = torch/cuprims (target >= 2.5)")
    add(work, "PyTorch torch.compile (x * x).sum()", t_compiled, "ms", t_compiled / t_sq, "ratio = compiled/cuprims")

    # --- counting -----------------------------------------------------------------------
    m = 1 << 30
    work = "sum of 0..n-1 int64 over a counting iterator, n=2^30"
    out64 = cp.empty(1, cp.int64)
    t_count = reducer_timing(CountingIterator(np.int64(0)), out64, OpKind.PLUS, np.int64(0), m)
    assert int(out64[0]) == m * (m - 1) // 2
    add(work, "cuprims CountingIterator", t_count, "ms")
    if ccomp is not None:
        try:
            h0 = np.zeros(1, np.int64)
            it = ccomp.CountingIterator(np.int64(0))
            cc_obj = ccomp.make_reduce_into(d_in=it, d_out=out64, op=ccomp.OpKind.PLUS, h_init=h0)
            cc_tmp = cp.empty(max(1, cc_obj(temp_storage=None, d_in=it, d_out=out64, num_items=m,
                                            op=ccomp.OpKind.PLUS, h_init=h0)), cp.uint8)
            t_cc = device_ms(lambda: cc_obj(temp_storage=cc_tmp, d_in=it, d_out=out64, num_items=m,
                                            op=ccomp.OpKind.PLUS, h_init=h0))
            add(work, "cuda.compute CountingIterator", t_cc, "ms", t_cc / t_count,
                "ratio = cuda.compute/cuprims (target >= 0.95)")
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute counting reduce failed:", exc)

    # --- argmax -------------------------------------------------------------------------
    work = f"argmax float32 2^{args.log2n}"
    Pair, better, init = argmax_pieces()
    best = cp.empty(1, Pair.dtype)
    t_arg = reducer_timing(ZipIterator(x, CountingIterator(np.int64(0))), best, better, init, n)
    got = int(best.get()[0]["index"])
    assert got == int(cp.argmax(x)) == int(torch.argmax(xt)), (got, int(cp.argmax(x)))
    t_targ = device_ms(lambda: torch.argmax(xt))
    t_carg = device_ms(lambda: cp.argmax(x))
    add(work, "cuprims Zip(x, Counting) + struct max-op", t_arg, "ms")
    add(work, "PyTorch torch.argmax", t_targ, "ms", t_targ / t_arg, "ratio = torch/cuprims (target >= 1.0)")
    add(work, "CuPy cupy.argmax", t_carg, "ms", t_carg / t_arg, "ratio = cupy/cuprims (target >= 1.0)")

    # --- transform through an output iterator ------------------------------------------
    work = f"unary transform float32 2^{args.log2n}"
    y = cp.empty_like(x)
    op = lambda v: v * 2 + 1  # noqa: E731
    plain = cuprims.make_unary_transform(d_in=x, d_out=y, op=op)
    t_tplain = device_ms(lambda: plain(d_in=x, d_out=y, op=op, num_items=n))
    try:
        through = TransformOutputIterator(y, lambda v: v + 1)
        op2 = lambda v: v * 2  # noqa: E731
        tout = cuprims.make_unary_transform(d_in=x, d_out=through, op=op2)
        tout(d_in=x, d_out=through, op=op2, num_items=n)
        assert bool(cp.allclose(y, x * 2 + 1))
        t_tout = device_ms(lambda: tout(d_in=x, d_out=through, op=op2, num_items=n))
        add(work, "cuprims x*2 into TransformOutputIterator(+1)", t_tout, "ms", t_tplain / t_tout,
            "ratio = plain/this (target >= 0.95)")
    except Exception as exc:  # noqa: BLE001
        print("transform through an output iterator failed:", exc)
    add(work, "cuprims x*2+1 into an array", t_tplain, "ms")

    save_results("iterators", rows, args.out, ccomp is not None)


if __name__ == "__main__":
    main()
