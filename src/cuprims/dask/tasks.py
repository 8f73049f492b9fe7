"""The functions the graphs' tasks run, inside the workers, on CuPy chunks: each calls one
cuprims algorithm. A partial result is a one-element device array, or None for an empty
chunk (so that no identity of the operator is ever needed)."""

from __future__ import annotations

from typing import Any

import numpy as np

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


def chunk_total(block: Any, op: Any, dtype: np.dtype) -> Any:
    return partial_reduce(block, op, dtype)


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
