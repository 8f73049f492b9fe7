"""The newer block primitives bench_coop.py measures against their CUB C++ twins, one tile
of 128 threads x 8 int32 per block, out of place (``x`` -> ``y``), the blocked arrangement
read and written directly: adjacent difference (left), discontinuity heads (flags as
int32), block shuffle up, histogram (256 bins per block, written to the first 256 items
of each tile's output), and run-length decode (each thread's 8 items: 2 runs of lengths
4 taken from its values, decoded into 8 items).

Importable without numba, CUDA or a GPU (imports happen inside the functions). Each op:
``kernel(op)`` (a :class:`_coop_kernels.NumbaKernel`), ``twin(op)`` (a
:class:`_coop_kernels.Twin`), ``reference(op, tiles)`` (numpy's output rows of the input
rows) and ``COMPARED[op]`` (how many items of each output row are compared).
"""

from __future__ import annotations

from typing import Any

THREADS, ITEMS = 128, 8
TILE = THREADS * ITEMS
BINS = 256
RUNS = 2                      # runs per thread in the run-length decode (each of length ITEMS // RUNS)
OPS = ("adjacent_difference", "discontinuity", "shuffle_up", "histogram", "run_length_decode")
COMPARED = {op: TILE for op in OPS} | {"histogram": BINS}

_HEAD = """\
// bench_coop twin: {what}
#define CCCL_DISABLE_BF16_SUPPORT
#define CCCL_DISABLE_FP16_SUPPORT
#include <cub/block/{header}>
"""

_TWIN_BODIES = {
    "adjacent_difference": ("block_adjacent_difference.cuh", "cub::BlockAdjacentDifference<int, {t}>",
                            "Prim(temp).SubtractLeft(items, out, Minus{{}});"),
    "discontinuity": ("block_discontinuity.cuh", "cub::BlockDiscontinuity<int, {t}>",
                      "Prim(temp).FlagHeads(out, items, Differ{{}});"),
    "shuffle_up": ("block_shuffle.cuh", "cub::BlockShuffle<int, {t}>",
                   "out[0] = items[0];\n  Prim(temp).Up(items, out);"),
}


def twin(op: str) -> Any:
    """The op's kernel in CUB C++ (one tile per block, as the numba kernel)."""
    from _coop_kernels import Twin

    t, n = THREADS, ITEMS
    name = f"twin_{op}"
    if op == "histogram":
        header, body = "block_histogram.cuh", f"""
using Prim = cub::BlockHistogram<int, {t}, {n}, {BINS}>;
extern "C" __global__ void {name}(const int* x, int* y)
{{
  __shared__ Prim::TempStorage temp;
  __shared__ int counts[{BINS}];
  const long long base = (long long)blockIdx.x * {t * n} + threadIdx.x * {n};
  int items[{n}];
  for (int i = 0; i < {n}; ++i) items[i] = x[base + i];
  Prim(temp).Histogram(items, counts);
  __syncthreads();
  for (int b = threadIdx.x; b < {BINS}; b += {t}) y[(long long)blockIdx.x * {t * n} + b] = counts[b];
}}
"""
    elif op == "run_length_decode":
        header, body = "block_run_length_decode.cuh", f"""
using Prim = cub::BlockRunLengthDecode<int, {t}, {RUNS}, {n}>;
extern "C" __global__ void {name}(const int* x, int* y)
{{
  __shared__ Prim::TempStorage temp;
  const long long base = (long long)blockIdx.x * {t * n} + threadIdx.x * {n};
  int values[{RUNS}];
  unsigned lengths[{RUNS}];
  for (int r = 0; r < {RUNS}; ++r) {{ values[r] = x[base + r]; lengths[r] = {n // RUNS}; }}
  unsigned total;
  int items[{n}];
  Prim(temp, values, lengths, total).RunLengthDecode(items, 0u);
  for (int i = 0; i < {n}; ++i) y[base + i] = items[i];
}}
"""
    else:
        header, prim, call = _TWIN_BODIES[op]
        body = f"""
struct Minus {{ __device__ int operator()(const int& a, const int& b) const {{ return a - b; }} }};
struct Differ {{ __device__ bool operator()(const int& a, const int& b) const {{ return a != b; }} }};
using Prim = {prim.format(t=t)};
extern "C" __global__ void {name}(const int* x, int* y)
{{
  __shared__ Prim::TempStorage temp;
  const long long base = (long long)blockIdx.x * {t * n} + threadIdx.x * {n};
  int items[{n}], out[{n}];
  for (int i = 0; i < {n}; ++i) items[i] = x[base + i];
  {call.format()}
  for (int i = 0; i < {n}; ++i) y[base + i] = out[i];
}}
"""
    return Twin("CUB C++ twin (NVRTC)", name, _HEAD.format(what=op, header=header) + body)


def kernel(op: str) -> Any:
    """The op's numba-cuda kernel over cuprims.coop's Style 1 primitive."""
    import numba
    from numba import cuda

    from _coop_kernels import NumbaKernel
    from cuprims import coop

    t, n = THREADS, ITEMS
    i4 = numba.types.Array(numba.int32, 1, "C")
    if op == "histogram":
        prim = coop.block.make_histogram(numba.int32, t, n, bins=BINS)

        @cuda.jit(link=prim.files)
        def histogram(x, y):
            counts = cuda.shared.array(BINS, numba.int32)
            base = cuda.blockIdx.x * TILE + cuda.threadIdx.x * n
            items = cuda.local.array(n, numba.int32)
            for i in range(n):
                items[i] = x[base + i]
            prim(items, counts)
            cuda.syncthreads()
            for b in range(cuda.threadIdx.x, BINS, t):
                y[cuda.blockIdx.x * TILE + b] = counts[b]

        return NumbaKernel("coop histogram (sort)", histogram, [prim], (i4, i4))
    if op == "run_length_decode":
        prim = coop.block.make_run_length_decode(numba.int32, t, RUNS, n)

        @cuda.jit(link=prim.files)
        def decode(x, y):
            base = cuda.blockIdx.x * TILE + cuda.threadIdx.x * n
            values = cuda.local.array(RUNS, numba.int32)
            lengths = cuda.local.array(RUNS, numba.uint32)
            items = cuda.local.array(n, numba.int32)
            for r in range(RUNS):
                values[r] = x[base + r]
                lengths[r] = n // RUNS
            prim(values, lengths, items)
            for i in range(n):
                y[base + i] = items[i]

        return NumbaKernel("coop run-length decode", decode, [prim], (i4, i4))
    if op == "adjacent_difference":
        prim = coop.block.make_adjacent_difference(numba.int32, t, n)
    elif op == "discontinuity":
        prim = coop.block.make_discontinuity(numba.int32, t, n, flag_dtype=numba.int32)
    else:
        prim = coop.block.make_shuffle(numba.int32, t, n, coop.block.BlockShuffleType.Up)

    @cuda.jit(link=prim.files)
    def tile_op(x, y):
        base = cuda.blockIdx.x * TILE + cuda.threadIdx.x * n
        items = cuda.local.array(n, numba.int32)
        out = cuda.local.array(n, numba.int32)
        for i in range(n):
            items[i] = x[base + i]
        prim(items, out)
        for i in range(n):
            y[base + i] = out[i]

    return NumbaKernel(f"coop {op.replace('_', ' ')}", tile_op, [prim], (i4, i4))


def inputs(op: str, n: int) -> Any:
    """The op's input on the device (CuPy): bin indices for the histogram, runs of equal
    values for the discontinuity, anything else for the others."""
    import cupy as cp

    if op == "histogram":
        return cp.random.randint(0, BINS, size=n, dtype=cp.int32)
    if op == "discontinuity":
        return cp.repeat(cp.random.randint(0, 100, size=n // 4, dtype=cp.int32), 4)
    return cp.random.randint(-1000, 1000, size=n, dtype=cp.int32)


def reference(op: str, rows: Any) -> Any:
    """numpy's output rows (one per tile) of the input ``rows``."""
    import numpy as np

    if op == "adjacent_difference":
        out = rows.copy()
        out[:, 1:] = rows[:, 1:] - rows[:, :-1]
        return out
    if op == "discontinuity":
        out = np.ones_like(rows)
        out[:, 1:] = rows[:, 1:] != rows[:, :-1]
        return out
    if op == "shuffle_up":
        out = rows.copy()
        out[:, 1:] = rows[:, :-1]
        return out
    if op == "histogram":
        return np.stack([np.bincount(r, minlength=BINS) for r in rows]).astype(np.int32)
    # run-length decode: each thread's first RUNS values, each repeated ITEMS // RUNS times
    runs = rows.reshape(rows.shape[0], THREADS, ITEMS)[:, :, :RUNS]
    return np.repeat(runs, ITEMS // RUNS, axis=2).reshape(rows.shape[0], TILE)
