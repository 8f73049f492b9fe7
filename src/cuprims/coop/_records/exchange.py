"""Exchanges of a tile between arrangements: CUB's BlockExchange (striped, blocked,
warp-striped; time-sliced or not) and, over a logical warp's tile, WarpExchange.

Entry point: ``SYM(const T* in, T* out)`` (``in`` may be ``out``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cuprims.coop._arguments import BlockExchangeType, block_exchange_kind, warp_exchange_kind
from cuprims.coop._records._abi import Entry, copied, items_ref, thread_in, thread_out
from cuprims.coop._records._base import WARP_MOVE_STORAGE_BUDGET, Call, Record, roles
from cuprims.coop._records._texts import arrays_in_out
from cuprims.coop._spec import ProviderSpec
from cuprims.errors import ArgumentError


def _exchange_entries(spec: ProviderSpec, s: str) -> list[Entry]:
    t, arr = spec.vt.cpp, items_ref(spec)
    # CUB's time-sliced exchanges write part of the output before all of the input is
    # read: copy the input first so that in == out (an in-place exchange) stays correct.
    # The others (WarpExchange too) read all of a thread's input before writing any output.
    copy = copied(spec, "in") if spec.algorithm == "timesliced" else ""
    src = "tmp" if copy else f"reinterpret_cast<{arr}>(*const_cast<{t}*>(in))"
    return [Entry("", (thread_in(t, "in"), thread_out(t, "out")),
                  f"{copy}prim.{spec.mode}({src}, reinterpret_cast<{arr}>(*out));")]


def _exchange_text(spec: ProviderSpec) -> str:
    """``prim(items_in, items_out, temp_storage=None)``."""
    return arrays_in_out()


def _plan_exchange(record: Record, o: Any, group: Any, items: Any, out: Any, *_: Any) -> Any:
    from cuprims.coop._style2 import operands as s2

    vt, n = s2.items_of(items, "items")
    sliced = o.options["warp_time_slicing"]
    if not isinstance(sliced, bool):
        raise ArgumentError("warp_time_slicing", "a bool", sliced)
    if record.warp:
        # blocked <-> striped over the logical warp's tile
        if sliced:
            raise s2.fail(o, "warp_time_slicing= is a block option; a warp's exchange has one algorithm")
        mode = warp_exchange_kind(o.options["block_exchange_type"], "block_exchange_type").value
        spec = ProviderSpec(record.kind, vt, s2.dims(group), n, "", mode=mode)
        return s2.in_place_or_into(spec, None, items, out)
    dims = group.dims
    kind: BlockExchangeType = block_exchange_kind(o.options["block_exchange_type"])
    if "Warp" in kind.value and (dims[0] * dims[1] * dims[2]) % 32:
        raise s2.fail(o, f"a warp-striped exchange needs whole warps; the block has {dims} threads")
    spec = ProviderSpec(record.kind, vt, dims, n, "timesliced" if sliced else "", mode=kind.value)
    return s2.in_place_or_into(spec, None, items, out)


# the exchanged items type the output
EXCHANGE_CALL = Call("exchange", roles(("items", "out"), ("block_exchange_type", "warp_time_slicing")), _plan_exchange,
                     (("out", "items"),))

EXCHANGE = Record("exchange", "#include <cub/block/block_exchange.cuh>",
                  "cub::BlockExchange<{t}, {x}, {n}, {algorithm}, {y}, {z}>", _exchange_entries, _exchange_text,
                  (EXCHANGE_CALL,), algorithms={"": "false", "timesliced": "true"})
# CUB's shared-memory algorithm: a tile of storage per logical warp
WARP_EXCHANGE = dataclasses.replace(EXCHANGE, kind="warp_exchange", header="#include <cub/warp/warp_exchange.cuh>",
                                    cub_type="cub::WarpExchange<{t}, {n}, {x}>", warp=True,
                                    tile_budget=WARP_MOVE_STORAGE_BUDGET, algorithms=None)
