"""Device-wide merge sort: ``make_merge_sort``, the sorter object, and ``merge_sort``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator).
"""

from cuprims.algorithms.merge_sort.api import MergeSort, make_merge_sort, merge_sort

__all__ = ["MergeSort", "make_merge_sort", "merge_sort"]
