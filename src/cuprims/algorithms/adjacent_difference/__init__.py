"""Adjacent difference: ``make_adjacent_difference``, the object, and ``adjacent_difference``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template
``cuprims_adjacent_difference.cuh``.
"""

from cuprims.algorithms.adjacent_difference.api import AdjacentDifference, adjacent_difference, make_adjacent_difference

__all__ = ["AdjacentDifference", "make_adjacent_difference", "adjacent_difference"]
