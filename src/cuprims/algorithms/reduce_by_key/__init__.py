"""Reduce-by-key and run-length encoding: ``make_reduce_by_key``, ``make_run_length_encode``,
``make_non_trivial_runs``, their objects, and ``reduce_by_key`` / ``run_length_encode`` /
``non_trivial_runs``.

This folder is the algorithms' home: ``api`` (their public functions, objects and host
dispatch), ``descriptions`` (what each is built for, checked from the build-time arguments,
and the plan they share), ``source`` (their CUDA C++ generators) and their kernel template
``cuprims_reduce_by_key.cuh``.
"""

from cuprims.algorithms.reduce_by_key.api import (NonTrivialRuns, ReduceByKey, RunLengthEncode, make_non_trivial_runs,
                                                  make_reduce_by_key, make_run_length_encode, non_trivial_runs,
                                                  reduce_by_key, run_length_encode)

__all__ = ["ReduceByKey", "make_reduce_by_key", "reduce_by_key", "RunLengthEncode", "make_run_length_encode",
           "run_length_encode", "NonTrivialRuns", "make_non_trivial_runs", "non_trivial_runs"]
