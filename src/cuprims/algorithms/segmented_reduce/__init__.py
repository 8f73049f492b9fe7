"""Segmented reduction: ``make_segmented_reduce``, the reducer object, and ``segmented_reduce``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template ``cuprims_segmented_reduce.cuh``.
"""

from cuprims.algorithms.segmented_reduce.api import SegmentedReduce, make_segmented_reduce, segmented_reduce

__all__ = ["SegmentedReduce", "make_segmented_reduce", "segmented_reduce"]
