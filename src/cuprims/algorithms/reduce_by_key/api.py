"""Reduce-by-key and run-length encoding: ``make_reduce_by_key``, ``make_run_length_encode``,
their objects, and ``reduce_by_key`` / ``run_length_encode``.

Each run of consecutive keys equal by ``equality_op`` (``OpKind.EQUAL_TO`` unless given:
C++'s ``==`` on scalar keys, so a NaN key is a run of its own) gives one output: the run's
first key goes to ``d_out_unique_keys`` and the reduction of its values by
``reduction_op`` to ``d_out_aggregates``, both at the run's index; the number of runs goes
to ``d_out_num_runs[0]``, on the device (nothing synchronises). Values are reduced in the
type of ``d_out_aggregates``; CUB takes ``reduction_op`` to be associative and combines a
run's values in an order of its own. Inputs may be iterators (``ConstantIterator(1)`` as
values counts each run's length); an output you do not want can be a ``DiscardIterator``.
Run-length encoding is that reduction: ``run_length_encode`` writes each run's first item
and its length (ones of the counts' type, summed).

Host dispatch (ours; kernels in ``algorithms/reduce_by_key/cuprims_reduce_by_key.cuh``): an
init kernel readies the tile states and zeroes the run count, then a sweep of one tile per
block with decoupled look-back, as CUB's ``DeviceReduce::ReduceByKey`` runs it, for up to
2^31 - 1 items.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cuprims._build.results import OpInput
from cuprims._codegen.builtin_ops import check_equality_builtin
from cuprims._codegen.common import op_symbol
from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims.algorithms.arguments import ArgKind, describe, keyword_checked, linked_objects
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.lookback import REGION_ALIGN, count_output, output_like
from cuprims.algorithms.operators import combined_input, combiner_spec
from cuprims.algorithms.reduce_by_key.source import reduce_by_key_source
from cuprims.algorithms.skeleton import Algorithm, Description, Plan, description, functor_size, functor_state
from cuprims.errors import ArgumentError
from cuprims.iterators import ConstantIterator
from cuprims.op import OpKind, OpSpec, op_spec
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ArrayOrProxy, ComputeCapabilityLike, DeviceArrayLike,
                            OperatorLike, StreamLike)

__all__ = ["ReduceByKey", "make_reduce_by_key", "reduce_by_key", "RunLengthEncode", "make_run_length_encode",
           "run_length_encode"]

#: The most items one call takes: the kernels' offsets are 32-bit.
MAX_ITEMS = (1 << 31) - 1


@description
class ReduceByKeyDescription(Description):
    """Keys and values in, unique keys and aggregates out (the aggregates' type is the one
    the values are reduced in), the run count's type, and the two operators."""

    keys_in: ArgKind
    values_in: ArgKind
    unique_out: ArgKind
    aggregates_out: ArgKind
    num_runs: ArgKind
    equality: OpSpec
    reduction: OpSpec

    @property
    def operator(self) -> None:
        return None  # two operators, both listed by _link (see ReduceByKey._objects)

    def source(self, arch: int) -> Source:
        return reduce_by_key_source(keys_in=self.keys_in, values_in=self.values_in, unique_out=self.unique_out,
                                    aggregates_out=self.aggregates_out, num_runs=self.num_runs,
                                    equality=self.equality, reduction=self.reduction,
                                    accum=self.aggregates_out.value, arch=arch)

    def _link(self) -> tuple[OpInput, ...]:
        key, accum = self.keys_in.value, self.aggregates_out.value
        own = []
        if self.equality.kind != "builtin":
            own.append(OpInput(op_symbol(self.equality, "cuprims_op_0"), self.equality, (key, key), None))
        if self.reduction.kind != "builtin":
            own.append(OpInput(op_symbol(self.reduction, "cuprims_op_1"), self.reduction, (accum, accum), accum))
        return tuple(own) + tuple(op for a in (self.keys_in, self.values_in, self.unique_out, self.aggregates_out)
                                  for op in a.linked_ops())

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        return (
            # init: tile storage, tiles, run count
            ("ptr", "i32", "ptr"),
            # sweep: keys in, unique out, values in, aggregates out, run count, tile storage, equality,
            #        reduction, items, tiles
            (self.keys_in.param, self.unique_out.param, self.values_in.param, self.aggregates_out.param, "ptr",
             "ptr", functor_size(self.equality), functor_size(self.reduction), "i32", "i32"),
        )


class _Plan(Plan):
    """The init and sweep kernels, the tile shape and the tile states' bytes."""

    __slots__ = ("init", "sweep", "threads", "tile_items", "init_threads", "padding", "bytes_per_tile",
                 "fixed_bytes", "device")

    def __init__(self, loaded: Loaded):
        meta = loaded.meta
        self.init, self.sweep = loaded.handles
        self.threads = meta["threads"]
        self.tile_items = self.threads * meta["items"]
        self.init_threads = meta["init_threads"]
        self.padding, self.bytes_per_tile, self.fixed_bytes = (meta["tile_padding"], meta["tile_bytes_per_tile"],
                                                               meta["tile_fixed_bytes"])


def storage_layout(plan: Any, num_items: int) -> tuple[int, int]:
    """(tiles, bytes of the tile states) for ``num_items`` items (at least one tile state
    is readied: the init kernel zeroes the run count of an empty input too)."""
    tiles = -(-num_items // plan.tile_items)
    return tiles, max(tiles, 1) * plan.bytes_per_tile + plan.fixed_bytes


def _describe(d_in_keys: Any, d_in_values: Any, d_out_unique_keys: Any, d_out_aggregates: Any, d_out_num_runs: Any,
              equality_op: Any, reduction_op: Any) -> ReduceByKeyDescription:
    keys_in = describe(d_in_keys, "d_in_keys", iterators=True)
    values_in = describe(d_in_values, "d_in_values", iterators=True)
    unique_out = output_like(d_out_unique_keys, "d_out_unique_keys", keys_in)
    aggregates_out = describe(d_out_aggregates, "d_out_aggregates", iterators=True, output=True)
    values_in = combined_input(values_in, aggregates_out, "d_in_values", "d_out_aggregates")
    num_runs = count_output(d_out_num_runs, "d_out_num_runs")
    if reduction_op is None:
        raise ArgumentError("reduction_op", "an OpKind, a Python callable f(a, b) -> value or a RawOp", None)
    equality = op_spec(OpKind.EQUAL_TO if equality_op is None else equality_op, argument="equality_op",
                       bind_captures=True)
    if equality.kind == "builtin":
        check_equality_builtin(equality, keys_in.value, "equality_op")
    reduction = combiner_spec(reduction_op, aggregates_out.value, "reduction_op")
    return ReduceByKeyDescription(keys_in, values_in, unique_out, aggregates_out, num_runs, equality, reduction)


class ReduceByKey(Algorithm):
    """Reduces each run of equal consecutive keys; built for fixed types and operators by
    :func:`make_reduce_by_key`. With ``temp_storage=None`` the call returns the bytes it
    needs; with a buffer it writes the runs' keys, aggregates and count on ``stream``.
    """

    desc: ReduceByKeyDescription

    def _setup(self) -> None:
        self._init_params, self._sweep_params = self._packs
        self._stateful = (bool(self.desc.equality.state_size), bool(self.desc.reduction.state_size))

    def _objects(self, equality_op: Any = None, reduction_op: Any = None, *iterators: Any) -> list[Any]:
        # as _link lists them: built-in operators are not linked
        ops = zip((equality_op, reduction_op), (self.desc.equality, self.desc.reduction))
        return [obj for obj, spec in ops if spec.kind != "builtin"] + linked_objects(*iterators)

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded)

    # args: (p_kin, p_vin, p_kout, p_aout, p_count, eq_state, red_state, n)
    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        return REGION_ALIGN + storage_layout(plan, args[7])[1]

    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        p_kin, p_vin, p_kout, p_aout, p_count, eq_state, red_state, n = args
        tiles = storage_layout(plan, n)[0]
        storage = -(-temp // REGION_ALIGN) * REGION_ALIGN
        ready = max(tiles, 1)
        driver.launch(plan.init, -(-ready // plan.init_threads), plan.init_threads, stream,
                      self._init_params.pack(storage, ready, p_count))
        if n:
            driver.launch(plan.sweep, tiles, plan.threads, stream,
                          self._sweep_params.pack(p_kin, p_kout, p_vin, p_aout, p_count, storage, eq_state, red_state,
                                                  n, tiles))

    def _run(self, temp_storage: Any, d_in_keys: Any, d_in_values: Any, d_out_unique_keys: Any,
             d_out_aggregates: Any, d_out_num_runs: Any, equality_op: Any, reduction_op: Any, num_items: Any,
             stream: Any, one_shot: bool) -> int | None:
        n = check_num_items(num_items)
        if n > MAX_ITEMS:
            raise ArgumentError("num_items", f"at most {MAX_ITEMS} items", n)
        d = self.desc
        args = (d.keys_in.bind(d_in_keys, n), d.values_in.bind(d_in_values, n), d.unique_out.bind(d_out_unique_keys, n),
                d.aggregates_out.bind(d_out_aggregates, n), d.num_runs.bind(d_out_num_runs, 1, None),
                functor_state(d.equality, equality_op, "equality_op") if self._stateful[0] else b"\0",
                functor_state(d.reduction, reduction_op, "reduction_op") if self._stateful[1] else b"\0", n)
        return self._execute(temp_storage, stream, one_shot, args,
                             (equality_op, reduction_op, d_in_keys, d_in_values, d_out_unique_keys, d_out_aggregates))

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in_keys: ArrayOrIterator,
                 d_in_values: ArrayOrIterator, d_out_unique_keys: ArrayOrIterator, d_out_aggregates: ArrayOrIterator,
                 d_out_num_runs: DeviceArrayLike, num_items: int, equality_op: OperatorLike | None = None,
                 reduction_op: OperatorLike | None = None, stream: StreamLike | None = None) -> int | None:
        """Run (or, with ``temp_storage=None``, return the temporary bytes needed). Operators
        that capture device arrays must be passed again, with the arrays of this call."""
        return self._run(temp_storage, d_in_keys, d_in_values, d_out_unique_keys, d_out_aggregates, d_out_num_runs,
                         equality_op, reduction_op, num_items, stream, False)


@keyword_checked
def make_reduce_by_key(*, d_in_keys: ArrayIteratorOrProxy, d_in_values: ArrayIteratorOrProxy,
                       d_out_unique_keys: ArrayIteratorOrProxy, d_out_aggregates: ArrayIteratorOrProxy,
                       d_out_num_runs: ArrayOrProxy, reduction_op: OperatorLike,
                       equality_op: OperatorLike | None = None,
                       compute_capability: ComputeCapabilityLike | None = None) -> ReduceByKey:
    """Build (or fetch from cache) a reduce-by-key.

    Args:
        d_in_keys, d_in_values: device arrays or iterators of keys and their values.
        d_out_unique_keys: device array (room for as many runs as there may be) or output
            iterator: each run's first key, of the keys' type or of one numpy's
            ``same_kind`` rule casts them to.
        d_out_aggregates: device array or output iterator: each run's reduction, in its
            dtype (the type the values are reduced in; a struct of the values' layout).
        d_out_num_runs: a one-element device array of int32/int64 (or unsigned) that
            receives the number of runs.
        reduction_op: an ``OpKind``, a Python callable ``f(a, b) -> value`` or a RawOp.
        equality_op: ``OpKind.EQUAL_TO`` (the default), a Python callable
            ``f(a, b) -> bool`` or a RawOp.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray([1, 1, 2, 3, 3, 3], np.int32); values = cp.arange(6, dtype=np.float32)
        uk, agg, runs = cp.empty(6, np.int32), cp.empty(6, np.float32), cp.empty(1, np.int64)
        r = cuprims.make_reduce_by_key(d_in_keys=keys, d_in_values=values, d_out_unique_keys=uk,
                                       d_out_aggregates=agg, d_out_num_runs=runs, reduction_op=cuprims.OpKind.PLUS)
        tmp = cp.empty(r(temp_storage=None, d_in_keys=keys, d_in_values=values, d_out_unique_keys=uk,
                         d_out_aggregates=agg, d_out_num_runs=runs, num_items=6), np.uint8)
        r(temp_storage=tmp, d_in_keys=keys, d_in_values=values, d_out_unique_keys=uk, d_out_aggregates=agg,
          d_out_num_runs=runs, num_items=6)      # runs == [3], uk[:3] == [1, 2, 3], agg[:3] == [1, 2, 12]
    """
    desc = ReduceByKey._described(_describe, d_in_keys, d_in_values, d_out_unique_keys, d_out_aggregates,
                                  d_out_num_runs, equality_op, reduction_op)
    return ReduceByKey._make(desc, compute_capability, (equality_op, reduction_op, d_in_keys, d_in_values,
                                                        d_out_unique_keys, d_out_aggregates))


@keyword_checked
def reduce_by_key(*, d_in_keys: ArrayOrIterator, d_in_values: ArrayOrIterator, d_out_unique_keys: ArrayOrIterator,
                  d_out_aggregates: ArrayOrIterator, d_out_num_runs: DeviceArrayLike, reduction_op: OperatorLike,
                  num_items: int, equality_op: OperatorLike | None = None, stream: StreamLike | None = None) -> None:
    """Reduce-by-key in one call (temporary storage taken on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray([5, 5, 7], np.int64); values = cp.asarray([1.0, 2.0, 3.0])
        uk, agg, runs = cp.empty(3, np.int64), cp.empty(3), cp.empty(1, np.int32)
        cuprims.reduce_by_key(d_in_keys=keys, d_in_values=values, d_out_unique_keys=uk, d_out_aggregates=agg,
                              d_out_num_runs=runs, reduction_op=cuprims.OpKind.PLUS, num_items=3)
        assert int(runs[0]) == 2 and agg[:2].get().tolist() == [3.0, 3.0]
    """
    obj = make_reduce_by_key.__wrapped__(d_in_keys=d_in_keys, d_in_values=d_in_values,
                                         d_out_unique_keys=d_out_unique_keys, d_out_aggregates=d_out_aggregates,
                                         d_out_num_runs=d_out_num_runs, reduction_op=reduction_op,
                                         equality_op=equality_op)
    obj._run(None, d_in_keys, d_in_values, d_out_unique_keys, d_out_aggregates, d_out_num_runs, equality_op,
             reduction_op, num_items, stream, True)


# ------------------------------------------------------------------ run-length encoding

@description
class RunLengthEncodeDescription(ReduceByKeyDescription):
    """A reduce-by-key whose values are ones of the counts' type, summed: each run's length
    (a class of its own, so that its objects and blobs are not a reduce-by-key's)."""


def _ones(counts: ArgKind) -> ConstantIterator:
    return ConstantIterator(np.ones(1, counts.value.dtype)[0])


def _describe_encoding(d_in: Any, d_out_unique: Any, d_out_counts: Any,
                       d_out_num_runs: Any) -> RunLengthEncodeDescription:
    keys_in = describe(d_in, "d_in", iterators=True)
    unique_out = output_like(d_out_unique, "d_out_unique", keys_in)
    counts = describe(d_out_counts, "d_out_counts", iterators=True, output=True)
    if counts.value.kind not in "iu":
        raise ArgumentError("d_out_counts", "an array or output iterator of an integer type (the runs' lengths)",
                            counts.value.dtype)
    num_runs = count_output(d_out_num_runs, "d_out_num_runs")
    equality = op_spec(OpKind.EQUAL_TO, argument="d_in")
    check_equality_builtin(equality, keys_in.value, "d_in")
    return RunLengthEncodeDescription(keys_in, describe(_ones(counts), "d_out_counts", iterators=True), unique_out,
                                      counts, num_runs, equality, combiner_spec(OpKind.PLUS, counts.value))


class RunLengthEncode(ReduceByKey):
    """Run-length encoding (what :func:`make_run_length_encode` returns): each run of equal
    consecutive items gives its first item and its length. With ``temp_storage=None`` the
    call returns the bytes it needs."""

    desc: RunLengthEncodeDescription

    def _setup(self) -> None:
        super()._setup()
        self._one = _ones(self.desc.aggregates_out)

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in: ArrayOrIterator,  # type: ignore[override]
                 d_out_unique: ArrayOrIterator, d_out_counts: ArrayOrIterator, d_out_num_runs: DeviceArrayLike,
                 num_items: int, stream: StreamLike | None = None) -> int | None:
        """Run (or, with ``temp_storage=None``, return the temporary bytes needed)."""
        return self._run(temp_storage, d_in, self._one, d_out_unique, d_out_counts, d_out_num_runs, None, None,
                         num_items, stream, False)


@keyword_checked
def make_run_length_encode(*, d_in: ArrayIteratorOrProxy, d_out_unique: ArrayIteratorOrProxy,
                           d_out_counts: ArrayIteratorOrProxy, d_out_num_runs: ArrayOrProxy,
                           compute_capability: ComputeCapabilityLike | None = None) -> RunLengthEncode:
    """Build (or fetch from cache) a run-length encoding.

    Args:
        d_in: device array or iterator of scalar items (equal by ``==``: a NaN is a run of
            its own).
        d_out_unique: device array or output iterator: each run's item.
        d_out_counts: device array or output iterator of an integer type: each run's length.
        d_out_num_runs: a one-element device array of int32/int64 (or unsigned) that
            receives the number of runs.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray([4, 4, 4, 1, 9, 9], np.int32)
        unique, counts, runs = cp.empty(6, np.int32), cp.empty(6, np.int64), cp.empty(1, np.int32)
        rle = cuprims.make_run_length_encode(d_in=x, d_out_unique=unique, d_out_counts=counts,
                                             d_out_num_runs=runs)
        call = dict(d_in=x, d_out_unique=unique, d_out_counts=counts, d_out_num_runs=runs, num_items=6)
        tmp = cp.empty(rle(temp_storage=None, **call), np.uint8)
        rle(temp_storage=tmp, **call)      # runs == [3], unique[:3] == [4, 1, 9], counts[:3] == [3, 1, 2]
    """
    desc = RunLengthEncode._described(_describe_encoding, d_in, d_out_unique, d_out_counts, d_out_num_runs)
    return RunLengthEncode._make(desc, compute_capability, (None, None, d_in, _ones(desc.aggregates_out),
                                                            d_out_unique, d_out_counts))


@keyword_checked
def run_length_encode(*, d_in: ArrayOrIterator, d_out_unique: ArrayOrIterator, d_out_counts: ArrayOrIterator,
                      d_out_num_runs: DeviceArrayLike, num_items: int, stream: StreamLike | None = None) -> None:
    """Run-length encoding in one call (temporary storage taken on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray([0.5, 0.5, 2.0], np.float32)
        unique, counts, runs = cp.empty(3, np.float32), cp.empty(3, np.int32), cp.empty(1, np.int64)
        cuprims.run_length_encode(d_in=x, d_out_unique=unique, d_out_counts=counts, d_out_num_runs=runs,
                                  num_items=3)
        assert int(runs[0]) == 2 and counts[:2].get().tolist() == [2, 1]
    """
    obj = make_run_length_encode.__wrapped__(d_in=d_in, d_out_unique=d_out_unique, d_out_counts=d_out_counts,
                                             d_out_num_runs=d_out_num_runs)
    obj._run(None, d_in, obj._one, d_out_unique, d_out_counts, d_out_num_runs, None, None, num_items, stream, True)
