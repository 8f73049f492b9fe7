"""Device-wide reduction: ``make_reduce_into``, the reducer object, and ``reduce_into``.

The result has the type of ``d_out``: items are converted to it and combined with
``op``; ``h_init`` (converted to that type too) is combined with the result, and is the
result for an empty input. Without ``h_init`` an empty input leaves ``d_out`` untouched.

Host dispatch (ours, mirroring CUB's): a problem that fits one tile of the single-tile
policy runs one kernel and needs no temporary storage; larger problems run CUB's
AgentReduce over an even share of tiles per block (grid = occupancy x SMs x 5, capped by
the tile count) into per-block partials, then CUB's single-tile kernel combines those
with ``h_init``. Tile sizes come from the compiled code's exported policy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _arrays
from .._enums import Determinism
from .._jit import driver
from .._jit.build import OpInput
from .._jit.codegen import check_binary_builtin, op_symbol, reduce_source
from .._streams import stream_handle
from ..errors import ArgumentError, CudaError
from ..op import OpSpec, RawOp, op_spec
from ..types import ValueType, host_bytes, value_type
from ._common import (Builds, CompiledAlgorithm, PerThreadCache, check_num_items, parse_compute_capability, targets,
                     temp_storage_info)

# CUB launches this many blocks per SM-occupancy slot for reductions.
_SUBSCRIPTION_FACTOR = 5
# Grid cap for Determinism.GPU_TO_GPU: a constant, so that the partition into partial
# sums (and with it the rounding) is the same on every GPU.
_PORTABLE_GRID = 2048


class _Plan:
    """How to launch on one device: kernel handles (over the input, over the partials),
    block size, items per tile, grid cap, accumulator size and alignment."""

    __slots__ = ("first", "second", "threads", "tile_items", "max_grid", "accum_size", "accum_align", "device")

    def __init__(self, first: Any, second: Any, threads: int, tile_items: int, max_grid: int, accum_size: int,
                 accum_align: int, device: int):
        self.first, self.second, self.threads, self.tile_items = first, second, threads, tile_items
        self.max_grid, self.accum_size, self.accum_align, self.device = max_grid, accum_size, accum_align, device


def _init_dtype(h_init: Any) -> np.dtype | None:
    if h_init is None:
        return None
    proxy = getattr(h_init, "_cuprims_proxy_dtype", None)
    if proxy is not None:
        return proxy
    struct_dtype = getattr(type(h_init), "_cuprims_dtype", None)
    if struct_dtype is not None:
        return struct_dtype
    dt = getattr(h_init, "dtype", None)
    if isinstance(dt, np.dtype):
        return dt
    return np.asarray(h_init).dtype


def _check_init_compatible(init_dt: np.dtype, accum: ValueType) -> None:
    if accum.is_struct or init_dt.names is not None:
        if init_dt.itemsize != accum.size or (init_dt.names is None) != (not accum.is_struct):
            raise ArgumentError("h_init", f"a value of the output's type {accum.dtype}", init_dt)
        return
    if init_dt.kind not in "biufc":
        raise ArgumentError("h_init", f"a value convertible to {accum.dtype}", init_dt)
    if init_dt.kind == "c" and accum.kind != "c":
        raise ArgumentError("h_init", f"a real value for a {accum.dtype} output", init_dt)


class _Reduce(CompiledAlgorithm):
    """A reduction built for fixed types and operator; call it to run.

    ``reducer(temp_storage=None, ...)`` returns the temporary bytes needed and launches
    nothing; ``reducer(temp_storage=buf, ...)`` runs on ``stream``.
    """

    def __init__(self, d_in: Any, d_out: Any, op: Any, h_init: Any, determinism: Any,
                 compute_capability: Any, spec: OpSpec | None = None):
        self._in_dtype = _arrays.array_dtype(d_in, "d_in")
        self._out_dtype = _arrays.array_dtype(d_out, "d_out")
        in_vt = value_type(self._in_dtype, argument="d_in")
        accum = value_type(self._out_dtype, argument="d_out")
        init_dt = _init_dtype(h_init)
        if init_dt is not None:
            _check_init_compatible(init_dt, accum)
        if accum.is_struct != in_vt.is_struct or (accum.is_struct and in_vt.code != accum.code):
            raise ArgumentError("d_in", f"items of the output's type {accum.dtype}", self._in_dtype)
        self._spec = spec = spec if spec is not None else op_spec(op)
        if spec.kind == "builtin":
            check_binary_builtin(spec, accum)
        try:
            det = determinism if isinstance(determinism, Determinism) else Determinism[str(determinism).upper()] \
                if isinstance(determinism, str) else Determinism(determinism)
        except (KeyError, ValueError):
            raise ArgumentError("determinism", "a cuprims.Determinism value", determinism) from None
        self._determinism = det
        self._accum = accum
        self._has_init = init_dt is not None
        portable = det is Determinism.GPU_TO_GPU
        has_init = self._has_init

        def make_source(arch: int):
            return reduce_source(in_type=in_vt, accum=accum, op=spec, has_init=has_init,
                                 deterministic_across_gpus=portable, arch=arch)

        ops = [] if spec.kind == "builtin" else [
            OpInput(op_symbol(spec, "cuprims_op_0"), spec, (accum, accum), accum)]
        self._builds = Builds(make_source, ops)
        self._builds.build_for(targets(compute_capability), [op] if ops else [])
        self._portable = portable
        functor_size = 1
        if spec.state_size:
            functor_size = -(-spec.state_size // spec.state_alignment) * spec.state_alignment
        self._functor_size = functor_size
        self._state = op.state.ljust(functor_size, b"\0") if isinstance(op, RawOp) and spec.state_size else b"\0"
        init_size = accum.size if self._has_init else 1
        # reduce_kernel(d_in, d_out, num_items, op, init, finalize); one pack per pass so the
        # two launches of a large problem never share a parameter block
        self._first_params = driver.ParamPack(("ptr", "ptr", "i64", functor_size, init_size, "i32"))
        self._second_params = driver.ParamPack(("ptr", "ptr", "i64", functor_size, init_size, "i32"))
        self._plan: _Plan | None = None
        # cuda::std::complex<T> is aligned to its full size, numpy's complex only to T's
        self._in_align_mask = in_vt.size - 1 if in_vt.kind == "c" else 0
        self._out_align_mask = accum.size - 1 if accum.kind == "c" else 0
        self._init_scalar_type = self._out_dtype.type if self._has_init and not accum.is_struct else None

    # -- per device facts (computed once per device) ---------------------------------
    def _device_plan(self, device: int, op: Any) -> "_Plan":
        loaded = self._builds._by_device.get(device)
        if loaded is None:
            loaded = self._builds.loaded(device, [op] if self._spec.kind != "builtin" else [])
        plan = loaded.extra.get("plan")
        if plan is None:
            meta = loaded.meta
            # handles follow codegen order: over the input, over the partials
            first_k, second_k = loaded.handles
            threads = meta["threads"]
            tile_items = threads * meta["items"]
            if self._portable:
                max_grid = _PORTABLE_GRID
            else:
                occupancy = loaded.module.max_active_blocks(loaded.names[0], threads)
                max_grid = max(1, occupancy) * driver.sm_count(device) * _SUBSCRIPTION_FACTOR
            plan = _Plan(first_k, second_k, threads, tile_items, max_grid, meta["accum_size"],
                         meta["accum_align"], device)
            loaded.extra["plan"] = plan
        self._plan = plan
        return plan

    def _init_bytes(self, h_init: Any) -> bytes:
        if type(h_init) is self._init_scalar_type:  # the common case: a numpy scalar of the output type
            return h_init.tobytes()
        if not self._has_init:
            if h_init is not None:
                raise ArgumentError("h_init", "None (this reducer was built without an initial value)", h_init)
            return b"\0"
        if h_init is None:
            raise ArgumentError("h_init", f"a {self._accum.dtype} value (this reducer was built with one)", None)
        return host_bytes(h_init, self._accum, argument="h_init")

    def _launch(self, plan: "_Plan", grid: int, stream: int, p_in: int, p_out: int, temp_ptr: int, n: int,
                state: bytes, init: bytes) -> None:
        if grid == 0:
            driver.launch(plan.first, 1, plan.threads, stream, self._first_params.pack(p_in, p_out, n, state, init, 1))
            return
        driver.launch(plan.first, grid, plan.threads, stream, self._first_params.pack(p_in, temp_ptr, n, state, init, 0))
        driver.launch(plan.second, 1, plan.threads, stream, self._second_params.pack(temp_ptr, p_out, grid, state, init, 1))

    def _run(self, temp_storage: Any, d_in: Any, d_out: Any, num_items: Any, op: Any, h_init: Any,
             stream: Any, one_shot: bool) -> int | None:
        n = num_items if type(num_items) is int and num_items >= 0 else check_num_items(num_items)
        p_in = _arrays.checked_pointer(d_in, "d_in", self._in_dtype, n, self._in_align_mask)
        p_out = _arrays.checked_pointer(d_out, "d_out", self._out_dtype, 1, self._out_align_mask, None)
        init = self._init_bytes(h_init)
        state = self._state
        if self._spec.state_size and isinstance(op, RawOp):
            state = op.state.ljust(self._functor_size, b"\0")
        # The plan of the last device used: kernel handles of a CUDA library are valid in
        # every context, so only a launch failure (another architecture) needs a fresh look.
        plan = self._plan or self._device_plan(driver.current_device(), op)
        if n <= plan.tile_items:  # one tile: a single block does it all, no temporary storage
            grid, needed = 0, 1
        else:
            grid = min(-(-n // plan.tile_items), plan.max_grid)
            needed = grid * plan.accum_size
        if temp_storage is None and not one_shot:
            return needed
        s = stream_handle(stream) if stream is not None else 0
        if grid == 0 and self._plan is plan:  # the common small case, kept short
            try:
                driver.launch(plan.first, 1, plan.threads, s, self._first_params.pack(p_in, p_out, n, state, init, 1))
                return None
            except CudaError:
                pass  # fall through: another device may be current
        owned = temp_ptr = 0
        if grid:
            if one_shot:
                owned = temp_ptr = driver.alloc_async(needed, s)
            else:
                temp_ptr, _ = temp_storage_info(temp_storage, needed)
                if temp_ptr % plan.accum_align:
                    raise ArgumentError("temp_storage", f"an address aligned to {plan.accum_align} bytes", hex(temp_ptr))
        try:
            try:
                self._launch(plan, grid, s, p_in, p_out, temp_ptr, n, state, init)
            except CudaError:
                device = driver.current_device()
                if device == plan.device:
                    raise
                # Another device (possibly another architecture) is current: use its build.
                self._plan = None
                fresh = self._device_plan(device, op)
                if grid and fresh.max_grid != plan.max_grid and not one_shot:
                    raise ArgumentError("temp_storage", "storage sized on the device it is used with "
                                        "(query the size again after switching devices)", "a stale size")
                self._launch(fresh, grid, s, p_in, p_out, temp_ptr, n, state, init)
        finally:
            if owned:
                driver.free_async(owned, s)
        return None

    def __call__(self, *, temp_storage: Any, d_in: Any, d_out: Any, num_items: int, op: Any = None,
                 h_init: Any = None, stream: Any = None) -> int | None:
        """Run the reduction (or, with ``temp_storage=None``, return the temporary bytes needed)."""
        return self._run(temp_storage, d_in, d_out, num_items, op, h_init, stream, False)



# ------------------------------------------------------------------- public functions

wrapper_caches = PerThreadCache()



def make_reduce_into(*, d_in: Any, d_out: Any, op: Any, h_init: Any = None, **kwargs: Any) -> _Reduce:
    """Build (or fetch from cache) a reduction of ``d_in`` into ``d_out[0]``.

    Args:
        d_in: device array (or ``ProxyArray`` when building ahead of time) of input items.
        d_out: device array whose first element receives the result; its dtype is the
            type the reduction computes in.
        op: an ``OpKind``, a Python callable ``f(a, b) -> value`` or a ``RawOp``.
        h_init: initial value (numpy scalar/array, gpu_struct value or ``ProxyValue``), or None.
        compute_capability: build ahead of time for these targets (no GPU needed).
        determinism: a :class:`Determinism` value (default RUN_TO_RUN).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(1000, dtype=np.float32); out = cp.empty(1, np.float32)
        reducer = cuprims.make_reduce_into(d_in=x, d_out=out, op=lambda a, b: a + b,
                                           h_init=np.float32(0))
        tmp = cp.empty(reducer(temp_storage=None, d_in=x, d_out=out, num_items=x.size,
                               h_init=np.float32(0)), np.uint8)
        reducer(temp_storage=tmp, d_in=x, d_out=out, num_items=x.size, h_init=np.float32(0))
    """
    unknown = set(kwargs) - {"compute_capability", "determinism"}
    if unknown:
        raise ArgumentError(sorted(unknown)[0], "one of compute_capability=, determinism=", "an unknown keyword")
    compute_capability = kwargs.get("compute_capability")
    determinism = kwargs.get("determinism", Determinism.RUN_TO_RUN)
    spec = op_spec(op)
    if not spec.persistent:
        return _Reduce(d_in, d_out, op, h_init, determinism, compute_capability, spec)
    archs = parse_compute_capability(compute_capability)
    key = (_arrays.array_dtype(d_in, "d_in"), _arrays.array_dtype(d_out, "d_out"), spec.key, _init_dtype(h_init), determinism,
           None if archs is None else tuple(archs), spec.state_size, spec.state_alignment)
    obj = wrapper_caches.get(key)
    if obj is None:
        obj = _Reduce(d_in, d_out, op, h_init, determinism, archs, spec)
        wrapper_caches.put(key, obj)
    return obj


def reduce_into(*, d_in: Any, d_out: Any, num_items: int, op: Any, h_init: Any = None, stream: Any = None,
                **kwargs: Any) -> None:
    """Reduce ``num_items`` items of ``d_in`` with ``op`` into ``d_out[0]``, in one call.

    Temporary storage is allocated and freed on ``stream`` (stream-ordered), so the
    call never synchronises.

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(10, dtype=np.int32); out = cp.empty(1, np.int32)
        cuprims.reduce_into(d_in=x, d_out=out, num_items=10, op=cuprims.OpKind.PLUS,
                            h_init=np.int32(0))
        assert int(out[0]) == 45
    """
    obj = make_reduce_into(d_in=d_in, d_out=d_out, op=op, h_init=h_init, **kwargs)
    obj._run(None, d_in, d_out, num_items, op, h_init, stream, True)
