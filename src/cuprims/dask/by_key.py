"""Reduce-by-key and unique-by-key of one-dimensional Dask arrays of CuPy chunks: each chunk's
runs by cuprims in its worker, each chunk's first and last keys and runs' values (one item
each) gathered in one task that finds the runs crossing chunk boundaries and folds them, and
each chunk's runs then trimmed and patched where they are."""

from __future__ import annotations

import operator
from typing import Any

from cuprims.dask import tasks
from cuprims.dask.graph import checked_keys_values, checked_op, chunk_keys, keyed_outputs, result_dtype
from cuprims.op import OpKind


def _by_key(keys: Any, values: Any, op: Any, equality_op: Any, dtype: Any, reduce: bool) -> tuple:
    import dask.array as da

    keys, values = checked_keys_values(keys, values)
    op = checked_op(op) if reduce else None
    equality = OpKind.EQUAL_TO if equality_op is None else checked_op(equality_op, "equality_op")
    dt = result_dtype(values, dtype)
    kind = "reduce-by-key" if reduce else "unique-by-key"
    token = da.core.tokenize(keys, values, op, equality, dt, kind)
    name = f"cuprims-{kind}-{token}"
    runs, ends, stitch, fix, out = (f"{name}-runs", f"{name}-ends", f"{name}-stitch", f"{name}-fix",
                                    f"{name}-part")
    key_leaves, value_leaves = chunk_keys(keys), chunk_keys(values)
    count = len(key_leaves)
    layer: dict[Any, Any] = {}
    for i in range(count):
        layer[(runs, i)] = (tasks.chunk_by_key, key_leaves[i], value_leaves[i], op, equality, dt)
        layer[(ends, i)] = (tasks.run_ends, (runs, i), reduce)
    # only the ends (one item each) meet in one task; each chunk gets back its own fix alone
    layer[(stitch,)] = (tasks.stitch_runs, [(ends, i) for i in range(count)], op, equality, dt)
    for i in range(count):
        layer[(fix, i)] = (operator.getitem, (stitch,), i)
        layer[(out, i)] = (tasks.patch_runs, (runs, i), (fix, i))
    return keyed_outputs(layer, name, out, count, keys, values, dt)


def reduce_by_key(keys: Any, values: Any, op: Any, equality_op: Any = None, *, dtype: Any = None) -> tuple:
    """Each run of equal consecutive ``keys`` (runs cross chunk boundaries, and empty chunks)
    reduced to its last key (as :func:`cuprims.reduce_by_key` and CUB write it) and the fold
    of its ``values`` by ``op``, as ``(unique_keys, aggregates)``: Dask arrays of one chunk
    per input chunk (a run that crosses chunks is output by the chunk it starts in), of
    sizes known once computed.

    :func:`cuprims.reduce_by_key` on each chunk; each chunk's first and last keys and its
    first and last runs' values go to one task, which tests each boundary with
    ``equality_op`` and folds each run that crosses chunks with ``op``; each chunk's runs
    are then trimmed (a first run that continues an earlier chunk's) and patched (a last
    run that goes on) in their workers.

    Args:
        keys: a one-dimensional ``dask.array.Array`` of CuPy chunks.
        values: an array of the same chunks.
        op: an associative ``OpKind``, Python callable ``f(a, b)`` or RawOp; a run's values
            are folded in their order (CUB groups them as it likes).
        equality_op: when two consecutive keys are in one run: ``OpKind.EQUAL_TO`` (the
            default; a NaN key is a run of its own), a Python callable ``f(a, b) -> bool`` or
            a RawOp.
        dtype: the aggregates' dtype, the one the values are folded in (default: ``values``').

    Example::

        import cupy as cp, dask.array as da, numpy as np, cuprims.dask
        k = da.from_array(cp.asarray([1, 1, 1, 2, 2, 3], np.int32), chunks=2, asarray=False)
        v = da.from_array(cp.arange(6, dtype=np.int64), chunks=2, asarray=False)
        keys, sums = cuprims.dask.reduce_by_key(k, v, cuprims.OpKind.PLUS)
        assert keys.compute().get().tolist() == [1, 2, 3] and sums.compute().get().tolist() == [3, 7, 5]
    """
    return _by_key(keys, values, op, equality_op, dtype, True)


def unique_by_key(keys: Any, values: Any, equality_op: Any = None) -> tuple:
    """The first key and the first value of each run of equal consecutive ``keys`` (runs
    cross chunk boundaries, and empty chunks), as ``(unique_keys, values)``: Dask arrays of
    one chunk per input chunk, of sizes known once computed.

    :func:`cuprims.unique_by_key` on each chunk; each chunk's first and last keys go to one
    task, which tests each boundary with ``equality_op``; each chunk whose first run
    continues an earlier chunk's drops it, in its worker.

    Args:
        keys: a one-dimensional ``dask.array.Array`` of CuPy chunks.
        values: an array of the same chunks.
        equality_op: when two consecutive keys are in one run: ``OpKind.EQUAL_TO`` (the
            default), a Python callable ``f(a, b) -> bool`` or a RawOp.

    Example::

        import cupy as cp, dask.array as da, numpy as np, cuprims.dask
        k = da.from_array(cp.asarray([4, 4, 4, 7, 7, 4], np.int64), chunks=2, asarray=False)
        v = da.from_array(cp.arange(6, dtype=np.float32), chunks=2, asarray=False)
        keys, firsts = cuprims.dask.unique_by_key(k, v)
        assert keys.compute().get().tolist() == [4, 7, 4] and firsts.compute().get().tolist() == [0.0, 3.0, 5.0]
    """
    return _by_key(keys, values, None, equality_op, None, False)
