"""The ``cuprims`` logger, with the :mod:`logging` import left until something is logged.

A warm process's first build (everything served by the disk cache) logs nothing, and
importing :mod:`logging` (with traceback, string and weakref behind it) was ~3 ms of its
~25 ms on the CPU machine. Code that logs calls ``logger.debug(...)`` etc. as usual;
:func:`debug_enabled` answers without importing logging: where nothing has imported it,
nothing has configured a handler or a level that would show a debug record.
"""

from __future__ import annotations

import sys
from typing import Any

NAME = "cuprims"


class _Logger:
    """Forwards every attribute to ``logging.getLogger("cuprims")``, imported on first use."""

    __slots__ = ()

    def __getattr__(self, attribute: str) -> Any:
        import logging

        return getattr(logging.getLogger(NAME), attribute)


logger: Any = _Logger()


def debug_enabled() -> bool:
    """Whether a DEBUG record on the ``cuprims`` logger would be handled."""
    logging = sys.modules.get("logging")
    return logging is not None and logging.getLogger(NAME).isEnabledFor(logging.DEBUG)
