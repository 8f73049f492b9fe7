"""Block-wide cooperative primitives (``cuprims.coop.block``): two-phase factories.

Each factory builds its CUB provider on the host (for :func:`cuprims.coop.target`'s
architecture, else the current device's) and returns a ``Primitive`` to
call inside a ``@cuda.jit(link=prim.files)`` kernel launched with ``threads_per_block``
threads. Every thread of the block must call it. A reduction's result is valid in
thread 0 only (as in CUB). ``temp_storage=`` (a ``uint8`` shared array of at least
``prim.temp_storage_bytes``) replaces the primitive's own shared memory; without it, the
provider's storage is reused by later calls of the same primitive, after a barrier the
provider issues itself.

Example::

    block_sum = coop.block.make_sum(numba.int32, 128)

    @cuda.jit(link=block_sum.files)
    def kernel(x, out):
        s = block_sum(x[cuda.threadIdx.x])
        if cuda.threadIdx.x == 0:
            out[0] = s
"""

from __future__ import annotations

from cuprims.coop._arguments import (BlockAdjacentDifferenceType, BlockDiscontinuityType, BlockExchangeType,
                                     BlockShuffleType, PrefixCallback)
from cuprims.coop._style1.block import (make_exclusive_scan, make_exclusive_sum, make_inclusive_scan,
                                        make_inclusive_sum, make_load, make_reduce, make_scan, make_store, make_sum)
from cuprims.coop._style1.block_histogram import BlockHistogramAlgorithm, make_histogram
from cuprims.coop._style1.block_neighbours import make_adjacent_difference, make_discontinuity
from cuprims.coop._style1.block_run_length import make_run_length_decode
from cuprims.coop._style1.block_shuffle import make_shuffle
from cuprims.coop._style1.block_tiles import (make_exchange, make_merge_sort_keys, make_merge_sort_pairs,
                                              make_radix_sort_keys, make_radix_sort_keys_descending,
                                              make_radix_sort_pairs, make_radix_sort_pairs_descending)

__all__ = ["make_load", "make_store", "make_reduce", "make_sum", "make_scan", "make_exclusive_sum",
           "make_inclusive_sum", "make_exclusive_scan", "make_inclusive_scan", "make_exchange", "BlockExchangeType",
           "make_merge_sort_keys", "make_radix_sort_keys", "make_radix_sort_keys_descending", "PrefixCallback"]
__all__ += ["make_merge_sort_pairs", "make_radix_sort_pairs", "make_radix_sort_pairs_descending"]
__all__ += ["make_discontinuity", "BlockDiscontinuityType", "make_adjacent_difference", "BlockAdjacentDifferenceType"]
__all__ += ["make_histogram", "BlockHistogramAlgorithm", "make_shuffle", "BlockShuffleType", "make_run_length_decode"]


def __dir__() -> list[str]:
    """The public names only (the module's own imports and helpers are not for users)."""
    return sorted(__all__)
