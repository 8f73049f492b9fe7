"""Three-way partition: ``make_three_way_partition``, the object, and ``three_way_partition``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator).
"""

from cuprims.algorithms.three_way_partition.api import ThreeWayPartition, make_three_way_partition, three_way_partition

__all__ = ["ThreeWayPartition", "make_three_way_partition", "three_way_partition"]
