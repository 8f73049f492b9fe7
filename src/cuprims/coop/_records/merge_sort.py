"""Merge sorts of a tile's keys, or key-value pairs, by a comparator: CUB's BlockMergeSort
and, over a logical warp's tile, WarpMergeSort.

Entry points: ``SYM(T* keys)``, ``SYM_valid(T* keys, int valid, const T* oob)`` (in place,
by the comparator functor); pairs take ``V* values`` after the keys.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cuprims.coop._arguments import comparator, python_callable
from cuprims.coop._records._abi import Entry, count, items_ref, keys_param, thread_in, values_arg, values_params
from cuprims.coop._records._base import WARP_SORT_STORAGE_BUDGET, Record, sort_calls
from cuprims.coop._records._texts import OOB, dispatch
from cuprims.coop._spec import ProviderSpec


def _merge_entries(spec: ProviderSpec, s: str) -> list[Entry]:
    t, n = spec.vt.cpp, spec.items
    # StableSort: CUB documents Sort as not necessarily stable, StableSort as stable.
    # A partial tile's merges in CUB 3.5 may leave copies of other keys past `valid`
    # (its docs promise oob_default there): the tail is written here, in registers.
    keys = f"reinterpret_cast<{items_ref(spec)}>(*keys){values_arg(spec)}"
    tail = (f"const int first = int(prim.get_linear_tid()) * {n};\n"
            f"  for (int i = 0; i < {n}; ++i) {{ if (first + i >= valid) {{ keys[i] = *oob; }} }}")
    # (a sort of pairs leaves the values past `valid` as CUB's merges left them)
    head = (keys_param(t), *values_params(spec))
    return [Entry("", head, f"prim.StableSort({keys}, {s}_functor{{}});"),
            Entry("_valid", head + (count("valid"), thread_in(t, "oob", one=True)),
                  f"prim.StableSort({keys}, {s}_functor{{}}, valid, *oob);\n  {tail}")]


def _merge_text(spec: ProviderSpec) -> str:
    """``prim(keys[, values], num_valid=-1, oob_default=None, temp_storage=None)``: with
    ``num_valid >= 0`` only the tile's first ``num_valid`` keys are sorted, the rest
    becoming ``oob_default`` (which must then be given)."""
    arrays = ("keys",) if spec.values is None else ("keys", "values")
    return (f"def prim({', '.join(arrays)}, num_valid=-1, oob_default=None, temp_storage=None):\n"
            "    __oob_given(num_valid, oob_default)\n" + OOB
            + dispatch("ext", ", ".join(f"__span({a}, ITEMS)" for a in arrays),
                       "i32(min(num_valid, TILE)), __addr(oob)"))


def _plan_merge(record: Record, o: Any, group: Any, keys: Any, values: Any, valid: Any, oob: Any, *_: Any
                ) -> Any:
    from cuprims.coop._style2 import operands as s2

    vt, n = s2.items_of(keys, "keys")
    vvt = None if values is None else s2.values_of(keys, values)
    op = comparator(o.options["compare_op"], vt, "compare_op")
    obj = python_callable(op, o.options["compare_op"])
    if not record.warp:
        threads = group.dims[0] * group.dims[1] * group.dims[2]
        if threads & (threads - 1):
            raise s2.fail(o, f"CUB's block merge sort merges halves: the block's {threads} threads must be a "
                          "power of two")
    spec = ProviderSpec(record.kind, vt, s2.dims(group), n, "", op, values=vvt)
    variant, first = ("sort", 1) if values is None else ("sort_pairs", 2)    # first: valid_items' index
    if s2.absent(valid):
        if not s2.absent(oob):
            raise s2.fail(o, "oob_default= fills the keys past valid_items=, which is missing")
        return s2.Plan(spec, obj, s2.NONE, variant, tuple(range(first)))
    s2.integer(valid, "valid_items")
    if s2.absent(oob):
        raise s2.fail(o, "valid_items= needs oob_default= too: a key ordered after every valid key (CUB's merge "
                      "sort pads the tile past valid_items with it)")
    s2.fill_value(oob, keys)
    return s2.Plan(spec, obj, s2.NONE, variant + "_valid", tuple(range(first + 2)), spec.threads * n)


MERGE_SORT_CALLS = sort_calls("merge_sort", _plan_merge, ("compare_op",), ("valid_items", "oob_default"))

# No barrier of ours: each of CUB's merge passes starts with a barrier before it writes
# the storage, so the previous call's reads are over by then.
MERGE_SORT = Record("merge_sort", "#include <cub/block/block_merge_sort.cuh>",
                    "cub::BlockMergeSort<{t}, {x}, {n}, {v}, {y}, {z}>", _merge_entries, _merge_text,
                    MERGE_SORT_CALLS, compares=True, barrier=False)
# a tile of storage per logical warp
WARP_MERGE_SORT = dataclasses.replace(MERGE_SORT, kind="warp_merge_sort",
                                      header="#include <cub/warp/warp_merge_sort.cuh>",
                                      cub_type="cub::WarpMergeSort<{t}, {n}, {x}, {v}>", warp=True,
                                      tile_budget=WARP_SORT_STORAGE_BUDGET)
