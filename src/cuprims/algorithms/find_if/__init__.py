"""Find-if: ``make_find_if``, the object, and ``find_if``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template
``cuprims_find_if.cuh``.
"""

from cuprims.algorithms.find_if.api import FindIf, find_if, make_find_if

__all__ = ["FindIf", "make_find_if", "find_if"]
