"""Segmented scans: ``make_segmented_inclusive_scan``, ``make_segmented_exclusive_scan``,
their object, and ``segmented_inclusive_scan`` / ``segmented_exclusive_scan``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template
``cuprims_segmented_scan.cuh``.
"""

from cuprims.algorithms.segmented_scan.api import (SegmentedScan, make_segmented_exclusive_scan,
                                                   make_segmented_inclusive_scan, segmented_exclusive_scan,
                                                   segmented_inclusive_scan)

__all__ = ["SegmentedScan", "make_segmented_inclusive_scan", "make_segmented_exclusive_scan",
           "segmented_inclusive_scan", "segmented_exclusive_scan"]
