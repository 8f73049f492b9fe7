"""gpu_struct: user-defined value types (placeholder; full implementation follows)."""

from __future__ import annotations

from typing import Any

import numpy as np


def gpu_struct(field_dict: Any, name: str = "AnonymousStruct") -> type:
    raise NotImplementedError
