"""Device-wide prefix scans: ``make_inclusive_scan``/``inclusive_scan``,
``make_exclusive_scan``/``exclusive_scan`` and the scan object.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template ``cuprims_scan.cuh``.
"""

from cuprims.algorithms.scan.api import Scan, exclusive_scan, inclusive_scan, make_exclusive_scan, make_inclusive_scan

__all__ = ["Scan", "exclusive_scan", "inclusive_scan", "make_exclusive_scan", "make_inclusive_scan"]
