"""Small public enums shared by the algorithms."""

from __future__ import annotations

import enum


class SortOrder(enum.Enum):
    ASCENDING = 0
    DESCENDING = 1


class Determinism(enum.Enum):
    """How reproducible a floating-point reduction must be.

    * ``NOT_GUARANTEED``: any order (cuprims currently gives run-to-run reproducibility anyway);
    * ``RUN_TO_RUN``: the same bits on every run on one GPU (the default);
    * ``GPU_TO_GPU``: the same bits on every GPU: the tiling and grid do not depend on
      the device (a little slower).
    """

    NOT_GUARANTEED = 0
    RUN_TO_RUN = 1
    GPU_TO_GPU = 2
