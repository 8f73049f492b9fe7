"""A block's shuffles: CUB's BlockShuffle. ``spec.mode`` is the shuffle:

* offset: each thread gets the item of the thread ``distance`` after it (before it for a
  negative distance); one with no such thread gets its own item back;
* rotate: the same, around the block (``distance`` taken modulo its threads: CUB reads
  its storage only for ``0 <= distance < threads``);
* up: the blocked tile moved up one item, ``prev[i]`` the item before ``items[i]`` (the
  tile's first item, which has none, is copied: CUB leaves that output as it was);
  returns the tile's last item;
* down: moved down one item, ``next[i]`` the item after (the tile's last is copied);
  returns the tile's first item.

Entry points: ``SYM(const T* in, T* out, int distance)`` (offset, rotate) and
``SYM(const T* in, T* out, T* edge)`` (up, down).
"""

from __future__ import annotations

from typing import Any

from cuprims.coop._records._abi import Entry, count, thread_in, thread_out
from cuprims.coop._records._base import Call, Record, roles
from cuprims.coop._records._texts import dispatch
from cuprims.coop._spec import ProviderSpec
from cuprims.errors import ArgumentError

MODES = ("offset", "rotate", "up", "down")


def moves_tile(mode: str) -> bool:
    """Whether the shuffle moves a thread's items (up, down), not one value (offset, rotate)."""
    return mode in ("up", "down")


def _entries(spec: ProviderSpec, s: str) -> list[Entry]:
    t, n = spec.vt.cpp, spec.items
    if moves_tile(spec.mode):
        ref = f"{t} (&)[{n}]"
        edge = 0 if spec.mode == "up" else n - 1      # the item CUB does not write in one thread
        body = (f"out[{edge}] = in[{edge}];\n  prim.{spec.mode.capitalize()}(reinterpret_cast<{ref}>(*const_cast<{t}*>(in)), "
                f"reinterpret_cast<{ref}>(*out), *edge);")
        return [Entry("", (thread_in(t, "in"), thread_out(t, "out"), thread_out(t, "edge", one=True)), body)]
    threads = spec.threads
    if spec.mode == "rotate":
        body = (f"const int d = ((distance % {threads}) + {threads}) % {threads};\n"
                "  prim.Rotate(*in, *out, static_cast<unsigned>(d));")
    else:
        body = "*out = *in;\n  prim.Offset(*in, *out, distance);"
    return [Entry("", (thread_in(t, "in", one=True), thread_out(t, "out", one=True), count("distance")), body)]


def _style1(spec: ProviderSpec) -> str:
    """``prim(item, distance=1, temp_storage=None) -> value`` (offset, rotate) or
    ``prim(items_in, items_out, temp_storage=None) -> value`` (up, down: the tile's last
    or first item; the two arrays may be one)."""
    if moves_tile(spec.mode):
        return ("def prim(items_in, items_out, temp_storage=None):\n    edge = cuda.local.array(1, T)\n"
                + dispatch("ext", "__span(items_in, ITEMS), __span(items_out, ITEMS), __addr(edge)", None)
                + "    return edge[0]\n")
    return ("def prim(item, distance=1, temp_storage=None):\n    inp = cuda.local.array(1, T)\n    inp[0] = item\n"
            "    out = cuda.local.array(1, T)\n" + dispatch("ext", "__addr(inp), __addr(out), i32(distance)", None)
            + "    return out[0]\n")


def _plan(record: Record, o: Any, group: Any, x: Any, out: Any, distance: Any, *_: Any) -> Any:
    from cuprims.coop._style2 import operands as s2

    mode = o.options["block_shuffle_type"]
    mode = getattr(mode, "value", mode)
    if mode not in MODES:
        raise ArgumentError("block_shuffle_type", "one of " + ", ".join(repr(m) for m in MODES)
                            + " or a coop.block.BlockShuffleType", o.options["block_shuffle_type"])
    vt, n, is_items = s2.value_of(x, "items")
    spec = ProviderSpec(record.kind, vt, s2.dims(group), n, "", mode=mode)
    if moves_tile(mode):
        if not is_items:
            raise ArgumentError("items", f"a coop.ThreadData (block_shuffle_type {mode!r} moves a tile)", x)
        if not s2.absent(distance):
            raise s2.fail(o, f"distance= is for the offset and rotate shuffles, not {mode!r} (one item)")
        plan = s2.in_place_or_into(spec, None, x, out)
        variant = "edge_in_place" if plan.variant == "in_place" else "edge_into"
        return s2.Plan(spec, None, s2.result_type(vt), variant, plan.slots)
    if is_items:
        raise ArgumentError("items", f"one value a thread (block_shuffle_type {mode!r}), not a coop.ThreadData", x)
    if not s2.absent(out):
        raise s2.fail(o, f"block_shuffle_type {mode!r} returns the value: out= is for 'up' and 'down'")
    if s2.absent(distance):
        return s2.Plan(spec, None, s2.result_type(vt), "value_arg_out", (0, s2.int32_constant(1)))
    s2.integer(distance, "distance")
    return s2.Plan(spec, None, s2.result_type(vt), "value_arg_out", (0, 2))


SHUFFLE_CALL = Call("shuffle", roles(("items", "out"), ("block_shuffle_type",), ("distance",)), _plan,
                    (("out", "items"),))

BLOCK_SHUFFLE = Record("block_shuffle", "#include <cub/block/block_shuffle.cuh>", "cub::BlockShuffle<{t}, {x}, {y}, {z}>",
                       _entries, _style1, (SHUFFLE_CALL,))
