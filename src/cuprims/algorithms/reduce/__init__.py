"""Device-wide reduction: ``make_reduce_into``, the reducer object, and ``reduce_into``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template ``cuprims_reduce.cuh``.
"""

from cuprims.algorithms.reduce.api import Reduce, make_reduce_into, reduce_into

__all__ = ["Reduce", "make_reduce_into", "reduce_into"]
