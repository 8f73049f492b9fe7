"""Scans by key: ``make_inclusive_scan_by_key`` / ``inclusive_scan_by_key``,
``make_exclusive_scan_by_key`` / ``exclusive_scan_by_key`` and the scan-by-key object.

A run is a stretch of consecutive keys equal by ``equality_op`` (``OpKind.EQUAL_TO`` unless
given: C++'s ``==`` on scalar keys, so a NaN key is a run of its own). The values are
scanned with ``scan_op`` in the type of ``d_out``, and the scan restarts at every run:
``d_out[i]`` is ``d_in_values[h] ⊕ ... ⊕ d_in_values[i]`` (inclusive) or ``init ⊕
d_in_values[h] ⊕ ... ⊕ d_in_values[i-1]`` (exclusive, so a run's first output is
``init``), where ``h`` is the first index of ``i``'s run. ``scan_op`` must be associative.
``init_value`` is a host value, fixed when the call is made, or a one-element device array
read by the kernel when it runs. Inputs and the output may be iterators; ``d_out`` may be
``d_in_values`` (in place).

Host dispatch (ours; kernels in ``algorithms/scan_by_key/cuprims_scan_by_key.cuh``): a
problem of one tile is one launch with no temporary storage; a larger one readies the tile
states and each tile's preceding key, then scans one tile per block with decoupled
look-back, as CUB's ``DeviceScan::*ScanByKey`` runs it: 32-bit offsets up to 2^31 - 1
items, a 64-bit build (variant 1) past them.
"""

from __future__ import annotations

from typing import Any

from cuprims._build.results import OpInput
from cuprims._codegen.builtin_ops import check_equality_builtin
from cuprims._codegen.common import op_symbol
from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims.algorithms.arguments import ArgKind, describe, keyword_checked, linked_objects
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.lookback import REGION_ALIGN
from cuprims.algorithms.operators import combined_input, combiner_spec
from cuprims.algorithms.scan_by_key.source import scan_by_key_source
from cuprims.algorithms.skeleton import Algorithm, Description, Plan, description, functor_size, functor_state
from cuprims.algorithms.values import described_init, init_argument, init_param, scalar_init_type
from cuprims.errors import ArgumentError
from cuprims.op import OpKind, OpSpec, op_spec
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ComputeCapabilityLike, DeviceArrayLike, InitValue,
                            OperatorLike, StreamLike)

__all__ = ["ScanByKey", "make_inclusive_scan_by_key", "make_exclusive_scan_by_key", "inclusive_scan_by_key",
           "exclusive_scan_by_key"]

#: The most items the 32-bit-offset build (variant 0) takes; more go to the 64-bit one.
NARROW_MAX_ITEMS = (1 << 31) - 1


@description
class ScanByKeyDescription(Description):
    """Keys and values in, the scan out (its type is the one the values are scanned in),
    the two operators, what the initial value is ("none": inclusive, "value": passed at
    launch, "device": read from a one-element device array) and the direction."""

    keys_in: ArgKind
    values_in: ArgKind
    out: ArgKind
    equality: OpSpec
    op: OpSpec
    init_kind: str
    inclusive: bool
    wide_offsets: bool = False

    def source(self, arch: int) -> Source:
        return scan_by_key_source(keys_in=self.keys_in, values_in=self.values_in, out=self.out,
                                  equality=self.equality, op=self.op, accum=self.out.value,
                                  init_kind=self.init_kind, arch=arch, wide_offsets=self.wide_offsets)

    def _link(self) -> tuple[OpInput, ...]:
        key, accum = self.keys_in.value, self.out.value
        own = []
        if self.equality.kind != "builtin":
            own.append(OpInput(op_symbol(self.equality, "cuprims_op_0"), self.equality, (key, key), None))
        if self.op.kind != "builtin":
            own.append(OpInput(op_symbol(self.op, "cuprims_op_1"), self.op, (accum, accum), accum))
        return tuple(own) + tuple(op for a in (self.keys_in, self.values_in, self.out) for op in a.linked_ops())

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        return (
            # init: tile storage, keys in, keys before each tile, tile items, tiles
            ("ptr", self.keys_in.param, "ptr", "i32", "i32"),
            # sweep: keys in, keys before each tile, values in, out, tile storage, equality, scan
            #        operator, init, items, tiles
            (self.keys_in.param, "ptr", self.values_in.param, self.out.param, "ptr", functor_size(self.equality),
             functor_size(self.op), init_param(self.init_kind, self.out.value), "i64" if self.wide_offsets else "i32",
             "i32"),
        )


class _Plan(Plan):
    """The init and sweep kernels, the tile shape and the tile states' bytes."""

    __slots__ = ("init", "sweep", "threads", "tile_items", "init_threads", "bytes_per_tile", "fixed_bytes",
                 "key_bytes", "device")

    def __init__(self, loaded: Loaded, key_bytes: int):
        meta = loaded.meta
        self.init, self.sweep = loaded.handles
        self.threads = meta["threads"]
        self.tile_items = self.threads * meta["items"]
        self.init_threads = meta["init_threads"]
        self.bytes_per_tile, self.fixed_bytes = meta["tile_bytes_per_tile"], meta["tile_fixed_bytes"]
        self.key_bytes = key_bytes


def storage_layout(plan: Any, num_items: int) -> tuple[int, int, int]:
    """(tiles, offset of the keys before each tile from the tile states' start, temporary
    bytes) for ``num_items`` items. One tile needs no storage: its block reads neither the
    tile states nor a key before it."""
    tiles = -(-num_items // plan.tile_items)
    if tiles <= 1:
        return tiles, 0, 0
    states = tiles * plan.bytes_per_tile + plan.fixed_bytes
    keys_at = -(-states // REGION_ALIGN) * REGION_ALIGN
    return tiles, keys_at, REGION_ALIGN + keys_at + tiles * plan.key_bytes


def _describe(d_in_keys: Any, d_in_values: Any, d_out: Any, scan_op: Any, init_value: Any, equality_op: Any,
              inclusive: bool) -> ScanByKeyDescription:
    keys_in = describe(d_in_keys, "d_in_keys", iterators=True)
    values_in = describe(d_in_values, "d_in_values", iterators=True)
    out = describe(d_out, "d_out", iterators=True, output=True)
    values_in = combined_input(values_in, out, "d_in_values", "d_out")
    if scan_op is None:
        raise ArgumentError("scan_op", "an OpKind, a Python callable f(a, b) -> value or a RawOp", None)
    init_kind = described_init(init_value, out.value, inclusive)
    equality = op_spec(OpKind.EQUAL_TO if equality_op is None else equality_op, argument="equality_op",
                       bind_captures=True)
    if equality.kind == "builtin":
        check_equality_builtin(equality, keys_in.value, "equality_op")
    op = combiner_spec(scan_op, out.value, "scan_op")
    return ScanByKeyDescription(keys_in, values_in, out, equality, op, init_kind, inclusive)


class ScanByKey(Algorithm):
    """A scan by key built for fixed types, operators, init kind and direction (what
    :func:`make_inclusive_scan_by_key` and :func:`make_exclusive_scan_by_key` return). With
    ``temp_storage=None`` the call returns the bytes it needs; with a buffer it writes the
    scan on ``stream``."""

    desc: ScanByKeyDescription

    def _setup(self) -> None:
        desc = self.desc
        self._stateful = (bool(desc.equality.state_size), bool(desc.op.state_size))
        self._init_scalar_type = scalar_init_type(desc.out.value, desc.init_kind == "value")

    def _objects(self, equality_op: Any = None, scan_op: Any = None, *iterators: Any) -> list[Any]:
        # as _link lists them: built-in operators are not linked
        ops = zip((equality_op, scan_op), (self.desc.equality, self.desc.op))
        return [obj for obj, spec in ops if spec.kind != "builtin"] + linked_objects(*iterators)

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded, self.desc.keys_in.value.size)

    # args: (p_kin, p_vin, p_out, eq_state, op_state, init, n, variant)
    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        return storage_layout(plan, args[6])[2]

    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        p_kin, p_vin, p_out, eq_state, op_state, init, n, variant = args
        if n == 0:
            return
        init_params, sweep_params = self._packs_of(variant)
        tiles, keys_at, _ = storage_layout(plan, n)
        storage = keys_before = 0
        if tiles > 1:
            storage = -(-temp // REGION_ALIGN) * REGION_ALIGN
            keys_before = storage + keys_at
            driver.launch(plan.init, -(-tiles // plan.init_threads), plan.init_threads, stream,
                          init_params.pack(storage, p_kin, keys_before, plan.tile_items, tiles))
        driver.launch(plan.sweep, tiles, plan.threads, stream,
                      sweep_params.pack(p_kin, keys_before, p_vin, p_out, storage, eq_state, op_state, init, n,
                                        tiles))

    def _run(self, temp_storage: Any, d_in_keys: Any, d_in_values: Any, d_out: Any, scan_op: Any, init_value: Any,
             equality_op: Any, num_items: Any, stream: Any, one_shot: bool) -> int | None:
        n = check_num_items(num_items)
        variant = 0 if n <= NARROW_MAX_ITEMS else 1
        d = self.desc
        args = (d.keys_in.bind(d_in_keys, n), d.values_in.bind(d_in_values, n), d.out.bind(d_out, n),
                functor_state(d.equality, equality_op, "equality_op") if self._stateful[0] else b"\0",
                functor_state(d.op, scan_op, "scan_op") if self._stateful[1] else b"\0",
                init_argument(d.init_kind, d.out.value, self._init_scalar_type, init_value), n, variant)
        return self._execute(temp_storage, stream, one_shot, args,
                             (equality_op, scan_op, d_in_keys, d_in_values, d_out), variant)

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in_keys: ArrayOrIterator,
                 d_in_values: ArrayOrIterator, d_out: ArrayOrIterator, num_items: int,
                 scan_op: OperatorLike | None = None, init_value: InitValue | None = None,
                 equality_op: OperatorLike | None = None, stream: StreamLike | None = None) -> int | None:
        """Run (or, with ``temp_storage=None``, return the temporary bytes needed).
        ``init_value`` must be of the kind given at build time (none for an inclusive
        scan). Operators that capture device arrays must be passed again, with the arrays
        of this call."""
        return self._run(temp_storage, d_in_keys, d_in_values, d_out, scan_op, init_value, equality_op, num_items,
                         stream, False)


# ------------------------------------------------------------------- public functions

def _make(d_in_keys: Any, d_in_values: Any, d_out: Any, scan_op: Any, init_value: Any, equality_op: Any,
          inclusive: bool, compute_capability: Any) -> ScanByKey:
    desc = ScanByKey._described(_describe, d_in_keys, d_in_values, d_out, scan_op, init_value, equality_op,
                                inclusive)
    return ScanByKey._make(desc, compute_capability, (equality_op, scan_op, d_in_keys, d_in_values, d_out))


@keyword_checked
def make_inclusive_scan_by_key(*, d_in_keys: ArrayIteratorOrProxy, d_in_values: ArrayIteratorOrProxy,
                               d_out: ArrayIteratorOrProxy, scan_op: OperatorLike,
                               equality_op: OperatorLike | None = None,
                               compute_capability: ComputeCapabilityLike | None = None) -> ScanByKey:
    """Build (or fetch from cache) an inclusive scan by key: each output is the scan of the
    values of its run up to and including its own.

    Args:
        d_in_keys, d_in_values: device arrays or iterators of keys and their values.
        d_out: device array or output iterator of results; its dtype is the type the scan
            computes in. May be ``d_in_values``.
        scan_op: an associative ``OpKind``, Python callable ``f(a, b) -> value`` or RawOp.
        equality_op: ``OpKind.EQUAL_TO`` (the default), a Python callable
            ``f(a, b) -> bool`` or a RawOp.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray([0, 0, 0, 7, 7, 2], np.int32); values = cp.ones(6, np.float32)
        out = cp.empty(6, np.float32)
        s = cuprims.make_inclusive_scan_by_key(d_in_keys=keys, d_in_values=values, d_out=out,
                                               scan_op=cuprims.OpKind.PLUS)
        call = dict(d_in_keys=keys, d_in_values=values, d_out=out, num_items=6)
        tmp = cp.empty(s(temp_storage=None, **call), np.uint8)
        s(temp_storage=tmp, **call)          # out == [1, 2, 3, 1, 2, 1]
    """
    return _make(d_in_keys, d_in_values, d_out, scan_op, None, equality_op, True, compute_capability)


@keyword_checked
def make_exclusive_scan_by_key(*, d_in_keys: ArrayIteratorOrProxy, d_in_values: ArrayIteratorOrProxy,
                               d_out: ArrayIteratorOrProxy, scan_op: OperatorLike, init_value: InitValue,
                               equality_op: OperatorLike | None = None,
                               compute_capability: ComputeCapabilityLike | None = None) -> ScanByKey:
    """Build (or fetch from cache) an exclusive scan by key: each run's first output is
    ``init_value``, each later one ``init_value`` combined with the run's values before it.

    Args:
        d_in_keys, d_in_values: device arrays or iterators of keys and their values.
        d_out: device array or output iterator of results; its dtype is the type the scan
            computes in. May be ``d_in_values``.
        scan_op: an associative ``OpKind``, Python callable ``f(a, b) -> value`` or RawOp.
        init_value: a host value (numpy scalar or one-element array, gpu_struct value or its
            field values as a dict or tuple, ``ProxyValue``) or a one-element device array
            (``ProxyArray``) read when the kernel runs. Required.
        equality_op: ``OpKind.EQUAL_TO`` (the default), a Python callable
            ``f(a, b) -> bool`` or a RawOp.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray([3, 3, 3, 5, 5], np.int64); values = cp.asarray([1, 2, 3, 4, 5], np.int32)
        out = cp.empty(5, np.int32)
        s = cuprims.make_exclusive_scan_by_key(d_in_keys=keys, d_in_values=values, d_out=out,
                                               scan_op=cuprims.OpKind.PLUS, init_value=np.int32(0))
        call = dict(d_in_keys=keys, d_in_values=values, d_out=out, init_value=np.int32(0), num_items=5)
        tmp = cp.empty(s(temp_storage=None, **call), np.uint8)
        s(temp_storage=tmp, **call)          # out == [0, 1, 3, 0, 4]
    """
    return _make(d_in_keys, d_in_values, d_out, scan_op, init_value, equality_op, False, compute_capability)


@keyword_checked
def inclusive_scan_by_key(*, d_in_keys: ArrayOrIterator, d_in_values: ArrayOrIterator, d_out: ArrayOrIterator,
                          scan_op: OperatorLike, num_items: int, equality_op: OperatorLike | None = None,
                          stream: StreamLike | None = None) -> None:
    """Inclusive scan by key in one call (temporary storage taken on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray([1, 1, 2, 2, 2], np.int32); values = cp.asarray([5, 1, 4, 2, 3], np.int32)
        out = cp.empty(5, np.int32)
        cuprims.inclusive_scan_by_key(d_in_keys=keys, d_in_values=values, d_out=out,
                                      scan_op=cuprims.OpKind.MAXIMUM, num_items=5)
        assert out.get().tolist() == [5, 5, 4, 4, 4]
    """
    obj = _make(d_in_keys, d_in_values, d_out, scan_op, None, equality_op, True, None)
    obj._run(None, d_in_keys, d_in_values, d_out, scan_op, None, equality_op, num_items, stream, True)


@keyword_checked
def exclusive_scan_by_key(*, d_in_keys: ArrayOrIterator, d_in_values: ArrayOrIterator, d_out: ArrayOrIterator,
                          scan_op: OperatorLike, init_value: InitValue, num_items: int,
                          equality_op: OperatorLike | None = None, stream: StreamLike | None = None) -> None:
    """Exclusive scan by key in one call (temporary storage taken on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray([0, 0, 1, 1], np.int32); values = cp.asarray([1.5, 2.0, 1.0, 1.0])
        out = cp.empty(4)
        cuprims.exclusive_scan_by_key(d_in_keys=keys, d_in_values=values, d_out=out,
                                      scan_op=cuprims.OpKind.PLUS, init_value=np.float64(0), num_items=4)
        assert out.get().tolist() == [0.0, 1.5, 0.0, 1.0]
    """
    obj = _make(d_in_keys, d_in_values, d_out, scan_op, init_value, equality_op, False, None)
    obj._run(None, d_in_keys, d_in_values, d_out, scan_op, init_value, equality_op, num_items, stream, True)
