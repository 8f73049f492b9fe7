"""Top-k: ``make_top_k``, the object, and ``top_k``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template ``cuprims_top_k.cuh``.
"""

from cuprims.algorithms.top_k.api import TopK, make_top_k, top_k

__all__ = ["TopK", "make_top_k", "top_k"]
