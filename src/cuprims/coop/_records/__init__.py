"""The coop primitives: one :class:`Record` per provider kind, one module per family.

A record holds all that is particular to its primitive: the CUB header and type, its
entry points (the provider ABI: C++ parameters and how numba passes them, and their
bodies), the Python text of its Style 1 device function, and the Style 2 calls it serves
(parameter roles, planner). The code generator (``_codegen.py``), the build, the Style 1
factories (``_style1/``) and the Style 2 front end and lowering (``_style2/``) read them
here and test no kind by name. A new primitive is a record (and its factory and stub,
the public faces) and its tests.

Importing this package imports neither numba nor CUDA (the planners import Style 2's
operand checks when they run).

Example::

    record("reduce").cub_type           # 'cub::BlockReduce<{t}, {x}, {algorithm}, {y}, {z}>'
    serving("load", warp=True).kind     # 'warp_load'
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

from cuprims.coop._records._abi import Entry, Param, is_sum
from cuprims.coop._records._base import OPERAND, RUNTIME, STATIC, Call, Record
from cuprims.coop._records.block_shuffle import BLOCK_SHUFFLE
from cuprims.coop._records.exchange import EXCHANGE, WARP_EXCHANGE
from cuprims.coop._records.histogram import HISTOGRAM
from cuprims.coop._records.load_store import LOAD, STORE, WARP_LOAD, WARP_STORE
from cuprims.coop._records.merge_sort import MERGE_SORT, WARP_MERGE_SORT
from cuprims.coop._records.neighbours import ADJACENT_DIFFERENCE, DISCONTINUITY
from cuprims.coop._records.radix_sort import RADIX_SORT
from cuprims.coop._records.reduce_scan import REDUCE, SCAN, WARP_REDUCE, WARP_SCAN
from cuprims.coop._records.run_length import RUN_LENGTH_DECODE
from cuprims.coop._records.shuffle import WARP_SHUFFLE
from cuprims.errors import ArgumentError

__all__ = ["CALLS", "OPERAND", "RECORDS", "RUNTIME", "STATIC", "Call", "Entry", "Param", "Record", "is_sum",
           "logical_warp_lanes", "record", "serving"]

RECORDS: Mapping[str, Record] = MappingProxyType({r.kind: r for r in (
    LOAD, STORE, EXCHANGE, REDUCE, SCAN, MERGE_SORT, RADIX_SORT, DISCONTINUITY, ADJACENT_DIFFERENCE, HISTOGRAM,
    BLOCK_SHUFFLE, RUN_LENGTH_DECODE,
    WARP_LOAD, WARP_STORE, WARP_EXCHANGE, WARP_REDUCE, WARP_SCAN, WARP_MERGE_SORT, WARP_SHUFFLE)})

# Style 2's calls, in the records' order (the reference lists them so): name -> Call
CALLS: Mapping[str, Call] = MappingProxyType({c.name: c for r in RECORDS.values() for c in r.calls})
_SERVING = {(c.name, r.warp): r for r in RECORDS.values() for c in r.calls}
assert all(c is CALLS[c.name] for r in RECORDS.values() for c in r.calls), "a call defined twice"


def record(kind: str) -> Record:
    """The record of provider kind ``kind``."""
    found = RECORDS.get(kind)
    if found is None:
        raise ValueError(f"unknown provider kind {kind!r}")
    return found


def serving(call: str, warp: bool) -> Record | None:
    """The record whose provider serves Style 2's ``call`` for a warp or a block, if any."""
    return _SERVING.get((call, warp))


def logical_warp_lanes(kind: str, threads_in_warp: Any, argument: str = "threads_in_warp") -> int:
    """``threads_in_warp`` checked for the warp primitive ``kind``: 1..32 lanes where CUB
    takes any logical warp size (reductions and scans), else a power of two."""
    any_lanes = record(kind).any_lanes
    lanes = threads_in_warp
    if not isinstance(lanes, int) or isinstance(lanes, bool) or not 1 <= lanes <= 32 or (
            not any_lanes and lanes & (lanes - 1)):
        expected = "an int from 1 to 32" if any_lanes else f"1, 2, 4, 8, 16 or 32 (CUB's {kind} takes a power of two)"
        raise ArgumentError(argument, expected, threads_in_warp)
    return lanes
