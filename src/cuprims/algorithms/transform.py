"""Device-wide transforms: ``d_out[i] = op(d_in[i])`` and ``d_out[i] = op(d_in1[i], d_in2[i])``.

``make_unary_transform`` / ``make_binary_transform`` build an object; calling it runs the
transform (a transform needs no temporary storage, so there is no ``temp_storage``
argument); ``unary_transform`` / ``binary_transform`` do both in one call.

The result of ``op`` is converted to ``d_out``'s type, so inputs and output may have
different types (``int8`` in, ``float32`` out). Built-in operators follow the rules in
:mod:`cuprims._jit.codegen_transform` (binary ones compute in numpy's common type of the
inputs, comparisons give ``bool``).

Device code is CUB's own transform kernel; its host dispatch (CUB's
``dispatch_transform.cuh``) is ours, here, driven by the policy the compiled code exports:

* bulk-copy (TMA, sm_90+) and LDGSTS (sm_80) algorithms stage each block's tile in
  shared memory. Items per thread grow until ``occupancy x tile x bytes loaded per item``
  reaches the policy's bytes-in-flight target (found once per device from the occupancy
  calculator), then shrink for small problems so every SM gets work; the input pointers
  are passed aligned down to the copy alignment with their head padding.
* the vectorized algorithm uses its fixed tile when every pointer is aligned to a vector,
  and otherwise (like the prefetch algorithm) sizes items per thread from bytes in flight.

Offsets are 64-bit, so more than 2^31 items work.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from .. import _arrays
from .._jit import driver
from .._jit.build import OpInput
from .._jit.codegen import op_symbol
from .._jit.codegen_transform import (ALGO_LDGSTS, ALGO_UBLKCP, ALGO_VECTORIZED, check_transform_builtin,
                                      transform_source)
from .._streams import stream_handle
from ..errors import ArgumentError, CudaError
from ..op import OpSpec, RawOp, op_spec
from ..types import value_type
from ._common import (Builds, CompiledAlgorithm, PerThreadCache, check_num_items, parse_compute_capability, targets)

# One 16-byte kernel argument per input: {pointer, int head padding, 4 bytes of padding}
# (CUB's kernel_arg union; its layout is pinned by static_asserts in cuprims_transform.cuh).
_INPUT_ARG = struct.Struct("<Qi4x")
_MAX_GRID = (1 << 31) - 1
_TRUE, _FALSE = b"\x01", b"\x00"


class _Plan:
    """How to launch on one device (computed once per device from the exported policy and
    the occupancy calculator)."""

    __slots__ = ("kernel", "device", "threads", "is_async", "cfg_ipt", "spread", "min_ipt", "max_ipt",
                 "smem_1", "smem_step", "align_mask", "vectorized", "vec_ipt", "out_vec_mask", "in_vec_masks")

    def __init__(self, **kw: Any):
        for k, v in kw.items():
            setattr(self, k, v)

    def config(self, n: int, p_out: int, p_ins: tuple[int, ...]) -> tuple[int, int, int, bytes]:
        """(items per thread, grid, dynamic shared memory, can_vectorize flag) for ``n`` items."""
        if self.vectorized and not (p_out & self.out_vec_mask) and not any(
                p & m for p, m in zip(p_ins, self.in_vec_masks)):
            ipt, flag = self.vec_ipt, _TRUE
        else:
            # enough blocks for every SM, but never more items per thread than bytes in flight need
            ipt = min(self.cfg_ipt, -(-n // self.spread))
            ipt = self.min_ipt if ipt < self.min_ipt else self.max_ipt if ipt > self.max_ipt else ipt
            flag = _FALSE
        tile = self.threads * ipt
        smem = self.smem_1 + (ipt - 1) * self.smem_step if self.is_async else 0
        return ipt, -(-n // tile), smem, flag


def _plan_for(loaded: Any, device: int) -> _Plan:
    meta = loaded.meta
    name = loaded.names[0]
    threads = meta["threads"]
    algorithm = meta["algorithm"]
    is_async = algorithm in (ALGO_LDGSTS, ALGO_UBLKCP)
    sm = driver.sm_count(device)
    loaded_bytes = meta["loaded_bytes"]
    min_bytes = meta["min_bytes_in_flight"]
    smem_1, step = meta["smem_1"], meta["smem_2"] - meta["smem_1"]
    if is_async:
        # Grow items per thread until the SM holds the bytes in flight the policy asks for
        # (or shared memory runs out); CUB's dispatch does the same search.
        cfg = None
        for ipt in range(meta["min_ipt"], meta["max_ipt"] + 1):
            smem = smem_1 + (ipt - 1) * step
            if smem > meta["smem_cap"]:
                break
            occupancy = loaded.module.max_active_blocks(name, threads, smem)
            if occupancy == 0:
                break
            cfg = (ipt, occupancy)
            if occupancy * threads * ipt * loaded_bytes >= min_bytes:
                break
        if cfg is None:
            raise CudaError("cuOccupancyMaxActiveBlocksPerMultiprocessor", "no resident block",
                            f"transform kernel with {threads} threads and {smem_1} bytes of shared memory")
        cfg_ipt, occupancy = cfg
    else:
        occupancy = max(1, loaded.module.max_active_blocks(name, threads, 0))
        if loaded_bytes == 0:
            cfg_ipt = meta["ipt_no_input"]
        else:
            cfg_ipt = -(-min_bytes // (occupancy * threads * loaded_bytes))
    align = meta["copy_align"]
    vec = meta["vec_size"]
    in_sizes = [s for s in (meta["in1_size"], meta["in2_size"]) if s]
    return _Plan(kernel=loaded.handles[0], device=device, threads=threads, is_async=is_async, cfg_ipt=cfg_ipt,
                 spread=sm * threads * occupancy, min_ipt=meta["min_ipt"], max_ipt=meta["max_ipt"],
                 smem_1=smem_1, smem_step=step, align_mask=(align - 1) if is_async else 0,
                 vectorized=algorithm == ALGO_VECTORIZED, vec_ipt=meta["vec_ipt"],
                 out_vec_mask=meta["out_size"] * vec - 1, in_vec_masks=tuple(s * vec - 1 for s in in_sizes))


class _Transform(CompiledAlgorithm):
    """Shared machinery of the unary and binary transform objects."""

    _IN_NAMES: tuple[str, ...] = ()

    def __init__(self, d_ins: tuple[Any, ...], d_out: Any, op: Any, compute_capability: Any,
                 spec: OpSpec | None = None):
        names = self._IN_NAMES
        self._in_dtypes = tuple(_arrays.array_dtype(x, n) for x, n in zip(d_ins, names))
        self._out_dtype = _arrays.array_dtype(d_out, "d_out")
        in_vts = tuple(value_type(dt, argument=n) for dt, n in zip(self._in_dtypes, names))
        out_vt = value_type(self._out_dtype, argument="d_out")
        self._spec = spec = spec if spec is not None else op_spec(op)
        if spec.kind == "builtin":
            check_transform_builtin(spec, in_vts, out_vt)
        self._in_vts, self._out_vt = in_vts, out_vt

        def make_source(arch: int):
            return transform_source(inputs=in_vts, out=out_vt, op=spec, arch=arch)

        ops = [] if spec.kind == "builtin" else [OpInput(op_symbol(spec, "cuprims_op_0"), spec, in_vts, out_vt)]
        self._builds = Builds(make_source, ops)
        self._builds.build_for(targets(compute_capability), [op] if ops else [])
        functor_size = 1
        if spec.state_size:
            functor_size = -(-spec.state_size // spec.state_alignment) * spec.state_alignment
        self._functor_size = functor_size
        self._state = op.state.ljust(functor_size, b"\0") if isinstance(op, RawOp) and spec.state_size else b"\0"
        # transform_kernel(num_items, items_per_thread, can_vectorize, pred, op, out, inputs...)
        self._params = driver.ParamPack(("i64", "i32", 1, 1, functor_size, "ptr") + (16,) * len(d_ins))
        self._plan: _Plan | None = None
        # C++ alignment of each type (numpy aligns complex numbers only to their component)
        self._in_masks = tuple(vt.alignment - 1 for vt in in_vts)
        self._out_mask = out_vt.alignment - 1

    def _device_plan(self, device: int, op: Any) -> _Plan:
        loaded = self._builds._by_device.get(device)
        if loaded is None:
            loaded = self._builds.loaded(device, [op] if self._spec.kind != "builtin" else [])
        plan = loaded.extra.get("plan")
        if plan is None:
            plan = loaded.extra["plan"] = _plan_for(loaded, device)
        self._plan = plan
        return plan

    def _read(self, x: Any, name: str, dtype: np.dtype, n: int, mask: int) -> int:
        return _arrays.checked_pointer(x, name, dtype, n, mask)

    def _run(self, d_ins: tuple[Any, ...], d_out: Any, num_items: Any, op: Any, stream: Any) -> None:
        n = num_items if type(num_items) is int and num_items >= 0 else check_num_items(num_items)
        p_ins = tuple(self._read(x, name, dt, n, m)
                      for x, name, dt, m in zip(d_ins, self._IN_NAMES, self._in_dtypes, self._in_masks))
        p_out = self._read(d_out, "d_out", self._out_dtype, n, self._out_mask)
        s = stream_handle(stream) if stream is not None else 0
        if n == 0:
            return
        state = self._state
        if self._spec.state_size and isinstance(op, RawOp):
            state = op.state.ljust(self._functor_size, b"\0")
        plan = self._plan or self._device_plan(driver.current_device(), op)
        try:
            self._launch(plan, n, p_ins, p_out, state, s)
        except CudaError:
            device = driver.current_device()
            if device == plan.device:
                raise
            # Another device (possibly another architecture) is current: use its build.
            self._plan = None
            self._launch(self._device_plan(device, op), n, p_ins, p_out, state, s)

    def _launch(self, plan: _Plan, n: int, p_ins: tuple[int, ...], p_out: int, state: bytes, s: int) -> None:
        ipt, grid, smem, flag = plan.config(n, p_out, p_ins)
        if grid > _MAX_GRID:
            raise ArgumentError("num_items", f"at most {_MAX_GRID * plan.threads * ipt} items for one launch", n)
        mask = plan.align_mask
        args = [_INPUT_ARG.pack(p & ~mask, p & mask) for p in p_ins]
        params = self._params.pack(n, ipt, flag, b"\0", state, p_out, *args)
        driver.launch(plan.kernel, grid, plan.threads, s, params, smem)



class _UnaryTransform(_Transform):
    """A unary transform built for fixed types and operator; call it to run.

    ``transform(d_in=x, d_out=y, op=op, num_items=n, stream=s)`` writes
    ``y[i] = op(x[i])`` for ``i < n`` on ``stream``.
    """

    _IN_NAMES = ("d_in",)

    def __call__(self, *, d_in: Any, d_out: Any, op: Any = None, num_items: int, stream: Any = None) -> None:
        """Run the transform on ``num_items`` items."""
        self._run((d_in,), d_out, num_items, op, stream)


class _BinaryTransform(_Transform):
    """A binary transform built for fixed types and operator; call it to run.

    ``transform(d_in1=a, d_in2=b, d_out=y, op=op, num_items=n, stream=s)`` writes
    ``y[i] = op(a[i], b[i])`` for ``i < n`` on ``stream``.
    """

    _IN_NAMES = ("d_in1", "d_in2")

    def __call__(self, *, d_in1: Any, d_in2: Any, d_out: Any, op: Any = None, num_items: int,
                 stream: Any = None) -> None:
        """Run the transform on ``num_items`` items."""
        self._run((d_in1, d_in2), d_out, num_items, op, stream)


# ------------------------------------------------------------------- public functions

wrapper_caches = PerThreadCache()



def _make(cls: type, d_ins: tuple[Any, ...], d_out: Any, op: Any, compute_capability: Any) -> _Transform:
    spec = op_spec(op)
    if not spec.persistent:
        return cls(d_ins, d_out, op, compute_capability, spec)
    archs = parse_compute_capability(compute_capability)
    key = (cls.__name__, tuple(_arrays.array_dtype(x, n) for x, n in zip(d_ins, cls._IN_NAMES)), _arrays.array_dtype(d_out, "d_out"),
           spec.key, None if archs is None else tuple(archs), spec.state_size, spec.state_alignment)
    obj = wrapper_caches.get(key)
    if obj is None:
        obj = cls(d_ins, d_out, op, archs, spec)
        wrapper_caches.put(key, obj)
    return obj


def make_unary_transform(*, d_in: Any, d_out: Any, op: Any, compute_capability: Any = None) -> _UnaryTransform:
    """Build (or fetch from cache) a transform writing ``d_out[i] = op(d_in[i])``.

    Args:
        d_in: device array (or ``ProxyArray`` when building ahead of time) of input items.
        d_out: device array receiving the results; ``op``'s result is converted to its dtype.
        op: a unary ``OpKind`` (NEGATE, IDENTITY, BIT_NOT, LOGICAL_NOT), a Python callable
            ``f(x) -> value`` or a ``RawOp`` (``void name(void* in, void* out)``).
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(1000, dtype=np.float32); y = cp.empty_like(x)
        twice = cuprims.make_unary_transform(d_in=x, d_out=y, op=lambda v: v * 2 + 1)
        twice(d_in=x, d_out=y, op=lambda v: v * 2 + 1, num_items=x.size)
    """
    return _make(_UnaryTransform, (d_in,), d_out, op, compute_capability)  # type: ignore[return-value]


def make_binary_transform(*, d_in1: Any, d_in2: Any, d_out: Any, op: Any,
                          compute_capability: Any = None) -> _BinaryTransform:
    """Build (or fetch from cache) a transform writing ``d_out[i] = op(d_in1[i], d_in2[i])``.

    Args:
        d_in1, d_in2: device arrays (or ``ProxyArray`` placeholders) of input items; their
            dtypes may differ.
        d_out: device array receiving the results; ``op``'s result is converted to its dtype.
        op: a binary ``OpKind`` (PLUS, MINUS, MULTIPLIES, DIVIDES, MODULUS, comparisons,
            MINIMUM, MAXIMUM, bit and logical operators), a Python callable ``f(a, b) -> value``
            or a ``RawOp`` (``void name(void* a, void* b, void* out)``).
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        a = cp.arange(10, dtype=np.int32); b = cp.full(10, 3, np.int32)
        y = cp.empty(10, np.bool_)
        less = cuprims.make_binary_transform(d_in1=a, d_in2=b, d_out=y, op=cuprims.OpKind.LESS)
        less(d_in1=a, d_in2=b, d_out=y, op=cuprims.OpKind.LESS, num_items=10)
    """
    return _make(_BinaryTransform, (d_in1, d_in2), d_out, op, compute_capability)  # type: ignore[return-value]


def unary_transform(*, d_in: Any, d_out: Any, op: Any, num_items: int, stream: Any = None) -> None:
    """Write ``d_out[i] = op(d_in[i])`` for ``i < num_items``, in one call (on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(10, dtype=np.int8); y = cp.empty(10, np.float32)
        cuprims.unary_transform(d_in=x, d_out=y, op=lambda v: v * 0.5, num_items=10)
        assert float(y[3]) == 1.5
    """
    obj = make_unary_transform(d_in=d_in, d_out=d_out, op=op)
    obj._run((d_in,), d_out, num_items, op, stream)


def binary_transform(*, d_in1: Any, d_in2: Any, d_out: Any, op: Any, num_items: int, stream: Any = None) -> None:
    """Write ``d_out[i] = op(d_in1[i], d_in2[i])`` for ``i < num_items``, in one call (on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        a = cp.arange(10, dtype=np.float32); b = cp.ones(10, np.float32); y = cp.empty_like(a)
        cuprims.binary_transform(d_in1=a, d_in2=b, d_out=y, op=cuprims.OpKind.PLUS, num_items=10)
        assert float(y[9]) == 10.0
    """
    obj = make_binary_transform(d_in1=d_in1, d_in2=d_in2, d_out=d_out, op=op)
    obj._run((d_in1, d_in2), d_out, num_items, op, stream)
