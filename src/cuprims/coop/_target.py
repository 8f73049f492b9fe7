"""Which ``sm_<arch>`` the providers are compiled for.

Provider LTO-IR must be built for the architecture the user's kernel is compiled for,
and a factory runs before that kernel exists; so the factories take the target from
:func:`target` when one is active (ahead-of-time builds, the CPU tests), else from the
current CUDA device.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

_target: contextvars.ContextVar[int | None] = contextvars.ContextVar("cuprims_coop_target", default=None)


@contextlib.contextmanager
def target(compute_capability: tuple[int, int] | int) -> Iterator[None]:
    """Build the providers of factories called inside for ``compute_capability``.

    Example::

        with cuprims.coop.target((9, 0)):
            block_sum = cuprims.coop.block.make_sum("int32", 128)   # no GPU needed
    """
    cc = compute_capability
    arch = cc[0] * 10 + cc[1] if isinstance(cc, tuple) else int(cc)
    token = _target.set(arch)
    try:
        yield
    finally:
        _target.reset(token)


def current_arch() -> int:
    """The active :func:`target`, else the current device's ``major * 10 + minor``."""
    arch = _target.get()
    if arch is not None:
        return arch
    from .._jit import lazy

    major, minor = lazy.cuda_core().Device().compute_capability
    return major * 10 + minor
