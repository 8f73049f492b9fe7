"""Even-bin histograms: ``make_histogram_even``, the histogram object, and ``histogram_even``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``plan`` (its launch facts per device), ``source`` (its CUDA C++ generator),
``bins`` (the level type and the levels' checks) and its kernel template
``cuprims_histogram.cuh``.
"""

from cuprims.algorithms.histogram.api import HistogramEven, histogram_even, make_histogram_even

__all__ = ["HistogramEven", "histogram_even", "make_histogram_even"]
