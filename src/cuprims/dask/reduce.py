"""Reductions of Dask arrays of CuPy chunks: each chunk reduced by cuprims in its worker,
the partial results combined in a tree, ``h_init`` folded in last."""

from __future__ import annotations

from typing import Any

from cuprims.dask import tasks
from cuprims.dask.graph import (checked_array, checked_op, checked_split_every, chunk_keys, combining_tree,
                                result_dtype)
from cuprims.op import OpKind


def reduce(x: Any, op: Any, h_init: Any = None, *, dtype: Any = None, split_every: int = 8) -> Any:
    """The fold of every item of ``x`` with ``op``, and ``h_init``, as a 0-d Dask array.

    Args:
        x: a ``dask.array.Array`` of CuPy chunks (any shape; every item is folded).
        op: an associative ``OpKind``, Python callable ``f(a, b)`` or RawOp; the partial
            results of the chunks are combined in a tree, so the order of the fold is not
            the items' order (a commutative operator gives the same result either way).
        h_init: folded in once, last (numpy scalar or Python number); the result of an
            array with no item. Without it an array with no item is an error when computed.
        dtype: the accumulator's and result's dtype (default: ``x``'s).
        split_every: partial results combined a task (at least 2).

    Example::

        import cupy as cp, dask.array as da, numpy as np, cuprims.dask
        x = da.from_array(cp.arange(1000, dtype=np.int32), chunks=300, asarray=False)
        total = cuprims.dask.reduce(x, cuprims.OpKind.PLUS, np.int32(5))
        assert int(total.compute()) == 499505
    """
    import dask.array as da
    from dask.array.utils import meta_from_array
    from dask.highlevelgraph import HighLevelGraph

    x = checked_array(x)
    op = checked_op(op)
    split_every = checked_split_every(split_every)
    dt = result_dtype(x, dtype)
    token = da.core.tokenize(x, op, h_init, dt, split_every)
    leaves = chunk_keys(x)
    partial, tree, final = f"cuprims-reduce-partial-{token}", f"cuprims-reduce-tree-{token}", \
        f"cuprims-reduce-{token}"
    layer: dict[Any, Any] = {(partial, i): (tasks.partial_reduce, key, op, dt) for i, key in enumerate(leaves)}
    root = combining_tree(layer, tree, [(partial, i) for i in range(len(leaves))], split_every,
                          lambda parts, at_root: (tasks.combine, parts, op, dt))
    layer[(final,)] = (tasks.finish_reduce, root, op, dt, h_init)
    graph = HighLevelGraph.from_collections(final, layer, dependencies=[x])
    return da.Array(graph, final, chunks=(), dtype=dt, meta=meta_from_array(x._meta, ndim=0, dtype=dt))


def sum(x: Any, *, dtype: Any = None, split_every: int = 8) -> Any:
    """The sum of every item of ``x`` (0 for none), as a 0-d Dask array; see :func:`reduce`.

    Example::

        import cupy as cp, dask.array as da, numpy as np, cuprims.dask
        x = da.from_array(cp.ones(10_000, dtype=np.float32), chunks=3000, asarray=False)
        assert float(cuprims.dask.sum(x).compute()) == 10_000.0
    """
    dt = result_dtype(checked_array(x), dtype)
    return reduce(x, OpKind.PLUS, dt.type(0), dtype=dt, split_every=split_every)


def min(x: Any, *, split_every: int = 8) -> Any:
    """The smallest item of ``x`` (an error for none), as a 0-d Dask array; see :func:`reduce`.

    Example::

        import cupy as cp, dask.array as da, numpy as np, cuprims.dask
        x = da.from_array(cp.asarray([5, -2, 9], np.int64), chunks=2, asarray=False)
        assert int(cuprims.dask.min(x).compute()) == -2
    """
    return reduce(x, OpKind.MINIMUM, None, split_every=split_every)


def max(x: Any, *, split_every: int = 8) -> Any:
    """The largest item of ``x`` (an error for none), as a 0-d Dask array; see :func:`reduce`.

    Example::

        import cupy as cp, dask.array as da, numpy as np, cuprims.dask
        x = da.from_array(cp.asarray([5, -2, 9], np.int64), chunks=2, asarray=False)
        assert int(cuprims.dask.max(x).compute()) == 9
    """
    return reduce(x, OpKind.MAXIMUM, None, split_every=split_every)

