"""Device-wide prefix scans: ``make_inclusive_scan``/``inclusive_scan``,
``make_exclusive_scan``/``exclusive_scan`` and the scan object.

``d_out[i]`` receives ``init ⊕ d_in[0] ⊕ ... ⊕ d_in[i]`` (inclusive) or
``init ⊕ d_in[0] ⊕ ... ⊕ d_in[i-1]`` (exclusive, so ``d_out[0] == init``), computed in the
type of ``d_out`` (items are converted to it, like a reduction's accumulator; struct
items of ``d_out``'s layout, a ``ZipIterator``'s, are read as ``d_out``'s). ``op``
must be associative. An inclusive scan may go without ``init_value``; an exclusive scan
needs one. ``init_value`` is a host value (numpy scalar or one-element array, gpu_struct
value or its field values as a dict or tuple), fixed when the call is made, or a
one-element device array, read by the kernel when it runs (so a value computed on the
device by earlier work on the stream is used without a round trip to the host). ``d_in`` and ``d_out`` may be the same array
(an in-place scan).

Host dispatch (ours, mirroring CUB's DispatchScan for its look-back algorithm): one tile
per block; a problem of at most one tile runs one kernel and needs no temporary
storage; larger problems first mark every tile state "not yet set" (init kernel), then
scan with decoupled look-back. Tile size, tile-state bytes per tile and fixed bytes come
from the compiled code's exported metadata (``cuprims_meta``).
"""

from __future__ import annotations

from typing import Any

from cuprims._compile.source import Source
from cuprims.algorithms.arguments import describe, keyword_checked
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.operators import combined_input
from cuprims.algorithms.scan.source import scan_source
from cuprims.algorithms.skeleton import (Algorithm, CombinerDescription, Plan, combiner_spec, description, functor_size,
                                         functor_state)
from cuprims.algorithms.values import described_init, init_argument, init_param, scalar_init_type
from cuprims.errors import ArgumentError
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ComputeCapabilityLike, DeviceArrayLike, InitValue,
                            OperatorLike, StreamLike)


@description
class ScanDescription(CombinerDescription):
    """A prefix scan: input and output, operator, what the initial value is ("none",
    "value": passed at launch, "device": read from a one-element device array) and the
    direction."""

    init_kind: str
    inclusive: bool

    def source(self, arch: int) -> Source:
        return scan_source(in_type=self.d_in.value, accum=self.d_out.value, op=self.op, init_kind=self.init_kind,
                           inclusive=self.inclusive, arch=arch, d_in=self.d_in, d_out=self.d_out)

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        return (
            # scan_init_kernel(tile_storage, num_tiles)
            ("ptr", "i32"),
            # scan_kernel(d_in, d_out, tile_storage, num_tiles, op, init, num_items)
            (self.d_in.param, self.d_out.param, "ptr", "i32", functor_size(self.op),
             init_param(self.init_kind, self.d_out.value), "i64"),
        )


class _Plan(Plan):
    """Kernel handles and the compiled code's tile facts on one device."""

    def __init__(self, loaded: Loaded):
        meta = loaded.meta
        self.init, self.scan = loaded.handles  # codegen order: init kernel, scan kernel
        self.threads = meta["threads"]
        self.tile_items = meta["threads"] * meta["items"]
        self.init_threads = meta["init_threads"]
        self.bytes_per_tile = meta["tile_bytes_per_tile"]
        self.fixed_bytes = meta["tile_fixed_bytes"]
        self.max_tiles = meta["max_tiles"]
        # Programmatic dependent launch (sm_90+), as CUB's scan dispatch does: the scan
        # kernel's blocks are scheduled while the init kernel finishes, and wait for it
        # before touching the tile states (see Algorithm._launcher).
        self.pdl_capable = loaded.arch >= 90


def _describe(d_in: Any, d_out: Any, op: Any, init_value: Any, inclusive: bool) -> ScanDescription:
    in_arg = describe(d_in, "d_in", iterators=True)
    out_arg = describe(d_out, "d_out", iterators=True, output=True)
    accum = out_arg.value
    in_arg = combined_input(in_arg, out_arg)
    init_kind = described_init(init_value, accum, inclusive)
    spec = combiner_spec(op, accum)
    return ScanDescription(in_arg, out_arg, spec, init_kind, inclusive)


class Scan(Algorithm):
    """A prefix scan built for fixed types, operator, init kind and direction (what
    :func:`make_inclusive_scan` and :func:`make_exclusive_scan` return); call it to run
    (``temp_storage=None`` returns the temporary bytes needed and launches nothing)."""

    desc: ScanDescription

    def _setup(self) -> None:
        desc = self.desc
        self._init_params, self._scan_params = self._packs
        self._accum = desc.d_out.value
        self._init_scalar_type = scalar_init_type(self._accum, desc.init_kind == "value")

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded)

    def _init_arg(self, init_value: Any) -> Any:
        """The scan kernel's init argument: value bytes, a device pointer, or a placeholder byte."""
        return init_argument(self.desc.init_kind, self._accum, self._init_scalar_type, init_value)

    # args: (p_in, p_out, n, state, init)
    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        n = args[2]
        num_tiles = -(-n // plan.tile_items)
        if num_tiles > plan.max_tiles:
            raise ArgumentError("num_items", f"at most {plan.max_tiles * plan.tile_items} items (the scan's "
                                "tile count is a 32-bit int)", n)
        return num_tiles * plan.bytes_per_tile + plan.fixed_bytes if num_tiles > 1 else 0

    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        p_in, p_out, n, state, init = args
        if n == 0:
            return
        num_tiles = -(-n // plan.tile_items)
        launch = self._launcher(plan)
        if num_tiles > 1:
            launch(plan.init, -(-num_tiles // plan.init_threads), plan.init_threads, stream,
                   self._init_params.pack(temp, num_tiles))
        launch(plan.scan, num_tiles, plan.threads, stream,
               self._scan_params.pack(p_in, p_out, temp, num_tiles, state, init, n))

    def _run(self, temp_storage: Any, d_in: Any, d_out: Any, num_items: Any, op: Any, init_value: Any,
             stream: Any, one_shot: bool) -> int | None:
        desc = self.desc
        arrays, counts = (d_in, d_out), (num_items,)
        bound = self._recall(arrays, counts)
        memo = None
        if bound is None:
            n = check_num_items(num_items)
            bound = (desc.d_in.bind(d_in, n), desc.d_out.bind(d_out, n), n)
            memo = (arrays, counts, bound)
        # read every call: the initial value (a mutable host array, or a device array) and the operator's state
        args = (*bound, functor_state(desc.op, op) if desc.op.state_size else self._state, self._init_arg(init_value))
        return self._execute(temp_storage, stream, one_shot, args, (op, d_in, d_out), memo=memo)

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in: ArrayOrIterator, d_out: ArrayOrIterator,
                 op: OperatorLike, init_value: InitValue | None, num_items: int,
                 stream: StreamLike | None = None) -> int | None:
        """Run the scan (or, with ``temp_storage=None``, return the temporary bytes needed).

        ``op`` is the operator the scan was built with (a RawOp's state is read again);
        ``init_value`` must be of the kind given at build time: a host value, a
        one-element device array, or None (inclusive scans built without one).
        """
        return self._run(temp_storage, d_in, d_out, num_items, op, init_value, stream, False)


# ------------------------------------------------------------------- public functions

def _make(d_in: ArrayIteratorOrProxy, d_out: ArrayIteratorOrProxy, op: OperatorLike, init_value: InitValue | None,
          inclusive: bool, compute_capability: ComputeCapabilityLike | None) -> Scan:
    desc = Scan._described(_describe, d_in, d_out, op, init_value, inclusive)
    return Scan._make(desc, compute_capability, (op, d_in, d_out))


@keyword_checked
def make_inclusive_scan(*, d_in: ArrayIteratorOrProxy, d_out: ArrayIteratorOrProxy, op: OperatorLike,
                        init_value: InitValue | None = None,
                        compute_capability: ComputeCapabilityLike | None = None) -> Scan:
    """Build (or fetch from cache) an inclusive scan: ``d_out[i] = init ⊕ d_in[0] ⊕ ... ⊕ d_in[i]``.

    Args:
        d_in: device array (or ``ProxyArray`` when building ahead of time) of input items.
        d_out: device array of results; its dtype is the type the scan computes in.
        op: an associative ``OpKind``, Python callable ``f(a, b) -> value`` or ``RawOp``.
        init_value: None, a host value (numpy scalar/array, gpu_struct value or its field
            values as a dict or tuple, ``ProxyValue``) or a one-element device array
            (``ProxyArray``) read when the kernel runs.
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


@keyword_checked
def make_exclusive_scan(*, d_in: ArrayIteratorOrProxy, d_out: ArrayIteratorOrProxy, op: OperatorLike,
                        init_value: InitValue, compute_capability: ComputeCapabilityLike | None = None) -> Scan:
    """Build (or fetch from cache) an exclusive scan: ``d_out[0] = init``,
    ``d_out[i] = init ⊕ d_in[0] ⊕ ... ⊕ d_in[i-1]``.

    Args:
        d_in: device array (or ``ProxyArray``) of input items.
        d_out: device array of results; its dtype is the type the scan computes in.
        op: an associative ``OpKind``, Python callable or ``RawOp``.
        init_value: a host value (numpy scalar/array, gpu_struct value or its field values as
            a dict or tuple, ``ProxyValue``) or a one-element device array (``ProxyArray``)
            read when the kernel runs. Required.
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


@keyword_checked
def inclusive_scan(*, d_in: ArrayOrIterator, d_out: ArrayOrIterator, op: OperatorLike,
                   init_value: InitValue | None = None, num_items: int, stream: StreamLike | None = None) -> None:
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


@keyword_checked
def exclusive_scan(*, d_in: ArrayOrIterator, d_out: ArrayOrIterator, op: OperatorLike, init_value: InitValue,
                   num_items: int, stream: StreamLike | None = None) -> None:
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
