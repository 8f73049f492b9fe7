"""What the single-pass (decoupled look-back) algorithms share on the host: the tile
states in temporary storage, readied by an init kernel that also zeroes the counts
(unique-by-key, select, three-way partition)."""

from __future__ import annotations

from typing import Any

from .._jit import driver
from ._common import Loaded
from ._skeleton import Plan

REGION_ALIGN = 256   # the tile states start at the first such boundary of the storage


def tile_storage(plan: Any, num_items: int) -> tuple[int, int]:
    """(tiles, bytes of alignment slack and tile states) for ``num_items`` items; ``plan``
    has ``tile_items``, ``padding`` (CUB's look-back padding entries) and ``word_bytes``."""
    tiles = -(-num_items // plan.tile_items)
    return tiles, REGION_ALIGN + (max(tiles, 1) + plan.padding) * plan.word_bytes


def ready_tiles(plan: Any, params: Any, temp: int, tiles: int, p_counts: int, stream: int,
                init_threads: int) -> int:
    """Launch the init kernel (``plan.init``, parameters tile state, tiles, counts) over
    ``max(tiles, 1)`` tile states; returns the tile states' address."""
    tile_state = -(-temp // REGION_ALIGN) * REGION_ALIGN
    ready = max(tiles, 1)
    driver.launch(plan.init, -(-ready // init_threads), init_threads, stream, params.pack(tile_state, ready, p_counts))
    return tile_state


class LookbackPlan(Plan):
    """Kernel handles (init, then the sweep), the tile size, and the tile states' storage
    per tile, read from the build's exported metadata."""

    __slots__ = ("init", "sweep", "threads", "tile_items", "padding", "word_bytes", "device")

    def __init__(self, loaded: Loaded):
        meta = loaded.meta
        self.init, self.sweep = loaded.handles
        self.threads = meta["threads"]
        self.tile_items = self.threads * meta["items"]
        self.padding, self.word_bytes = meta["tile_padding"], meta["tile_word_bytes"]
