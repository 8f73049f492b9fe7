"""Device-wide merge of two sorted sequences: ``make_merge``, the merger object, and ``merge``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and ``cuprims_merge.cuh`` (its kernels, over
CUB's merge agent).
"""

from cuprims.algorithms.merge.api import Merge, make_merge, merge

__all__ = ["Merge", "make_merge", "merge"]
