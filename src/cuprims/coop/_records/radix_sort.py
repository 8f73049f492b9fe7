"""A block's radix sort of keys, or of key-value pairs: CUB's BlockRadixSort.

Entry point: ``SYM(T* keys, int begin_bit, int end_bit)`` (in place; ``end_bit < 0``: all
bits); pairs take ``V* values`` after the keys. ``spec.algorithm`` "striped": the sorted
tile is left striped (thread ``t`` holds ranks ``t``, ``t + threads``...: CUB's
``Sort[Descending]BlockedToStriped``), else blocked.
"""

from __future__ import annotations

from typing import Any

from cuprims.coop._records._abi import Entry, count, items_ref, keys_param, values_arg, values_params
from cuprims.coop._records._base import Record, sort_calls
from cuprims.coop._records._texts import dispatch
from cuprims.coop._spec import ProviderSpec
from cuprims.errors import ArgumentError


def _radix_entries(spec: ProviderSpec, s: str) -> list[Entry]:
    t = spec.vt.cpp
    # end < 0: every bit of the key (the Python default, so it never restates sizeof)
    call = ("SortDescending" if spec.mode == "descending" else "Sort") + (
        "BlockedToStriped" if spec.algorithm == "striped" else "")
    return [Entry("", (keys_param(t), *values_params(spec), count("begin"), count("end")),
                  f"prim.{call}(reinterpret_cast<{items_ref(spec)}>(*keys){values_arg(spec)}, begin, "
                  f"end < 0 ? int(sizeof({t}) * 8) : end);")]


def _radix_text(spec: ProviderSpec) -> str:
    """``prim(keys[, values], begin_bit=0, end_bit=-1, temp_storage=None)``."""
    arrays = ("keys",) if spec.values is None else ("keys", "values")
    spans = ", ".join(f"__span({a}, ITEMS)" for a in arrays)
    return (f"def prim({', '.join(arrays)}, begin_bit=0, end_bit=-1, temp_storage=None):\n"
            + dispatch("ext", f"{spans}, i32(begin_bit), i32(end_bit)", None))


def _plan_radix(record: Record, o: Any, group: Any, keys: Any, values: Any, begin: Any, end: Any, *_: Any
                ) -> Any:
    from cuprims.coop._style2 import operands as s2

    vt, n = s2.items_of(keys, "keys")
    if vt.dtype.kind not in "iuf" or vt.is_struct:
        raise ArgumentError("keys", "a ThreadData of integers or floats (radix sort keys)", keys)
    vvt = None if values is None else s2.values_of(keys, values)
    descending, striped = o.options["descending"], o.options["blocked_to_striped"]
    for name, flag in (("descending", descending), ("blocked_to_striped", striped)):
        if not isinstance(flag, bool):
            raise ArgumentError(name, "a bool", flag)
    first = 1 if values is None else 2           # the operand index of begin_bit
    slots: list[Any] = list(range(first))
    for t, index, default, name in ((begin, first, 0, "begin_bit"), (end, first + 1, -1, "end_bit")):
        if s2.absent(t):
            slots.append(s2.int32_constant(default))   # end < 0: every bit (the provider's rule)
        else:
            s2.integer(t, name)
            slots.append(index)
    spec = ProviderSpec(record.kind, vt, group.dims, n, "striped" if striped else "",
                        mode="descending" if descending else "ascending", values=vvt)
    return s2.Plan(spec, None, s2.NONE, "radix" if values is None else "radix_pairs", tuple(slots))


RADIX_SORT_CALLS = sort_calls("radix_sort", _plan_radix, ("descending", "blocked_to_striped"), ("begin_bit", "end_bit"))

# CUB's defaults (4-bit digits, memoized warp-scan ranking) up to the block's y and z
RADIX_SORT = Record("radix_sort", "#include <cub/block/block_radix_sort.cuh>",
                    "cub::BlockRadixSort<{t}, {x}, {n}, {v}, 4, true, cub::BLOCK_SCAN_WARP_SCANS, "
                    "cudaSharedMemBankSizeFourByte, {y}, {z}>", _radix_entries, _radix_text, RADIX_SORT_CALLS)
