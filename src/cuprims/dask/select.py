"""Histograms and top-k of Dask arrays of CuPy chunks: each chunk's result by cuprims in its
worker, then the results combined in a tree (counts added; candidates selected again)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from cuprims.dask import tasks
from cuprims.dask.graph import checked_array, checked_split_every, chunk_keys, combining_tree
from cuprims.enums import SortOrder
from cuprims.errors import ArgumentError


def histogram_even(x: Any, num_output_levels: int, lower_level: Any, upper_level: Any, *,
                   counter_dtype: Any = np.int64, split_every: int = 8) -> Any:
    """Counts of the items of ``x`` in ``num_output_levels - 1`` even bins over
    ``[lower_level, upper_level)`` (items outside, and NaNs, are not counted), as a Dask
    array of one chunk; :func:`cuprims.histogram_even` on each chunk, the counts added in
    a tree.

    Args:
        x: a ``dask.array.Array`` of CuPy chunks (any shape; every item counts).
        num_output_levels: bin edges, one more than the bins (at least 2).
        lower_level: the first bin's lower edge (numpy scalar of the samples' kind).
        upper_level: the last bin's upper edge, excluded.
        counter_dtype: int32, uint32, int64 (default) or uint64.
        split_every: chunks' counts added a task (at least 2).

    Example::

        import cupy as cp, dask.array as da, numpy as np, cuprims.dask
        x = da.from_array(cp.arange(100, dtype=np.float32), chunks=30, asarray=False)
        h = cuprims.dask.histogram_even(x, 5, np.float32(0), np.float32(100))
        assert h.compute().get().tolist() == [25, 25, 25, 25]
    """
    import dask.array as da
    from dask.array.utils import meta_from_array
    from dask.highlevelgraph import HighLevelGraph

    x = checked_array(x)
    if type(num_output_levels) is not int or num_output_levels < 2:
        raise ArgumentError("num_output_levels", "an int of at least 2 (bin edges)", num_output_levels)
    counter = np.dtype(counter_dtype)
    if counter not in (np.dtype(np.int32), np.dtype(np.uint32), np.dtype(np.int64), np.dtype(np.uint64)):
        raise ArgumentError("counter_dtype", "int32, uint32, int64 or uint64", counter)
    split_every = checked_split_every(split_every)
    token = da.core.tokenize(x, num_output_levels, lower_level, upper_level, counter, split_every)
    part, tree, out = f"cuprims-histogram-part-{token}", f"cuprims-histogram-tree-{token}", \
        f"cuprims-histogram-{token}"
    leaves = chunk_keys(x)
    layer: dict[Any, Any] = {(part, i): (tasks.chunk_histogram, key, num_output_levels, lower_level, upper_level,
                                         counter) for i, key in enumerate(leaves)}
    root = combining_tree(layer, tree, [(part, i) for i in range(len(leaves))], split_every,
                          lambda parts, at_root: (tasks.add_counts, parts))
    layer[(out, 0)] = root   # an alias: the root's counts under the output's name
    graph = HighLevelGraph.from_collections(out, layer, dependencies=[x])
    bins = num_output_levels - 1
    return da.Array(graph, out, chunks=((bins,),), dtype=counter, meta=meta_from_array(x._meta, ndim=1, dtype=counter))


def top_k(x: Any, k: int, order: SortOrder = SortOrder.DESCENDING, *, return_indices: bool = False,
          split_every: int = 8) -> Any:
    """The ``k`` largest (``DESCENDING``) or smallest (``ASCENDING``) items of ``x``, best
    first, as a Dask array of one chunk; with ``return_indices``, also their positions in
    ``x`` (int64). NaN orders above +inf, as numpy sorts. Each chunk's candidates by
    :func:`cuprims.top_k`, then the candidates of ``split_every`` chunks selected again,
    up the tree (``k`` items a chunk travel).

    Args:
        x: a one-dimensional ``dask.array.Array`` of CuPy chunks.
        k: how many items (0 to ``x.size``).
        order: ``SortOrder.DESCENDING`` (the largest) or ``SortOrder.ASCENDING``.
        return_indices: return ``(keys, indices)``.
        split_every: candidate sets selected from a task (at least 2).

    Example::

        import cupy as cp, dask.array as da, numpy as np, cuprims.dask
        x = da.from_array(cp.asarray([3.0, 9.0, 1.0, 7.0, 5.0], np.float32), chunks=2, asarray=False)
        keys, where = cuprims.dask.top_k(x, 2, return_indices=True)
        assert keys.compute().get().tolist() == [9.0, 7.0] and where.compute().get().tolist() == [1, 3]
    """
    import dask.array as da
    from dask.array.utils import meta_from_array
    from dask.highlevelgraph import HighLevelGraph

    x = checked_array(x)
    if x.ndim != 1:
        raise ArgumentError("x", "a one-dimensional dask array", f"an array of shape {x.shape}")
    if type(k) is not int or not 0 <= k <= x.size:
        raise ArgumentError("k", f"an int from 0 to the array's {x.size} items", k)
    if not isinstance(order, SortOrder):
        raise ArgumentError("order", "SortOrder.DESCENDING or SortOrder.ASCENDING", order)
    split_every = checked_split_every(split_every)
    indices = bool(return_indices)
    token = da.core.tokenize(x, k, order, indices, split_every)
    part, tree, root_name = f"cuprims-top-k-part-{token}", f"cuprims-top-k-tree-{token}", f"cuprims-top-k-{token}"
    leaves = chunk_keys(x)
    starts = np.r_[0, np.cumsum(x.chunks[0])[:-1]].astype(np.int64)
    layer: dict[Any, Any] = {(part, i): (tasks.chunk_top_k, key, int(starts[i]), k, order, indices)
                             for i, key in enumerate(leaves)}
    # the candidates are sorted at the root only
    root = combining_tree(layer, tree, [(part, i) for i in range(len(leaves))], split_every,
                          lambda parts, at_root: (tasks.merge_top_k, parts, k, order, indices, at_root))
    keys_name, where_name = f"{root_name}-keys", f"{root_name}-indices"
    layer[(keys_name, 0)] = (operator.getitem, root, 0)
    keys = da.Array(HighLevelGraph.from_collections(keys_name, layer, dependencies=[x]), keys_name, chunks=((k,),),
                    dtype=x.dtype, meta=meta_from_array(x._meta, ndim=1, dtype=x.dtype))
    if not indices:
        return keys
    where_layer = dict(layer)
    where_layer[(where_name, 0)] = (operator.getitem, root, 1)
    where = da.Array(HighLevelGraph.from_collections(where_name, where_layer, dependencies=[x]), where_name,
                     chunks=((k,),), dtype=np.int64, meta=meta_from_array(x._meta, ndim=1, dtype=np.int64))
    return keys, where
