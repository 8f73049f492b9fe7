"""Scans of one-dimensional Dask arrays of CuPy chunks: each chunk's total, one task
folding the totals into each chunk's carry, then each chunk scanned from its carry by
cuprims in its worker."""

from __future__ import annotations

from typing import Any

from cuprims.dask import tasks
from cuprims.dask.graph import checked_array, checked_op, chunk_keys, result_dtype
from cuprims.errors import ArgumentError


def _scan(x: Any, op: Any, init: Any, dtype: Any, inclusive: bool) -> Any:
    import dask.array as da
    from dask.array.utils import meta_from_array
    from dask.highlevelgraph import HighLevelGraph

    x = checked_array(x)
    if x.ndim != 1:
        raise ArgumentError("x", "a one-dimensional dask array", f"an array of shape {x.shape}")
    op = checked_op(op)
    if not inclusive and init is None:
        raise ArgumentError("init_value", "a value (an exclusive scan starts from it)", None)
    dt = result_dtype(x, dtype)
    kind = "inclusive" if inclusive else "exclusive"
    token = da.core.tokenize(x, op, init, dt, kind)
    leaves = chunk_keys(x)
    totals, carry, out = f"cuprims-{kind}-total-{token}", f"cuprims-{kind}-carry-{token}", f"cuprims-{kind}-{token}"
    layer: dict[Any, Any] = {(totals, i): (tasks.partial_reduce, key, op, dt) for i, key in enumerate(leaves)}
    layer[(carry,)] = (tasks.carries, [(totals, i) for i in range(len(leaves))], op, dt, init)
    for i, key in enumerate(leaves):
        layer[(out, i)] = (tasks.chunk_scan, key, (carry,), i, op, dt, inclusive)
    graph = HighLevelGraph.from_collections(out, layer, dependencies=[x])
    return da.Array(graph, out, chunks=x.chunks, dtype=dt, meta=meta_from_array(x._meta, ndim=1, dtype=dt))


def inclusive_scan(x: Any, op: Any, init_value: Any = None, *, dtype: Any = None) -> Any:
    """The running fold of ``x`` with ``op`` (item i: the fold of ``init_value`` and items
    0..i), as a Dask array with ``x``'s chunks.

    Args:
        x: a one-dimensional ``dask.array.Array`` of CuPy chunks.
        op: an associative ``OpKind``, Python callable ``f(a, b)`` or RawOp (structs too).
        init_value: folded in before the first item (numpy scalar or Python number), or None.
        dtype: the accumulator's and result's dtype (default: ``x``'s).

    Example::

        import cupy as cp, dask.array as da, numpy as np, cuprims.dask
        x = da.from_array(cp.arange(10, dtype=np.int64), chunks=4, asarray=False)
        y = cuprims.dask.inclusive_scan(x, cuprims.OpKind.PLUS)
        assert y.compute().get().tolist() == np.cumsum(np.arange(10)).tolist()
    """
    return _scan(x, op, init_value, dtype, True)


def exclusive_scan(x: Any, op: Any, init_value: Any, *, dtype: Any = None) -> Any:
    """The running fold of ``x`` with ``op`` before each item (item i: the fold of
    ``init_value`` and items 0..i-1), as a Dask array with ``x``'s chunks; see
    :func:`inclusive_scan`.

    Example::

        import cupy as cp, dask.array as da, numpy as np, cuprims.dask
        x = da.from_array(cp.arange(1, 6, dtype=np.int64), chunks=2, asarray=False)
        y = cuprims.dask.exclusive_scan(x, cuprims.OpKind.MULTIPLIES, np.int64(1))
        assert y.compute().get().tolist() == [1, 1, 2, 6, 24]
    """
    return _scan(x, op, init_value, dtype, False)
