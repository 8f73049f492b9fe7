"""For-each: ``make_for_each``, the object, and ``for_each``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template
``cuprims_for_each.cuh``.
"""

from cuprims.algorithms.for_each.api import ForEach, for_each, make_for_each

__all__ = ["ForEach", "make_for_each", "for_each"]
