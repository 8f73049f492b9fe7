"""Kernels calling ``coop.block.make_run_length_decode`` in each of its forms: the first
window with the primitive's own storage, the second with the caller's storage first and
each item's offset within its run, the first again by keywords.
tests/cpu/coop/test_coop_run_length.py links each kernel for sm_90;
tests/gpu/coop/test_coop_run_length_gpu.py runs it against numpy.

A case's kernel ``kernel[1, shape](values, lengths, decoded, offsets, totals)`` reads each
thread's runs (blocked), writes form ``f``'s decoded window to ``decoded[f * window:]``, its
relative offsets (forms 1 and 2) to ``offsets[f * window:]`` and each thread's three totals
to ``totals[3 * t:]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from coop_forms import FORM_SHAPES, FORM_TYPES, STRUCT, fits_twice, launch_bounds, np_dtype, storage_of
from twins import dims_of, threads_of

SHAPES_ITEMS = [(1, 1), (2, 3)]       # (runs, decoded items) per thread
FORMS = ["window 0, own storage", "window 1, storage first, relative offsets", "window 0, keywords"]


def all_cases() -> list[tuple[str, tuple, int, int]]:
    return [(t, s, r, d) for t in FORM_TYPES for s in FORM_SHAPES for r, d in SHAPES_ITEMS]


def case_id(type_name: str, shape: tuple, runs: int, items: int) -> str:
    return f"{type_name}-{'x'.join(map(str, shape))}-{runs}runs-{items}items"


def inputs(type_name: str, threads: int, runs: int, items: int, seed: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Runs of lengths 1 and more whose total passes the first window (so the second one
    decodes something), their values distinct."""
    rng = np.random.default_rng(seed)
    count = threads * runs
    lengths = rng.integers(1, 2 * -(-items // runs) + 1, count).astype(np.uint32)
    window = threads * items
    if lengths.sum() < window + 3:
        lengths[-1] += window + 3 - lengths.sum()
    dtype = np_dtype(type_name)
    if type_name == STRUCT:
        values = np.zeros(count, dtype)
        values["v"], values["i"] = np.arange(count) * 0.5, np.arange(count)
    elif dtype.kind == "c":
        values = (np.arange(count) + 1j).astype(dtype)
    else:
        values = (np.arange(count) % (100 if dtype.itemsize == 1 else 2000)).astype(dtype)
    return values, lengths


def decoded_window(values: np.ndarray, lengths: np.ndarray, start: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The window by numpy: past the total, the last run's value and offsets from its start."""
    begins = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)[:-1]])
    total = int(lengths.sum(dtype=np.int64))
    positions = start + np.arange(size)
    run = np.where(positions < total, np.searchsorted(begins, positions, side="right") - 1, lengths.size - 1)
    return values[run], (positions - begins[run]).astype(lengths.dtype)


def expected(values: np.ndarray, lengths: np.ndarray, threads: int, items: int) -> tuple:
    window = threads * items
    d0, o0 = decoded_window(values, lengths, 0, window)
    d1, o1 = decoded_window(values, lengths, window, window)
    total = int(lengths.sum(dtype=np.int64))
    return np.concatenate([d0, d1, d0]), np.concatenate([o1, o0]), np.full(3 * threads, total, np.int64)


@dataclass
class RunLengthCase:
    prim: Any
    kernel: Any
    threads: int
    runs: int
    items: int


def build(type_name: str, shape: tuple, runs: int, items: int) -> RunLengthCase:
    import numba
    from numba import cuda
    from numba.cuda.np.numpy_support import from_dtype

    from cuprims import coop

    nb = from_dtype(np_dtype(type_name))
    prim = coop.block.make_run_length_decode(nb, shape, runs, items)
    threads = threads_of(shape)
    window = threads * items
    dx, dy, _ = dims_of(shape)
    big, exact, salign = storage_of(prim)
    nbytes = prim.temp_storage_bytes
    own = fits_twice(nbytes)

    @cuda.jit(link=prim.files, launch_bounds=launch_bounds(threads))
    def kernel(values, lengths, decoded, offsets, totals):
        if big:
            temp_storage = cuda.shared.array(shape=exact, dtype="uint8", alignment=salign)
        else:
            temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        v = cuda.local.array(runs, nb)
        n = cuda.local.array(runs, numba.uint32)
        out = cuda.local.array(items, nb)
        rel = cuda.local.array(items, numba.uint32)
        for i in range(runs):
            v[i] = values[t * runs + i]
            n[i] = lengths[t * runs + i]
        if own:
            total = prim(v, n, out)
        else:
            total = prim(v, n, out, temp_storage=temp_storage)
        for i in range(items):
            decoded[t * items + i] = out[i]
        totals[3 * t] = total
        cuda.syncthreads()     # the caller's storage is reused: CUB's rule, the kernel syncs
        totals[3 * t + 1] = prim(temp_storage, v, n, out, window, rel)
        for i in range(items):
            decoded[window + t * items + i] = out[i]
            offsets[t * items + i] = rel[i]
        cuda.syncthreads()
        totals[3 * t + 2] = prim(v, n, out, window_offset=0, relative_offsets=rel, temp_storage=temp_storage)
        for i in range(items):
            decoded[2 * window + t * items + i] = out[i]
            offsets[window + t * items + i] = rel[i]

    return RunLengthCase(prim, kernel, threads, runs, items)
