"""Reduce-by-key and run-length encoding: ``make_reduce_by_key``, ``make_run_length_encode``,
``make_non_trivial_runs``, their objects, and ``reduce_by_key`` / ``run_length_encode`` /
``non_trivial_runs`` (their descriptions and shared plan in ``descriptions``).

Each run of consecutive keys equal by ``equality_op`` (``OpKind.EQUAL_TO`` unless given:
C++'s ``==`` on scalar keys, so a NaN key is a run of its own) gives one output: the run's
last key goes to ``d_out_unique_keys`` (as CUB and cuda.compute write it: with an
``equality_op`` coarser than ``==`` a run's keys may differ) and the reduction of its values by
``reduction_op`` to ``d_out_aggregates``, both at the run's index; the number of runs goes
to ``d_out_num_runs[0]``, on the device (nothing synchronises). Values are reduced in the
type of ``d_out_aggregates``; CUB takes ``reduction_op`` to be associative and combines a
run's values in an order of its own. Inputs may be iterators (``ConstantIterator(1)`` as
values counts each run's length); an output you do not want can be a ``DiscardIterator``.
``run_length_encode`` writes each run's first item and its length; ``non_trivial_runs``
writes, for each run of more than one item, its offset and length.

Host dispatch (ours; kernels in ``algorithms/reduce_by_key/cuprims_reduce_by_key.cuh``): an
init kernel readies the tile states and zeroes the run count, then a sweep of one tile per
block with decoupled look-back, as CUB's ``DeviceReduce::ReduceByKey`` runs it, for up to
2^31 - 1 items (a 64-bit-offset build, variant 1, past them). After the same init kernel,
``run_length_encode`` sweeps with cuprims' encoding kernel
(``algorithms/reduce_by_key/cuprims_run_length.cuh``: a run's length is the distance to the
next run's head, so only heads are counted) and ``non_trivial_runs`` on CUB's ``AgentRle``.
"""

from __future__ import annotations

from typing import Any

from cuprims._runtime import driver
from cuprims.algorithms.arguments import keyword_checked, linked_objects
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.lookback import REGION_ALIGN
from cuprims.algorithms.reduce_by_key.descriptions import (NonTrivialRunsDescription, ReduceByKeyDescription,
                                                           RunLengthEncodeDescription, _describe, _describe_encoding,
                                                           _describe_non_trivial, _Plan, _RunSweepDescription,
                                                           storage_layout)
from cuprims.algorithms.skeleton import Algorithm, functor_state
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ArrayOrProxy, ComputeCapabilityLike, DeviceArrayLike,
                            OperatorLike, StreamLike)

__all__ = ["ReduceByKey", "make_reduce_by_key", "reduce_by_key", "RunLengthEncode", "make_run_length_encode",
           "run_length_encode", "NonTrivialRuns", "make_non_trivial_runs", "non_trivial_runs"]

#: The most items the 32-bit-offset build (variant 0) takes; more go to the 64-bit one.
NARROW_MAX_ITEMS = (1 << 31) - 1


def init_and_sweep(algorithm: Algorithm, plan: _Plan, variant: int, temp: int, stream: int, n: int,
                   before: tuple, after: tuple) -> None:
    """The init kernel (tile states readied, run count zeroed, the count's pointer last of
    ``before``), then, for items, the sweep with arguments ``before``, the tile storage,
    ``after`` (the operators' states), the item count and the tile count."""
    init_params, sweep_params = algorithm._packs_of(variant)
    tiles = storage_layout(plan, n)[0]
    storage = -(-temp // REGION_ALIGN) * REGION_ALIGN
    ready = max(tiles, 1)
    driver.launch(plan.init, -(-ready // plan.init_threads), plan.init_threads, stream,
                  init_params.pack(storage, ready, before[-1]))
    if n:
        driver.launch(plan.sweep, tiles, plan.threads, stream, sweep_params.pack(*before, storage, *after, n, tiles))


class ReduceByKey(Algorithm):
    """Reduces each run of equal consecutive keys; built for fixed types and operators by
    :func:`make_reduce_by_key`. With ``temp_storage=None`` the call returns the bytes it
    needs; with a buffer it writes the runs' keys, aggregates and count on ``stream``.
    """

    desc: ReduceByKeyDescription

    def _setup(self) -> None:
        self._stateful = (bool(self.desc.equality.state_size), bool(self.desc.reduction.state_size))

    def _objects(self, equality_op: Any = None, reduction_op: Any = None, *iterators: Any) -> list[Any]:
        # as _link lists them: built-in operators are not linked
        ops = zip((equality_op, reduction_op), (self.desc.equality, self.desc.reduction))
        return [obj for obj, spec in ops if spec.kind != "builtin"] + linked_objects(*iterators)

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded)

    # args: (p_kin, p_vin, p_kout, p_aout, p_count, eq_state, red_state, n, variant)
    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        return REGION_ALIGN + storage_layout(plan, args[7])[1]

    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        p_kin, p_vin, p_kout, p_aout, p_count, eq_state, red_state, n, variant = args
        init_and_sweep(self, plan, variant, temp, stream, n, (p_kin, p_kout, p_vin, p_aout, p_count),
                       (eq_state, red_state))

    def _run(self, temp_storage: Any, d_in_keys: Any, d_in_values: Any, d_out_unique_keys: Any,
             d_out_aggregates: Any, d_out_num_runs: Any, equality_op: Any, reduction_op: Any, num_items: Any,
             stream: Any, one_shot: bool) -> int | None:
        n = check_num_items(num_items)
        variant = 0 if n <= NARROW_MAX_ITEMS else 1
        d = self.desc
        args = (d.keys_in.bind(d_in_keys, n), d.values_in.bind(d_in_values, n), d.unique_out.bind(d_out_unique_keys, n),
                d.aggregates_out.bind(d_out_aggregates, n), d.num_runs.bind(d_out_num_runs, 1, None),
                functor_state(d.equality, equality_op, "equality_op") if self._stateful[0] else b"\0",
                functor_state(d.reduction, reduction_op, "reduction_op") if self._stateful[1] else b"\0", n, variant)
        return self._execute(temp_storage, stream, one_shot, args,
                             (equality_op, reduction_op, d_in_keys, d_in_values, d_out_unique_keys, d_out_aggregates),
                             variant)

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
            iterator: each run's last key, of the keys' type or of one numpy's
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

class _RunSweep(Algorithm):
    """What the run-length encoding and the search for runs of more than one item share: an
    input, two outputs and a run count, reduce-by-key's init kernel, then one sweep."""

    desc: _RunSweepDescription

    def _objects(self, *iterators: Any) -> list[Any]:
        return linked_objects(*iterators)

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded)

    # args: (p_in, p_out_a, p_out_b, p_count, n, variant)
    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        return REGION_ALIGN + storage_layout(plan, args[4])[1]

    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        p_in, p_out_a, p_out_b, p_count, n, variant = args
        init_and_sweep(self, plan, variant, temp, stream, n, (p_in, p_out_a, p_out_b, p_count), (b"\0",))

    def _run(self, temp_storage: Any, d_in: Any, d_out_a: Any, d_out_b: Any, d_out_num_runs: Any, num_items: Any,
             stream: Any, one_shot: bool) -> int | None:
        """Binds and runs: ``d_out_a`` and ``d_out_b`` are the arrays of the description's
        ``outputs``."""
        n = check_num_items(num_items)
        variant = 0 if n <= NARROW_MAX_ITEMS else 1
        kind_a, kind_b = self.desc.outputs
        args = (self.desc.items_in.bind(d_in, n), kind_a.bind(d_out_a, n), kind_b.bind(d_out_b, n),
                self.desc.num_runs.bind(d_out_num_runs, 1, None), n, variant)
        return self._execute(temp_storage, stream, one_shot, args, (d_in, d_out_a, d_out_b), variant)


class RunLengthEncode(_RunSweep):
    """Run-length encoding (what :func:`make_run_length_encode` returns): each run of equal
    consecutive items gives its first item and its length. With ``temp_storage=None`` the
    call returns the bytes it needs."""

    desc: RunLengthEncodeDescription

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in: ArrayOrIterator,
                 d_out_unique: ArrayOrIterator, d_out_counts: ArrayOrIterator, d_out_num_runs: DeviceArrayLike,
                 num_items: int, stream: StreamLike | None = None) -> int | None:
        """Run (or, with ``temp_storage=None``, return the temporary bytes needed)."""
        return self._run(temp_storage, d_in, d_out_unique, d_out_counts, d_out_num_runs, num_items, stream, False)


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
    return RunLengthEncode._make(desc, compute_capability, (d_in, d_out_unique, d_out_counts))


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
    obj._run(None, d_in, d_out_unique, d_out_counts, d_out_num_runs, num_items, stream, True)


# ------------------------------------------------------------------ runs of more than one item

class NonTrivialRuns(_RunSweep):
    """The runs of more than one equal consecutive item (what :func:`make_non_trivial_runs`
    returns): each one's offset and length, and their number. With ``temp_storage=None`` the
    call returns the bytes it needs."""

    desc: NonTrivialRunsDescription

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in: ArrayOrIterator,
                 d_out_offsets: ArrayOrIterator, d_out_lengths: ArrayOrIterator, d_out_num_runs: DeviceArrayLike,
                 num_items: int, stream: StreamLike | None = None) -> int | None:
        """Run (or, with ``temp_storage=None``, return the temporary bytes needed)."""
        return self._run(temp_storage, d_in, d_out_offsets, d_out_lengths, d_out_num_runs, num_items, stream, False)


@keyword_checked
def make_non_trivial_runs(*, d_in: ArrayIteratorOrProxy, d_out_offsets: ArrayIteratorOrProxy,
                          d_out_lengths: ArrayIteratorOrProxy, d_out_num_runs: ArrayOrProxy,
                          compute_capability: ComputeCapabilityLike | None = None) -> NonTrivialRuns:
    """Build (or fetch from cache) the search for runs of more than one equal item.

    Args:
        d_in: device array or iterator of scalar items (equal by ``==``: a NaN is a run of
            its own, so never part of a run of more than one).
        d_out_offsets: device array or output iterator of an integer type: each such run's
            first index, in order.
        d_out_lengths: device array or output iterator of an integer type: each such run's
            length (counted in this type).
        d_out_num_runs: a one-element device array of int32/int64 (or unsigned) that
            receives the number of such runs.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray([4, 4, 4, 1, 9, 9, 2], np.int32)
        offsets, lengths, runs = cp.empty(7, np.int64), cp.empty(7, np.int32), cp.empty(1, np.int32)
        ntr = cuprims.make_non_trivial_runs(d_in=x, d_out_offsets=offsets, d_out_lengths=lengths,
                                            d_out_num_runs=runs)
        call = dict(d_in=x, d_out_offsets=offsets, d_out_lengths=lengths, d_out_num_runs=runs, num_items=7)
        tmp = cp.empty(ntr(temp_storage=None, **call), np.uint8)
        ntr(temp_storage=tmp, **call)      # runs == [2], offsets[:2] == [0, 4], lengths[:2] == [3, 2]
    """
    desc = NonTrivialRuns._described(_describe_non_trivial, d_in, d_out_offsets, d_out_lengths, d_out_num_runs)
    return NonTrivialRuns._make(desc, compute_capability, (d_in, d_out_offsets, d_out_lengths))


@keyword_checked
def non_trivial_runs(*, d_in: ArrayOrIterator, d_out_offsets: ArrayOrIterator, d_out_lengths: ArrayOrIterator,
                     d_out_num_runs: DeviceArrayLike, num_items: int, stream: StreamLike | None = None) -> None:
    """The runs of more than one equal item, in one call (temporary storage taken on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray([1.0, 2.0, 2.0, 3.0, 3.0, 3.0], np.float32)
        offsets, lengths, runs = cp.empty(6, np.int32), cp.empty(6, np.int32), cp.empty(1, np.int64)
        cuprims.non_trivial_runs(d_in=x, d_out_offsets=offsets, d_out_lengths=lengths, d_out_num_runs=runs,
                                 num_items=6)
        assert int(runs[0]) == 2 and offsets[:2].get().tolist() == [1, 3] and lengths[:2].get().tolist() == [2, 3]
    """
    obj = make_non_trivial_runs.__wrapped__(d_in=d_in, d_out_offsets=d_out_offsets, d_out_lengths=d_out_lengths,
                                            d_out_num_runs=d_out_num_runs)
    obj._run(None, d_in, d_out_offsets, d_out_lengths, d_out_num_runs, num_items, stream, True)
