"""Where the host time of one reduction call goes (n = 1024). A diagnostic, not a benchmark."""

from __future__ import annotations

import time

import numpy as np


def per_call(fn, calls=200, repeats=40):
    """Median per-call microseconds over short bursts (see _harness.host_us for why)."""
    import statistics

    import cupy as cp

    for _ in range(100):
        fn()
    samples = []
    for _ in range(repeats):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(samples)


def main():
    import cupy as cp

    import cuprims
    from cuprims import OpKind
    from cuprims._runtime import arrays as _arrays
    from cuprims._runtime import driver

    x = cp.random.random(1024, dtype=cp.float32)
    out = cp.empty(1, cp.float32)
    init = np.float32(0)
    r = cuprims.make_reduce_into(d_in=x, d_out=out, op=OpKind.PLUS, h_init=init)
    tmp = cp.empty(1, cp.uint8)
    r(temp_storage=tmp, d_in=x, d_out=out, num_items=1024, h_init=init)
    cp.cuda.Device().synchronize()
    rows = {
        "object call": lambda: r(temp_storage=tmp, d_in=x, d_out=out, num_items=1024, h_init=init),
        "array_info x2": lambda: (_arrays.array_info(x, "d_in"), _arrays.array_info(out, "d_out")),
        "cupy flags": lambda: x.flags.c_contiguous,
        "cupy data.ptr": lambda: x.data.ptr,
        "current_device": driver.current_device,
        "init bytes": lambda: r._init_bytes(init),
        "device plan": lambda: r._device_plan(0, ()),
    }
    plan = r._device_plan(0, ())
    pack = driver.ParamPack(("ptr", "ptr", "i64", 1, 4, "i32"))
    params = pack.pack(x.data.ptr, out.data.ptr, 1024, b"\0", init.tobytes(), 1)
    rows["pack"] = lambda: pack.pack(x.data.ptr, out.data.ptr, 1024, b"\0", init.tobytes(), 1)
    rows["driver.launch"] = lambda: driver.launch(plan.first, 1, plan.threads, 0, params)
    from cuda.bindings import driver as drv
    rows["cuda.bindings launch"] = lambda: drv.cuLaunchKernel(plan.first, 1, 1, 1, plan.threads, 1, 1, 0, 0,
                                                              params, 0)
    rows["one-shot reduce_into"] = lambda: cuprims.reduce_into(d_in=x, d_out=out, num_items=1024, op=OpKind.PLUS,
                                                               h_init=init)
    rows["make_reduce_into hit"] = lambda: cuprims.make_reduce_into(d_in=x, d_out=out, op=OpKind.PLUS, h_init=init)
    pyop = lambda a, b: a + b  # noqa: E731
    rows["op_spec(lambda)"] = lambda: cuprims.op.op_spec(pyop)
    y = cp.empty_like(x)
    affine = lambda v: v * 2 + 1  # noqa: E731
    small = cuprims.make_unary_transform(d_in=x, d_out=y, op=affine)
    rows["transform object (lambda)"] = lambda: small(d_in=x, d_out=y, op=affine, num_items=1024)
    rows["unary_transform one-shot"] = lambda: cuprims.unary_transform(d_in=x, d_out=y, op=affine, num_items=1024)
    rows["make_unary_transform hit"] = lambda: cuprims.make_unary_transform(d_in=x, d_out=y, op=affine)
    # the arguments cuda.compute's users pass: a view of a larger array, a 1-element numpy
    # initial value, op= on every call; each alone, then all together
    big = cp.random.random(4096, dtype=cp.float32)
    view, init1 = big[:1024], np.zeros(1, np.float32)
    rows["object, view"] = lambda: r(temp_storage=tmp, d_in=view, d_out=out, num_items=1024, h_init=init)
    rows["object, 1-element init"] = lambda: r(temp_storage=tmp, d_in=x, d_out=out, num_items=1024, h_init=init1)
    rows["object, op="] = lambda: r(temp_storage=tmp, d_in=x, d_out=out, num_items=1024, h_init=init,
                                    op=OpKind.PLUS)
    rows["object, all three"] = lambda: r(temp_storage=tmp, d_in=view, d_out=out, num_items=1024, h_init=init1,
                                          op=OpKind.PLUS)
    rows["cupy view CAI"] = lambda: view.__cuda_array_interface__
    rows["cupy view data.ptr"] = lambda: view.data.ptr
    for name, fn in rows.items():
        try:
            us = per_call(fn)
            print(f"{name:26s} {us:7.2f} us")
        except Exception as exc:  # noqa: BLE001
            print(f"{name:26s} failed: {exc}")
        cp.cuda.Device().synchronize()
    import cProfile
    import pstats

    for name in ("unary_transform one-shot", "object, all three"):
        print(f"--- profile: {name}")
        fn = rows[name]
        cProfile.runctx("for _ in range(2000): fn()", globals(), {"fn": fn}, "/tmp/host.prof")
        pstats.Stats("/tmp/host.prof").sort_stats("tottime").print_stats(16)


if __name__ == "__main__":
    main()
