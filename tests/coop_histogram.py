"""Kernels calling ``coop.block.make_histogram`` in each of its forms: the whole histogram
(zero, then count) with the primitive's own storage and with the caller's first, and
``init`` then ``composite`` over two tiles with the storage left out, first, or as a
keyword. tests/cpu/coop/test_coop_histogram.py links each kernel for sm_90 and checks it
keeps its items in registers; tests/gpu/coop/test_coop_histogram_gpu.py runs it against
numpy's ``bincount``.

A case's kernel ``kernel[1, shape](x, y)`` reads two tiles from ``x`` (blocked: thread
``t`` holds ``x[t * n ...]``, then the next tile's) and writes each form's counters to
``y[f * bins:(f + 1) * bins]``; ``expected(x)`` is ``y`` by numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from coop_forms import FORM_ITEMS, FORM_SHAPES, INTS, blocked_io, fits_twice, launch_bounds, storage_of
from twins import dims_of, threads_of

ALGORITHMS = ["sort", "atomic"]
COUNTERS = ["int32", "uint32", "uint64", "float32", "float64"]
BINS = 61          # neither a power of two nor a multiple of any block's threads
# (a block whose TempStorage cannot be in shared memory twice passes its storage by keyword
# where the others use the primitive's own)
FORMS = ["whole, own storage", "whole, storage first", "init + composite of two tiles, storage first in the second",
         "init and composite, storage first and by keyword"]


def all_cases() -> list[tuple[str, str, str, tuple, int]]:
    """(algorithm, item type, counter type, shape, items): every algorithm, item type, block
    shape and item count; the counter type rotates over the cases."""
    cases = []
    for a in ALGORITHMS:
        for t in INTS:
            for s in FORM_SHAPES:
                for n in FORM_ITEMS:
                    cases.append((a, t, COUNTERS[len(cases) % len(COUNTERS)], s, n))
    return cases


def case_id(algorithm: str, item: str, counter: str, shape: tuple, items: int) -> str:
    return f"{algorithm}-{item}-{counter}-{'x'.join(map(str, shape))}-{items}"


def inputs(item: str, count: int, seed: int = 11) -> np.ndarray:
    """Bin indices drawn at random, bin 0 and the last bin among them."""
    x = np.random.default_rng(seed).integers(0, BINS, count)
    x[:2] = 0, BINS - 1
    return x.astype(item)


@dataclass
class HistogramCase:
    prim: Any
    kernel: Any
    shape: tuple
    items: int
    counter: str

    @property
    def tile(self) -> int:
        return threads_of(self.shape) * self.items

    def expected(self, x: np.ndarray) -> np.ndarray:
        tile = self.tile

        def counts(part: np.ndarray) -> np.ndarray:
            return np.bincount(part.astype(np.int64), minlength=BINS).astype(self.counter)

        return np.concatenate([counts(x[:tile]), counts(x[:tile]), counts(x[:2 * tile]), counts(x[tile:2 * tile])])


def build(algorithm: str, item: str, counter: str, shape: tuple, items: int) -> HistogramCase:
    """The case's primitive and kernel (built now, for the current coop target)."""
    import numba
    from numba import cuda

    from cuprims import coop

    it, cnt = getattr(numba, item), getattr(numba, counter)
    prim = coop.block.make_histogram(it, shape, items, algorithm, bins=BINS, counter_dtype=counter)
    threads, n = threads_of(shape), items
    tile = threads * n
    dx, dy, _ = dims_of(shape)
    big, exact, salign = storage_of(prim)
    nbytes = prim.temp_storage_bytes
    own = fits_twice(nbytes)     # else the primitive's own storage and the caller's pass 48 KiB: the caller's only
    read = blocked_io(n, tile)[0]

    @cuda.jit(device=True)
    def publish(y, slot, counts, t):
        cuda.syncthreads()
        for b in range(t, BINS, threads):
            y[slot * BINS + b] = counts[b]
        cuda.syncthreads()

    @cuda.jit(link=prim.files, launch_bounds=launch_bounds(threads))
    def kernel(x, y):
        if big:      # CUB's size, aligned: the room to round up would pass 48 KiB
            temp_storage = cuda.shared.array(shape=exact, dtype="uint8", alignment=salign)
        else:
            temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
        counts = cuda.shared.array(BINS, cnt)
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        items_ = cuda.local.array(n, it)
        read(x, items_, t)
        if own:
            prim(items_, counts)
        else:
            prim(items_, counts, temp_storage=temp_storage)
        publish(y, 0, counts, t)
        prim(temp_storage, items_, counts)
        publish(y, 1, counts, t)
        prim.init(counts)
        cuda.syncthreads()
        if own:
            prim.composite(items_, counts)
        else:
            prim.composite(items_, counts, temp_storage=temp_storage)
        read(x, items_, t + threads)                  # the second tile
        prim.composite(temp_storage, items_, counts)
        publish(y, 2, counts, t)
        prim.init(temp_storage, counts)
        cuda.syncthreads()
        prim.composite(items_, counts, temp_storage=temp_storage)
        publish(y, 3, counts, t)

    return HistogramCase(prim, kernel, tuple(shape), items, counter)


def out_size() -> int:
    return len(FORMS) * BINS


Expected = Callable[[np.ndarray], np.ndarray]
