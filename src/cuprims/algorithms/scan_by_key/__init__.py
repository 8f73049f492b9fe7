"""Scans by key: ``make_inclusive_scan_by_key``, ``make_exclusive_scan_by_key``, their
object, and ``inclusive_scan_by_key`` / ``exclusive_scan_by_key``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template
``cuprims_scan_by_key.cuh``.
"""

from cuprims.algorithms.scan_by_key.api import (ScanByKey, exclusive_scan_by_key, inclusive_scan_by_key,
                                                make_exclusive_scan_by_key, make_inclusive_scan_by_key)

__all__ = ["ScanByKey", "make_inclusive_scan_by_key", "make_exclusive_scan_by_key", "inclusive_scan_by_key",
           "exclusive_scan_by_key"]
