"""What a build takes and gives, as plain data: the operators to link and the compiled,
device-independent payload. Kept apart from :mod:`cuprims._jit.build` so that calling an
already-built (or deserialized) object never imports the compiler side."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from ..op import OpSpec
from ..types import ValueType


@dataclass(frozen=True)
class OpInput:
    """An operator to link: the symbol the kernel calls and the types it is called with."""

    symbol: str
    spec: OpSpec
    arg_types: tuple[ValueType, ...]
    result_type: ValueType | None


@dataclass
class BuildResult:
    """Compiled, device-independent payload for one compute capability."""

    arch: int
    cubin: bytes
    kernels: dict[str, str]           # name expression -> lowered (mangled) name
    meta: dict[str, int]
    loaded: dict[int, Any] = field(default_factory=dict, repr=False)   # device ordinal -> Module
    load_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
