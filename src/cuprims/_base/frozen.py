"""Frozen dataclasses whose hash is computed once, for values that are cache keys: algorithm
descriptions and argument kinds, looked up on every one-shot call."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # (typing has it from Python 3.11; a type checker reads typing_extensions')
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: Any) -> Any:
        return lambda decorator: decorator

_C = TypeVar("_C", bound=type)


@dataclass_transform(frozen_default=True)
def frozen(cls: _C) -> _C:
    """Make ``cls`` a frozen dataclass whose hash is computed once: descriptions and
    argument kinds are cache keys looked up on every one-shot call."""
    cls = dataclasses.dataclass(frozen=True)(cls)  # type: ignore[assignment]
    names = tuple(f.name for f in dataclasses.fields(cls) if f.compare)

    def __hash__(self: Any) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, n) for n in names))
            object.__setattr__(self, "_hash", h)
        return h

    cls.__hash__ = __hash__  # type: ignore[assignment]
    return cls
