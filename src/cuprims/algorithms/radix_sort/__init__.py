"""Device-wide radix sort: ``make_radix_sort``, the sorter object, and ``radix_sort``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator).
"""

from cuprims.algorithms.radix_sort.api import RadixSort, make_radix_sort, radix_sort

__all__ = ["RadixSort", "make_radix_sort", "radix_sort"]
