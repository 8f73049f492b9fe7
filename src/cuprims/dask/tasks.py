"""The functions the graphs' tasks run, inside the workers, on CuPy chunks: each calls one
cuprims algorithm. A partial result is a one-element device array, or None for an empty
chunk (so that no identity of the operator is ever needed)."""

from __future__ import annotations

from typing import Any

import numpy as np

from cuprims.dask.exchange import DevicePiece
from cuprims.errors import ArgumentError


def _flat(block: Any) -> Any:
    import cupy as cp

    return cp.ascontiguousarray(block).reshape(-1)


def partial_reduce(block: Any, op: Any, dtype: np.dtype) -> Any:
    """``op``'s fold of the chunk's items, as a one-element array of ``dtype``; None when the
    chunk is empty."""
    import cupy as cp

    import cuprims

    flat = _flat(block)
    if flat.size == 0:
        return None
    out = cp.empty(1, dtype)
    cuprims.reduce_into(d_in=flat, d_out=out, op=op, num_items=flat.size)
    return out


def combine(parts: list, op: Any, dtype: np.dtype) -> Any:
    """The fold of several partial results (None where a chunk was empty)."""
    import cupy as cp

    present = [p for p in parts if p is not None]
    if len(present) <= 1:
        return present[0] if present else None
    return partial_reduce(cp.concatenate(present), op, dtype)


def finish_reduce(part: Any, op: Any, dtype: np.dtype, h_init: Any) -> Any:
    """The 0-d result: the fold of every item and ``h_init`` (``h_init`` alone for no item)."""
    import cupy as cp

    import cuprims

    if h_init is None:
        if part is None:
            raise ArgumentError("h_init", "a value (the array has no item, and the fold of none is h_init)", None)
        return part.reshape(())
    out = cp.empty(1, dtype)
    if part is None:
        out[0] = np.asarray(h_init).astype(dtype, copy=False).reshape(())
    else:
        cuprims.reduce_into(d_in=part, d_out=out, op=op, num_items=1, h_init=h_init)
    return out.reshape(())


def carries(totals: list, op: Any, dtype: np.dtype, init: Any) -> list:
    """Each chunk's carry into its scan: the fold of ``init`` (if any) and the totals of the
    chunks before it, as a one-element device array, or None (the first chunks, where no
    item and no ``init`` came before)."""
    import cupy as cp

    import cuprims

    carried: list = []
    running = None if init is None else cp.asarray(np.asarray(init).astype(dtype, copy=False).reshape(1))
    for total in totals:
        carried.append(running)
        if total is None:
            continue
        if running is None:
            running = total
        else:
            both = cp.concatenate([running, total])
            nxt = cp.empty(1, dtype)
            cuprims.reduce_into(d_in=both, d_out=nxt, op=op, num_items=2)
            running = nxt
    return carried


def chunk_scan(block: Any, carried: list, index: int, op: Any, dtype: np.dtype, inclusive: bool) -> Any:
    """The chunk scanned from its carry (the carry leads an exclusive scan's chunk)."""
    import cupy as cp

    import cuprims

    flat = _flat(block)
    out = cp.empty(flat.size, dtype)
    if flat.size == 0:
        return out.reshape(block.shape)
    carry = carried[index]
    if inclusive:
        cuprims.inclusive_scan(d_in=flat, d_out=out, op=op, init_value=carry, num_items=flat.size)
    else:
        cuprims.exclusive_scan(d_in=flat, d_out=out, op=op, init_value=carry, num_items=flat.size)
    return out.reshape(block.shape)


def chunk_histogram(block: Any, num_output_levels: int, lower: Any, upper: Any, counter: np.dtype) -> Any:
    """The chunk's counts in ``num_output_levels - 1`` even bins over ``[lower, upper)``."""
    import cupy as cp

    import cuprims

    flat = _flat(block)
    counts = cp.zeros(num_output_levels - 1, counter)
    if flat.size:
        cuprims.histogram_even(d_samples=flat, d_histogram=counts, num_output_levels=num_output_levels,
                               lower_level=lower, upper_level=upper, num_samples=flat.size)
    return counts


def add_counts(parts: list) -> Any:
    """The sum of several chunks' counts (small arrays: one bin each)."""
    total = parts[0].copy()
    for part in parts[1:]:
        total += part
    return total


def chunk_top_k(block: Any, start: int, k: int, order: Any, indices: bool) -> tuple:
    """The chunk's ``min(k, size)`` best keys, and (``indices``) their positions in the whole
    array (the chunk's ``start`` added), unsorted."""
    import cupy as cp

    import cuprims
    from cuprims import CountingIterator

    flat = _flat(block)
    take = flat.size if flat.size < k else k
    keys = cp.empty(take, flat.dtype)
    where = cp.empty(take, np.int64) if indices else None
    if take:
        cuprims.top_k(d_in_keys=flat, d_out_keys=keys, k=take, num_items=flat.size,
                      d_in_values=CountingIterator(np.int64(start)) if indices else None, d_out_values=where,
                      order=order)
    return keys, where


def merge_top_k(parts: list, k: int, order: Any, indices: bool, sort: bool) -> tuple:
    """The best ``min(k, candidates)`` of several chunks' candidates (sorted where ``sort``)."""
    import cupy as cp

    import cuprims

    keys = cp.concatenate([p[0] for p in parts])
    where = cp.concatenate([p[1] for p in parts]) if indices else None
    take = keys.size if keys.size < k else k
    out_keys = cp.empty(take, keys.dtype)
    out_where = cp.empty(take, np.int64) if indices else None
    if take:
        cuprims.top_k(d_in_keys=keys, d_out_keys=out_keys, k=take, num_items=keys.size, d_in_values=where,
                      d_out_values=out_where, order=order, sorted=sort)
    return out_keys, out_where


def sort_chunk(keys: Any, values: Any, order: Any) -> tuple:
    """The chunk's keys (and values) sorted by :func:`cuprims.radix_sort`."""
    import cupy as cp

    import cuprims

    flat = _flat(keys)
    out_keys = cp.empty_like(flat)
    out_values = None if values is None else cp.empty_like(_flat(values))
    if flat.size:
        cuprims.radix_sort(d_in_keys=flat, d_out_keys=out_keys, d_in_values=None if values is None else _flat(values),
                           d_out_values=out_values, num_items=flat.size, order=order)
    return out_keys, out_values


def sample_chunk(pair: tuple, count: int) -> np.ndarray:
    """``count`` evenly spaced keys of a sorted chunk, on the host (fewer for a short chunk)."""
    import cupy as cp

    keys = pair[0]
    if keys.size == 0:
        return cp.asnumpy(keys)
    return cp.asnumpy(keys[np.linspace(0, keys.size - 1, min(count, keys.size)).astype(np.int64)])


def splitters(samples: list, parts: int, descending: bool) -> np.ndarray:
    """The ``parts - 1`` keys that cut the samples into ``parts`` groups of one size: the
    boundaries of the output chunks (numpy's order: NaN last, first when descending)."""
    from cuprims.dask.graph import splitter_positions

    pooled = np.sort(np.concatenate(samples))
    if descending:
        pooled = pooled[::-1]
    return pooled[splitter_positions(pooled.size, parts)]


def cut_chunk(pair: tuple, cuts: np.ndarray, descending: bool) -> np.ndarray:
    """Where each of ``cuts`` falls in a sorted chunk (items equal to a cut go after it):
    ``parts + 1`` positions, from 0 to the chunk's size."""
    import cupy as cp

    import cuprims
    from cuprims import OpKind

    keys = pair[0]
    where = cp.zeros(cuts.size, np.int64)
    if keys.size and cuts.size:
        cuprims.lower_bound(d_data=keys, num_items=keys.size, d_values=cp.asarray(cuts), num_values=cuts.size,
                            d_out=where, comp=OpKind.GREATER if descending else None)
    return np.r_[0, cp.asnumpy(where), keys.size].astype(np.int64)


def chunk_piece(pair: tuple, cuts: np.ndarray, part: int) -> DevicePiece:
    """The ``part``-th piece of a sorted chunk (views of its keys, and values or None), with
    an event recorded after the sort that wrote it. Only the piece travels to the worker
    gathering that part: device to device to a worker of this machine, else as host bytes
    (:mod:`cuprims.dask.exchange`)."""
    keys, values = pair
    start, stop = int(cuts[part]), int(cuts[part + 1])
    ready = None
    if hasattr(keys, "__cuda_array_interface__"):
        import cupy as cp

        # on the stream the sort ran on (cuprims' default, the legacy stream)
        ready = cp.cuda.Event(block=False, disable_timing=True)
        ready.record(cp.cuda.Stream.null)
    return DevicePiece(keys[start:stop], None if values is None else values[start:stop], ready)


def join_pieces(pieces: list, values: bool) -> tuple:
    """An output chunk's pieces (:func:`chunk_piece`), keys and values (or None) laid end
    to end: the exchange's end, before the chunk's sort."""
    import cupy as cp

    keys = cp.concatenate([p.keys for p in pieces])
    return keys, cp.concatenate([p.values for p in pieces]) if values else None


# key dtypes whose OpKind.LESS / GREATER order is radix sort's (numbers; floats NaN last)
_MERGED = frozenset(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                                          np.uint64, np.float32, np.float64))


def merge_pieces(pieces: list, order: Any, values: bool) -> tuple:
    """An output chunk's pieces, each sorted, merged in a tree of :func:`cuprims.merge`
    calls (neighbours first, so equal keys keep the chunks' order: the result is the stable
    sort of the pieces laid end to end)."""
    import cupy as cp

    import cuprims
    from cuprims import OpKind, SortOrder

    op = OpKind.GREATER if order is SortOrder.DESCENDING else OpKind.LESS
    runs = [(p.keys, p.values) for p in pieces if p.keys.size]
    if len(runs) <= 1:   # nothing to merge: a copy, not a view that keeps a whole chunk alive
        return join_pieces(pieces, values)
    while len(runs) > 1:
        merged = []
        for (k1, v1), (k2, v2) in zip(runs[0::2], runs[1::2]):
            keys = cp.empty(k1.size + k2.size, k1.dtype)
            vals = cp.empty(k1.size + k2.size, v1.dtype) if values else None
            cuprims.merge(d_in_keys1=k1, d_in_values1=v1, d_in_keys2=k2, d_in_values2=v2, d_out_keys=keys,
                          d_out_values=vals, num_items1=k1.size, num_items2=k2.size, op=op)
            merged.append((keys, vals))
        runs = merged + runs[len(merged) * 2:]
    return runs[0]


def gather_part(pieces: list, order: Any, values: bool) -> tuple:
    """An output chunk: its piece of every sorted chunk, merged (numbers) or sorted together."""
    if pieces and pieces[0].keys.dtype in _MERGED:
        return merge_pieces(pieces, order, values)
    keys, vals = join_pieces(pieces, values)
    return sort_chunk(keys, vals, order)


def chunk_by_key(keys: Any, values: Any, op: Any, equality: Any, dtype: np.dtype) -> tuple:
    """The chunk's runs of equal consecutive keys: by :func:`cuprims.reduce_by_key` (each run's
    last key and its values folded by ``op``, in ``dtype``), or with ``op`` None by
    :func:`cuprims.unique_by_key` (each run's first key and first value); with the chunk's
    last key (None for an empty chunk), which the stitch compares with the next chunk's first."""
    import cupy as cp

    import cuprims

    flat, vals = _flat(keys), _flat(values)
    n = flat.size
    out_keys, out_vals = cp.empty(n, flat.dtype), cp.empty(n, dtype)
    if n == 0:
        return out_keys, out_vals, None
    count = cp.empty(1, np.int64)
    if op is None:
        cuprims.unique_by_key(d_in_keys=flat, d_in_items=vals, d_out_keys=out_keys, d_out_items=out_vals,
                              d_out_num_selected=count, op=equality, num_items=n)
    else:
        cuprims.reduce_by_key(d_in_keys=flat, d_in_values=vals, d_out_unique_keys=out_keys, d_out_aggregates=out_vals,
                              d_out_num_runs=count, reduction_op=op, num_items=n, equality_op=equality)
    runs = int(count[0])
    if runs < n:     # copies of the runs alone, so that the chunk-sized outputs are freed
        out_keys, out_vals = out_keys[:runs].copy(), out_vals[:runs].copy()
    return out_keys, out_vals, flat[-1:].copy()


def run_ends(part: tuple, values: bool) -> tuple | None:
    """What the stitch needs of one chunk's runs, one item each (None for an empty chunk):
    the first key, the chunk's last key, (with ``values``, else None) the first and last
    runs' values, and the count of runs. Copies, so that the chunk's arrays do not travel
    with them."""
    keys, vals, last = part
    if last is None:
        return None
    if not values:
        return keys[:1].copy(), last, None, None, int(keys.size)
    return keys[:1].copy(), last, vals[:1].copy(), vals[-1:].copy(), int(keys.size)


def boundary_joins(lasts: list, firsts: list, equality: Any) -> list[bool]:
    """For each pair, whether ``equality(lasts[j], firsts[j])`` holds (one-element arrays):
    :func:`cuprims.unique_by_key` of the pairs laid end to end, each pair's second item
    joining its first exactly where it is no head (a run's head is decided by its item and
    the one before alone; the heads where one pair meets the next are not looked at)."""
    import cupy as cp

    import cuprims
    from cuprims import CountingIterator

    if not lasts:
        return []
    laid = cp.concatenate([item for pair in zip(lasts, firsts) for item in pair])
    heads, count = cp.empty(laid.size, np.int64), cp.empty(1, np.int64)
    cuprims.unique_by_key(d_in_keys=laid, d_in_items=CountingIterator(np.int64(0)), d_out_keys=cp.empty_like(laid),
                          d_out_items=heads, d_out_num_selected=count, op=equality, num_items=laid.size)
    starts = set(cp.asnumpy(heads[:int(count[0])]).tolist())
    return [2 * j + 1 not in starts for j in range(len(lasts))]


def fold_groups(groups: list, op: Any, dtype: np.dtype) -> list:
    """Each group's one-element arrays folded in order by ``op``, in one
    :func:`cuprims.reduce_by_key` over all groups (the group's number its key): a
    one-element array per group."""
    import cupy as cp

    import cuprims

    pieces = cp.concatenate([piece for group in groups for piece in group])
    ids = cp.asarray(np.repeat(np.arange(len(groups), dtype=np.int32), [len(group) for group in groups]))
    # reduce_by_key asks room for as many runs as items, the most there could be
    folded, count = cp.empty(pieces.size, dtype), cp.empty(1, np.int64)
    cuprims.reduce_by_key(d_in_keys=ids, d_in_values=pieces, d_out_unique_keys=cp.empty_like(ids),
                          d_out_aggregates=folded, d_out_num_runs=count, reduction_op=op, num_items=pieces.size)
    return [folded[g:g + 1].copy() for g in range(len(groups))]


def stitch_runs(ends: list, op: Any, equality: Any, dtype: np.dtype) -> list:
    """For each chunk, from every chunk's :func:`run_ends`: ``(drop, patch)``, whether its
    first run continues an earlier chunk's (and leaves its output), and, where its last run
    goes on into later chunks, ``(key, value)``: that run's last key (the first key the last
    chunk it reaches gives, reduce-by-key writing a run's last key) and its fold over all of
    them (reduce-by-key only; else None)."""
    from cuprims.dask.graph import joined_runs

    present = [end for end in ends if end is not None]
    joins = boundary_joins([end[1] for end in present[:-1]], [end[0] for end in present[1:]], equality)
    drops, groups = joined_runs([0 if end is None else end[4] for end in ends], joins)
    patches: list = [None] * len(ends)
    if op is not None and groups:
        # the head chunk gives its last run's value; every other chunk its first run's
        pieces = [[ends[i][3 if k == 0 else 2] for k, i in enumerate(group)] for group in groups]
        for group, folded in zip(groups, fold_groups(pieces, op, dtype)):
            patches[group[0]] = (ends[group[-1]][0], folded)
    return list(zip(drops, patches))


def patch_runs(part: tuple, fix: tuple) -> tuple:
    """The chunk's runs as they go out: its first run dropped where it continues an earlier
    chunk's, its last run's key and value replaced where that run goes on into later chunks."""
    keys, vals, _ = part
    drop, patch = fix
    if drop:
        keys, vals = keys[1:], vals[1:]
    if patch is not None:
        keys, vals = keys.copy(), vals.copy()     # the part is the runs task's result: left as it is
        keys[-1:], vals[-1:] = patch
    return keys, vals
