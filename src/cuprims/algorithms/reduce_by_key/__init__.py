"""Reduce-by-key and run-length encoding: ``make_reduce_by_key``, ``make_run_length_encode``,
their objects, and ``reduce_by_key`` / ``run_length_encode``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template
``cuprims_reduce_by_key.cuh``.
"""

from cuprims.algorithms.reduce_by_key.api import (ReduceByKey, RunLengthEncode, make_reduce_by_key,
                                                  make_run_length_encode, reduce_by_key, run_length_encode)

__all__ = ["ReduceByKey", "make_reduce_by_key", "reduce_by_key", "RunLengthEncode", "make_run_length_encode",
           "run_length_encode"]
