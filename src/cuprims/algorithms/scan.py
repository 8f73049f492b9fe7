"""Device-wide prefix scans: ``make_inclusive_scan``/``inclusive_scan``,
``make_exclusive_scan``/``exclusive_scan`` and the scan object.

``d_out[i]`` receives ``init ⊕ d_in[0] ⊕ ... ⊕ d_in[i]`` (inclusive) or
``init ⊕ d_in[0] ⊕ ... ⊕ d_in[i-1]`` (exclusive, so ``d_out[0] == init``), computed in the
type of ``d_out`` (items are converted to it, like a reduction's accumulator). ``op``
must be associative. An inclusive scan may go without ``init_value``; an exclusive scan
needs one. ``init_value`` is a host value (numpy scalar or one-element array, gpu_struct
value), fixed when the call is made, or a one-element device array, read by the kernel
when it runs (so a value computed on the device by earlier work on the stream is
used without a round trip to the host). ``d_in`` and ``d_out`` may be the same array
(an in-place scan).

Host dispatch (ours, mirroring CUB's DispatchScan for its look-back algorithm): one tile
per block; a problem of at most one tile runs one kernel and needs no temporary
storage; larger problems first mark every tile state "not yet set" (init kernel), then
scan with decoupled look-back. Tile size, tile-state bytes per tile and fixed bytes come
from the compiled code's exported metadata (``cuprims_meta``).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .. import _arrays
from .._jit import driver
from .._jit.build import OpInput
from .._jit.codegen import check_binary_builtin, op_symbol
from .._jit.codegen_scan import scan_source
from .._proxy import ProxyArray, ProxyValue
from .._streams import stream_handle
from ..errors import ArgumentError, ArgumentTypeError, CudaError
from ..op import OpSpec, RawOp, op_spec
from ..types import ValueType, host_bytes, value_type
from ._common import (Builds, CompiledAlgorithm, PerThreadCache, check_num_items, parse_compute_capability, targets,
                     temp_storage_info)

_HOST_SCALARS = (bool, int, float, complex, np.generic, np.ndarray)


def _init_info(init_value: Any) -> tuple[str, np.dtype | None]:
    """("none" | "value" | "device", dtype) of an init_value argument."""
    if init_value is None:
        return "none", None
    if isinstance(init_value, ProxyArray):
        return "device", init_value.dtype
    if isinstance(init_value, ProxyValue):
        return "value", init_value.dtype
    struct_dtype = getattr(type(init_value), "_cuprims_dtype", None)
    if struct_dtype is not None:
        return "value", struct_dtype
    if isinstance(init_value, _HOST_SCALARS):
        dt = getattr(init_value, "dtype", None)
        return "value", dt if isinstance(dt, np.dtype) else np.asarray(init_value).dtype
    try:
        return "device", _arrays.array_dtype(init_value, "init_value")
    except ArgumentError:
        raise ArgumentTypeError("init_value", "a host value (numpy scalar or array, gpu_struct value), a "
                                "one-element device array, or None", init_value) from None


def _check_host_init(init_dt: np.dtype, accum: ValueType) -> None:
    if accum.is_struct or init_dt.names is not None:
        if init_dt.itemsize != accum.size or (init_dt.names is None) != (not accum.is_struct):
            raise ArgumentError("init_value", f"a value of the output's type {accum.dtype}", init_dt)
        return
    if init_dt.kind not in "biufc":
        raise ArgumentError("init_value", f"a value convertible to {accum.dtype}", init_dt)
    if init_dt.kind == "c" and accum.kind != "c":
        raise ArgumentError("init_value", f"a real value for a {accum.dtype} output", init_dt)


def _check_device_init(init_dt: np.dtype, accum: ValueType) -> None:
    # The kernel reads the value as the accumulator type itself: no conversion on the device.
    if init_dt != accum.dtype and not (accum.is_struct and value_type(init_dt, argument="init_value").code
                                       == accum.code):
        raise ArgumentError("init_value", f"a one-element device array of the output's type {accum.dtype}",
                            f"a device array of {init_dt}")


def _check_item_types(in_vt: ValueType, accum: ValueType) -> None:
    if accum.is_struct != in_vt.is_struct or (accum.is_struct and in_vt.code != accum.code):
        raise ArgumentError("d_in", f"items of the output's type {accum.dtype}", in_vt.dtype)
    if in_vt.kind == "c" and accum.kind != "c":
        raise ArgumentError("d_out", f"a complex output for {in_vt.dtype} input items (the imaginary part "
                            "would be lost)", accum.dtype)


# Launch with programmatic dependent launch (PDL) on sm_90+, as CUB's own scan dispatch
# does: the scan kernel's blocks are scheduled while the init kernel finishes, and wait
# for it (griddepcontrol.wait) before touching the tile states. Both kernels wait before
# reading any memory, so this only hides launch latency. Set to False to launch plainly.
USE_PDL = True
_CUDA_ERROR_INVALID_VALUE = 1
_CUDA_ERROR_NOT_SUPPORTED = 801


class _PdlLauncher:
    """cuLaunchKernelEx with the programmatic-stream-serialization attribute; one reusable
    launch configuration per thread."""

    def __init__(self) -> None:
        self._tls = threading.local()

    def _config(self) -> tuple:
        state = getattr(self._tls, "state", None)
        if state is None:
            from .._jit.lazy import driver_bindings

            drv = driver_bindings()

            attr = drv.CUlaunchAttribute()
            attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            attr.value.programmaticStreamSerializationAllowed = 1
            cfg = drv.CUlaunchConfig()
            cfg.gridDimY = cfg.gridDimZ = cfg.blockDimY = cfg.blockDimZ = 1
            cfg.sharedMemBytes = 0
            cfg.attrs = [attr]
            cfg.numAttrs = 1
            state = self._tls.state = (cfg, drv.cuLaunchKernelEx, attr)
        return state

    def __call__(self, kernel: Any, grid: int, block: int, stream: int, params: int) -> None:
        global USE_PDL
        try:
            cfg, launch_ex, _ = self._config()
            cfg.gridDimX = grid
            cfg.blockDimX = block
            cfg.hStream = stream
            err = int(launch_ex(cfg, kernel, params, 0)[0])
        except (TypeError, ValueError, AttributeError, ImportError):
            err = -1  # these bindings cannot express the launch: stop trying
        if err in (-1, _CUDA_ERROR_INVALID_VALUE, _CUDA_ERROR_NOT_SUPPORTED):
            # PDL unavailable here: launch plainly from now on (same results, a little more latency)
            USE_PDL = False
            driver.launch(kernel, grid, block, stream, params)
        elif err:
            raise CudaError("cuLaunchKernelEx", driver.error_name(err), f"grid={grid}, block={block}, PDL")


_pdl_launch = _PdlLauncher()


class _Plan:
    """How to launch on one device: kernel handles and the compiled code's tile facts."""

    __slots__ = ("init", "scan", "threads", "tile_items", "init_threads", "bytes_per_tile", "fixed_bytes",
                 "max_tiles", "device", "pdl")

    def __init__(self, init: Any, scan: Any, meta: dict[str, int], device: int, arch: int):
        self.init, self.scan, self.device = init, scan, device
        self.pdl = arch >= 90  # PDL exists from sm_90 on
        self.threads = meta["threads"]
        self.tile_items = meta["threads"] * meta["items"]
        self.init_threads = meta["init_threads"]
        self.bytes_per_tile = meta["tile_bytes_per_tile"]
        self.fixed_bytes = meta["tile_fixed_bytes"]
        self.max_tiles = meta["max_tiles"]


class _Scan(CompiledAlgorithm):
    """A prefix scan built for fixed types, operator, init kind and direction; call it to run.

    ``scan(temp_storage=None, ...)`` returns the temporary bytes needed and launches
    nothing; ``scan(temp_storage=buf, ...)`` runs on ``stream``.
    """

    def __init__(self, d_in: Any, d_out: Any, op: Any, init_value: Any, inclusive: bool, compute_capability: Any,
                 spec: OpSpec | None = None):
        self._in_dtype = _arrays.array_dtype(d_in, "d_in")
        self._out_dtype = _arrays.array_dtype(d_out, "d_out")
        in_vt = value_type(self._in_dtype, argument="d_in")
        accum = value_type(self._out_dtype, argument="d_out")
        _check_item_types(in_vt, accum)
        init_kind, init_dt = _init_info(init_value)
        if init_kind == "none" and not inclusive:
            raise ArgumentError("init_value", "an initial value (an exclusive scan's first output); a host value "
                                "or a one-element device array", None)
        if init_kind == "value":
            _check_host_init(init_dt, accum)
        elif init_kind == "device":
            _check_device_init(init_dt, accum)
        self._spec = spec = spec if spec is not None else op_spec(op)
        if spec.kind == "builtin":
            check_binary_builtin(spec, accum)
        self._accum = accum
        self._inclusive = inclusive
        self._init_kind = init_kind

        def make_source(arch: int):
            return scan_source(in_type=in_vt, accum=accum, op=spec, init_kind=init_kind, inclusive=inclusive,
                               arch=arch)

        ops = [] if spec.kind == "builtin" else [
            OpInput(op_symbol(spec, "cuprims_op_0"), spec, (accum, accum), accum)]
        self._builds = Builds(make_source, ops)
        self._builds.build_for(targets(compute_capability), [op] if ops else [])
        functor_size = 1
        if spec.state_size:
            functor_size = -(-spec.state_size // spec.state_alignment) * spec.state_alignment
        self._functor_size = functor_size
        self._state = op.state.ljust(functor_size, b"\0") if isinstance(op, RawOp) and spec.state_size else b"\0"
        init_param = {"none": 1, "value": accum.size, "device": "ptr"}[init_kind]
        # scan_init_kernel(tile_storage, num_tiles)
        self._init_param_kinds = ("ptr", "i32")
        # scan_kernel(d_in, d_out, tile_storage, num_tiles, op, init, num_items)
        self._scan_param_kinds = ("ptr", "ptr", "ptr", "i32", functor_size, init_param, "i64")
        self._init_params = driver.ParamPack(self._init_param_kinds)
        self._scan_params = driver.ParamPack(self._scan_param_kinds)
        self._plan: _Plan | None = None
        # cuda::std::complex<T> is aligned to its full size, numpy's complex only to T's
        self._in_align_mask = in_vt.size - 1 if in_vt.kind == "c" else 0
        self._out_align_mask = accum.size - 1 if accum.kind == "c" else 0
        self._init_scalar_type = self._out_dtype.type if init_kind == "value" and not accum.is_struct else None

    # -- per device facts (computed once per device) ---------------------------------
    def _device_plan(self, device: int, op: Any) -> _Plan:
        loaded = self._builds._by_device.get(device)
        if loaded is None:
            loaded = self._builds.loaded(device, [op] if self._spec.kind != "builtin" else [])
        plan = loaded.extra.get("plan")
        if plan is None:
            init_k, scan_k = loaded.handles  # codegen order: init kernel, scan kernel
            plan = loaded.extra["plan"] = _Plan(init_k, scan_k, loaded.meta, device, loaded.arch)
        self._plan = plan
        return plan

    def _init_arg(self, init_value: Any) -> Any:
        """The scan kernel's init argument: value bytes, a device pointer, or a placeholder byte."""
        kind = self._init_kind
        if kind == "value":
            if type(init_value) is self._init_scalar_type:  # the common case: a numpy scalar of the output type
                return init_value.tobytes()
            if init_value is None:
                raise ArgumentError("init_value", f"a {self._accum.dtype} value (this scan was built with one)", None)
            if _init_info(init_value)[0] != "value":
                raise ArgumentError("init_value", "a host value (this scan was built with one)", init_value)
            return host_bytes(init_value, self._accum, argument="init_value")
        if kind == "device":
            if init_value is None:
                raise ArgumentError("init_value", "a one-element device array (this scan was built with one)", None)
            if isinstance(init_value, _HOST_SCALARS) or getattr(type(init_value), "_cuprims_dtype", None) is not None:
                raise ArgumentTypeError("init_value", "a one-element device array (this scan was built with one)",
                                        init_value)
            ptr, dt, size = _arrays.array_info(init_value, "init_value")
            if dt != self._accum.dtype:
                _check_device_init(dt, self._accum)
            if size != 1:
                raise ArgumentError("init_value", "a device array of exactly one element", f"{size} elements")
            if ptr & self._out_align_mask:
                raise ArgumentError("init_value", f"data aligned to {self._out_align_mask + 1} bytes", hex(ptr))
            return ptr
        if init_value is not None:
            raise ArgumentError("init_value", "None (this scan was built without an initial value)", init_value)
        return b"\0"

    def _launch(self, plan: _Plan, num_tiles: int, stream: int, p_in: int, p_out: int, temp_ptr: int, n: int,
                state: bytes, init: Any) -> None:
        launch = _pdl_launch if plan.pdl and USE_PDL else driver.launch
        if num_tiles > 1:
            launch(plan.init, -(-num_tiles // plan.init_threads), plan.init_threads, stream,
                   self._init_params.pack(temp_ptr, num_tiles))
        launch(plan.scan, num_tiles, plan.threads, stream,
               self._scan_params.pack(p_in, p_out, temp_ptr, num_tiles, state, init, n))

    def _run(self, temp_storage: Any, d_in: Any, d_out: Any, num_items: Any, op: Any, init_value: Any,
             stream: Any, one_shot: bool) -> int | None:
        n = num_items if type(num_items) is int and num_items >= 0 else check_num_items(num_items)
        p_in = _arrays.checked_pointer(d_in, "d_in", self._in_dtype, n, self._in_align_mask)
        p_out = _arrays.checked_pointer(d_out, "d_out", self._out_dtype, n, self._out_align_mask)
        init = self._init_arg(init_value)
        state = self._state
        if self._spec.state_size and isinstance(op, RawOp):
            state = op.state.ljust(self._functor_size, b"\0")
        # The plan of the last device used: kernel handles of a CUDA library are valid in
        # every context, so only a launch failure (another architecture) needs a fresh look.
        plan = self._plan or self._device_plan(driver.current_device(), op)
        num_tiles = -(-n // plan.tile_items)
        if num_tiles > plan.max_tiles:
            raise ArgumentError("num_items", f"at most {plan.max_tiles * plan.tile_items} items (the scan's "
                                "tile count is a 32-bit int)", n)
        needed = num_tiles * plan.bytes_per_tile + plan.fixed_bytes if num_tiles > 1 else 1
        if temp_storage is None and not one_shot:
            return needed
        if n == 0:
            return None
        s = stream_handle(stream) if stream is not None else 0
        owned = temp_ptr = available = 0
        if num_tiles > 1:
            if one_shot:
                owned = temp_ptr = driver.alloc_async(needed, s)
                available = needed
            else:
                temp_ptr, available = temp_storage_info(temp_storage, needed)
        try:
            try:
                self._launch(plan, num_tiles, s, p_in, p_out, temp_ptr, n, state, init)
            except CudaError:
                device = driver.current_device()
                if device == plan.device:
                    raise
                # Another device (possibly another architecture) is current: use its build,
                # whose tiles (and so its temporary storage) may differ.
                self._plan = None
                fresh = self._device_plan(device, op)
                num_tiles = -(-n // fresh.tile_items)
                if num_tiles > 1 and num_tiles * fresh.bytes_per_tile + fresh.fixed_bytes > available:
                    if not one_shot:
                        raise ArgumentError("temp_storage", "storage sized on the device it is used with "
                                            "(query the size again after switching devices)", "a stale size")
                    if owned:
                        driver.free_async(owned, s)
                        owned = 0
                    available = num_tiles * fresh.bytes_per_tile + fresh.fixed_bytes
                    owned = temp_ptr = driver.alloc_async(available, s)
                self._launch(fresh, num_tiles, s, p_in, p_out, temp_ptr, n, state, init)
        finally:
            if owned:
                driver.free_async(owned, s)
        return None

    def __call__(self, *, temp_storage: Any, d_in: Any, d_out: Any, op: Any, init_value: Any, num_items: int,
                 stream: Any = None) -> int | None:
        """Run the scan (or, with ``temp_storage=None``, return the temporary bytes needed).

        ``op`` is the operator the scan was built with (a RawOp's state is read again);
        ``init_value`` must be of the kind given at build time: a host value, a
        one-element device array, or None (inclusive scans built without one).
        """
        return self._run(temp_storage, d_in, d_out, num_items, op, init_value, stream, False)



# ------------------------------------------------------------------- public functions

wrapper_caches = PerThreadCache()



def _make(d_in: Any, d_out: Any, op: Any, init_value: Any, inclusive: bool, compute_capability: Any) -> _Scan:
    spec = op_spec(op)
    if not spec.persistent:
        return _Scan(d_in, d_out, op, init_value, inclusive, compute_capability, spec)
    archs = parse_compute_capability(compute_capability)
    kind, init_dt = _init_info(init_value)
    key = (_arrays.array_dtype(d_in, "d_in"), _arrays.array_dtype(d_out, "d_out"), spec.key, kind, init_dt, inclusive,
           None if archs is None else tuple(archs), spec.state_size, spec.state_alignment)
    obj = wrapper_caches.get(key)
    if obj is None:
        obj = _Scan(d_in, d_out, op, init_value, inclusive, archs, spec)
        wrapper_caches.put(key, obj)
    return obj


def make_inclusive_scan(*, d_in: Any, d_out: Any, op: Any, init_value: Any = None,
                        compute_capability: Any = None) -> _Scan:
    """Build (or fetch from cache) an inclusive scan: ``d_out[i] = init ⊕ d_in[0] ⊕ ... ⊕ d_in[i]``.

    Args:
        d_in: device array (or ``ProxyArray`` when building ahead of time) of input items.
        d_out: device array of results; its dtype is the type the scan computes in.
        op: an associative ``OpKind``, Python callable ``f(a, b) -> value`` or ``RawOp``.
        init_value: None, a host value (numpy scalar/array, gpu_struct value, ``ProxyValue``)
            or a one-element device array (``ProxyArray``) read when the kernel runs.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(1, 1001, dtype=np.int32); y = cp.empty_like(x)
        scan = cuprims.make_inclusive_scan(d_in=x, d_out=y, op=cuprims.OpKind.PLUS)
        tmp = cp.empty(scan(temp_storage=None, d_in=x, d_out=y, op=cuprims.OpKind.PLUS,
                            init_value=None, num_items=x.size), np.uint8)
        scan(temp_storage=tmp, d_in=x, d_out=y, op=cuprims.OpKind.PLUS, init_value=None,
             num_items=x.size)
        assert int(y[-1]) == 500500
    """
    return _make(d_in, d_out, op, init_value, True, compute_capability)


def make_exclusive_scan(*, d_in: Any, d_out: Any, op: Any, init_value: Any, compute_capability: Any = None) -> _Scan:
    """Build (or fetch from cache) an exclusive scan: ``d_out[0] = init``,
    ``d_out[i] = init ⊕ d_in[0] ⊕ ... ⊕ d_in[i-1]``.

    Args:
        d_in: device array (or ``ProxyArray``) of input items.
        d_out: device array of results; its dtype is the type the scan computes in.
        op: an associative ``OpKind``, Python callable or ``RawOp``.
        init_value: a host value (numpy scalar/array, gpu_struct value, ``ProxyValue``) or a
            one-element device array (``ProxyArray``) read when the kernel runs. Required.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.ones(8, dtype=np.int64); y = cp.empty_like(x)
        add = lambda a, b: a + b
        scan = cuprims.make_exclusive_scan(d_in=x, d_out=y, op=add, init_value=np.int64(10))
        tmp = cp.empty(scan(temp_storage=None, d_in=x, d_out=y, op=add,
                            init_value=np.int64(10), num_items=8), np.uint8)
        scan(temp_storage=tmp, d_in=x, d_out=y, op=add, init_value=np.int64(10), num_items=8)
        assert y.tolist() == [10, 11, 12, 13, 14, 15, 16, 17]
    """
    return _make(d_in, d_out, op, init_value, False, compute_capability)


def inclusive_scan(*, d_in: Any, d_out: Any, op: Any, init_value: Any = None, num_items: int,
                   stream: Any = None) -> None:
    """Inclusive scan of ``num_items`` items of ``d_in`` into ``d_out``, in one call.

    Temporary storage is allocated and freed on ``stream`` (stream-ordered), so the call
    never synchronises.

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(5, dtype=np.float32); y = cp.empty_like(x)
        cuprims.inclusive_scan(d_in=x, d_out=y, op=cuprims.OpKind.PLUS, num_items=5)
        assert y.tolist() == [0, 1, 3, 6, 10]
    """
    obj = _make(d_in, d_out, op, init_value, True, None)
    obj._run(None, d_in, d_out, num_items, op, init_value, stream, True)


def exclusive_scan(*, d_in: Any, d_out: Any, op: Any, init_value: Any, num_items: int, stream: Any = None) -> None:
    """Exclusive scan of ``num_items`` items of ``d_in`` into ``d_out``, in one call.

    ``init_value`` may be a one-element device array, read by the kernel when it runs.

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(1, 6, dtype=np.int32); y = cp.empty_like(x)
        cuprims.exclusive_scan(d_in=x, d_out=y, op=cuprims.OpKind.MULTIPLIES,
                               init_value=np.int32(1), num_items=5)
        assert y.tolist() == [1, 1, 2, 6, 24]
    """
    obj = _make(d_in, d_out, op, init_value, False, None)
    obj._run(None, d_in, d_out, num_items, op, init_value, stream, True)
