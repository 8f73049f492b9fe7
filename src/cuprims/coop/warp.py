"""Warp-wide cooperative primitives (``cuprims.coop.warp``): two-phase factories.

Every thread of a logical warp (``threads_in_warp`` consecutive threads in the block's
linear order) must call the primitive. Reductions and scans (``make_reduce``,
``make_sum``, ``make_exclusive_sum``) take any size from 1 to 32 lanes; the others take
a power of two. A size that is not a power of two is laid out as CUB lays it out: afresh
in each hardware warp of 32, the last logical warp of each partial (12 lanes: lanes 0-11,
12-23 and 24-31, that one of 8 lanes). A partial logical warp scans correctly; its
reduction is defined only with ``num_valid`` at most its lane count (``make_sum`` and
``make_reduce`` without it read lanes it does not have). A reduction's result is valid
in the logical warp's first lane; a sort's keys are sorted in place in every lane; a load or store moves the warp's
own tile; an exchange rearranges the warp's tile between blocked and striped. Without
``temp_storage=`` each logical warp of the block uses its own slot of
the provider's shared memory.

Example::

    warp_sum = coop.warp.make_sum(numba.float32)

    @cuda.jit(link=warp_sum.files)
    def kernel(x, out):
        s = warp_sum(x[cuda.threadIdx.x])
        if cuda.threadIdx.x % 32 == 0:
            out[cuda.threadIdx.x // 32] = s
"""

from __future__ import annotations

from cuprims.coop._arguments import WarpExchangeType
from cuprims.coop._style1.warp import (make_exchange, make_exclusive_sum, make_load, make_merge_sort_keys,
                                       make_merge_sort_pairs, make_reduce, make_shuffle_down, make_shuffle_index,
                                       make_shuffle_up, make_shuffle_xor, make_store, make_sum)

__all__ = ["make_reduce", "make_sum", "make_exclusive_sum", "make_merge_sort_keys", "make_merge_sort_pairs",
           "make_load", "make_store", "make_exchange", "WarpExchangeType", "make_shuffle_index", "make_shuffle_up",
           "make_shuffle_down", "make_shuffle_xor"]


def __dir__() -> list[str]:
    """The public names only (the module's own imports and helpers are not for users)."""
    return sorted(__all__)
