"""Kernels calling the block radix sorts with ``blocked_to_striped=True`` (keys and pairs,
both orders): thread ``t`` ends with ranks ``t``, ``t + threads``... of the sorted tile.
tests/cpu/coop/test_coop_radix_striped.py links each for sm_90; the GPU test runs it.

A case's kernel ``kernel[1, shape](keys, values)`` sorts ``keys`` (blocked: thread ``t``
reads ``keys[t * n ...]``) carrying ``values`` (pairs), and writes them back striped
(thread ``t``'s item ``i`` to position ``i * threads + t``): the arrays sorted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from twins import dims_of, threads_of

KINDS = ["keys", "keys_descending", "pairs", "pairs_descending"]
TYPES = ["int8", "uint16", "int32", "uint64", "float32", "float64"]
SHAPES = [(32,), (128,), (8, 16), (2, 4, 8)]
ITEMS = [1, 3]


def all_cases() -> list[tuple[str, str, tuple, int]]:
    return [(k, t, s, n) for k in KINDS for t in TYPES for s in SHAPES for n in ITEMS]


def case_id(kind: str, type_name: str, shape: tuple, items: int) -> str:
    return f"{kind}-{type_name}-{'x'.join(map(str, shape))}-{items}"


def inputs(type_name: str, count: int, seed: int = 9) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = np.dtype(type_name)
    if dtype.kind == "f":
        return (rng.permutation(count) - count / 2).astype(dtype)
    return rng.integers(0, min(np.iinfo(dtype).max, 4 * count), count).astype(dtype)


def expected(kind: str, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The keys sorted stably and, for pairs, the values (each key's index) carried."""
    order = np.argsort(-keys if kind.endswith("descending") and keys.dtype.kind != "u" else keys, kind="stable")
    if kind.endswith("descending") and keys.dtype.kind == "u":
        order = np.argsort(keys.max() - keys, kind="stable")
    return keys[order], order.astype(np.int32)


def build(kind: str, type_name: str, shape: tuple, items: int) -> Any:
    import numba
    from numba import cuda

    from cuprims import coop

    nb = getattr(numba, type_name)
    pairs, descending = kind.startswith("pairs"), kind.endswith("descending")
    name = f"make_radix_sort_{'pairs' if pairs else 'keys'}{'_descending' if descending else ''}"
    args = (nb, numba.int32) if pairs else (nb,)
    prim = getattr(coop.block, name)(*args, shape, items, blocked_to_striped=True)
    threads, n = threads_of(shape), items
    dx, dy, _ = dims_of(shape)

    @cuda.jit(link=prim.files)
    def kernel(keys_io, values_io):
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        keys = cuda.local.array(n, nb)
        values = cuda.local.array(n, numba.int32)
        for i in range(n):
            keys[i] = keys_io[t * n + i]
            values[i] = t * n + i
        if pairs:
            prim(keys, values)
        else:
            prim(keys)
        cuda.syncthreads()
        for i in range(n):
            keys_io[i * threads + t] = keys[i]
            values_io[i * threads + t] = values[i]

    return prim, kernel


def style2_kernel() -> Any:
    """``kernel[1, 128](x)``: Style 2's descending sort of 512 uint32 keys left striped, then
    stored with a striped store: ``x`` sorted, largest first."""
    import numba
    from numba import cuda

    from cuprims import coop

    @cuda.jit
    def kernel(x):
        block = coop.this_block()
        keys = coop.ThreadData(4, dtype=numba.uint32)
        coop.load(block, x, keys)
        coop.radix_sort_keys(block, keys, descending=True, blocked_to_striped=True)
        coop.store(block, x, keys, algorithm="striped")

    return kernel
