"""Pieces of the Python text of Style 1 device functions (each record's ``style1``).

Each function takes the thread's values, calls the provider through pointers and returns
the result. Names it may use (see ``_style1/factory.make_primitive``): ``ext``,
``ext_ts``, ``ext_valid``, ``ext_valid_ts`` (the entry points), ``T``, ``V``, ``i32``,
``i64``, ``ITEMS``, ``TILE``, ``__addr``, ``__span``, ``__state``, ``__temp``,
``__oob_given``. ``temp_storage is None`` and ``num_valid < 0`` pick the entry point;
numba prunes the first at compile time (an omitted argument is typed None).
"""

from __future__ import annotations

# A load's or store's first line: ``n``, the elements of its array the call touches (the
# whole tile, or num_valid clamped to it: CUB reads no more, and the int32 it is handed
# cannot wrap)
TOUCHED = "    n = TILE if num_valid < 0 else min(num_valid, TILE)\n"
# numba zero-fills a local array where it is made: oob_default left out is all zero bytes
# (0 for numbers, a zeroed struct), and a struct never types `oob[0] = 0`
OOB = "    oob = cuda.local.array(1, T)\n    if oob_default is not None:\n        oob[0] = oob_default\n"
# a block prefix callback's state: its data and length
STATE_ARGS = "__state(prefix_state), i64(prefix_state.size)"


def dispatch(call: str, args: str, valid: str | None, indent: str = "    ") -> str:
    """Lines calling ``call[_valid][_ts]`` with ``args`` (+ valid) (+ temp storage)."""
    lines = [f"{indent}if temp_storage is None:"]
    if valid is None:
        lines.append(f"{indent}    {call}({args})")
        lines += [f"{indent}else:", f"{indent}    {call}_ts({args}, __temp(temp_storage))"]
        return "\n".join(lines) + "\n"
    lines += [f"{indent}    if num_valid < 0:", f"{indent}        {call}({args})",
              f"{indent}    else:", f"{indent}        {call}_valid({args}, {valid})",
              f"{indent}else:", f"{indent}    if num_valid < 0:",
              f"{indent}        {call}_ts({args}, __temp(temp_storage))",
              f"{indent}    else:", f"{indent}        {call}_valid_ts({args}, {valid}, __temp(temp_storage))"]
    return "\n".join(lines) + "\n"


def value_in_value_out(with_valid: bool, state: bool = False) -> str:
    """``prim(item[, num_valid][, prefix_state], temp_storage=None) -> value`` (one item
    per thread; ``state``: a block prefix callback's state follows the item)."""
    params = "item, num_valid=-1, temp_storage=None" if with_valid else "item, temp_storage=None"
    args = "__addr(inp), __addr(out)"
    if state:
        params, args = "item, prefix_state, temp_storage=None", args + ", " + STATE_ARGS
    return (f"def prim({params}):\n    inp = cuda.local.array(1, T)\n    inp[0] = item\n"
            "    out = cuda.local.array(1, T)\n"
            + dispatch("ext", args, "i32(min(num_valid, TILE))" if with_valid else None)
            + "    return out[0]\n")


def array_in_value_out() -> str:
    """``prim(items, temp_storage=None) -> value``."""
    return ("def prim(items, temp_storage=None):\n    out = cuda.local.array(1, T)\n"
            + dispatch("ext", "__span(items, ITEMS), __addr(out)", None) + "    return out[0]\n")


def arrays_in_out(state: bool = False) -> str:
    """``prim(items_in, items_out[, prefix_state], temp_storage=None)`` (the two may be one array)."""
    if state:
        return "def prim(items_in, items_out, prefix_state, temp_storage=None):\n" + dispatch(
            "ext", f"__span(items_in, ITEMS), __span(items_out, ITEMS), {STATE_ARGS}", None)
    return "def prim(items_in, items_out, temp_storage=None):\n" + dispatch(
        "ext", "__span(items_in, ITEMS), __span(items_out, ITEMS)", None)
