"""Unique-by-key: ``make_unique_by_key``, the object, and ``unique_by_key``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template ``cuprims_unique.cuh``.
"""

from cuprims.algorithms.unique_by_key.api import UniqueByKey, make_unique_by_key, unique_by_key

__all__ = ["UniqueByKey", "make_unique_by_key", "unique_by_key"]
