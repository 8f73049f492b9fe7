"""Which ``sm_<arch>`` the providers are compiled for, and (Style 2) which block shape.

Provider LTO-IR must be built for the architecture the user's kernel is compiled for,
and a factory runs before that kernel exists; so the factories take the target from
:func:`target` when one is active (ahead-of-time builds, the CPU tests), else from the
current CUDA device. Style 2 kernels (``coop.this_block()``) take their block shape
from the launch being compiled for; a compilation with no launch (ahead of time, the
CPU tests) takes it from ``target(block=...)``.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator

_target: contextvars.ContextVar[int | None] = contextvars.ContextVar("cuprims_coop_target", default=None)
_block: contextvars.ContextVar[tuple[int, int, int] | None] = contextvars.ContextVar("cuprims_coop_block",
                                                                                      default=None)


@contextlib.contextmanager
def target(compute_capability: tuple[int, int] | int | None = None, *, block: Any = None) -> Iterator[None]:
    """Build providers for ``compute_capability`` and compile Style 2 kernels that are
    not compiled for a launch with ``block`` threads (an int or a 1-3 tuple); either may
    be left out (the enclosing ``target``'s, else the current device / an error).

    Example::

        with cuprims.coop.target((9, 0)):
            block_sum = cuprims.coop.block.make_sum("int32", 128)   # no GPU needed

        with cuprims.coop.target((9, 0), block=(32, 4)):
            cuda.compile_all(kernel.py_func, sig, cc=(9, 0), output="ltoir")   # Style 2, ahead of time
    """
    tokens = []
    if compute_capability is not None:
        cc = compute_capability
        tokens.append((_target, _target.set(cc[0] * 10 + cc[1] if isinstance(cc, tuple) else int(cc))))
    if block is not None:
        from cuprims.coop._spec import block_dims

        tokens.append((_block, _block.set(block_dims(block, "block"))))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def current_arch() -> int:
    """The active :func:`target`, else the current device's ``major * 10 + minor``."""
    arch = _target.get()
    if arch is not None:
        return arch
    from cuprims._base import lazy

    major, minor = lazy.cuda_core().Device().compute_capability
    return major * 10 + minor


def current_block() -> tuple[int, int, int] | None:
    """The active :func:`target`'s block shape (x, y, z), or None."""
    return _block.get()
