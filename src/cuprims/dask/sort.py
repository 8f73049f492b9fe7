"""A sample sort of Dask arrays of CuPy chunks: each chunk sorted by cuprims in its worker,
splitters chosen from evenly spaced samples of every sorted chunk, each chunk cut at the
splitters, and each output chunk gathered from one piece of every chunk (the one
all-to-all exchange) and sorted."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from cuprims.dask import tasks
from cuprims.dask.graph import checked_array, chunk_keys
from cuprims.enums import SortOrder
from cuprims.errors import ArgumentError


def sort(keys: Any, values: Any = None, order: SortOrder = SortOrder.ASCENDING, *, samples_per_chunk: int = 256,
         parts: int | None = None) -> Any:
    """``keys`` sorted (and ``values`` moved with them), as Dask arrays of ``parts`` chunks of
    sizes known once computed (about even: the splitters are quantiles of samples, so skewed
    keys still spread; many copies of one key stay in one chunk).

    Args:
        keys: a one-dimensional ``dask.array.Array`` of CuPy chunks (any key dtype
            :func:`cuprims.radix_sort` takes; floats in numpy's order, NaN last).
        values: None, or an array of the same chunks moved with the keys.
        order: ``SortOrder.ASCENDING`` or ``SortOrder.DESCENDING``.
        samples_per_chunk: keys sampled from each sorted chunk to choose the splitters.
        parts: output chunks (default: as many as ``keys`` has).

    Returns:
        The sorted keys, or ``(keys, values)`` with values.

    Example::

        import cupy as cp, dask.array as da, numpy as np, cuprims.dask
        x = da.from_array(cp.asarray([5, 3, 9, 1, 7, 2], np.int32), chunks=2, asarray=False)
        assert cuprims.dask.sort(x).compute().get().tolist() == [1, 2, 3, 5, 7, 9]
    """
    import dask.array as da
    from dask.array.utils import meta_from_array
    from dask.highlevelgraph import HighLevelGraph

    keys = checked_array(keys, "keys")
    if keys.ndim != 1:
        raise ArgumentError("keys", "a one-dimensional dask array", f"an array of shape {keys.shape}")
    if values is not None:
        values = checked_array(values, "values")
        if values.chunks != keys.chunks:
            raise ArgumentError("values", f"an array of the keys' chunks {keys.chunks}", values.chunks)
    if not isinstance(order, SortOrder):
        raise ArgumentError("order", "SortOrder.ASCENDING or SortOrder.DESCENDING", order)
    if type(samples_per_chunk) is not int or samples_per_chunk < 1:
        raise ArgumentError("samples_per_chunk", "a positive int", samples_per_chunk)
    count = len(keys.chunks[0])
    parts = count if parts is None else parts
    if type(parts) is not int or parts < 1:
        raise ArgumentError("parts", "a positive int (output chunks)", parts)
    descending = order is SortOrder.DESCENDING
    token = da.core.tokenize(keys, values, order, samples_per_chunk, parts)
    name = f"cuprims-sort-{token}"
    sorted_, sample, split, cut, piece, out = (f"{name}-sorted", f"{name}-sample", f"{name}-splitters",
                                               f"{name}-cut", f"{name}-piece", f"{name}-part")
    key_leaves = chunk_keys(keys)
    value_leaves = chunk_keys(values) if values is not None else [None] * count
    layer: dict[Any, Any] = {}
    for i in range(count):
        layer[(sorted_, i)] = (tasks.sort_chunk, key_leaves[i], value_leaves[i], order)
        layer[(sample, i)] = (tasks.sample_chunk, (sorted_, i), samples_per_chunk)
    layer[(split,)] = (tasks.splitters, [(sample, i) for i in range(count)], parts, descending)
    for i in range(count):
        layer[(cut, i)] = (tasks.cut_chunk, (sorted_, i), (split,), descending)
        for j in range(parts):   # a task per piece: only the piece leaves the chunk's worker
            layer[(piece, i, j)] = (tasks.chunk_piece, (sorted_, i), (cut, i), j)
    for j in range(parts):
        layer[(out, j)] = (tasks.gather_part, [(piece, i, j) for i in range(count)], order, values is not None)
    unknown = ((np.nan,) * parts,)
    deps = [keys] if values is None else [keys, values]
    keys_name, values_name = f"{name}-keys", f"{name}-values"
    key_layer = {**layer, **{(keys_name, j): (operator.getitem, (out, j), 0) for j in range(parts)}}
    sorted_keys = da.Array(HighLevelGraph.from_collections(keys_name, key_layer, dependencies=deps), keys_name,
                           chunks=unknown, dtype=keys.dtype, meta=meta_from_array(keys._meta, ndim=1))
    if values is None:
        return sorted_keys
    value_layer = {**layer, **{(values_name, j): (operator.getitem, (out, j), 1) for j in range(parts)}}
    moved = da.Array(HighLevelGraph.from_collections(values_name, value_layer, dependencies=deps), values_name,
                     chunks=unknown, dtype=values.dtype, meta=meta_from_array(values._meta, ndim=1))
    return sorted_keys, moved
