"""What the single-pass (decoupled look-back) algorithms share on the host: the tile
states in temporary storage, readied by an init kernel that also zeroes the counts
(unique-by-key, select, three-way partition), and the checks of their arguments."""

from __future__ import annotations

import dataclasses

import struct
from typing import Any, Iterator, NamedTuple

import numpy as np

from cuprims._runtime import driver
from cuprims.algorithms.arguments import ArgKind, describe
from cuprims.algorithms.common import Loaded
from cuprims.algorithms.skeleton import Algorithm, Plan
from cuprims.errors import ArgumentError
from cuprims.op import OpKind, OpSpec, op_spec

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


class Partition(NamedTuple):
    """One launch of a partitioned single-pass algorithm (inputs past ``partition_items``)."""

    offset: int        # items before it
    size: int
    tiles: int
    first: bool
    last: bool
    counts_in: int     # address of the running counts the previous partition left (0: none)
    counts_out: int    # ... and of those this one leaves for the next


def partitioned_temp_bytes(plan: Any, num_items: int, partition_items: int, counter_bytes: int) -> int:
    """Temporary bytes of ``num_items`` items run in partitions of ``partition_items``: the
    tile states of the largest partition and, with several, two buffers of running counts
    (``counter_bytes`` together, 8-aligned)."""
    states = tile_storage(plan, min(num_items, partition_items))[1]
    return states + (counter_bytes + 8 if num_items > partition_items else 0)


def partitions(plan: Any, num_items: int, temp: int, partition_items: int, counter_bytes: int) -> Iterator[Partition]:
    """The partitions of ``num_items`` items (one, maybe empty, when they fit one), the
    running-count buffers in ``temp`` after the tile states, taking turns."""
    count = max(1, -(-num_items // partition_items))
    buffers = (0, 0)
    if count > 1:
        counters = -(-(temp + tile_storage(plan, partition_items)[1]) // 8) * 8
        buffers = (counters, counters + counter_bytes // 2)
    for k in range(count):
        size = min(partition_items, num_items - k * partition_items)
        yield Partition(k * partition_items, size, tile_storage(plan, size)[0], k == 0, k == count - 1,
                        buffers[(k + 1) % 2], buffers[k % 2])


class LookbackPlan(Plan):
    """Kernel handles (init, then the sweep), the tile size, and the tile states' storage
    per tile, read from the build's exported metadata."""

    __slots__ = ("init", "sweep", "threads", "tile_items", "padding", "word_bytes", "device", "partition_params")
    partition_params: Any  # a select's parameter block for a partitioned sweep (set by the select's plan)

    def __init__(self, loaded: Loaded):
        meta = loaded.meta
        self.init, self.sweep = loaded.handles
        self.threads = meta["threads"]
        self.tile_items = self.threads * meta["items"]
        self.padding, self.word_bytes = meta["tile_padding"], meta["tile_word_bytes"]


class LookbackAlgorithm(Algorithm):
    """An algorithm of an init kernel and one single-pass sweep (parameter blocks in that
    order), planned from the build's exported metadata."""

    def _setup(self) -> None:
        self._init_params, self._sweep_params = self._packs

    def _make_plan(self, loaded: Loaded, variant: int) -> LookbackPlan:
        return LookbackPlan(loaded)


def output_like(x: Any, name: str, like: ArgKind) -> ArgKind:
    """Output argument ``name``, written with input ``like``'s items: an array of their
    dtype, or of one numpy's ``same_kind`` rule casts them to (each item converted at the
    store as C++ converts it: the generated code's ``converting_output``), or an output
    iterator (one of another scalar type converts on writing). Structs go only to their
    own type."""
    out = describe(x, name, iterators=True, output=True)
    if out.value.code == like.value.code or not (out.is_pointer or out.value.is_struct or like.value.is_struct):
        return out
    if out.value.is_struct or like.value.is_struct:
        raise ArgumentError(name, f"an array of {like.value.dtype} like its input (or an output iterator of that "
                            "type, e.g. DiscardIterator(that array))", out.value.dtype)
    if not np.can_cast(like.value.dtype, out.value.dtype, "same_kind"):
        raise ArgumentError(name, f"an array of a dtype that the input's {like.value.dtype} items cast to under "
                            "numpy's same_kind rule", out.value.dtype)
    return out


def count_output(x: Any, name: str, what: str = "a device array of a 32- or 64-bit integer type") -> ArgKind:
    """The device array (never an iterator) that receives a count, of a 32- or 64-bit integer type."""
    count = describe(x, name, output=True)
    if count.value.kind not in "iu" or count.value.size < 4:
        raise ArgumentError(name, what, count.value.dtype)
    return count


def predicate(op: Any, argument: str) -> OpSpec:
    """The spec of predicate ``op``: a Python callable or RawOp (captured arrays bound per
    call), or OpKind.IDENTITY (an item selects itself by its truth value, as numpy's
    ``bool``: nonzero, NaN included)."""
    spec = op_spec(op, argument=argument, bind_captures=True)
    if spec.kind == "builtin" and spec.builtin is not OpKind.IDENTITY:
        raise ArgumentError(argument, "a Python callable f(x) -> bool, a RawOp, or OpKind.IDENTITY (an item's own "
                            "truth value)", op)
    if spec.kind == "builtin":
        spec = dataclasses.replace(spec, argument=argument)    # named if the items have no truth value
    return spec


# CUB's streaming context as the host packs it: first partition, last partition, padding,
# the items before this partition, then the counters the previous partition left (first,
# second, rejected) and the ones this partition leaves for the next
_CONTEXT_LAYOUT = struct.Struct("<??6xqQQ")


CONTEXT_SIZE = _CONTEXT_LAYOUT.size


def context_bytes(first: bool, last: bool, previous_items: int, counters_in: int, counters_out: int) -> bytes:
    """The streaming context of one partition (counter addresses: 0 for a single partition)."""
    return _CONTEXT_LAYOUT.pack(first, last, previous_items, counters_in, counters_out)
