"""Reduce-by-key: ``make_reduce_by_key``, the object, and ``reduce_by_key``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template
``cuprims_reduce_by_key.cuh``.
"""

from cuprims.algorithms.reduce_by_key.api import ReduceByKey, make_reduce_by_key, reduce_by_key

__all__ = ["ReduceByKey", "make_reduce_by_key", "reduce_by_key"]
