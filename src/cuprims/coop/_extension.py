"""Registers Style 2 with numba-cuda: the typeof hooks and data models of its types, and
the two rewrites (:mod:`._style2.rewrite` before type inference, :mod:`._style2.kernel_unit` after).

It must run before numba-cuda starts compiling a kernel that uses Style 2 (rewrites are
read when a compilation's rewrite pass begins). It runs when any Style 2 name
(``coop.this_block``, ``coop.load``...) is first looked up on the host, when
``cuprims.coop`` is imported after ``numba.cuda``, and through the
``numba_cuda_extensions`` entry point ``init`` of an installed cuprims (numba-cuda calls
those before its first compilation).

Example::

    from numba import cuda          # numba.cuda first: importing cuprims.coop registers Style 2
    from cuprims import coop
"""

from __future__ import annotations

from typing import Any

from cuprims.coop._records import CALLS

# the groups, ThreadData, then each primitive's calls (the reference's order)
_NAMES = ("this_block", "this_warp", "ThreadData", *CALLS)


def init() -> None:
    """Register Style 2 (idempotent; imports numba.cuda)."""
    from cuprims.coop._style2 import kernel_unit, rewrite  # noqa: F401  (registration happens on import)


def names() -> dict[str, Any]:
    """Every public Style 2 name -> its object (registers Style 2 first)."""
    init()
    from cuprims.coop._style2 import calls, groups, thread_data

    found = {"this_block": groups.this_block, "this_warp": groups.this_warp, "ThreadData": thread_data.ThreadData,
             **calls.STUBS}
    assert set(found) == set(_NAMES)
    return found
