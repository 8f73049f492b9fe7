"""Each item of a tile against its neighbour: CUB's BlockDiscontinuity (flags where
``flag_op(previous, item)`` is true, at heads, tails or both) and BlockAdjacentDifference
(``difference_op(item, left neighbour)`` or ``difference_op(item, right neighbour)``).

A discontinuity's flag type is the spec's ``values`` (the flags are the provider's second
array type). Entry points:

* discontinuity: ``SYM(const T* in, F* head)`` (heads), ``SYM(const T* in, F* tail)``
  (tails) or ``SYM(const T* in, F* head, F* tail)``, with twins taking the tile's
  predecessor (``_pred``), successor (``_succ``) or both (``_pred_succ``) last;
* adjacent difference: ``SYM(const T* in, T* out)`` (``in`` may be ``out``: CUB reads each
  item before it writes its output), ``SYM_valid(..., int valid)`` for a partial tile,
  and ``_pred`` twins (left) or a ``_succ`` one (right) taking the neighbour of the tile's
  first or last item.
"""

from __future__ import annotations

import itertools
from typing import Any

from cuprims._codegen.functors import flag_functor
from cuprims.coop._arguments import difference_operator, flag_operator, python_callable
from cuprims.coop._records._abi import Entry, Param, count, thread_in, thread_out
from cuprims.coop._records._base import Call, Record, roles
from cuprims.coop._records._texts import dispatch
from cuprims.coop._spec import ProviderSpec
from cuprims.errors import ArgumentError

# Style 1's names of the tile's neighbours, and the entry points' suffixes and parameters for them
_PRED, _SUCC = ("tile_predecessor_item", "_pred", "pred"), ("tile_successor_item", "_succ", "succ")


def _flags(spec: ProviderSpec, name: str) -> Param:
    assert spec.values is not None, "a discontinuity's flag type is its spec's values"
    return Param(f"{spec.values.cpp}*", name, "vptr", thread=True)


def _items(spec: ProviderSpec) -> str:
    t = spec.vt.cpp
    return f"reinterpret_cast<{t} (&)[{spec.items}]>(*const_cast<{t}*>(in))"


def _discontinuity_entries(spec: ProviderSpec, s: str) -> list[Entry]:
    t, op = spec.vt.cpp, f"{s}_functor{{}}"
    assert spec.values is not None

    def flags(name: str) -> str:
        return f"reinterpret_cast<{spec.values.cpp} (&)[{spec.items}]>(*{name})"

    if spec.mode == "heads_and_tails":
        head = (thread_in(t, "in"), _flags(spec, "head"), _flags(spec, "tail"))
        out = []
        for pred, succ in itertools.product((False, True), repeat=2):
            params = head + tuple(thread_in(t, p[2], one=True) for p, on in ((_PRED, pred), (_SUCC, succ)) if on)
            body = (f"prim.FlagHeadsAndTails({flags('head')}{', *pred' if pred else ''}, {flags('tail')}"
                    f"{', *succ' if succ else ''}, {_items(spec)}, {op});")
            out.append(Entry(("_pred" if pred else "") + ("_succ" if succ else ""), params, body))
        return out
    method, name, (_, suffix, extra) = (("FlagHeads", "head", _PRED) if spec.mode == "heads"
                                        else ("FlagTails", "tail", _SUCC))
    params = (thread_in(t, "in"), _flags(spec, name))
    call = f"prim.{method}({flags(name)}, {_items(spec)}, {op}"
    return [Entry("", params, call + ");"),
            Entry(suffix, params + (thread_in(t, extra, one=True),), call + f", *{extra});")]


def _branches(pending: tuple[tuple[str, str, str], ...], args: str, chosen: tuple = (),
              indent: str = "    ") -> str:
    """Lines calling ``ext`` with ``args`` and, for each neighbour given (``pending``:
    Style 1's name, the entry point's suffix, a local's name), the address of a local
    copy of it. ``neighbour is None`` is known when numba compiles: one call remains."""
    if not pending:
        call = "ext" + "".join(suffix for _, suffix, _ in chosen)
        return dispatch(call, args + "".join(f", __addr({local})" for _, _, local in chosen), None, indent)
    (name, _, local), rest = pending[0], pending[1:]
    return (f"{indent}if {name} is None:\n" + _branches(rest, args, chosen, indent + "    ")
            + f"{indent}else:\n{indent}    {local} = cuda.local.array(1, T)\n{indent}    {local}[0] = {name}\n"
            + _branches(rest, args, chosen + (pending[0],), indent + "    "))


def _discontinuity_text(spec: ProviderSpec) -> str:
    """``prim(items, head_flags, tile_predecessor_item=None, temp_storage=None)`` (heads),
    ``prim(items, tail_flags, tile_successor_item=None, temp_storage=None)`` (tails) or
    ``prim(items, head_flags, tail_flags, tile_predecessor_item=None,
    tile_successor_item=None, temp_storage=None)``."""
    arrays, neighbours = {"heads": (("head_flags",), (_PRED,)), "tails": (("tail_flags",), (_SUCC,)),
                          "heads_and_tails": (("head_flags", "tail_flags"), (_PRED, _SUCC))}[spec.mode]
    params = ", ".join(("items",) + arrays + tuple(f"{n}=None" for n, _, _ in neighbours))
    args = ", ".join(f"__span({a}, ITEMS)" for a in ("items",) + arrays)
    return f"def prim({params}, temp_storage=None):\n" + _branches(neighbours, args)


def _difference_entries(spec: ProviderSpec, s: str) -> list[Entry]:
    t, op = spec.vt.cpp, f"{s}_functor{{}}"
    left = spec.mode == "left"
    side = "Left" if left else "Right"
    params = (thread_in(t, "in"), thread_out(t, "out"))
    call = f"{_items(spec)}, reinterpret_cast<{t} (&)[{spec.items}]>(*out), {op}"
    extra = "pred" if left else "succ"
    out = [Entry("", params, f"prim.Subtract{side}({call});"),
           Entry("_valid", params + (count("valid"),), f"prim.Subtract{side}PartialTile({call}, valid);"),
           Entry("_" + extra, params + (thread_in(t, extra, one=True),), f"prim.Subtract{side}({call}, *{extra});")]
    if left:   # CUB's right difference of a partial tile takes no successor: the tile ends before it
        out.append(Entry("_pred_valid", params + (thread_in(t, "pred", one=True), count("valid")),
                         f"prim.SubtractLeftPartialTile({call}, valid, *pred);"))
    return out


def _difference_text(spec: ProviderSpec) -> str:
    """``prim(items_in, items_out, num_valid=-1, tile_predecessor_item=None,
    temp_storage=None)`` (left; ``tile_successor_item`` for right, which a partial tile
    does not take: typing fails when both are given). The two arrays may be one."""
    name, suffix, local = _PRED if spec.mode == "left" else _SUCC
    args = "__span(items_in, ITEMS), __span(items_out, ITEMS)"
    valid = "i32(min(num_valid, TILE))"
    text = (f"def prim(items_in, items_out, num_valid=-1, {name}=None, temp_storage=None):\n"
            f"    if {name} is None:\n" + dispatch("ext", args, valid, "        ")
            + f"    else:\n        {local} = cuda.local.array(1, T)\n        {local}[0] = {name}\n")
    if spec.mode == "left":
        return text + dispatch("ext_pred", args + ", __addr(pred)", valid, "        ")
    return text + "        __full_tile(num_valid)\n" + dispatch("ext_succ", args + ", __addr(succ)", None, "        ")


def _check_neighbour(t: Any, items: Any, argument: str) -> None:
    from numba import types

    if not (isinstance(types.unliteral(t), (types.Number, types.Boolean)) or t == items.dtype):
        raise ArgumentError(argument, f"a value convertible to {items.dtype} (the item next to the tile)", t)


def _flags_of(o: Any, items: Any, flags: Any, argument: str) -> Any:
    """The flag type of a ThreadData of flags (as many as the items, of bool or an integer type)."""
    from cuprims.coop._style2 import operands as s2

    fvt, count = s2.items_of(flags, argument)
    if count != items.count or fvt.is_struct or fvt.dtype.kind not in "biu":
        raise ArgumentError(argument, f"a coop.ThreadData of {items.count} bools or integers (one flag per item)",
                            flags)
    return fvt


def _plan_flags(record: Record, o: Any, group: Any, items: Any, arrays: tuple, pred: Any, succ: Any,
                mode: str) -> Any:
    from cuprims.coop._style2 import operands as s2

    vt, n = s2.items_of(items, "items")
    names = {"heads": ("head_flags",), "tails": ("tail_flags",), "heads_and_tails": ("head_flags", "tail_flags")}
    fvts = [_flags_of(o, items, a, name) for a, name in zip(arrays, names[mode])]
    if len(set(fvts)) > 1:
        raise ArgumentError("tail_flags", f"a coop.ThreadData like head_flags ({arrays[0]})", arrays[1])
    op = flag_operator(o.options["flag_op"], vt)
    spec = ProviderSpec(record.kind, vt, group.dims, n, "", op, mode=mode, values=fvts[0])
    given = [(name, sfx, t) for name, sfx, t in (("pred", "_pred", pred), ("succ", "_succ", succ)) if not s2.absent(t)]
    for name, _, t in given:
        _check_neighbour(t, items, "tile_predecessor_item" if name == "pred" else "tile_successor_item")
    # the operands: the items, the flag arrays, then the neighbours in the stub's order
    # (flag_heads_and_tails takes the predecessor, then the successor)
    after_flags = 1 + len(arrays)
    operand = {"pred": after_flags, "succ": after_flags + (1 if mode == "heads_and_tails" else 0)}
    slots = tuple(range(after_flags)) + tuple(operand[name] for name, _, _ in given)
    variant = ("flags" if len(arrays) == 1 else "flags2") + "".join("_" + name for name, _, _ in given)
    return s2.Plan(spec, python_callable(op, o.options["flag_op"]), s2.NONE, variant, slots)


def _plan_heads(record: Record, o: Any, group: Any, items: Any, flags: Any, pred: Any, *_: Any) -> Any:
    return _plan_flags(record, o, group, items, (flags,), pred, None, "heads")


def _plan_tails(record: Record, o: Any, group: Any, items: Any, flags: Any, succ: Any, *_: Any) -> Any:
    return _plan_flags(record, o, group, items, (flags,), None, succ, "tails")


def _plan_heads_and_tails(record: Record, o: Any, group: Any, items: Any, head: Any, tail: Any, pred: Any, succ: Any,
                          *_: Any) -> Any:
    return _plan_flags(record, o, group, items, (head, tail), pred, succ, "heads_and_tails")


def _plan_difference(record: Record, o: Any, group: Any, items: Any, out: Any, neighbour: Any, valid: Any,
                     *_: Any) -> Any:
    from cuprims.coop._style2 import operands as s2

    vt, n = s2.items_of(items, "items")
    left = o.primitive == "subtract_left"
    op = difference_operator(o.options["difference_op"], vt)
    spec = ProviderSpec(record.kind, vt, group.dims, n, "", op, mode="left" if left else "right")
    obj = python_callable(op, o.options["difference_op"])
    plan = s2.in_place_or_into(spec, obj, items, out)
    if s2.absent(neighbour) and s2.absent(valid):
        return plan
    slots, side = (0, 0) if plan.variant == "in_place" else (0, 1), "pred" if left else "succ"
    if not s2.absent(neighbour):
        _check_neighbour(neighbour, items, f"tile_{'predecessor' if left else 'successor'}_item")
        slots += (2,)
    if s2.absent(valid):
        return s2.Plan(spec, obj, s2.NONE, f"into_{side}", slots)
    s2.integer(valid, "valid_items")
    if not left and not s2.absent(neighbour):
        raise s2.fail(o, "valid_items= and tile_successor_item= exclude each other: CUB's right difference of a "
                      "partial tile ends at its last valid item, with no successor")
    variant = "into_valid" if s2.absent(neighbour) else "into_pred_valid"
    return s2.Plan(spec, obj, s2.NONE, variant, slots + (3,), spec.threads * n)


_FLAG_CALLS = (Call("flag_heads", roles(("items", "head_flags"), ("flag_op",), ("tile_predecessor_item",)),
                    _plan_heads),
               Call("flag_tails", roles(("items", "tail_flags"), ("flag_op",), ("tile_successor_item",)), _plan_tails),
               Call("flag_heads_and_tails", roles(("items", "head_flags", "tail_flags"), ("flag_op",),
                                                  ("tile_predecessor_item", "tile_successor_item")),
                    _plan_heads_and_tails))
# the differences' items type their output
_DIFFERENCE_CALLS = tuple(Call(f"subtract_{side}", roles(("items", "out"), ("difference_op",),
                                                         (f"tile_{neighbour}_item", "valid_items")),
                               _plan_difference, (("out", "items"),))
                          for side, neighbour in (("left", "predecessor"), ("right", "successor")))

# the flag operator is a truth value: a linked Python one writes a flag byte
DISCONTINUITY = Record("discontinuity", "#include <cub/block/block_discontinuity.cuh>",
                       "cub::BlockDiscontinuity<{t}, {x}, {y}, {z}>", _discontinuity_entries, _discontinuity_text,
                       _FLAG_CALLS, compares=True, functor=flag_functor)
ADJACENT_DIFFERENCE = Record("adjacent_difference", "#include <cub/block/block_adjacent_difference.cuh>",
                             "cub::BlockAdjacentDifference<{t}, {x}, {y}, {z}>", _difference_entries,
                             _difference_text, _DIFFERENCE_CALLS)
