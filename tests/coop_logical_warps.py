"""Warp reductions and scans over logical warps whose size is not a power of two, in both
styles. CUB lays such warps out afresh in each hardware warp of 32: logical warps start at
lanes 0, L, 2L... and the last one of each hardware warp is partial (12 lanes: 12 + 12 + 8).

A :class:`LogicalWarpCase` is one call (``sum``, ``max`` by a Python operator, the exclusive
sum, or Style 2's sum and exclusive sum), one logical warp size and one block shape (a
multiple of 32 threads: CUB's shared-memory variant synchronises the whole logical warp).
Its kernel ``kernel[1, shape](x, y)`` writes, for thread ``t``: a reduction's result over the
whole logical warp at ``y[t]`` and over the lanes the warp has (``num_valid``) at
``y[threads + t]``, both from the warp's first lane; a scan's result at ``y[t]``.
:func:`expected` gives ``y`` by numpy, with ``valid`` marking the entries that are defined.
tests/cpu/coop/test_coop_logical_warps.py links each kernel for sm_90;
tests/gpu/coop/test_coop_logical_warps_gpu.py runs them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

LANES = [3, 5, 12, 20, 31]
SHAPES = [(32,), (96,), (8, 16), (2, 4, 8)]
CALLS = ["sum", "max", "exclusive_sum", "style2_sum", "style2_exclusive_sum"]
DTYPES = {"sum": np.int32, "max": np.float64, "exclusive_sum": np.int64, "style2_sum": np.float32,
          "style2_exclusive_sum": np.int32}


@dataclasses.dataclass
class LogicalWarpCase:
    call: str
    lanes: int
    shape: tuple
    kernel: Any
    prims: list

    @property
    def threads(self) -> int:
        return int(np.prod(self.shape))

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(DTYPES[self.call])

    @property
    def scans(self) -> bool:
        return self.call.endswith("exclusive_sum")


def all_cases() -> list[tuple[str, int, tuple]]:
    return [(call, lanes, shape) for call in CALLS for lanes in LANES for shape in SHAPES]


def case_id(call: str, lanes: int, shape: tuple) -> str:
    return f"{call}-{lanes}lanes-{'x'.join(map(str, shape))}"


def layout(threads: int, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """Per thread: the first thread of its logical warp, and how many lanes that warp has."""
    t = np.arange(threads)
    start = (t // 32) * 32 + (t % 32) // lanes * lanes
    return start, np.minimum(lanes, 32 - (start % 32))


def inputs(call: str, threads: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = np.dtype(DTYPES[call])
    if dtype.kind == "f":
        return rng.integers(-40, 40, threads).astype(dtype) / 4      # exact sums in float32
    return rng.integers(-40, 40, threads).astype(dtype)


def expected(case: LogicalWarpCase, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``y`` by numpy, and which of its entries the primitive defines."""
    n = case.threads
    start, have = layout(n, case.lanes)
    lane = np.arange(n) - start
    if case.scans:
        y = np.array([x[s:s + i].sum(dtype=x.dtype) for s, i in zip(start, lane)], dtype=x.dtype)
        return y, np.ones(n, bool)
    reduce = np.max if case.call == "max" else np.sum
    part = np.array([reduce(x[s:s + h]) for s, h in zip(start, have)], dtype=x.dtype)
    first = lane == 0
    y = np.concatenate([np.where(first, part, 0), np.where(first, part, 0)]).astype(x.dtype)
    # a partial logical warp's reduction without num_valid reads lanes it does not have
    return y, np.concatenate([first & (have == case.lanes), first])


def build(call: str, lanes: int, shape: tuple) -> LogicalWarpCase:
    from numba import cuda

    from cuprims import coop
    from twins import bigger

    dx, dy = (tuple(shape) + (1, 1))[:2]
    threads = int(np.prod(shape))
    nb_dtype = DTYPES[call]
    if call == "exclusive_sum" or call == "style2_exclusive_sum":
        if call == "exclusive_sum":
            prim = coop.warp.make_exclusive_sum(nb_dtype, threads_in_warp=lanes)
            prims = [prim]

            @cuda.jit(link=prim.files)
            def kernel(x, y):
                t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
                y[t] = prim(x[t])
        else:
            prims = []

            @cuda.jit
            def kernel(x, y):
                t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
                y[t] = coop.exclusive_sum(coop.this_warp(lanes), x[t])
        return LogicalWarpCase(call, lanes, shape, kernel, prims)

    if call == "style2_sum":
        prims = []

        @cuda.jit
        def kernel(x, y):
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            warp = coop.this_warp(lanes)
            start = (t // 32) * 32 + (t % 32) // lanes * lanes
            have = min(lanes, 32 - start % 32)
            whole = coop.sum(warp, x[t])
            part = coop.sum(warp, x[t], valid_items=have)
            if t == start:
                y[t] = whole
                y[threads + t] = part
        return LogicalWarpCase(call, lanes, shape, kernel, prims)

    prim = (coop.warp.make_sum(nb_dtype, threads_in_warp=lanes) if call == "sum"
            else coop.warp.make_reduce(nb_dtype, bigger, threads_in_warp=lanes))

    @cuda.jit(link=prim.files)
    def kernel(x, y):
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        start = (t // 32) * 32 + (t % 32) // lanes * lanes
        have = min(lanes, 32 - start % 32)
        whole = prim(x[t])
        part = prim(x[t], have)
        if t == start:
            y[t] = whole
            y[threads + t] = part
    return LogicalWarpCase(call, lanes, shape, kernel, [prim])


def out_size(case: LogicalWarpCase) -> int:
    return case.threads if case.scans else 2 * case.threads
