"""RawOp operators (LTO-IR the user compiled) for coop primitives: a maximum of int32
values and a less-than of float32 keys, compiled by NVRTC (through cuda.core), with the
kernels the CPU and GPU tests share: a block reduction and a warp reduction sharing the
maximum (its LTO-IR linked once), and a block merge sort by the comparator.
"""

from __future__ import annotations

import functools
from typing import Any

MAX_SOURCE = """extern "C" __device__ void coop_raw_max(void* a, void* b, void* out)
{
  const int x = *static_cast<int*>(a), y = *static_cast<int*>(b);
  *static_cast<int*>(out) = x > y ? x : y;
}
"""
LESS_SOURCE = """extern "C" __device__ void coop_raw_less(void* a, void* b, void* flag)
{
  *static_cast<unsigned char*>(flag) = *static_cast<float*>(a) < *static_cast<float*>(b);
}
"""


@functools.lru_cache(maxsize=None)
def _ltoir(source: str) -> bytes:
    from cuda.core import Program, ProgramOptions

    options = ProgramOptions(arch="sm_90", std="c++17", relocatable_device_code=True, link_time_optimization=True)
    return bytes(Program(source, "c++", options).compile("ltoir").code)


def raw_max() -> Any:
    from cuprims import RawOp

    return RawOp(ltoir=_ltoir(MAX_SOURCE), name="coop_raw_max")


def raw_less() -> Any:
    from cuprims import RawOp

    return RawOp(ltoir=_ltoir(LESS_SOURCE), name="coop_raw_less")


def reductions_kernel(threads: int = 128) -> tuple[list, Any]:
    """``kernel[1, threads](x, out)``: ``out[0]`` the block's maximum, ``out[1 + w]`` warp
    ``w``'s, both by the same RawOp."""
    import numba
    from numba import cuda

    from cuprims import coop

    op = raw_max()
    block_max = coop.block.make_reduce(numba.int32, threads, op)
    warp_max = coop.warp.make_reduce(numba.int32, op)

    @cuda.jit(link=block_max.files + warp_max.files)
    def kernel(x, out):
        t = cuda.threadIdx.x
        b = block_max(x[t])
        w = warp_max(x[t])
        if t == 0:
            out[0] = b
        if t % 32 == 0:
            out[1 + t // 32] = w

    return [block_max, warp_max], kernel


def sort_kernel(threads: int = 64, items: int = 3) -> tuple[list, Any]:
    """``kernel[1, threads](keys)``: the block's tile of float32 keys sorted by the RawOp."""
    import numba
    from numba import cuda

    from cuprims import coop

    sort = coop.block.make_merge_sort_keys(numba.float32, threads, items, raw_less())

    @cuda.jit(link=sort.files)
    def kernel(keys):
        t = cuda.threadIdx.x
        k = cuda.local.array(items, numba.float32)
        for i in range(items):
            k[i] = keys[t * items + i]
        sort(k)
        for i in range(items):
            keys[t * items + i] = k[i]

    return [sort], kernel


def style2_kernel() -> Any:
    """``kernel[1, 128](x, out)``: Style 2's block reduction by the RawOp maximum."""
    from numba import cuda

    from cuprims import coop

    op = raw_max()

    @cuda.jit
    def kernel(x, out):
        m = coop.reduce(coop.this_block(), x[cuda.threadIdx.x], binary_op=op)
        if cuda.threadIdx.x == 0:
            out[0] = m

    return kernel
