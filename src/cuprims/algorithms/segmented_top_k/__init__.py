"""Segmented top-k: ``make_segmented_top_k``, the object, and ``segmented_top_k``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template
``cuprims_segmented_top_k.cuh``.
"""

from cuprims.algorithms.segmented_top_k.api import SegmentedTopK, make_segmented_top_k, segmented_top_k

__all__ = ["SegmentedTopK", "make_segmented_top_k", "segmented_top_k"]
