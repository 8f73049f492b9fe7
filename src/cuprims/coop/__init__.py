"""Cooperative primitives: CUB's block- and warp-wide algorithms inside numba-cuda kernels.

``cuprims.coop.block`` and ``cuprims.coop.warp`` hold the two-phase factories
(``make_sum``, ``make_load``...); they are imported on first use, so ``import cuprims``
(and ``import cuprims.coop``) import neither numba nor CUDA. See docs/coop.md.

Example::

    from cuprims import coop
    block_sum = coop.block.make_sum("int32", 128)
"""

from __future__ import annotations

import importlib
from typing import Any

from ._target import target

__all__ = ["block", "warp", "target"]


def __getattr__(name: str) -> Any:
    if name in ("block", "warp"):
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'cuprims.coop' has no attribute {name!r}")
