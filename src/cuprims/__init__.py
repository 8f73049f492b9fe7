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

from typing import TYPE_CHECKING, Any

from cuprims import errors, types
from cuprims._base.version import VERSION
from cuprims._caching import cache_info, clear_all_caches
from cuprims._runtime.proxy import ProxyArray, ProxyValue
from cuprims.config import settings
from cuprims.enums import Determinism, SortOrder
from cuprims.iterators import (CacheModifiedInputIterator, ConstantIterator, CountingIterator, DiscardIterator,
                               PermutationIterator, ReverseIterator, ShuffleIterator, TransformIterator,
                               TransformOutputIterator, ZipIterator)
from cuprims.op import OpKind, RawOp
from cuprims.struct import gpu_struct

__version__ = VERSION

# The algorithms load at first use: ``import cuprims`` pays for none of their modules
# (about half of its import time) until a program names one.
_LAZY = {
    "make_merge_sort": "merge_sort", "merge_sort": "merge_sort",
    "make_radix_sort": "radix_sort", "radix_sort": "radix_sort", "DoubleBuffer": "sort_common",
    "lower_bound": "binary_search", "upper_bound": "binary_search", "make_lower_bound": "binary_search",
    "make_upper_bound": "binary_search", "histogram_even": "histogram", "make_histogram_even": "histogram",
    "make_reduce_into": "reduce", "reduce_into": "reduce",
    "make_segmented_reduce": "segmented_reduce", "segmented_reduce": "segmented_reduce",
    "make_segmented_sort": "segmented_sort", "segmented_sort": "segmented_sort",
    "exclusive_scan": "scan", "inclusive_scan": "scan", "make_exclusive_scan": "scan", "make_inclusive_scan": "scan",
    "make_unique_by_key": "unique_by_key", "unique_by_key": "unique_by_key",
    "make_reduce_by_key": "reduce_by_key", "reduce_by_key": "reduce_by_key",
    "make_run_length_encode": "reduce_by_key", "run_length_encode": "reduce_by_key",
    "make_non_trivial_runs": "reduce_by_key", "non_trivial_runs": "reduce_by_key",
    "make_segmented_inclusive_scan": "segmented_scan", "segmented_inclusive_scan": "segmented_scan",
    "make_segmented_exclusive_scan": "segmented_scan", "segmented_exclusive_scan": "segmented_scan",
    "make_inclusive_scan_by_key": "scan_by_key", "inclusive_scan_by_key": "scan_by_key",
    "make_exclusive_scan_by_key": "scan_by_key", "exclusive_scan_by_key": "scan_by_key",
    "make_select": "select", "select": "select",
    "make_adjacent_difference": "adjacent_difference", "adjacent_difference": "adjacent_difference",
    "make_find_if": "find_if", "find_if": "find_if", "make_for_each": "for_each", "for_each": "for_each",
    "make_merge": "merge", "merge": "merge",
    "make_top_k": "top_k", "top_k": "top_k",
    "make_segmented_top_k": "segmented_top_k", "segmented_top_k": "segmented_top_k",
    "make_three_way_partition": "three_way_partition", "three_way_partition": "three_way_partition",
    "binary_transform": "transform", "make_binary_transform": "transform", "make_unary_transform": "transform",
    "unary_transform": "transform",
    "serialize": None, "deserialize": None,
    # the classes of the objects the make_* functions return
    "Reduce": "reduce", "SegmentedReduce": "segmented_reduce", "Scan": "scan", "UnaryTransform": "transform",
    "BinaryTransform": "transform", "LowerBound": "binary_search", "UpperBound": "binary_search",
    "RadixSort": "radix_sort", "MergeSort": "merge_sort", "SegmentedSort": "segmented_sort", "Select": "select",
    "ThreeWayPartition": "three_way_partition", "UniqueByKey": "unique_by_key", "HistogramEven": "histogram",
    "ReduceByKey": "reduce_by_key", "RunLengthEncode": "reduce_by_key", "NonTrivialRuns": "reduce_by_key",
    "ScanByKey": "scan_by_key", "SegmentedScan": "segmented_scan", "AdjacentDifference": "adjacent_difference",
    "FindIf": "find_if", "ForEach": "for_each",
    "Merge": "merge",
    "TopK": "top_k",
    "SegmentedTopK": "segmented_top_k",
}


if TYPE_CHECKING:   # the lazy names' objects, for type checkers (at run time __getattr__ loads them)
    from cuprims._serialization import deserialize, serialize
    from cuprims.algorithms.adjacent_difference import AdjacentDifference, adjacent_difference, make_adjacent_difference
    from cuprims.algorithms.binary_search import (LowerBound, UpperBound, lower_bound, make_lower_bound,
                                                  make_upper_bound, upper_bound)
    from cuprims.algorithms.find_if import FindIf, find_if, make_find_if
    from cuprims.algorithms.for_each import ForEach, for_each, make_for_each
    from cuprims.algorithms.histogram import HistogramEven, histogram_even, make_histogram_even
    from cuprims.algorithms.merge import Merge, make_merge, merge
    from cuprims.algorithms.merge_sort import MergeSort, make_merge_sort, merge_sort
    from cuprims.algorithms.radix_sort import RadixSort, make_radix_sort, radix_sort
    from cuprims.algorithms.reduce import Reduce, make_reduce_into, reduce_into
    from cuprims.algorithms.reduce_by_key import (NonTrivialRuns, ReduceByKey, RunLengthEncode,
                                                  make_non_trivial_runs, make_reduce_by_key, make_run_length_encode,
                                                  non_trivial_runs, reduce_by_key, run_length_encode)
    from cuprims.algorithms.scan import Scan, exclusive_scan, inclusive_scan, make_exclusive_scan, make_inclusive_scan
    from cuprims.algorithms.scan_by_key import (ScanByKey, exclusive_scan_by_key, inclusive_scan_by_key,
                                                make_exclusive_scan_by_key, make_inclusive_scan_by_key)
    from cuprims.algorithms.top_k import TopK, make_top_k, top_k
    from cuprims.algorithms.segmented_scan import (SegmentedScan, make_segmented_exclusive_scan,
                                                   make_segmented_inclusive_scan, segmented_exclusive_scan,
                                                   segmented_inclusive_scan)
    from cuprims.algorithms.segmented_reduce import SegmentedReduce, make_segmented_reduce, segmented_reduce
    from cuprims.algorithms.segmented_top_k import SegmentedTopK, make_segmented_top_k, segmented_top_k
    from cuprims.algorithms.segmented_sort import SegmentedSort, make_segmented_sort, segmented_sort
    from cuprims.algorithms.select import Select, make_select, select
    from cuprims.algorithms.sort_common import DoubleBuffer
    from cuprims.algorithms.three_way_partition import ThreeWayPartition, make_three_way_partition, three_way_partition
    from cuprims.algorithms.transform import (BinaryTransform, UnaryTransform, binary_transform, make_binary_transform,
                                              make_unary_transform, unary_transform)
    from cuprims.algorithms.unique_by_key import UniqueByKey, make_unique_by_key, unique_by_key


def __getattr__(name: str) -> Any:
    if name == "coop":     # a subpackage: importing it imports neither numba nor CUDA
        import importlib

        return importlib.import_module(".coop", __name__)
    if name not in _LAZY:
        raise AttributeError(f"module 'cuprims' has no attribute {name!r}")
    import importlib

    module = _LAZY[name]
    where = "._serialization" if module is None else f".algorithms.{module}"
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value   # later lookups skip this function
    from cuprims.algorithms.skeleton import use_serializer

    use_serializer(_serialize)   # obj.serialize(), which the algorithms' layer cannot import
    return value


def _serialize(obj: Any) -> bytes:
    from cuprims._serialization import serialize

    return serialize(obj)


def __dir__() -> list[str]:
    """The public names only: the algorithms (loaded at first use), the iterators, types
    and helpers, ``coop``, ``errors`` and ``types``, ``__version__``."""
    return sorted(__all__ + ["__version__"])

__all__ = [
    "Determinism", "OpKind", "ProxyArray", "ProxyValue", "RawOp", "SortOrder",
    "cache_info", "clear_all_caches", "errors", "gpu_struct", "settings", "serialize", "deserialize", "types",
    "make_reduce_into", "reduce_into", "make_segmented_reduce", "segmented_reduce",
    "make_inclusive_scan", "inclusive_scan", "make_exclusive_scan", "exclusive_scan",
    "make_unary_transform", "unary_transform", "make_binary_transform", "binary_transform",
    "make_lower_bound", "make_upper_bound", "lower_bound", "upper_bound",
    "DoubleBuffer", "make_radix_sort", "radix_sort", "make_merge_sort", "merge_sort",
    "make_segmented_sort", "segmented_sort",
    "make_unique_by_key", "unique_by_key", "make_reduce_by_key", "reduce_by_key",
    "make_run_length_encode", "run_length_encode", "make_non_trivial_runs", "non_trivial_runs",
    "make_segmented_inclusive_scan", "segmented_inclusive_scan", "make_segmented_exclusive_scan",
    "segmented_exclusive_scan",
    "make_inclusive_scan_by_key", "inclusive_scan_by_key", "make_exclusive_scan_by_key", "exclusive_scan_by_key",
    "make_three_way_partition", "three_way_partition",
    "make_select", "select",
    "make_adjacent_difference", "adjacent_difference",
    "make_find_if", "find_if", "make_for_each", "for_each",
    "make_merge", "merge",
    "make_top_k", "top_k",
    "make_segmented_top_k", "segmented_top_k",
    "make_histogram_even", "histogram_even",
    "Reduce", "SegmentedReduce", "Scan", "UnaryTransform", "BinaryTransform", "LowerBound", "UpperBound",
    "RadixSort", "MergeSort", "SegmentedSort", "Select", "ThreeWayPartition", "UniqueByKey", "HistogramEven",
    "ReduceByKey", "RunLengthEncode", "NonTrivialRuns", "ScanByKey", "SegmentedScan", "AdjacentDifference",
    "FindIf", "ForEach", "Merge", "TopK", "SegmentedTopK",
    "CacheModifiedInputIterator", "ConstantIterator", "CountingIterator", "DiscardIterator", "PermutationIterator",
    "ReverseIterator", "ShuffleIterator", "TransformIterator", "TransformOutputIterator", "ZipIterator",
    "coop",
]
