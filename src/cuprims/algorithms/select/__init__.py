"""Select (stream compaction): ``make_select``, the object, and ``select``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template ``cuprims_select.cuh``.
"""

from cuprims.algorithms.select.api import Select, make_select, select

__all__ = ["Select", "make_select", "select"]
