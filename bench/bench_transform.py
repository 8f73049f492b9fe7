"""Transform benchmark: cuprims beside CuPy, PyTorch and cuda.compute, in one process.

The bandwidth reference is CuPy's device-to-device copy (cudaMemcpyAsync) of the same
bytes: a unary float32 transform reads and writes as much as that copy.

Run on a GPU machine:  python bench/bench_transform.py [--out DIR] [--log2n 28] [--big]
Writes bench/results/transform.json and transform.md (and copies to --out).
``--big`` adds an int8 transform of 2^31 + 1 items (about 4.3 GB of device memory).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import result_rows, add_extra_path, device_ms, host_us, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _dist_version(name: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # noqa: BLE001
        return None


def affine(x):
    return x * 2 + 1


_TWO, _ONE = np.float32(2), np.float32(1)


def affine_f32(x):
    # float32 all the way (with Python literals numba computes x * 2 + 1 in float64)
    return x * _TWO + _ONE


def add_op(a, b):
    return a + b


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--log2n", type=int, default=28)
    parser.add_argument("--big", action="store_true", help="also time an int8 transform of 2^31 + 1 items")
    args = parser.parse_args()
    add_extra_path()

    import cupy as cp
    import torch

    import cuprims
    from cuprims import OpKind
    from cuprims.algorithms.transform.api import (binary_transform, make_binary_transform, make_unary_transform,
                                                  unary_transform)

    try:
        import cuda.compute as ccomp
    except Exception as exc:  # noqa: BLE001
        ccomp = None
        print("cuda.compute not importable:", exc)


    rows, add = result_rows(40, 40)

    n = 1 << args.log2n
    x = cp.random.random(n, dtype=cp.float32)
    y = cp.empty_like(x)
    nbytes = x.nbytes

    # --- unary float32 x*2+1 vs the copy ----------------------------------------------
    work = f"unary float32 x*2+1, 2^{args.log2n}"
    t_copy = device_ms(lambda: y.data.copy_from_device_async(x.data, nbytes))
    add(work, "CuPy device-to-device copy", t_copy, "ms", 1.0, f"{2 * nbytes / t_copy / 1e9:.2f} TB/s r+w (reference)")
    for name, fn in (("cuprims lambda x*2+1", affine), ("cuprims x*float32(2)+float32(1)", affine_f32)):
        obj = make_unary_transform(d_in=x, d_out=y, op=fn)
        t = device_ms(lambda obj=obj, fn=fn: obj(d_in=x, d_out=y, op=fn, num_items=n))
        add(work, name, t, "ms", t_copy / t, f"{2 * nbytes / t / 1e9:.2f} TB/s; ratio = copy/cuprims (target >= 0.95)")
    want = (x.astype(cp.float64) * 2 + 1).astype(cp.float32)
    make_unary_transform(d_in=x, d_out=y, op=affine)(d_in=x, d_out=y, op=affine, num_items=n)
    assert bool(cp.array_equal(y, want)), "cuprims transform result differs"
    del want
    t_neg = device_ms(lambda: unary_transform(d_in=x, d_out=y, op=OpKind.NEGATE, num_items=n))
    add(work, "cuprims OpKind.NEGATE, one-shot", t_neg, "ms", t_copy / t_neg, "ratio = copy/cuprims")
    t_cupy = device_ms(lambda: x * 2 + 1)
    add(work, "CuPy x * 2 + 1", t_cupy, "ms", t_copy / t_cupy, "two kernels + allocation; ratio = copy/CuPy")
    fused = cp.ElementwiseKernel("float32 v", "float32 r", "r = v * 2 + 1", "cuprims_bench_affine")
    t_fused = device_ms(lambda: fused(x, y))
    add(work, "CuPy ElementwiseKernel v*2+1", t_fused, "ms", t_copy / t_fused, "ratio = copy/CuPy")
    xt = torch.as_tensor(x, device="cuda")
    yt = torch.as_tensor(y, device="cuda")
    t_torch = device_ms(lambda: xt * 2 + 1)
    add(work, "PyTorch x * 2 + 1", t_torch, "ms", t_copy / t_torch, "ratio = copy/torch")
    t_torch_out = device_ms(lambda: torch.add(torch.mul(xt, 2, out=yt), 1, out=yt))
    add(work, "PyTorch mul/add out=", t_torch_out, "ms", t_copy / t_torch_out, "two passes; ratio = copy/torch")
    if ccomp is not None:
        try:
            c_obj = ccomp.make_unary_transform(d_in=x, d_out=y, op=affine)
            t_cc = device_ms(lambda: c_obj(d_in=x, d_out=y, op=affine, num_items=n))
            add(work, "cuda.compute lambda x*2+1", t_cc, "ms", t_copy / t_cc, "ratio = copy/cuda.compute")
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute unary transform failed:", exc)

    # --- binary float32 a+b -------------------------------------------------------------
    work = f"binary float32 a+b, 2^{args.log2n}"
    z = cp.random.random(n, dtype=cp.float32)
    t_copy3 = t_copy * 1.5  # bytes moved: 3 arrays against the copy's 2
    b_obj = make_binary_transform(d_in1=x, d_in2=z, d_out=y, op=OpKind.PLUS)
    t_bin = device_ms(lambda: b_obj(d_in1=x, d_in2=z, d_out=y, op=OpKind.PLUS, num_items=n))
    add(work, "cuprims OpKind.PLUS", t_bin, "ms", t_copy3 / t_bin,
        f"{3 * nbytes / t_bin / 1e9:.2f} TB/s; ratio = copy bandwidth / cuprims bandwidth")
    b_py = make_binary_transform(d_in1=x, d_in2=z, d_out=y, op=add_op)
    t_bin_py = device_ms(lambda: b_py(d_in1=x, d_in2=z, d_out=y, op=add_op, num_items=n))
    add(work, "cuprims lambda a+b", t_bin_py, "ms", t_copy3 / t_bin_py)
    assert bool(cp.array_equal(y, x + z))
    t_cupy_add = device_ms(lambda: cp.add(x, z, out=y))
    add(work, "CuPy cp.add(out=)", t_cupy_add, "ms", t_copy3 / t_cupy_add)
    zt = torch.as_tensor(z, device="cuda")
    t_torch_add = device_ms(lambda: torch.add(xt, zt, out=yt))
    add(work, "PyTorch torch.add(out=)", t_torch_add, "ms", t_copy3 / t_torch_add)
    if ccomp is not None:
        try:
            cb = ccomp.make_binary_transform(d_in1=x, d_in2=z, d_out=y, op=ccomp.OpKind.PLUS)
            t_ccb = device_ms(lambda: cb(d_in1=x, d_in2=z, d_out=y, op=ccomp.OpKind.PLUS, num_items=n))
            add(work, "cuda.compute OpKind.PLUS", t_ccb, "ms", t_copy3 / t_ccb)
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute binary transform failed:", exc)
    del z, zt

    # --- mixed types: int8 -> float32 ---------------------------------------------------
    work = f"unary int8 -> float32 v*0.5, 2^{args.log2n}"
    xi = cp.random.randint(-128, 128, n, dtype=cp.int8)

    def half(v):
        return v * 0.5

    m_obj = make_unary_transform(d_in=xi, d_out=y, op=half)
    t_mixed = device_ms(lambda: m_obj(d_in=xi, d_out=y, op=half, num_items=n))
    t_copy_mixed = t_copy * (5 / 8)  # 1 + 4 bytes per item against the copy's 8
    add(work, "cuprims lambda v*0.5", t_mixed, "ms", t_copy_mixed / t_mixed,
        f"{5 * n / t_mixed / 1e9:.2f} TB/s; ratio = copy bandwidth / cuprims bandwidth")
    t_cupy_mixed = device_ms(lambda: cp.multiply(xi, np.float32(0.5), out=y))
    add(work, "CuPy cp.multiply(out=)", t_cupy_mixed, "ms", t_copy_mixed / t_cupy_mixed)
    del xi, xt, yt

    # --- more than 2^31 items -----------------------------------------------------------
    if args.big:
        del x, y
        cp.get_default_memory_pool().free_all_blocks()
        nb = (1 << 31) + 1
        bi = cp.ones(nb, cp.int8)
        bo = cp.empty(nb, cp.int8)

        def inc(v):
            return v + 1

        big = make_unary_transform(d_in=bi, d_out=bo, op=inc)
        t_big = device_ms(lambda: big(d_in=bi, d_out=bo, op=inc, num_items=nb), inner=5, repeats=5)
        t_big_copy = device_ms(lambda: bo.data.copy_from_device_async(bi.data, nb), inner=5, repeats=5)
        assert int(bo[-1]) == 2 and int(bo[0]) == 2
        work = "unary int8 v+1, 2^31 + 1 items"
        add(work, "cuprims lambda v+1", t_big, "ms", t_big_copy / t_big, f"{2 * nb / t_big / 1e9:.2f} TB/s")
        add(work, "CuPy device-to-device copy", t_big_copy, "ms", 1.0)
        del bi, bo
        x = cp.random.random(n, dtype=cp.float32)
        y = cp.empty_like(x)

    # --- host time per call, n = 1024 ---------------------------------------------------
    s = cp.random.random(1024, dtype=cp.float32)
    so = cp.empty_like(s)
    small = make_unary_transform(d_in=s, d_out=so, op=affine)
    work = "host time per call, n=1024"
    add(work, "cuprims object API (lambda)", host_us(lambda: small(d_in=s, d_out=so, op=affine, num_items=1024)), "us")
    add(work, "cuprims unary_transform (lambda)",
        host_us(lambda: unary_transform(d_in=s, d_out=so, op=affine, num_items=1024)), "us")
    add(work, "cuprims binary_transform (PLUS)",
        host_us(lambda: binary_transform(d_in1=s, d_in2=s, d_out=so, op=OpKind.PLUS, num_items=1024)), "us")
    add(work, "CuPy ElementwiseKernel", host_us(lambda: fused(s, so)), "us")
    st, sot = torch.as_tensor(s, device="cuda"), torch.as_tensor(so, device="cuda")
    add(work, "PyTorch torch.add(out=)", host_us(lambda: torch.add(st, st, out=sot)), "us")
    if ccomp is not None:
        try:
            c_small = ccomp.make_unary_transform(d_in=s, d_out=so, op=affine)
            add(work, "cuda.compute object API", host_us(lambda: c_small(d_in=s, d_out=so, op=affine,
                                                                          num_items=1024)), "us")
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute host timing failed:", exc)

    extra = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
             "cupy": cp.__version__, "torch": torch.__version__, "cuprims": cuprims.__version__,
             "cuda.compute": _dist_version("cuda-cccl") if ccomp else None}
    dirs = [ROOT / "bench" / "results"]
    if args.out:
        dirs.append(Path(args.out))
    print(write_results("transform", rows, extra, dirs))


if __name__ == "__main__":
    main()
