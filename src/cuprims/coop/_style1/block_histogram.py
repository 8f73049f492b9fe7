"""The block histogram factory (re-exported by :mod:`cuprims.coop.block`): CUB's
``BlockHistogram`` counting a block's tile into an array of counters the kernel holds."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from cuprims.coop._arguments import enum_member
from cuprims.coop._records.histogram import COUNTERS, check_bins
from cuprims.coop._spec import ProviderSpec, block_dims, element_type, items_count
from cuprims.coop._style1.factory import make_primitive
from cuprims.errors import ArgumentError


class BlockHistogramAlgorithm(enum.Enum):
    """How :func:`make_histogram` counts: by sorting the tile and adding each run's length
    (``SORT``, CUB's default), or with one shared-memory atomic add per item (``ATOMIC``)."""

    SORT = "sort"
    ATOMIC = "atomic"


def make_histogram(item_dtype: Any, threads_per_block: Any, items_per_thread: int = 1,
                   algorithm: Any = BlockHistogramAlgorithm.SORT, bins: int = 256,
                   counter_dtype: Any = np.int32) -> Any:
    """Count the block's tile into a histogram (CUB's ``BlockHistogram``).

    Each item is a bin index in ``[0, bins)``: an item outside traps (CUB would count it
    outside the array). The counters are an array of at least ``bins`` of
    ``counter_dtype`` (int32 unless given; uint32, uint64, float32 or float64), usually
    ``cuda.shared.array(bins, counter_dtype)``; every thread of the block passes the same
    one. Called as:

    * ``histo(items, histogram)``: zero the counters, then count the tile;
    * ``histo.init(histogram)``: zero the counters;
    * ``histo.composite(items, histogram)``: add the tile's counts (call it for each tile).

    Each also takes the caller's storage first (``histo.temp_storage_bytes``) or as
    ``temp_storage=``. Wait (``cuda.syncthreads()``) before reading the counters, and
    between ``init`` and the first ``composite`` (the ``ATOMIC`` algorithm has no barrier of
    its own). ``item_dtype``: any integer type. ``algorithm``: a
    ``BlockHistogramAlgorithm`` or its name in lower case.

    Example::

        histo = coop.block.make_histogram(numba.uint8, 128, 4, bins=256)

        @cuda.jit(link=histo.files)
        def kernel(x, out):
            counts = cuda.shared.array(256, numba.int32)
            items = cuda.local.array(4, numba.uint8)
            for i in range(4):
                items[i] = x[4 * cuda.threadIdx.x + i]
            histo(items, counts)
            cuda.syncthreads()
            for b in range(cuda.threadIdx.x, 256, 128):
                out[b] = counts[b]
    """
    if isinstance(algorithm, str) and algorithm.upper() in BlockHistogramAlgorithm.__members__:
        algorithm = algorithm.upper()
    kind = enum_member(BlockHistogramAlgorithm, algorithm, "algorithm")
    vt = element_type(item_dtype, "item_dtype")
    if vt.is_struct or vt.dtype.kind not in "iu":
        raise ArgumentError("item_dtype", "an integer type (each item is a bin index)", item_dtype)
    counters = element_type(counter_dtype, "counter_dtype")
    if counters.is_struct or counters.dtype.name not in COUNTERS:
        raise ArgumentError("counter_dtype", "one of " + ", ".join(COUNTERS), counter_dtype)
    bins = check_bins(int(bins) if isinstance(bins, np.integer) else bins)
    spec = ProviderSpec("histogram", vt, block_dims(threads_per_block), items_count(items_per_thread), kind.value,
                        values=counters, bins=bins)
    return make_primitive(f"block.histogram.{kind.name}", spec)
