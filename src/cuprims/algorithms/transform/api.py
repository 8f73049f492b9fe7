"""Device-wide transforms: ``d_out[i] = op(d_in[i])`` and ``d_out[i] = op(d_in1[i], d_in2[i])``.

``make_unary_transform`` / ``make_binary_transform`` build an object; calling it runs the
transform (a transform needs no temporary storage, so there is no ``temp_storage``
argument); ``unary_transform`` / ``binary_transform`` do both in one call.

The result of ``op`` is converted to ``d_out``'s type, so inputs and output may have
different types (``int8`` in, ``float32`` out); inputs and output may be iterators. Built-in
operators follow :mod:`cuprims._codegen.builtin_ops` (binary ones compute in numpy's common type
of the inputs, comparisons give ``bool``). Device code is CUB's own transform kernel; its
host dispatch (CUB's ``dispatch_transform.cuh``) is ours, driven by the exported policy:

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

from typing import Any

from cuprims._build.results import OpInput
from cuprims._codegen.common import op_symbol
from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims._runtime.streams import stream_handle
from cuprims.algorithms.arguments import ArgKind, describe, keyword_checked
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.skeleton import Algorithm, Description, Plan, description, functor_size, functor_state
from cuprims.algorithms.transform.source import (ALGO_LDGSTS, ALGO_UBLKCP, ALGO_VECTORIZED, INPUT_ARG,
                                                 check_transform_builtin, input_arg_size, transform_source)
from cuprims.errors import ArgumentError, CudaError
from cuprims.op import OpSpec, op_spec
from cuprims.typing import ArrayIteratorOrProxy, ArrayOrIterator, ComputeCapabilityLike, OperatorLike, StreamLike

_MAX_GRID = (1 << 31) - 1
_TRUE, _FALSE = b"\x01", b"\x00"


@description
class TransformDescription(Description):
    """A transform: the inputs it reads (one or two), the output it writes, the operator."""

    inputs: tuple[ArgKind, ...]
    out: ArgKind
    op: OpSpec

    def source(self, arch: int) -> Source:
        return transform_source(inputs=tuple(a.value for a in self.inputs), out=self.out.value, op=self.op,
                                arch=arch, in_args=self.inputs, out_arg=self.out)

    def _link(self) -> tuple[OpInput, ...]:
        own = () if self.op.kind == "builtin" else (
            OpInput(op_symbol(self.op, "cuprims_op_0"), self.op, tuple(a.value for a in self.inputs), self.out.value),)
        return own + tuple(o for a in self.inputs for o in a.linked_ops()) + self.out.linked_ops()

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        # transform_kernel(num_items, items_per_thread, can_vectorize, pred, op, out, inputs...)
        return (("i64", "i32", 1, 1, functor_size(self.op), self.out.param) + tuple(map(input_arg_size, self.inputs)),)


class _Plan(Plan):
    """How to launch on one device (computed once per device from the exported policy and
    the occupancy calculator)."""

    __slots__ = ("kernel", "device", "threads", "is_async", "cfg_ipt", "spread", "min_ipt", "max_ipt",
                 "smem_1", "smem_step", "align_mask", "vectorized", "vec_ipt", "out_vec_mask", "in_vec_masks")

    def __init__(self, loaded: Loaded, device: int):
        meta = loaded.meta
        name = loaded.names[0]
        self.threads = threads = meta["threads"]
        algorithm = meta["algorithm"]
        self.is_async = is_async = algorithm in (ALGO_LDGSTS, ALGO_UBLKCP)
        loaded_bytes, min_bytes = meta["loaded_bytes"], meta["min_bytes_in_flight"]
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
        vec = meta["vec_size"]
        self.kernel, self.device, self.cfg_ipt = loaded.handles[0], device, cfg_ipt
        self.spread = driver.sm_count(device) * threads * occupancy
        self.min_ipt, self.max_ipt, self.smem_1, self.smem_step = meta["min_ipt"], meta["max_ipt"], smem_1, step
        self.align_mask = (meta["copy_align"] - 1) if is_async else 0
        self.vectorized, self.vec_ipt = algorithm == ALGO_VECTORIZED, meta["vec_ipt"]
        self.out_vec_mask = meta["out_size"] * vec - 1
        self.in_vec_masks = tuple(s * vec - 1 for s in (meta["in1_size"], meta["in2_size"]) if s)

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


class _Transform(Algorithm):
    """Shared machinery of the unary and binary transform objects (no temporary storage)."""

    desc: TransformDescription

    def _setup(self) -> None:
        desc = self.desc
        (self._params,) = self._packs
        self._iterators = not all(a.is_pointer for a in desc.inputs + (desc.out,))

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded, loaded.device)

    # args: (n, input pointers, output pointer, functor state)
    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        n, p_ins, p_out, state = args
        if self._iterators:  # only arrays' addresses matter for vector loads and stores
            ipt, grid, smem, flag = plan.config(n, p_out if type(p_out) is int else 0,
                                                tuple(p if type(p) is int else 0 for p in p_ins))
        else:
            ipt, grid, smem, flag = plan.config(n, p_out, p_ins)
        if grid > _MAX_GRID:
            raise ArgumentError("num_items", f"at most {_MAX_GRID * plan.threads * ipt} items for one launch", n)
        mask = plan.align_mask
        inputs = [INPUT_ARG.pack(p & ~mask, p & mask) if type(p) is int else p for p in p_ins]
        driver.launch(plan.kernel, grid, plan.threads, stream,
                      self._params.pack(n, ipt, flag, b"\0", state, p_out, *inputs), smem)

    def _launch(self, n: int, p_ins: tuple[Any, ...], d_out: Any, op: Any, stream: Any, raw: tuple,
                counts: tuple) -> None:
        """Run on ``n`` items whose inputs are bound (``p_ins``); ``raw``: the input and
        output arguments as given (their iterators' operators, for a build), remembered
        with ``counts`` for the next call (:meth:`Algorithm._recall`) once this one succeeds."""
        bound = (n, p_ins, self.desc.out.bind(d_out, n))
        self._launch_bound(bound, op, stream, raw)
        self._remember(raw, counts, bound)

    def _launch_bound(self, bound: tuple, op: Any, stream: Any, raw: tuple) -> None:
        desc = self.desc
        s = stream_handle(stream) if stream is not None else 0  # checked before any device is asked for
        if bound[0] == 0:
            return
        # the operator's state: read every call
        self._execute(None, s, True, (*bound, functor_state(desc.op, op) if desc.op.state_size else self._state),
                      (op,) + raw)


class UnaryTransform(_Transform):
    """A unary transform built for fixed types and operator (what
    :func:`make_unary_transform` returns); call it to run.

    ``transform(d_in=x, d_out=y, op=op, num_items=n, stream=s)`` writes
    ``y[i] = op(x[i])`` for ``i < n`` on ``stream``.
    """

    def _run(self, d_in: Any, d_out: Any, num_items: Any, op: Any, stream: Any) -> None:
        arrays, counts = (d_in, d_out), (num_items,)
        bound = self._recall(arrays, counts)
        if bound is not None:
            self._launch_bound(bound, op, stream, arrays)
            return
        n = check_num_items(num_items)
        self._launch(n, (self.desc.inputs[0].bind(d_in, n),), d_out, op, stream, arrays, counts)

    def __call__(self, *, d_in: ArrayOrIterator, d_out: ArrayOrIterator, op: OperatorLike | None = None,
                 num_items: int, stream: StreamLike | None = None) -> None:
        """Run the transform on ``num_items`` items."""
        self._run(d_in, d_out, num_items, op, stream)


class BinaryTransform(_Transform):
    """A binary transform built for fixed types and operator (what
    :func:`make_binary_transform` returns); call it to run.

    ``transform(d_in1=a, d_in2=b, d_out=y, op=op, num_items=n, stream=s)`` writes
    ``y[i] = op(a[i], b[i])`` for ``i < n`` on ``stream``.
    """

    def _run(self, d_in1: Any, d_in2: Any, d_out: Any, num_items: Any, op: Any, stream: Any) -> None:
        arrays, counts = (d_in1, d_in2, d_out), (num_items,)
        bound = self._recall(arrays, counts)
        if bound is not None:
            self._launch_bound(bound, op, stream, arrays)
            return
        n = check_num_items(num_items)
        in1, in2 = self.desc.inputs
        self._launch(n, (in1.bind(d_in1, n), in2.bind(d_in2, n)), d_out, op, stream, arrays, counts)

    def __call__(self, *, d_in1: ArrayOrIterator, d_in2: ArrayOrIterator, d_out: ArrayOrIterator,
                 op: OperatorLike | None = None, num_items: int, stream: StreamLike | None = None) -> None:
        """Run the transform on ``num_items`` items."""
        self._run(d_in1, d_in2, d_out, num_items, op, stream)


def _describe(d_out: Any, op: Any, *d_ins: Any) -> TransformDescription:
    """Check the build arguments and describe the transform of ``d_ins`` (one or two)."""
    names = ("d_in",) if len(d_ins) == 1 else ("d_in1", "d_in2")
    inputs = tuple(describe(x, name, iterators=True) for x, name in zip(d_ins, names))
    out = describe(d_out, "d_out", iterators=True, output=True)
    spec = op_spec(op, bind_captures=True)
    if spec.kind == "builtin":
        check_transform_builtin(spec, tuple(a.value for a in inputs), out.value)
    return TransformDescription(inputs, out, spec)


# ------------------------------------------------------------------- public functions

@keyword_checked
def make_unary_transform(*, d_in: ArrayIteratorOrProxy, d_out: ArrayIteratorOrProxy, op: OperatorLike,
                         compute_capability: ComputeCapabilityLike | None = None) -> UnaryTransform:
    """Build (or fetch from cache) a transform writing ``d_out[i] = op(d_in[i])``.

    Args:
        d_in: device array (or ``ProxyArray`` when building ahead of time) of input items.
        d_out: device array receiving the results; ``op``'s result is converted to its dtype.
        op: a unary ``OpKind`` (NEGATE, IDENTITY, BIT_NOT, LOGICAL_NOT), a Python callable
            ``f(x) -> value`` or a ``RawOp`` (``void name(void* in, void* out)``). Device arrays
            a Python ``op`` captures (a global, closure variable or default argument) are read
            at each call, never compiled in: pass ``op=`` to every call of the object.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(1000, dtype=np.float32); y = cp.empty_like(x)
        twice = cuprims.make_unary_transform(d_in=x, d_out=y, op=lambda v: v * 2 + 1)
        twice(d_in=x, d_out=y, op=lambda v: v * 2 + 1, num_items=x.size)
    """
    desc = UnaryTransform._described(_describe, d_out, op, d_in)
    return UnaryTransform._make(desc, compute_capability, (op, d_in, d_out))


@keyword_checked
def make_binary_transform(*, d_in1: ArrayIteratorOrProxy, d_in2: ArrayIteratorOrProxy, d_out: ArrayIteratorOrProxy,
                          op: OperatorLike, compute_capability: ComputeCapabilityLike | None = None) -> BinaryTransform:
    """Build (or fetch from cache) a transform writing ``d_out[i] = op(d_in1[i], d_in2[i])``.

    Args:
        d_in1, d_in2: device arrays (or ``ProxyArray`` placeholders) of input items; their
            dtypes may differ.
        d_out: device array receiving the results; ``op``'s result is converted to its dtype.
        op: a binary ``OpKind`` (PLUS, MINUS, MULTIPLIES, DIVIDES, MODULUS, comparisons,
            MINIMUM, MAXIMUM, bit and logical operators), a Python callable ``f(a, b) -> value``
            or a ``RawOp`` (``void name(void* a, void* b, void* out)``). Device arrays a Python
            ``op`` captures are read at each call, as for :func:`make_unary_transform`.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        a = cp.arange(10, dtype=np.int32); b = cp.full(10, 3, np.int32)
        y = cp.empty(10, np.bool_)
        less = cuprims.make_binary_transform(d_in1=a, d_in2=b, d_out=y, op=cuprims.OpKind.LESS)
        less(d_in1=a, d_in2=b, d_out=y, op=cuprims.OpKind.LESS, num_items=10)
    """
    desc = BinaryTransform._described(_describe, d_out, op, d_in1, d_in2)
    return BinaryTransform._make(desc, compute_capability, (op, d_in1, d_in2, d_out))


@keyword_checked
def unary_transform(*, d_in: ArrayOrIterator, d_out: ArrayOrIterator, op: OperatorLike, num_items: int,
                    stream: StreamLike | None = None) -> None:
    """Write ``d_out[i] = op(d_in[i])`` for ``i < num_items``, in one call (on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(10, dtype=np.int8); y = cp.empty(10, np.float32)
        cuprims.unary_transform(d_in=x, d_out=y, op=lambda v: v * 0.5, num_items=10)
        assert float(y[3]) == 1.5
    """
    make_unary_transform.__wrapped__(d_in=d_in, d_out=d_out, op=op)._run(d_in, d_out, num_items, op, stream)


@keyword_checked
def binary_transform(*, d_in1: ArrayOrIterator, d_in2: ArrayOrIterator, d_out: ArrayOrIterator, op: OperatorLike,
                     num_items: int, stream: StreamLike | None = None) -> None:
    """Write ``d_out[i] = op(d_in1[i], d_in2[i])`` for ``i < num_items``, in one call (on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        a = cp.arange(10, dtype=np.float32); b = cp.ones(10, np.float32); y = cp.empty_like(a)
        cuprims.binary_transform(d_in1=a, d_in2=b, d_out=y, op=cuprims.OpKind.PLUS, num_items=10)
        assert float(y[9]) == 10.0
    """
    obj = make_binary_transform.__wrapped__(d_in1=d_in1, d_in2=d_in2, d_out=d_out, op=op)
    obj._run(d_in1, d_in2, d_out, num_items, op, stream)
