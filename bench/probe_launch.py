"""Diagnostic: what one kernel launch costs the host, by launch path."""
import ctypes, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import host_us, add_extra_path  # noqa: E402
import cupy as cp, numpy as np
import cuprims
from cuprims._runtime import driver, libcuda
import cuda.bindings.driver as drv

n = 1024
f = cp.asarray(np.random.default_rng(0).random(4 * n, dtype=np.float32))[:n]
fo = cp.empty_like(f)
t = cuprims.make_unary_transform(d_in=f, d_out=fo, op=cuprims.OpKind.NEGATE)
t(d_in=f, d_out=fo, op=cuprims.OpKind.NEGATE, num_items=n)
cp.cuda.Device().synchronize()
seen = []
real = driver.launch
def spy(kernel, grid, block, stream, params, shared=0):
    seen.append((kernel, grid, block, stream, params, shared)); real(kernel, grid, block, stream, params, shared)
driver.launch = spy
t(d_in=f, d_out=fo, op=cuprims.OpKind.NEGATE, num_items=n)
driver.launch = real
kernel, grid, block, stream0, params, shared = seen[0]
handle = int(kernel) if type(kernel) is not int else kernel
lib = libcuda.lib
func = ctypes.c_void_p()
lib.cuKernelGetFunction(ctypes.byref(func), ctypes.c_void_p(handle))
fhandle = func.value
bfunc = drv.CUfunction(fhandle)
s0 = drv.CUstream(0)
P = ctypes.c_void_p
U = ctypes.c_uint
proto = ctypes.CFUNCTYPE(ctypes.c_int, P, U, U, U, U, U, U, U, P, P, P)
raw_launch = proto(ctypes.cast(lib.cuLaunchKernel, P).value)

class Cfg(ctypes.Structure):
    _fields_ = [("gx", U), ("gy", U), ("gz", U), ("bx", U), ("by", U), ("bz", U), ("smem", U), ("stream", P),
                ("attrs", P), ("nattrs", U)]
cfg = Cfg(grid, 1, 1, block, 1, 1, shared, None, None, 0)
cfg_addr = ctypes.addressof(cfg)
lib.cuLaunchKernelEx.argtypes = [P, P, P, P]
ex_proto = ctypes.CFUNCTYPE(ctypes.c_int, P, P, P, P)
raw_ex = ex_proto(ctypes.cast(lib.cuLaunchKernelEx, P).value)
bcfg = drv.CUlaunchConfig()
bcfg.gridDimX, bcfg.gridDimY, bcfg.gridDimZ, bcfg.blockDimX, bcfg.blockDimY, bcfg.blockDimZ = grid, 1, 1, block, 1, 1
bcfg.sharedMemBytes = shared
bcfg.hStream = 0
bcfg.numAttrs = 0
paths = {
    "bindings CUkernel": lambda: drv.cuLaunchKernel(kernel, grid, 1, 1, block, 1, 1, shared, 0, params, 0),
    "bindings CUfunction": lambda: drv.cuLaunchKernel(bfunc, grid, 1, 1, block, 1, 1, shared, 0, params, 0),
    "bindings CUfunction CUstream": lambda: drv.cuLaunchKernel(bfunc, grid, 1, 1, block, 1, 1, shared, s0, params, 0),
    "bindings Ex CUfunction": lambda: drv.cuLaunchKernelEx(bcfg, bfunc, params, 0),
    "ctypes CUfunction": lambda: lib.cuLaunchKernel(fhandle, grid, 1, 1, block, 1, 1, shared, 0, params, None),
    "CFUNCTYPE CUfunction": lambda: raw_launch(fhandle, grid, 1, 1, block, 1, 1, shared, 0, params, None),
    "CFUNCTYPE Ex CUfunction": lambda: raw_ex(cfg_addr, fhandle, params, None),
    "CFUNCTYPE Ex CUkernel": lambda: raw_ex(cfg_addr, handle, params, None),
    "CFUNCTYPE Ex + 3 field sets": lambda: (setattr(cfg, "gx", grid), setattr(cfg, "bx", block),
                                             setattr(cfg, "stream", None), raw_ex(cfg_addr, fhandle, params, None)),
}
for pname, p in paths.items():
    r = p()
    print(pname, "returns", r if not isinstance(r, tuple) else r[0], flush=True)
    print(f"raw launch  {pname:30s} {host_us(p):6.2f} us   short bursts {host_us(p, calls=20, repeats=100):6.2f}",
          flush=True)
# the FFI alone: a call that fails at once in the driver (grid 0)
print("bindings invalid launch", host_us(lambda: drv.cuLaunchKernel(bfunc, 0, 1, 1, block, 1, 1, shared, 0, params, 0)))
print("CFUNCTYPE invalid launch", host_us(lambda: raw_launch(fhandle, 0, 1, 1, block, 1, 1, shared, 0, params, None)))
v = ctypes.c_int()
print("ctypes cuCtxGetDevice", host_us(lambda: lib.cuCtxGetDevice(ctypes.byref(v))), flush=True)
print("object call", host_us(lambda: t(d_in=f, d_out=fo, op=cuprims.OpKind.NEGATE, num_items=n)), flush=True)
print("cupy negative(out=)", host_us(lambda: cp.negative(f, out=fo)), flush=True)
add_extra_path()
try:
    import cuda.compute as cc
    o = cc.make_unary_transform(d_in=f, d_out=fo, op=cc.OpKind.NEGATE)
    o(d_in=f, d_out=fo, op=cc.OpKind.NEGATE, num_items=n)
    print("cuda.compute object NEGATE", host_us(lambda: o(d_in=f, d_out=fo, op=cc.OpKind.NEGATE, num_items=n)))
except Exception as exc:
    print("cc failed", exc)
