"""Reductions and scans: CUB's BlockReduce and BlockScan (a block prefix callback
included) and, one value per lane, WarpReduce and WarpScan.

Entry points (``T`` the element type):

* reduce, warp_reduce: ``SYM(const T* items, T* out)``; with one item per thread also
  ``SYM_valid(const T* items, T* out, int valid)``
* scan: ``SYM(const T* in, T* out)`` (``in`` may be ``out``); with a block prefix
  callback ``SYM(const T* in, T* out, void* state, long long state_len)`` (the callback's
  state array: its data and length, handed to the callback ``SYM_prefix``)
* warp_scan: ``SYM(const T* in, T* out)`` (one item per thread)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cuprims.coop._arguments import combiner, prefix_callback, python_callable, value_bytes
from cuprims.coop._records._abi import Entry, Param, count, is_plus, is_sum, items_ref, thread_in, thread_out
from cuprims.coop._records._base import Call, Record, roles
from cuprims.coop._records._texts import array_in_value_out, arrays_in_out, value_in_value_out
from cuprims.coop._spec import REDUCE_ALGORITHMS, SCAN_ALGORITHMS, ProviderSpec
from cuprims.errors import ArgumentError
from cuprims.op import OpKind, op_spec


def _reduce_entries(spec: ProviderSpec, s: str) -> list[Entry]:
    t, n = spec.vt.cpp, spec.items
    call, op = ("Sum(", "") if is_sum(spec) else ("Reduce(", f", {s}_functor{{}}")
    value = "items[0]" if n == 1 else f"reinterpret_cast<{items_ref(spec)}>(*const_cast<{t}*>(items))"
    head = (thread_in(t, "items"), thread_out(t, "out", one=True))
    entries = [Entry("", head, f"*out = prim.{call}{value}{op});")]
    if n == 1:
        entries.append(Entry("_valid", head + (count("valid"),), f"*out = prim.{call}items[0]{op}, valid);"))
    return entries


def _scan_init(spec: ProviderSpec, s: str) -> tuple[str, str]:
    """The initial-value argument of a scan through the functor, after the statement that
    declares it (if any): the user's, or for an exclusive sum not served by CUB's Sum (see
    is_sum) the sum's zero (``false`` for bool)."""
    if spec.init is not None:
        return "", f"{s}_init(), "
    if is_plus(spec) and spec.mode == "exclusive":
        if spec.vt.cpp == "bool":
            return "", "false, "
        return f"const {spec.vt.cpp} zero{{}};\n  ", "zero, "
    return "", ""


def _scan_call(spec: ProviderSpec, s: str, io: str) -> str:
    if is_sum(spec) and spec.init is None:
        return f"prim.{spec.mode.capitalize()}Sum({io});"
    declaration, init = _scan_init(spec, s)
    return f"{declaration}prim.{spec.mode.capitalize()}Scan({io}, {init}{s}_functor{{}});"


def _scan_entries(spec: ProviderSpec, s: str) -> list[Entry]:
    t, arr = spec.vt.cpp, items_ref(spec)
    io = f"reinterpret_cast<{arr}>(*const_cast<{t}*>(in)), reinterpret_cast<{arr}>(*out)"
    head = (thread_in(t, "in"), thread_out(t, "out"))
    if spec.prefix is None:
        return [Entry("", head, _scan_call(spec, s, io))]
    # CUB's overloads taking a BlockPrefixCallbackOp& (no initial value: the prefix is one)
    op = "" if is_sum(spec) else f"{s}_functor{{}}, "
    call = f"{spec.mode.capitalize()}{'Sum' if is_sum(spec) else 'Scan'}({io}, {op}prefix)"
    state = (Param("void*", "state", "state"), Param("long long", "state_len", "i64"))
    return [Entry("", head + state, f"{s}_prefix_functor prefix{{state, state_len}};\n  prim.{call};")]


def _warp_scan_entries(spec: ProviderSpec, s: str) -> list[Entry]:
    t = spec.vt.cpp
    return [Entry("", (thread_in(t, "in"), thread_out(t, "out")), _scan_call(spec, s, "in[0], out[0]"))]


def _reduce_text(spec: ProviderSpec) -> str:
    """``prim(item, num_valid=-1, temp_storage=None) -> value``, or of a thread's items
    ``prim(items, temp_storage=None) -> value``."""
    return value_in_value_out(True) if spec.items == 1 else array_in_value_out()


def _scan_text(spec: ProviderSpec) -> str:
    """``prim(item, temp_storage=None) -> value``, or ``prim(items_in, items_out,
    temp_storage=None)``; with a block prefix callback its state follows the items."""
    state = spec.prefix is not None
    return value_in_value_out(False, state) if spec.items == 1 else arrays_in_out(state)


def _one_per_lane(record: Record, o: Any, n: int, verb: str) -> None:
    from cuprims.coop._style2 import operands as s2

    if record.warp and n != 1:
        raise s2.fail(o, f"a warp {verb} one value per lane: pass a scalar (or a ThreadData of 1)")


def _plan_reduction(record: Record, o: Any, group: Any, value: Any, valid: Any, *_: Any) -> Any:
    from cuprims.coop._style2 import operands as s2

    vt, n, is_items = s2.value_of(value, "value")
    if o.primitive == "sum":
        op, obj = op_spec(OpKind.PLUS), None
    else:
        op, obj = combiner(o.options["binary_op"], vt, "binary_op"), o.options["binary_op"]
    algorithm = s2.algorithm(record, o, "warp_reductions")
    _one_per_lane(record, o, n, "reduces")
    spec = ProviderSpec(record.kind, vt, s2.dims(group), n, algorithm, op)
    obj, ret = python_callable(op, obj), s2.result_type(vt)
    if not s2.absent(valid):
        s2.integer(valid, "valid_items")
        if n != 1:
            raise s2.fail(o, "valid_items= counts threads holding one value each: give a scalar value (for "
                          "several items per thread, load with valid_items= and an oob_default= that does not "
                          "change the result)")
        return s2.Plan(spec, obj, ret, "value_out_valid", (0, 1), spec.threads)
    return s2.Plan(spec, obj, ret, "items_out" if is_items else "value_out", (0,))


def _scan_operator(o: Any, vt: Any) -> tuple[Any, Any, str | None]:
    """(operator, its Python function or None, initial value bytes or None) of a scan call."""
    if o.primitive.endswith("_sum"):
        return op_spec(OpKind.PLUS), None, None
    op = combiner(o.options["scan_op"], vt, "scan_op")
    init_value = o.options["initial_value"]
    init = None if init_value is None else value_bytes(init_value, vt, "initial_value")
    return op, python_callable(op, o.options["scan_op"]), init


def _prefix(record: Record, o: Any, vt: Any, init: str | None, state: Any) -> tuple[Any, Any, Any]:
    """(OpSpec, state type, function) of a scan's block prefix callback, or Nones."""
    from cuprims.coop._style2 import operands as s2

    if o.options["prefix_op"] is None and s2.absent(state):
        return None, None, None
    if o.options["prefix_op"] is None or s2.absent(state):
        raise s2.fail(o, "a block prefix callback takes both prefix_op= (the function) and prefix_state= (the "
                      "array it keeps its state in)")
    if record.warp:
        raise s2.fail(o, "prefix_op= is a block scan's: CUB's warp scans take no prefix callback")
    if init is not None:
        raise s2.fail(o, "initial_value= and prefix_op= exclude each other: the callback's prefix seeds the scan")
    if not s2.block_array(state):
        raise ArgumentError("prefix_state", "a 1-D C-contiguous array (the block prefix callback's state, "
                            "e.g. cuda.local.array(1, ...))", state)
    prefix, prefix_state, fn = prefix_callback(o.options["prefix_op"], vt, "prefix_op", state=s2.state_type(state))
    if prefix_state != s2.state_type(state):
        raise ArgumentError("prefix_state", f"a 1-D array of {prefix_state.dtype} (the PrefixCallback's "
                            "state_dtype)", state)
    return prefix, prefix_state, fn


def _plan_scan(record: Record, o: Any, group: Any, items: Any, out: Any, state: Any, *_: Any) -> Any:
    from cuprims.coop._style2 import operands as s2

    vt, n, is_items = s2.value_of(items, "items")
    op, obj, init = _scan_operator(o, vt)
    prefix, prefix_state, prefix_fn = _prefix(record, o, vt, init, state)
    algorithm = s2.algorithm(record, o, "raking")
    _one_per_lane(record, o, n, "scans")
    spec = ProviderSpec(record.kind, vt, s2.dims(group), n, algorithm, op, mode=o.primitive.split("_")[0],
                        init=init, prefix=prefix, prefix_state=prefix_state)
    suffix = "" if prefix is None else "_prefix"
    if not is_items:
        if not s2.absent(out):
            raise s2.fail(o, "a scalar's scan is returned: out= takes a ThreadData when items is one")
        slots = (0,) if prefix is None else (0, 2)
        return s2.Plan(spec, obj, s2.result_type(vt), "value_out" + suffix, slots, prefix_op=prefix_fn)
    plan = s2.in_place_or_into(spec, obj, items, out)
    if prefix is None:
        return plan
    return s2.Plan(spec, obj, s2.NONE, plan.variant + suffix, plan.slots + (2,), prefix_op=prefix_fn)


_SUM_ROLES = roles(("items", "out"), ("algorithm", "prefix_op"), ("prefix_state",))
_SCAN_ROLES = roles(("items", "out"), ("scan_op", "initial_value", "algorithm", "prefix_op"), ("prefix_state",))
REDUCTION_CALLS = (Call("sum", roles(("value",), ("algorithm",), ("valid_items",)), _plan_reduction),
                   Call("reduce", roles(("value",), ("binary_op", "algorithm"), ("valid_items",)), _plan_reduction))
# a scan's items type its output
SCAN_CALLS = tuple(Call(name, call_roles, _plan_scan, (("out", "items"),))
                   for name, call_roles in (("inclusive_sum", _SUM_ROLES), ("exclusive_sum", _SUM_ROLES),
                                            ("inclusive_scan", _SCAN_ROLES), ("exclusive_scan", _SCAN_ROLES)))

REDUCE = Record("reduce", "#include <cub/block/block_reduce.cuh>", "cub::BlockReduce<{t}, {x}, {algorithm}, {y}, {z}>",
                _reduce_entries, _reduce_text, REDUCTION_CALLS, algorithms=REDUCE_ALGORITHMS)
SCAN = Record("scan", "#include <cub/block/block_scan.cuh>", "cub::BlockScan<{t}, {x}, {algorithm}, {y}, {z}>",
              _scan_entries, _scan_text, SCAN_CALLS, algorithms=SCAN_ALGORITHMS)
# warp-wide: one value per lane, shuffles (storage-free for most types), one algorithm
WARP_REDUCE = dataclasses.replace(REDUCE, kind="warp_reduce", header="#include <cub/warp/warp_reduce.cuh>",
                                  cub_type="cub::WarpReduce<{t}, {x}>", warp=True, any_lanes=True,
                                  algorithms=None)
WARP_SCAN = dataclasses.replace(SCAN, kind="warp_scan", header="#include <cub/warp/warp_scan.cuh>",
                                cub_type="cub::WarpScan<{t}, {x}>", entries=_warp_scan_entries, warp=True,
                                any_lanes=True, algorithms=None)
