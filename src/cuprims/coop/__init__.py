"""Cooperative primitives: CUB's block- and warp-wide algorithms inside numba-cuda kernels.

Style 1 (two-phase factories): ``cuprims.coop.block`` and ``cuprims.coop.warp`` hold
``make_sum``, ``make_load``...; the kernel links their ``.files``.

Style 2 (single-phase calls): ``coop.this_block()``, ``coop.ThreadData(n)``,
``coop.load(block, src, items)``, ``coop.sum(block, items)``... inside a plain
``@cuda.jit`` kernel; the block shape comes from the launch and the providers are linked
automatically.

Both load on first use, so ``import cuprims`` (and ``import cuprims.coop``) import
neither numba nor CUDA, unless numba.cuda is already imported (then Style 2 registers
its numba-cuda extension at once, see ``_extension.py``). See docs/design/coop.md.

Example::

    from cuprims import coop
    block_sum = coop.block.make_sum("int32", 128)          # Style 1

    @cuda.jit
    def kernel(x, out):                                     # Style 2
        s = coop.sum(coop.this_block(), x[cuda.threadIdx.x])
        if cuda.threadIdx.x == 0:
            out[0] = s
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from cuprims.coop._extension import _NAMES
from cuprims.coop._target import target

__all__ = ["block", "warp", "target", *_NAMES]


def __dir__() -> list[str]:
    """The public names only (the module's own imports and helpers are not for users)."""
    return sorted(__all__)


def __getattr__(name: str) -> Any:
    if name in ("block", "warp"):
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    if name in _NAMES:
        from cuprims.coop._extension import names

        found = names()
        globals().update(found)
        return found[name]
    raise AttributeError(f"module 'cuprims.coop' has no attribute {name!r}")


if "numba.cuda" in sys.modules:   # numba-cuda is loaded: register Style 2 before any kernel compiles
    from cuprims.coop._extension import init as _init

    _init()
