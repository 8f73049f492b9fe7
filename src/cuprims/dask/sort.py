"""A sample sort of Dask arrays of CuPy chunks: each chunk sorted by cuprims in its worker,
splitters chosen from evenly spaced samples of every sorted chunk, each chunk cut at the
splitters, and each output chunk gathered from one piece of every chunk (the one
all-to-all exchange) and the pieces merged."""

from __future__ import annotations

from typing import Any

from cuprims.dask import tasks
from cuprims.dask.graph import checked_keys_values, chunk_keys, keyed_outputs
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

    keys, values = checked_keys_values(keys, values, values_optional=True)
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
    sorted_keys, moved = keyed_outputs(layer, name, out, parts, keys, values)
    return sorted_keys if values is None else (sorted_keys, moved)
