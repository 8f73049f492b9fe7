"""Kernels calling the block shuffles (``coop.block.make_shuffle``) in each form: offset
and rotate (one value a thread; the distance left out, positive, negative; the storage
left out, first, by keyword), up and down (a thread's items into another array and in
place; the tile's edge item returned). tests/cpu/coop/test_coop_block_shuffle.py links
each kernel for sm_90; tests/gpu/coop/test_coop_block_shuffle_gpu.py runs it against numpy.

A case's kernel ``kernel[1, shape](x, y)`` reads the tile from ``x`` (blocked) and writes
form ``f``'s results to ``y[f * tile:(f + 1) * tile]``; up and down write their returned
edge item to ``y[forms * tile + t]`` too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from coop_forms import FORM_SHAPES, FORM_TYPES, STRUCT, np_dtype
from twins import dims_of, threads_of

KINDS = ["Offset", "Rotate", "Up", "Down"]
ITEMS = {"Offset": [1], "Rotate": [1], "Up": [1, 3], "Down": [1, 3]}
SINGLE_FORMS = ["distance left out", "distance 3, storage first", "distance -2, storage by keyword"]
TILE_FORMS = ["into another array", "in place, storage first"]


def all_cases() -> list[tuple[str, str, tuple, int]]:
    return [(k, t, s, n) for k in KINDS for t in FORM_TYPES for s in FORM_SHAPES for n in ITEMS[k]]


def case_id(kind: str, type_name: str, shape: tuple, items: int) -> str:
    return f"{kind}-{type_name}-{'x'.join(map(str, shape))}-{items}"


def inputs(type_name: str, count: int) -> np.ndarray:
    dtype = np_dtype(type_name)
    if type_name == STRUCT:
        x = np.zeros(count, dtype)
        x["v"], x["i"] = np.arange(count) * 0.25, np.arange(count)
        return x
    if dtype.kind == "c":
        return (np.arange(count) - 1j * (np.arange(count) % 5)).astype(dtype)
    return (np.arange(count) % (120 if dtype.itemsize == 1 else 2000)).astype(dtype)


def _offset(x: np.ndarray, d: int, rotate: bool) -> np.ndarray:
    n = x.size
    src = np.arange(n) + d
    if rotate:
        return x[src % n]
    inside = (src >= 0) & (src < n)
    return np.where(inside, x[np.clip(src, 0, n - 1)], x) if x.dtype.names is None else _where(inside, x, src)


def _where(inside: np.ndarray, x: np.ndarray, src: np.ndarray) -> np.ndarray:
    out = x.copy()
    out[inside] = x[src[inside]]
    return out


def expected(kind: str, x: np.ndarray, threads: int) -> np.ndarray:
    if kind in ("Offset", "Rotate"):
        return np.concatenate([_offset(x, d, kind == "Rotate") for d in (1, 3, -2)])
    moved = x.copy()
    if kind == "Up":
        moved[1:] = x[:-1]
        edge = np.full(threads, x[-1]) if x.dtype.names is None else np.repeat(x[-1:], threads)
    else:
        moved[:-1] = x[1:]
        edge = np.full(threads, x[0]) if x.dtype.names is None else np.repeat(x[:1], threads)
    return np.concatenate([moved, moved, edge])


def out_size(kind: str, tile: int, threads: int) -> int:
    return 3 * tile if kind in ("Offset", "Rotate") else 2 * tile + threads


@dataclass
class ShuffleCase:
    prim: Any
    kernel: Any
    tile: int
    threads: int


def build(kind: str, type_name: str, shape: tuple, items: int) -> ShuffleCase:
    from numba import cuda
    from numba.cuda.np.numpy_support import from_dtype

    from coop_forms import blocked_io, fits_twice, launch_bounds, storage_of
    from cuprims import coop

    nb = from_dtype(np_dtype(type_name))
    prim = coop.block.make_shuffle(nb, shape, items, getattr(coop.block.BlockShuffleType, kind))
    threads, n = threads_of(shape), items
    tile = threads * n
    dx, dy, _ = dims_of(shape)
    big, exact, salign = storage_of(prim)
    nbytes = prim.temp_storage_bytes
    own = fits_twice(nbytes)
    read, write = blocked_io(n, tile)

    if kind in ("Offset", "Rotate"):
        @cuda.jit(link=prim.files, launch_bounds=launch_bounds(threads))
        def kernel(x, y):
            if big:
                temp_storage = cuda.shared.array(shape=exact, dtype="uint8", alignment=salign)
            else:
                temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            if own:
                y[t] = prim(x[t])
            else:
                y[t] = prim(x[t], temp_storage=temp_storage)
            cuda.syncthreads()       # the caller's storage is reused: CUB's rule, the kernel syncs
            y[tile + t] = prim(temp_storage, x[t], 3)
            cuda.syncthreads()
            y[2 * tile + t] = prim(x[t], -2, temp_storage=temp_storage)
    else:
        @cuda.jit(link=prim.files, launch_bounds=launch_bounds(threads))
        def kernel(x, y):
            if big:
                temp_storage = cuda.shared.array(shape=exact, dtype="uint8", alignment=salign)
            else:
                temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            items_in = cuda.local.array(n, nb)
            items_out = cuda.local.array(n, nb)
            read(x, items_in, t)
            if own:
                prim(items_in, items_out)
            else:
                prim(items_in, items_out, temp_storage=temp_storage)
            write(y, 0, items_out, t)
            cuda.syncthreads()       # the caller's storage is reused: CUB's rule, the kernel syncs
            edge = prim(temp_storage, items_in)            # in place
            write(y, 1, items_in, t)
            y[2 * tile + t] = edge

    return ShuffleCase(prim, kernel, tile, threads)
