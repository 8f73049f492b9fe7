"""Vectorised binary search: ``make_lower_bound``, ``make_upper_bound``, ``lower_bound``,
``upper_bound``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template ``cuprims_binary_search.cuh``.
"""

from cuprims.algorithms.binary_search.api import (LowerBound, UpperBound, lower_bound, make_lower_bound,
                                                  make_upper_bound, upper_bound)

__all__ = ["LowerBound", "UpperBound", "lower_bound", "make_lower_bound", "make_upper_bound", "upper_bound"]
