"""Where the host time of one histogram call goes (uint8, n = 1024, 256 bins), for each way a
user writes the levels. A diagnostic, not a benchmark: run on a GPU machine,
``python bench/micro_host_histogram.py``."""

from __future__ import annotations

import numpy as np

from micro_host import per_call


def main() -> None:
    import cupy as cp

    import cuprims
    from cuprims._runtime import driver

    x = cp.random.randint(0, 256, 1024, dtype=cp.uint8)
    hist = cp.empty(256, cp.int32)
    levels = {"int32": (np.int32(0), np.int32(256)), "int64": (np.int64(0), np.int64(256)),
              "float32": (np.float32(0), np.float32(256)), "Python ints": (0, 256),
              "arrays": (np.array([0], np.int32), np.array([256], np.int32))}
    rows = {}
    for name, (lo, hi) in levels.items():
        args = dict(d_samples=x, d_histogram=hist, h_num_output_levels=np.array([257], np.int32), h_lower_level=lo,
                    h_upper_level=hi, num_samples=x.size)
        obj = cuprims.make_histogram_even(**args)
        tmp = cp.empty(obj(temp_storage=None, **args), cp.uint8)
        rows[f"object, {name}"] = lambda obj=obj, args=args, tmp=tmp: obj(temp_storage=tmp, **args)
        rows[f"one-shot, {name}"] = lambda lo=lo, hi=hi: cuprims.histogram_even(
            d_samples=x, d_histogram=hist, num_output_levels=257, lower_level=lo, upper_level=hi, num_samples=x.size)
    plan = obj._current_plan((None, x), 0)
    call = (x.data.ptr, hist.data.ptr, x.size, 256, np.int64(0).tobytes(), np.int64(256).tobytes(), False)
    rows["_dispatch alone"] = lambda: obj._dispatch(plan, call, tmp.data.ptr, 0)
    params = plan.packs[0].pack(256, hist.data.ptr, tmp.data.ptr)
    rows["init launch (PDL)"] = lambda: driver.launch_pdl(plan.init, 1, plan.init_threads, 0, params)
    rows["init launch (plain)"] = lambda: driver.launch(plan.init, 1, plan.init_threads, 0, params)
    rows["alloc + free (pool)"] = lambda: driver.free_async(driver.alloc_async(511, 0), 0)
    for name, fn in rows.items():
        print(f"{name:26s} {per_call(fn):7.2f} us")
        cp.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
