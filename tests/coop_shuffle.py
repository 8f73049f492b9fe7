"""Kernels calling the warp shuffles (``coop.warp.make_shuffle_index``, ``_up``, ``_down``,
``_xor``) in each form: the storage left out, first, and as a keyword, with two arguments
(source lanes that differ lane to lane; distances and masks of 1 and more).
tests/cpu/coop/test_coop_shuffle.py links each kernel for sm_90 and checks it keeps its
values in registers; tests/gpu/coop/test_coop_shuffle_gpu.py runs it against numpy.

A case's kernel ``kernel[1, shape](x, y)`` gives thread ``t`` (linear, x fastest) the value
``x[t]`` and writes form ``f``'s result to ``y[f * threads + t]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from coop_forms import FORM_SHAPES, FORM_TYPES, STRUCT, np_dtype
from twins import dims_of, threads_of

MODES = ["index", "up", "down", "xor"]
# each block shape its logical warp size
LANES = {shape: lanes for shape, lanes in zip(FORM_SHAPES, (32, 8, 16, 4, 2, 1))}
FORMS = ["first argument, own storage", "second argument, storage first", "first argument, storage by keyword"]


def all_cases() -> list[tuple[str, str, tuple]]:
    return [(m, t, s) for m in MODES for t in FORM_TYPES for s in FORM_SHAPES]


def case_id(mode: str, type_name: str, shape: tuple) -> str:
    return f"{mode}-{type_name}-{'x'.join(map(str, shape))}-lanes{LANES[tuple(shape)]}"


def inputs(type_name: str, count: int) -> np.ndarray:
    """Distinct values (as far as the type holds them): each lane's own is recognisable."""
    dtype = np_dtype(type_name)
    if type_name == STRUCT:
        x = np.zeros(count, dtype)
        x["v"], x["i"] = np.arange(count) * 0.5, -np.arange(count)
        return x
    if dtype.kind == "c":
        return (np.arange(count) + 1j * (np.arange(count) % 7)).astype(dtype)
    if dtype.kind == "b":
        return np.arange(count) % 3 == 0
    return (np.arange(count) % (100 if dtype.itemsize == 1 else 2000)).astype(dtype)


def _args(mode: str, lanes: int) -> tuple[Any, Any]:
    """The two arguments' values per lane, as numpy arrays of lane numbers -> argument."""
    lane = np.arange(lanes)
    if mode == "index":
        return (lane * 3 + 1) % lanes, np.zeros(lanes, int) + lanes - 1
    if mode == "xor":
        return np.ones(lanes, int) % lanes if lanes > 1 else np.zeros(1, int), np.full(lanes, lanes - 1)
    return np.ones(lanes, int), np.full(lanes, min(3, lanes))


def expected(mode: str, x: np.ndarray, lanes: int) -> np.ndarray:
    threads = x.size
    out = []
    for args in (_args(mode, lanes)[0], _args(mode, lanes)[1], _args(mode, lanes)[0]):
        y = x.copy()
        for t in range(threads):
            lane, base = t % lanes, t - t % lanes
            a = int(args[lane])
            if mode == "index":
                src = base + a % lanes
            elif mode == "xor":
                src = base + ((lane ^ a) % lanes)
            elif mode == "up":
                src = t - a if lane - a >= 0 else t
            else:
                src = t + a if lane + a < lanes else t
            y[t] = x[src]
        out.append(y)
    return np.concatenate(out)


@dataclass
class ShuffleCase:
    prim: Any
    kernel: Any
    shape: tuple
    lanes: int

    @property
    def threads(self) -> int:
        return threads_of(self.shape)


def build(mode: str, type_name: str, shape: tuple) -> ShuffleCase:
    import numba  # noqa: F401
    from numba import cuda
    from numba.cuda.np.numpy_support import from_dtype

    from cuprims import coop

    lanes = LANES[tuple(shape)]
    nb = from_dtype(np_dtype(type_name))
    prim = getattr(coop.warp, f"make_shuffle_{mode}")(nb, threads_in_warp=lanes)
    nbytes = prim.temp_storage_bytes
    threads = threads_of(shape)
    dx, dy, _ = dims_of(shape)
    first, second = (np.asarray(a, np.int32) for a in _args(mode, lanes))
    first_t, second_t = tuple(int(v) for v in first), tuple(int(v) for v in second)

    @cuda.jit(link=prim.files)
    def kernel(x, y):
        temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        lane = t % lanes
        a, b = first_t[lane], second_t[lane]
        y[t] = prim(x[t], a)
        y[threads + t] = prim(temp_storage, x[t], b)
        y[2 * threads + t] = prim(x[t], a, temp_storage=temp_storage)

    return ShuffleCase(prim, kernel, tuple(shape), lanes)
