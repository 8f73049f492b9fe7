"""Loads and stores of a group's tile: CUB's BlockLoad/BlockStore and, for a logical
warp's own tile, WarpLoad/WarpStore.

Entry points (``T`` the element type; items are the thread's ``T[items]``):

* load: ``SYM(const T* src, T* items)``, ``SYM_valid(const T* src, T* items, int valid, const T* oob)``
* store: ``SYM(T* dst, const T* items)``, ``SYM_valid(T* dst, const T* items, int valid)``
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cuprims.coop._records._abi import Entry, Param, copied, count, items_ref, thread_in, thread_out
from cuprims.coop._records._base import WARP_MOVE_STORAGE_BUDGET, Call, Record, roles
from cuprims.coop._records._texts import OOB, TOUCHED, dispatch
from cuprims.coop._spec import (LOAD_ALGORITHMS, STORE_ALGORITHMS, WARP_LOAD_ALGORITHMS, WARP_STORE_ALGORITHMS,
                                ProviderSpec, algorithm_of)


def _load_entries(spec: ProviderSpec, s: str) -> list[Entry]:
    t, arr = spec.vt.cpp, items_ref(spec)
    head = (Param(f"const {t}*", "src", "ptr"), thread_out(t, "items"))
    return [Entry("", head, f"prim.Load(src, reinterpret_cast<{arr}>(*items));"),
            Entry("_valid", head + (count("valid"), thread_in(t, "oob", one=True)),
                  f"prim.Load(src, reinterpret_cast<{arr}>(*items), valid, *oob);")]


def _store_entries(spec: ProviderSpec, s: str) -> list[Entry]:
    t = spec.vt.cpp
    head = (Param(f"{t}*", "dst", "ptr"), thread_in(t, "items"))
    if "transpose" in spec.algorithm:
        # CUB's transposing stores exchange the items in place before writing them: a
        # store must leave the caller's items as they were, so it stores a copy
        copy, items = copied(spec, "items"), "tmp"
    else:
        copy, items = "", f"reinterpret_cast<{items_ref(spec)}>(*const_cast<{t}*>(items))"
    return [Entry("", head, f"{copy}prim.Store(dst, {items});"),
            Entry("_valid", head + (count("valid"),), f"{copy}prim.Store(dst, {items}, valid);")]


def _load_text(spec: ProviderSpec) -> str:
    """``prim(src, items, num_valid=-1, oob_default=None, temp_storage=None)``."""
    return ("def prim(src, items, num_valid=-1, oob_default=None, temp_storage=None):\n" + TOUCHED + OOB
            + dispatch("ext", "__span(src, n), __span(items, ITEMS)", "i32(n), __addr(oob)"))


def _store_text(spec: ProviderSpec) -> str:
    """``prim(dst, items, num_valid=-1, temp_storage=None)``."""
    return ("def prim(dst, items, num_valid=-1, temp_storage=None):\n"
            + TOUCHED + dispatch("ext", "__span(dst, n), __span(items, ITEMS)", "i32(n)"))


def _tile(record: Record, o: Any, group: Any, array: Any, items: Any, argument: str, writable: bool
          ) -> ProviderSpec:
    """The provider moving the group's tile between ``array`` and each thread's ``items``."""
    from cuprims.coop._style2 import operands as s2

    vt, n = s2.items_of(items, "items")
    s2.array_of(array, items, argument, writable=writable)
    return ProviderSpec(record.kind, vt, s2.dims(group), n, algorithm_of(record.algorithms, o.options["algorithm"]))


def _plan_load(record: Record, o: Any, group: Any, src: Any, items: Any, valid: Any, oob: Any, *_: Any) -> Any:
    from cuprims.coop._style2 import operands as s2

    spec = _tile(record, o, group, src, items, "src", writable=False)
    tile, stride = spec.threads * spec.items, src.layout != "C"
    if s2.absent(valid):
        if not s2.absent(oob):
            raise s2.fail(o, "oob_default= fills the items past valid_items=, which is missing")
        return s2.Plan(spec, None, s2.NONE, "load", (0, 1), tile, stride)
    s2.integer(valid, "valid_items")
    if s2.absent(oob):
        fill: Any = ("null", items.dtype)   # 0 (all bytes zero), whatever the type
    else:
        s2.fill_value(oob, items)
        fill = 3
    return s2.Plan(spec, None, s2.NONE, "load_valid", (0, 1, 2, fill), tile, stride)


def _plan_store(record: Record, o: Any, group: Any, dst: Any, items: Any, valid: Any, *_: Any) -> Any:
    from cuprims.coop._style2 import operands as s2

    spec = _tile(record, o, group, dst, items, "dst", writable=True)
    tile, stride = spec.threads * spec.items, dst.layout != "C"
    if s2.absent(valid):
        return s2.Plan(spec, None, s2.NONE, "store", (0, 1), tile, stride)
    s2.integer(valid, "valid_items")
    return s2.Plan(spec, None, s2.NONE, "store_valid", (0, 1, 2), tile, stride)


# a load's source types the items it fills, first of all witnesses; a store's destination next
LOAD_CALL = Call("load", roles(("src", "items"), ("algorithm",), ("valid_items", "oob_default")), _plan_load,
                 (("items", "src"),), rank=0)
STORE_CALL = Call("store", roles(("dst", "items"), ("algorithm",), ("valid_items",)), _plan_store,
                  (("items", "dst"),), rank=1)

LOAD = Record("load", "#include <cub/block/block_load.cuh>", "cub::BlockLoad<{t}, {x}, {n}, {algorithm}, {y}, {z}>",
              _load_entries, _load_text, (LOAD_CALL,), algorithms=LOAD_ALGORITHMS)
STORE = Record("store", "#include <cub/block/block_store.cuh>",
               "cub::BlockStore<{t}, {x}, {n}, {algorithm}, {y}, {z}>", _store_entries, _store_text, (STORE_CALL,),
               algorithms=STORE_ALGORITHMS)
# a warp's tile: its transposing algorithm exchanges through a tile of shared memory per warp
WARP_LOAD = dataclasses.replace(LOAD, kind="warp_load", header="#include <cub/warp/warp_load.cuh>",
                                cub_type="cub::WarpLoad<{t}, {n}, {algorithm}, {x}>", warp=True,
                                tile_budget=WARP_MOVE_STORAGE_BUDGET, algorithms=WARP_LOAD_ALGORITHMS)
WARP_STORE = dataclasses.replace(STORE, kind="warp_store", header="#include <cub/warp/warp_store.cuh>",
                                 cub_type="cub::WarpStore<{t}, {n}, {algorithm}, {x}>", warp=True,
                                 tile_budget=WARP_MOVE_STORAGE_BUDGET, algorithms=WARP_STORE_ALGORITHMS)
