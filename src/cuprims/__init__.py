"""cuprims: CUB-speed device-wide algorithms with your own Python operators and types.

Quick start::

    import cupy as cp, numpy as np, cuprims
    x = cp.arange(1 << 20, dtype=np.float32)
    out = cp.empty(1, np.float32)
    cuprims.reduce_into(d_in=x, d_out=out, num_items=x.size, op=lambda a, b: a + b,
                        h_init=np.float32(0))

Importing cuprims does not import numba; it is loaded the first time a Python operator
needs compiling.
"""

from __future__ import annotations

from . import errors
from ._caching import cache_info, clear_all_caches
from ._enums import Determinism, SortOrder
from ._proxy import ProxyArray, ProxyValue
from .config import settings
from .algorithms.merge_sort import make_merge_sort, merge_sort
from .algorithms.radix_sort import make_radix_sort, radix_sort
from .algorithms.sort_common import DoubleBuffer
from .algorithms.binary_search import lower_bound, make_lower_bound, make_upper_bound, upper_bound
from .algorithms.histogram import histogram_even, make_histogram_even
from .algorithms.reduce import make_reduce_into, reduce_into
from .algorithms.segmented_reduce import make_segmented_reduce, segmented_reduce
from .algorithms.segmented_sort import make_segmented_sort, segmented_sort
from .algorithms.scan import exclusive_scan, inclusive_scan, make_exclusive_scan, make_inclusive_scan
from .algorithms.unique_by_key import make_unique_by_key, unique_by_key
from .algorithms.select import make_select, select
from .algorithms.three_way_partition import make_three_way_partition, three_way_partition
from .algorithms.transform import binary_transform, make_binary_transform, make_unary_transform, unary_transform
from .iterators import (CacheModifiedInputIterator, ConstantIterator, CountingIterator, DiscardIterator,
                        PermutationIterator, ReverseIterator, ShuffleIterator, TransformIterator,
                        TransformOutputIterator, ZipIterator)
from .op import OpKind, RawOp
from ._serialization import deserialize, serialize
from .struct import gpu_struct

__version__ = "0.1.0"

__all__ = [
    "Determinism", "OpKind", "ProxyArray", "ProxyValue", "RawOp", "SortOrder",
    "cache_info", "clear_all_caches", "errors", "gpu_struct", "settings", "serialize", "deserialize",
    "make_reduce_into", "reduce_into", "make_segmented_reduce", "segmented_reduce",
    "make_inclusive_scan", "inclusive_scan", "make_exclusive_scan", "exclusive_scan",
    "make_unary_transform", "unary_transform", "make_binary_transform", "binary_transform",
    "make_lower_bound", "make_upper_bound", "lower_bound", "upper_bound",
    "DoubleBuffer", "make_radix_sort", "radix_sort", "make_merge_sort", "merge_sort",
    "make_segmented_sort", "segmented_sort",
    "make_unique_by_key", "unique_by_key", "make_three_way_partition", "three_way_partition",
    "make_select", "select",
    "make_histogram_even", "histogram_even",
    "CacheModifiedInputIterator", "ConstantIterator", "CountingIterator", "DiscardIterator", "PermutationIterator",
    "ReverseIterator", "ShuffleIterator", "TransformIterator", "TransformOutputIterator", "ZipIterator",
]
