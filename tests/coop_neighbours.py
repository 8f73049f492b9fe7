"""Kernels calling the neighbour primitives (``coop.block.make_discontinuity`` and
``make_adjacent_difference``) in each of their forms, as ``coop_forms`` does for the
established interface's factories: the caller's storage first or left out, the tile's
neighbour items given or not, a partial tile, one array in place.
tests/cpu/coop/test_coop_neighbours.py links each kernel for sm_90 and checks it keeps its
items in registers; tests/gpu/coop/test_coop_neighbours_gpu.py runs it against numpy.

A case's kernel ``kernel[1, shape](x, y)`` reads the tile from ``x`` (blocked: thread ``t``
its items ``t * n ...``) and writes form ``f``'s results to ``y[f * tile:(f + 1) * tile]``;
``expected(x)`` is ``y`` by numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coop_forms import (FORM_ITEMS, FORM_SHAPES, FORM_TYPES, STRUCT, FormCase, blocked_io, fits_twice,
                        launch_bounds, np_dtype)
from twins import dims_of, threads_of

FACTORIES = ["block.flag_heads", "block.flag_tails", "block.flag_heads_and_tails", "block.subtract_left",
             "block.subtract_right"]
# each flag kind its own flag type (bool is the factory's default)
FLAG_TYPES = {"block.flag_heads": None, "block.flag_tails": "int32", "block.flag_heads_and_tails": "uint8"}


def all_cases() -> list[tuple[str, str, tuple, int]]:
    return [(f, t, s, n) for f in FACTORIES for t in FORM_TYPES for s in FORM_SHAPES for n in FORM_ITEMS]


def inputs(type_name: str, count: int, seed: int = 7) -> np.ndarray:
    """Runs of equal values (three values, drawn at random) of the type."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 3, count)
    dtype = np_dtype(type_name)
    if type_name == STRUCT:
        x = np.zeros(count, dtype)
        x["v"], x["i"] = values, np.arange(count)
        return x
    if dtype.kind == "c":
        return (values + 1j * (values % 2)).astype(dtype)
    return values.astype(dtype)


def v_differs(a, b):
    return a.v != b.v


def argmax(a, b):
    return a if a.v >= b.v else b


# ------------------------------------------------------------------ numpy's results

def _apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.names:
        return a["v"] != b["v"]
    return a != b


def heads(x: np.ndarray, pred: Any = None) -> np.ndarray:
    flags = np.ones(x.size, bool)
    flags[1:] = _apart(x[:-1], x[1:])
    if pred is not None:
        flags[0] = _apart(np.array([pred], x.dtype), x[:1])[0]
    return flags


def tails(x: np.ndarray, succ: Any = None) -> np.ndarray:
    flags = np.ones(x.size, bool)
    flags[:-1] = _apart(x[:-1], x[1:])
    if succ is not None:
        flags[-1] = _apart(x[-1:], np.array([succ], x.dtype))[0]
    return flags


def _op(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.names:
        return np.where(a["v"] >= b["v"], a, b)
    return (a - b).astype(a.dtype)


def left(x: np.ndarray, pred: Any = None, valid: int | None = None) -> np.ndarray:
    out = x.copy()
    out[1:] = _op(x[1:], x[:-1])
    if pred is not None:
        out[0] = _op(x[:1], np.array([pred], x.dtype))[0]
    if valid is not None:
        out[valid:] = x[valid:]
    return out


def right(x: np.ndarray, succ: Any = None, valid: int | None = None) -> np.ndarray:
    out = x.copy()
    out[:-1] = _op(x[:-1], x[1:])
    if succ is not None:
        out[-1] = _op(x[-1:], np.array([succ], x.dtype))[0]
    if valid is not None:
        out[max(valid - 1, 0):] = x[max(valid - 1, 0):]
    return out


# ------------------------------------------------------------------ cases

def build(factory: str, type_name: str, shape: tuple, items: int) -> FormCase:
    """The :class:`~coop_forms.FormCase` of a neighbour primitive (built now, for the
    current coop target). The tile's neighbours a form passes are ``x[tile - 1]`` before
    it and ``x[0]`` after it; a partial tile holds half the tile's items."""
    import numba
    from numba import cuda
    from numba.cuda.np.numpy_support import from_dtype

    from cuprims import coop

    dtype = np_dtype(type_name)
    nb = from_dtype(dtype)
    is_struct = type_name == STRUCT
    bounds = launch_bounds(threads_of(shape))
    dx, dy, _ = dims_of(shape)
    n = items
    tile = threads_of(shape) * n
    half = tile // 2

    def case(prim, kernel, forms, expected):
        return FormCase(factory, type_name, tuple(shape), items, [prim], kernel, forms, len(forms) * tile, expected,
                        False)

    if factory.startswith("block.flag_"):
        kind = factory[len("block.flag_"):].upper()
        flag_name = FLAG_TYPES[factory]
        fl = numba.boolean if flag_name is None else getattr(numba, flag_name)
        prim = coop.block.make_discontinuity(nb, shape, n, v_differs if is_struct else None,
                                             getattr(coop.block.BlockDiscontinuityType, kind),
                                             flag_dtype=flag_name)
        nbytes = prim.temp_storage_bytes
        own = fits_twice(nbytes)     # else the own storage and the caller's pass 48 KiB: the caller's, by keyword
        both = kind == "HEADS_AND_TAILS"

        read = blocked_io(n, tile)[0]

        @cuda.jit(device=True)
        def write(y, slot, a, b, t):      # heads and tails together: 1 head, 2 tail, 3 both
            for i in range(n):
                y[slot * tile + t * n + i] = a[i] + 2 * b[i] if both else a[i]
            cuda.syncthreads()            # the caller's storage is reused next: CUB's rule, the kernel syncs

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            items_ = cuda.local.array(n, nb)
            a = cuda.local.array(n, fl)
            b = cuda.local.array(n, fl)
            read(x, items_, t)
            before, after = x[tile - 1], x[0]
            if both:
                prim(temp_storage, items_, a, b)
                write(y, 0, a, b, t)
                if own:
                    prim(items_, a, b)
                else:
                    prim(items_, a, b, temp_storage=temp_storage)
                write(y, 1, a, b, t)
                prim(temp_storage, items_, a, b, before, after)
                write(y, 2, a, b, t)
                if own:
                    prim(items_, a, b, tile_successor_item=after)
                else:
                    prim(items_, a, b, tile_successor_item=after, temp_storage=temp_storage)
                write(y, 3, a, b, t)
            else:
                prim(temp_storage, items_, a)
                write(y, 0, a, b, t)
                if own:
                    prim(items_, a)
                else:
                    prim(items_, a, temp_storage=temp_storage)
                write(y, 1, a, b, t)
                if kind == "HEADS":
                    prim(temp_storage, items_, a, before)
                    write(y, 2, a, b, t)
                    if own:
                        prim(items_, a, tile_predecessor_item=before)
                    else:
                        prim(items_, a, tile_predecessor_item=before, temp_storage=temp_storage)
                else:
                    prim(temp_storage, items_, a, after)
                    write(y, 2, a, b, t)
                    if own:
                        prim(items_, a, tile_successor_item=after)
                    else:
                        prim(items_, a, tile_successor_item=after, temp_storage=temp_storage)
                write(y, 3, a, b, t)

        def expected(x):
            before, after = x[-1], x[0]
            if both:
                forms = [(None, None), (None, None), (before, after), (None, after)]
                return np.concatenate([heads(x, p) + 2 * tails(x, s) for p, s in forms]).astype(np.int64)
            flags = heads if kind == "HEADS" else tails
            neighbour = before if kind == "HEADS" else after
            return np.concatenate([flags(x), flags(x), flags(x, neighbour), flags(x, neighbour)]).astype(np.int64)
        return case(prim, kernel, ["storage first", "no storage", "storage first, neighbour",
                                   "no storage, neighbour keyword"], expected)

    is_left = factory == "block.subtract_left"
    side = coop.block.BlockAdjacentDifferenceType.SubtractLeft if is_left else \
        coop.block.BlockAdjacentDifferenceType.SubtractRight
    prim = coop.block.make_adjacent_difference(nb, shape, n, argmax if is_struct else None, side)
    nbytes = prim.temp_storage_bytes
    own = fits_twice(nbytes)         # else the own storage and the caller's pass 48 KiB: the caller's, by keyword

    copy_in, copy_out = blocked_io(n, tile)

    @cuda.jit(link=prim.files, launch_bounds=bounds)
    def kernel(x, y):
        temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        items_in = cuda.local.array(n, nb)
        items_out = cuda.local.array(n, nb)
        copy_in(x, items_in, t)
        prim(temp_storage, items_in, items_out)
        copy_out(y, 0, items_out, t)
        if own:
            prim(items_in)                               # in place
        else:
            prim(items_in, temp_storage=temp_storage)
        copy_out(y, 1, items_in, t)
        copy_in(x, items_in, t)
        prim(temp_storage, items_in, items_out, half)    # a partial tile
        copy_out(y, 2, items_out, t)
        if is_left:
            if own:
                prim(items_in, items_out, tile_predecessor_item=x[tile - 1])
            else:
                prim(items_in, items_out, tile_predecessor_item=x[tile - 1], temp_storage=temp_storage)
            copy_out(y, 3, items_out, t)
            prim(temp_storage, items_in, items_out, half, x[tile - 1])
        else:
            if own:
                prim(items_in, items_out, tile_successor_item=x[0])
            else:
                prim(items_in, items_out, tile_successor_item=x[0], temp_storage=temp_storage)
            copy_out(y, 3, items_out, t)
            prim(temp_storage, items_in, items_out, -1, x[0])
        copy_out(y, 4, items_out, t)

    def expected(x):
        if is_left:
            return np.concatenate([left(x), left(x), left(x, valid=half), left(x, x[-1]),
                                   left(x, x[-1], half)])
        return np.concatenate([right(x), right(x), right(x, valid=half), right(x, x[0]), right(x, x[0])])
    forms = ["storage first", "no storage, in place", "storage first, num_valid", "no storage, neighbour keyword",
             "storage first, num_valid and neighbour" if is_left else "storage first, neighbour"]
    return case(prim, kernel, forms, expected)


def case_id(factory: str, type_name: str, shape: tuple, items: int) -> str:
    return f"{factory}-{type_name}-{'x'.join(map(str, shape))}-{items}"
