"""A block's run-length decode: CUB's BlockRunLengthDecode. Each thread holds ``runs``
runs (a value and a length each, blocked); the block decodes a window of ``threads *
items`` items of the expanded sequence, starting at ``window_offset``, each thread its
``items`` in the blocked arrangement, optionally with each item's offset within its run.

The spec: ``vt`` the values' type, ``values`` the lengths' (and relative offsets') type,
``runs`` and ``items`` per thread. CUB's constructor runs the block's scan of the lengths
(so the body makes the object: the record ``constructs``), decoded offsets are uint32
(the whole sequence is shorter than 2**32 items), and the total comes back as an int64.
Entry points: ``SYM(const void* values, const void* lengths, T* decoded, long long window,
long long* total)`` and ``SYM_offsets(..., L* relative_offsets, long long window, long long*
total)``. A window offset outside ``[0, total]`` traps (CUB's is undefined there); items
past the total repeat the last run's value.
"""

from __future__ import annotations

from typing import Any

from cuprims.coop._records._abi import Entry, Param, thread_out
from cuprims.coop._records._base import Call, Record, roles
from cuprims.coop._records._texts import dispatch
from cuprims.coop._spec import ProviderSpec
from cuprims.errors import ArgumentError


def _entries(spec: ProviderSpec, s: str) -> list[Entry]:
    t, n, r = spec.vt.cpp, spec.items, spec.runs
    assert spec.values is not None and r > 0
    length = spec.values.cpp
    # the runs arrive as bytes (numba may under-align a struct's or complex's local array):
    # copied into aligned locals
    head = (Param("const void*", "values", "ptr"), Param("const void*", "lengths", "vptr"), thread_out(t, "decoded"))
    tail = (Param("long long", "window", "i64"), Param("long long*", "total", "i64ptr"))
    start = (f"{t} run_values[{r}];\n  memcpy(run_values, values, sizeof(run_values));\n"
             f"  {length} run_lengths[{r}];\n  memcpy(run_lengths, lengths, sizeof(run_lengths));\n"
             f"  long long size;\n  {s}_prim prim(storage, run_values, run_lengths, size);\n"
             "  if (window < 0 || window > size) { __trap(); }\n  *total = size;\n  ")
    out = f"reinterpret_cast<{t} (&)[{n}]>(*decoded)"
    offsets = Param(f"{length}*", "relative", "vptr", thread=True)
    return [Entry("", head + tail, start + f"prim.RunLengthDecode({out}, static_cast<unsigned>(window));"),
            Entry("_offsets", head + (offsets,) + tail,
                  start + f"prim.RunLengthDecode({out}, reinterpret_cast<{length} (&)[{n}]>(*relative), "
                          "static_cast<unsigned>(window));")]


def _style1(spec: ProviderSpec) -> str:
    """``prim(run_values, run_lengths, decoded_items, window_offset=0, relative_offsets=None,
    temp_storage=None) -> total decoded size``."""
    runs = "__span(run_values, RUNS), __span(run_lengths, RUNS), __span(decoded_items, ITEMS)"
    return ("def prim(run_values, run_lengths, decoded_items, window_offset=0, relative_offsets=None, "
            "temp_storage=None):\n    total = cuda.local.array(1, i64)\n    if relative_offsets is None:\n"
            + dispatch("ext", f"{runs}, i64(window_offset), __addr(total)", None, "        ")
            + "    else:\n"
            + dispatch("ext_offsets", f"{runs}, __span(relative_offsets, ITEMS), i64(window_offset), __addr(total)",
                       None, "        ")
            + "    return total[0]\n")


def _plan(record: Record, o: Any, group: Any, values: Any, lengths: Any, decoded: Any, relative: Any,
          window: Any, *_: Any) -> Any:
    from numba import types

    from cuprims.coop._style2 import operands as s2

    vt, runs = s2.items_of(values, "run_values")
    lvt, count = s2.items_of(lengths, "run_lengths")
    if count != runs or lvt.is_struct or lvt.dtype.kind not in "iu":
        raise ArgumentError("run_lengths", f"a coop.ThreadData of {runs} integers (one length per run)", lengths)
    dvt, n = s2.items_of(decoded, "decoded_items")
    if decoded.dtype != values.dtype:
        raise ArgumentError("decoded_items", f"a coop.ThreadData of {values.dtype} (the runs' values)", decoded)
    spec = ProviderSpec(record.kind, vt, s2.dims(group), n, "", values=lvt, runs=runs)
    slots: tuple = (0, 1, 2)
    variant = "decode"
    if not s2.absent(relative):
        rvt, rn = s2.items_of(relative, "relative_offsets")
        if rn != n or relative.dtype != lengths.dtype:
            raise ArgumentError("relative_offsets", f"a coop.ThreadData of {n} {lengths.dtype} (as decoded_items, "
                                "of the lengths' type)", relative)
        slots, variant = (0, 1, 2, 3), "decode_offsets"
    if s2.absent(window):
        slots += (("const", types.int64, 0),)
    else:
        s2.integer(window, "window_offset")
        slots += (4,)
    return s2.Plan(spec, None, types.int64, variant, slots)


DECODE_CALL = Call("run_length_decode", roles(("run_values", "run_lengths", "decoded_items", "relative_offsets"),
                                              (), ("window_offset",)), _plan)

RUN_LENGTH_DECODE = Record("run_length_decode", "#include <cub/block/block_run_length_decode.cuh>",
                           "cub::BlockRunLengthDecode<{t}, {x}, {runs}, {n}, unsigned, {y}, {z}>", _entries, _style1,
                           (DECODE_CALL,), constructs=True)
