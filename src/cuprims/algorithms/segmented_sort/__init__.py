"""Segmented sort: ``make_segmented_sort``, the sorter object, and ``segmented_sort``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator), ``dispatch`` and its kernel template ``cuprims_segmented_sort.cuh``.
"""

from cuprims.algorithms.segmented_sort.api import SegmentedSort, make_segmented_sort, segmented_sort

__all__ = ["SegmentedSort", "make_segmented_sort", "segmented_sort"]
