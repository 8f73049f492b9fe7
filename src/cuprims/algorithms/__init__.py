"""The device-wide algorithms, one module each (loaded at first use, see ``cuprims.__getattr__``)."""

from __future__ import annotations

import importlib

MODULES = ("reduce", "scan", "transform", "radix_sort", "merge_sort", "binary_search", "histogram",
           "segmented_reduce", "segmented_sort", "unique_by_key", "select", "three_way_partition", "reduce_by_key",
           "scan_by_key", "segmented_scan", "adjacent_difference", "find_if", "for_each", "merge", "top_k",
           "segmented_top_k")


def load_all() -> None:
    """Import every algorithm module (what needs their classes registered: deserialization)."""
    for name in MODULES:
        importlib.import_module(f"{__name__}.{name}")
