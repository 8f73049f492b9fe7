"""What the graph builders share: checks of the arguments, on the client, before any task
exists; the chunks' keys in order; the fan-in of a tree of combining tasks; the keys and
values arrays of a keyed algorithm's output tasks; and the host's bookkeeping that some
tasks do (the splitters' positions, the runs that cross chunks)."""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from cuprims.errors import ArgumentError, ArgumentTypeError
from cuprims.op import op_spec

_OP_EXPECTED = ("an OpKind, a Python callable or a RawOp that captures no device array (the workers run on "
                "other devices than the client's arrays)")


def checked_array(x: Any, name: str = "x") -> Any:
    """``x`` if it is a ``dask.array.Array``; else ArgumentTypeError naming ``name``."""
    import dask.array as da

    if not isinstance(x, da.Array):
        raise ArgumentTypeError(name, "a dask.array.Array (of CuPy chunks)", x)
    return x


def checked_keys_values(keys: Any, values: Any, *, values_optional: bool = False) -> tuple[Any, Any]:
    """``(keys, values)`` of a keyed algorithm, checked: ``keys`` a one-dimensional Dask
    array, ``values`` one of the same chunks (or None, where ``values_optional``)."""
    keys = checked_array(keys, "keys")
    if keys.ndim != 1:
        raise ArgumentError("keys", "a one-dimensional dask array", f"an array of shape {keys.shape}")
    if values is None and values_optional:
        return keys, None
    values = checked_array(values, "values")
    if values.chunks != keys.chunks:
        raise ArgumentError("values", f"an array of the keys' chunks {keys.chunks}", values.chunks)
    return keys, values


def keyed_outputs(layer: dict, name: str, out: str, parts: int, keys: Any, values: Any,
                  values_dtype: Any = None) -> tuple[Any, Any]:
    """The keys and values (None without ``values``) of tasks ``(out, j)`` of ``layer``,
    ``parts`` of them, each giving a ``(keys, values)`` chunk: two Dask arrays named
    ``<name>-keys`` and ``<name>-values``, of chunk sizes known once computed, typed like
    ``keys`` and ``values`` (or ``values_dtype``)."""
    import dask.array as da
    from dask.array.utils import meta_from_array
    from dask.highlevelgraph import HighLevelGraph

    unknown = ((np.nan,) * parts,)
    deps = [keys] if values is None else [keys, values]

    def array_of(pick: int, named: str, like: Any, dtype: np.dtype) -> Any:
        graph = {**layer, **{(named, j): (operator.getitem, (out, j), pick) for j in range(parts)}}
        return da.Array(HighLevelGraph.from_collections(named, graph, dependencies=deps), named, chunks=unknown,
                        dtype=dtype, meta=meta_from_array(like._meta, ndim=1, dtype=dtype))

    out_keys = array_of(0, f"{name}-keys", keys, keys.dtype)
    if values is None:
        return out_keys, None
    return out_keys, array_of(1, f"{name}-values", values, result_dtype(values, values_dtype))


def checked_op(op: Any, name: str = "op") -> Any:
    """``op``, checked to travel to the workers: an OpKind, a RawOp, or a Python callable
    that captures no device array."""
    if op is None:
        raise ArgumentError(name, _OP_EXPECTED, None)
    spec = op_spec(op, argument=name, bind_captures=True)
    if spec.captures or not spec.persistent:
        raise ArgumentError(name, _OP_EXPECTED, op)
    return op


def checked_split_every(split_every: Any) -> int:
    if type(split_every) is not int or split_every < 2:
        raise ArgumentError("split_every", "an int of at least 2 (partial results combined a task)", split_every)
    return split_every


def result_dtype(x: Any, dtype: Any) -> np.dtype:
    """The result's dtype: ``dtype`` where given, else the chunks'."""
    return np.dtype(x.dtype if dtype is None else dtype)


def chunk_keys(x: Any) -> list[tuple]:
    """The keys of ``x``'s chunks in C order (as ``x.ravel()`` would read them)."""
    keys = x.__dask_keys__()
    flat: list[tuple] = []

    def walk(k: Any) -> None:
        if isinstance(k, list):
            for item in k:
                walk(item)
        else:
            flat.append(k)

    walk(keys)
    return flat


def fan_in(count: int, split_every: int) -> list[list[range]]:
    """The levels of a tree combining ``count`` leaves ``split_every`` at a time: each level
    a list of the index ranges (into the level below) that one task combines; the last
    level has one task. None for no leaf."""
    levels: list[list[range]] = []
    width = count
    while width > 1 or not levels:
        level = [range(i, min(i + split_every, width)) for i in range(0, width, split_every)]
        levels.append(level)
        width = len(level)
    return levels


def combining_tree(layer: dict, name: str, leaves: list, split_every: int, task: Callable[[list, bool], tuple]) -> Any:
    """Add to ``layer`` the tasks that combine ``leaves`` (keys) ``split_every`` at a time, up
    to one root: task ``(name, depth, j)`` is ``task(parts, at_root)``, given its parts' keys
    and whether it is the root. Return the root's key (None for no leaf)."""
    if not leaves:
        return None
    below = list(leaves)
    levels = fan_in(len(below), split_every)
    for depth, level in enumerate(levels):
        here = []
        for j, group in enumerate(level):
            key = (name, depth, j)
            layer[key] = task([below[i] for i in group], depth == len(levels) - 1)
            here.append(key)
        below = here
    return below[0]


def splitter_positions(pooled: int, parts: int) -> np.ndarray:
    """Indices into ``pooled`` sorted samples of the ``parts - 1`` splitters that cut them into
    ``parts`` groups of (nearly) one size; none when there are no samples."""
    if pooled == 0 or parts < 2:
        return np.zeros(0, np.int64)
    return (np.arange(1, parts, dtype=np.int64) * pooled) // parts


def joined_runs(runs: list[int], joins: list[bool]) -> tuple[list[bool], list[list[int]]]:
    """Which runs of the chunks' by-key results join across chunk boundaries.

    ``runs``: each chunk's count of runs (0 for an empty chunk, which no run crosses);
    ``joins``: for each two consecutive non-empty chunks, whether the first's last run goes
    on into the second's first. Returns ``drops``, for each chunk whether its first run
    continues an earlier chunk's (and so leaves its output), and ``groups``, for each run
    that crosses a boundary the chunks it crosses in order (its head in the first one, as
    that chunk's last run; a chunk of one run can be crossed whole)."""
    present = [i for i, count in enumerate(runs) if count]
    if len(joins) != max(len(present) - 1, 0):
        raise ValueError(f"{len(joins)} joins for {len(present)} non-empty chunks")
    drops = [False] * len(runs)
    groups: list[list[int]] = []
    open_group: list[int] | None = None
    for a, b, join in zip(present, present[1:], joins):
        if not join:
            open_group = None
            continue
        drops[b] = True
        if open_group is None:
            open_group = [a]
            groups.append(open_group)
        open_group.append(b)
        if runs[b] > 1:     # b's last run is another run: one that joins b's successor starts a new group
            open_group = None
    return drops, groups
