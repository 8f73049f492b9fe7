"""What one kernel launch costs the host, by the way Python reaches the driver: the floor
under every algorithm's host time per call.

One small kernel (cuprims' float32 negate over 1024 items, its parameters packed once) is
launched through cuda.bindings' ``cuLaunchKernel`` (CUkernel and CUfunction handles),
ctypes' ``cuLaunchKernel`` (eleven arguments) and ctypes' ``cuLaunchKernelEx`` (four: a
launch configuration made once), the same ``cuLaunchKernelEx`` from a numba-compiled
function (what a compiled launcher would cost: numba's dispatch of three ints, then a native
call), then a whole object call of cuprims and of cuda.compute (its C++ layer launches
without an FFI crossing per argument). A diagnostic: it prints.

    python bench/launch_cost.py
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import add_extra_path, host_us  # noqa: E402


def main() -> None:
    import cupy as cp
    import numpy as np

    import cuda.bindings.driver as drv
    import cuprims
    from cuprims._runtime import driver, launch, libcuda

    n = 1024
    f = cp.asarray(np.random.default_rng(0).random(4 * n, dtype=np.float32))[:n]
    fo = cp.empty_like(f)
    negate = cuprims.make_unary_transform(d_in=f, d_out=fo, op=cuprims.OpKind.NEGATE)
    call = lambda: negate(d_in=f, d_out=fo, op=cuprims.OpKind.NEGATE, num_items=n)  # noqa: E731
    seen: list[tuple[Any, ...]] = []
    real = driver.launch
    driver.launch = lambda *args: seen.append(args) or real(*args)
    call()
    driver.launch = real
    kernel, grid, block, _stream, params, shared = seen[0]
    function = ctypes.c_void_p()
    libcuda.check("cuKernelGetFunction", libcuda.lib.cuKernelGetFunction(ctypes.byref(function), kernel))
    b_kernel, b_function = drv.CUkernel(kernel), drv.CUfunction(function.value)
    lib = libcuda.lib
    config = launch.config_address(grid, block, 0, shared)
    paths = {
        "cuda.bindings cuLaunchKernel, CUkernel": lambda: drv.cuLaunchKernel(b_kernel, grid, 1, 1, block, 1, 1,
                                                                              shared, 0, params, 0),
        "cuda.bindings cuLaunchKernel, CUfunction": lambda: drv.cuLaunchKernel(b_function, grid, 1, 1, block, 1,
                                                                                1, shared, 0, params, 0),
        "ctypes cuLaunchKernel, CUkernel": lambda: lib.cuLaunchKernel(kernel, grid, 1, 1, block, 1, 1, shared, 0,
                                                                      params, None),
        "ctypes cuLaunchKernelEx, CUkernel (cuprims)": lambda: lib.cuLaunchKernelEx(config, kernel, params, None),
        "ctypes cuLaunchKernelEx, CUfunction": lambda: lib.cuLaunchKernelEx(config, function.value, params, None),
        "cuprims driver.launch": lambda: driver.launch(kernel, grid, block, 0, params, shared),
        "ctypes cuCtxGetDevice (an FFI call alone)": lambda: lib.cuCtxGetDevice(ctypes.byref(ctypes.c_int())),
        "cuprims object call": call,
        "CuPy negative(out=)": lambda: cp.negative(f, out=fo),
    }
    nb_launch = _numba_launcher(lib)
    if nb_launch is not None:
        nb_launch(config, kernel, params)
        paths["numba-compiled cuLaunchKernelEx (njit dispatch)"] = lambda: nb_launch(config, kernel, params)
    for name, fn in paths.items():
        print(f"{name:48s} {host_us(fn):7.2f} us", flush=True)
    add_extra_path()
    try:
        import cuda.compute as cc
    except Exception as exc:  # noqa: BLE001
        print("cuda.compute not importable:", exc)
        return
    theirs = cc.make_unary_transform(d_in=f, d_out=fo, op=cc.OpKind.NEGATE)
    print(f"{'cuda.compute object call':48s} "
          f"{host_us(lambda: theirs(d_in=f, d_out=fo, op=cc.OpKind.NEGATE, num_items=n)):7.2f} us")


def _numba_launcher(lib: Any) -> Any:
    """cuLaunchKernelEx called from a numba-compiled function (a compiled launcher's cost: the
    njit dispatch of three ints, then a native call), or None without numba."""
    try:
        import numba
    except ImportError:
        return None
    u64 = ctypes.c_uint64   # pointers pass as 64-bit integers in the x86-64 calling convention
    launch_ex = ctypes.CFUNCTYPE(ctypes.c_int, u64, u64, u64, u64)(ctypes.cast(lib.cuLaunchKernelEx,
                                                                                ctypes.c_void_p).value)

    @numba.njit
    def nb_launch(config, kernel, params):
        return launch_ex(config, kernel, params, 0)

    return nb_launch


if __name__ == "__main__":
    main()
