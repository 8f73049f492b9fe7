"""First imports of the CUDA Python packages, serialised.

Two threads importing ``cuda.core`` for the first time at once can see a partly
initialised package and fail with ImportError; builds start from many threads (a pool
warming a cache, say), so every lazy import of these packages goes through here.
"""

from __future__ import annotations

import threading
from types import ModuleType

_lock = threading.Lock()
_modules: dict[str, ModuleType] = {}


def _load(name: str) -> ModuleType:
    module = _modules.get(name)
    if module is None:
        with _lock:
            module = _modules.get(name)
            if module is None:
                import importlib

                module = _modules[name] = importlib.import_module(name)
    return module


def cuda_core() -> ModuleType:
    return _load("cuda.core")


def driver_bindings() -> ModuleType:
    return _load("cuda.bindings.driver")


def nvrtc_bindings() -> ModuleType:
    return _load("cuda.bindings.nvrtc")


def nvjitlink_bindings() -> ModuleType:
    return _load("cuda.bindings.nvjitlink")
