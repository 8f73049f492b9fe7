"""The device helper a Style 2 call lowers to, one per plan variant: it checks counts,
puts scalars in local arrays and calls the provider's ``extern "C"`` entry point
(declared with ``cuda.declare_device``, as in Style 1) with their addresses; numba
compiles it (``context.compile_internal``) and nvJitLink's LTO inlines the provider.

A helper is plain Python, exec'd from text (as Style 1's device functions are) and
memoised per provider, variant and checks. It takes the plan's slots, the caller's
storage last (``temp``: typed ``none`` without it, a branch numba prunes). Counts out of
range trap (``trap;``) instead of letting CUB read or write past an array: ``valid``
outside ``0..limit`` or past the array's length, a full tile longer than the array, a
non-contiguous array (``check_stride``: 1-D arrays not known to be contiguous), and a
``temp`` array too small to hold the provider's TempStorage once its address is rounded
up to the TempStorage's alignment, or not contiguous (:func:`_temp_pointer`). With
``temp`` the helper calls the ``_ts`` entry point.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

from llvmlite import ir as llvm
from numba import types
from numba.cuda import cgutils
from numba.cuda.extending import intrinsic

from cuprims._value_types import value_type
from cuprims.coop._codegen import entries
from cuprims.coop._numba import addr, declare, state_pointer, trap_if
from cuprims.coop._spec import ProviderSpec
from cuprims.coop._style2.nbtypes import Static
from cuprims.coop._style2.operands import Plan
from cuprims.coop._style2.thread_data import _local_array, _trap

# the element type of a helper's int64 result (a run-length decode's total)
_INT64 = Static(("dtype", "int64"), value_type("int64"))


@dataclasses.dataclass(frozen=True)
class _Variant:
    """A helper: its parameters before ``temp``, the entry point's arguments, the
    statements before the call, whether it returns ``out[0]``, and the entry point's
    suffix (``SYM<suffix>``)."""

    params: str
    args: str
    prologue: tuple[str, ...] = ()
    returns: bool = False
    suffix: str = ""


def _within(array: str) -> tuple[str, ...]:
    return (f"if (valid < 0 or valid > limit or valid > {array}.shape[0]",
            f"        or (check_stride and {array}.strides[0] != {array}.itemsize)):", "    trap()")


_WHOLE_TILE = ("if array.shape[0] < limit or (check_stride and array.strides[0] != array.itemsize):", "    trap()")
_RANGE = ("if valid < 0 or valid > limit:", "    trap()")
_OOB = ("oob = local(1, vts)", "oob[0] = oob_default")
_SCALAR = ("inp = local(1, vts)", "inp[0] = value", "out = local(1, vts)")
_STATE = ", state_addr(state), i64(state.size)"     # a block prefix callback's state: data and length


def _NEIGHBOUR(local: str, value: str) -> tuple[str, ...]:  # noqa: N802  (reads as the constants beside it)
    """The item next to the tile, ``value``, in a local array ``local`` (passed by address)."""
    return (f"{local} = local(1, vts)", f"{local}[0] = {value}")

VARIANTS = {
    # a full-tile load or store: the two differ only in which pointer CUB reads
    "load": _Variant("array, items", "addr(array), addr(items)", _WHOLE_TILE),
    "store": _Variant("array, items", "addr(array), addr(items)", _WHOLE_TILE),
    "load_valid": _Variant("src, items, valid, oob_default", "addr(src), addr(items), i32(valid), addr(oob)",
                           _within("src") + _OOB, suffix="_valid"),
    "store_valid": _Variant("dst, items, valid", "addr(dst), addr(items), i32(valid)", _within("dst"), suffix="_valid"),
    "value_out": _Variant("value", "addr(inp), addr(out)", _SCALAR, returns=True),
    "value_out_valid": _Variant("value, valid", "addr(inp), addr(out), i32(valid)", _RANGE + _SCALAR, returns=True,
                                suffix="_valid"),
    # a warp shuffle: the value, and the source lane, distance or lane mask
    "value_arg_out": _Variant("value, arg", "addr(inp), addr(out), i32(arg)", _SCALAR, returns=True),
    # a block's up or down shuffle: the items moved in place or into another ThreadData, and
    # the tile's edge item returned
    "edge_in_place": _Variant("items", "addr(items), addr(items), addr(out)", ("out = local(1, vts)",),
                              returns=True),
    "edge_into": _Variant("items, dest", "addr(items), addr(dest), addr(out)", ("out = local(1, vts)",),
                          returns=True),
    # a run-length decode: the runs, the decoded items (and each one's offset in its run),
    # the window's offset; returns the total decoded size
    "decode": _Variant("values, lengths, decoded, window", "addr(values), addr(lengths), addr(decoded), "
                       "i64(window), addr(out)", ("out = local(1, i64s)",), returns=True),
    "decode_offsets": _Variant("values, lengths, decoded, relative, window", "addr(values), addr(lengths), "
                               "addr(decoded), addr(relative), i64(window), addr(out)", ("out = local(1, i64s)",),
                               returns=True, suffix="_offsets"),
    "items_out": _Variant("items", "addr(items), addr(out)", ("out = local(1, vts)",), returns=True),
    "in_place": _Variant("items", "addr(items), addr(items)"),
    "into": _Variant("items, out", "addr(items), addr(out)"),
    "radix": _Variant("keys, begin_bit, end_bit", "addr(keys), i32(begin_bit), i32(end_bit)"),
    "radix_pairs": _Variant("keys, values, begin_bit, end_bit",
                            "addr(keys), addr(values), i32(begin_bit), i32(end_bit)"),
    "sort": _Variant("keys", "addr(keys)"),
    "sort_valid": _Variant("keys, valid, oob_default", "addr(keys), i32(valid), addr(oob)", _RANGE + _OOB,
                           suffix="_valid"),
    "sort_pairs": _Variant("keys, values", "addr(keys), addr(values)"),
    "sort_pairs_valid": _Variant("keys, values, valid, oob_default", "addr(keys), addr(values), i32(valid), addr(oob)",
                                 _RANGE + _OOB, suffix="_valid"),
    # an adjacent difference: into another array or in place (the same array twice), of a
    # partial tile, given the item before (after) the tile
    "into_valid": _Variant("items, out, valid", "addr(items), addr(out), i32(valid)", _RANGE, suffix="_valid"),
    "into_pred_valid": _Variant("items, out, pred, valid", "addr(items), addr(out), addr(p), i32(valid)",
                                _RANGE + _NEIGHBOUR("p", "pred"), suffix="_pred_valid"),
    # discontinuity flags into one array, or heads and tails into two
    "flags": _Variant("items, flags", "addr(items), addr(flags)"),
    "flags2": _Variant("items, head, tail", "addr(items), addr(head), addr(tail)"),
    # a histogram: zero the counters and count, or add the counts (the counters a whole array of ``limit``)
    "histogram": _Variant("items, array", "addr(items), addr(array)", _WHOLE_TILE),
    "histogram_composite": _Variant("items, array", "addr(items), addr(array)", _WHOLE_TILE, suffix="_composite"),
    "flags2_pred_succ": _Variant("items, head, tail, pred, succ", "addr(items), addr(head), addr(tail), addr(p), addr(s)",
                                 _NEIGHBOUR("p", "pred") + _NEIGHBOUR("s", "succ"), suffix="_pred_succ"),
}
for _name in ("into", "flags", "flags2"):      # given the item before or after the tile
    _v = VARIANTS[_name]
    for _side in ("pred", "succ"):
        VARIANTS[f"{_name}_{_side}"] = dataclasses.replace(
            _v, params=_v.params + ", neighbour", args=_v.args + ", addr(nb)",
            prologue=_v.prologue + _NEIGHBOUR("nb", "neighbour"), suffix="_" + _side)
for _name in ("value_out", "in_place", "into"):     # with a block prefix callback: its state after the items
    _v = VARIANTS[_name]
    VARIANTS[_name + "_prefix"] = dataclasses.replace(_v, params=_v.params + ", state", args=_v.args + _STATE)


# what differs between two helpers of one variant: closed over, so that numba's cache of
# compiled subroutines (keyed by the code and the closure's values) tells them apart
_CLOSED = "run, run_ts, limit, check_stride, nbytes, align, vts"


def source(variant: str) -> str:
    """The Python text of ``variant``'s helper maker: ``make(<_CLOSED>) -> helper``."""
    v = VARIANTS[variant]
    lines = [f"def make({_CLOSED}):", f"    def helper({v.params}, temp):",
             *(f"        {line}" for line in v.prologue),
             "        if temp is None:", f"            run({v.args})",
             "        else:", f"            run_ts({v.args}, tp(temp, nbytes, align))"]
    if v.returns:
        lines.append("        return result(out)")
    lines.append("    return helper")
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=None)
def _maker(variant: str) -> Callable:
    namespace = {"addr": addr(), "trap": _trap, "local": _local_array, "i32": types.int32, "i64": types.int64,
                 "i64s": _INT64,
                 "tp": _temp_pointer, "state_addr": state_pointer(), "result": _result}
    exec(compile(source(variant), f"<cuprims coop helper {variant}>", "exec"), namespace)
    return namespace["make"]


_declared: dict[tuple[str, tuple[str, ...]], Any] = {}
_helpers: dict[tuple, Callable] = {}


def _entry(spec: ProviderSpec, suffix: str, ts: bool = False) -> Any:
    """The declaration of entry point ``SYM<suffix>[_ts]`` (its parameters: its record's ABI)."""
    found = [e for e in entries(spec) if e.suffix == suffix]
    if not found:
        raise AssertionError(f"{spec.symbol}{suffix} is not an entry point of {spec.key}")
    symbol = spec.symbol + suffix + ("_ts" if ts else "")
    params = found[0].abi + (("void*",) if ts else ())
    if (symbol, params) not in _declared:
        _declared[(symbol, params)] = declare(symbol, params, spec.vt, spec.values)
    return _declared[(symbol, params)]


@intrinsic
def _temp_pointer(typingctx: Any, arr: Any, nbytes: Any, align: Any) -> Any:
    """``temp_storage``'s data pointer rounded up to ``align`` (the provider's TempStorage),
    after a trap unless ``nbytes`` contiguous bytes follow it. Rounding up, as Style 1
    does, lets a caller cut per-warp slots of ``temp_storage_bytes`` (which has room for
    it) at any offset."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.uint8):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        aryty = sig.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        size = cgutils.unpack_tuple(builder, ary.shape, 1)[0]
        need, alignment = args[1], args[2]
        address = builder.ptrtoint(ary.data, need.type)
        skip = builder.and_(builder.sub(llvm.Constant(need.type, 0), address),
                            builder.sub(alignment, llvm.Constant(need.type, 1)))
        bad = builder.icmp_signed("<", size, builder.add(need, skip))
        if aryty.layout != "C":
            stride = cgutils.unpack_tuple(builder, ary.strides, 1)[0]
            bad = builder.or_(bad, builder.icmp_signed("!=", stride, llvm.Constant(stride.type, 1)))
        trap_if(builder, bad)
        return builder.gep(ary.data, [skip])

    return types.CPointer(types.uint8)(arr, types.intp, types.intp), codegen


@intrinsic
def _result(typingctx: Any, out: Any) -> Any:
    """``out[0]``, a helper's result from its one-element local array; a record's as its
    bytes by value (``UniTuple(uint8, size)``: see ``_coop_call``)."""
    if not isinstance(out, types.Array):
        return None
    dt = out.dtype
    if not isinstance(dt, types.Record):
        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            return context.compile_internal(builder, lambda a: a[0], sig, args)

        return dt(out), codegen
    by_value = types.UniTuple(types.uint8, dt.size)

    def codegen_record(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        return builder.load(builder.bitcast(data, context.get_value_type(by_value).as_pointer()))

    return by_value(out), codegen_record


def helper(plan: Plan) -> Callable:
    """The device helper of ``plan`` (plain Python; numba compiles it)."""
    from cuprims.coop._style2.kernel_unit import layout_for

    layout = layout_for(plan) if plan.temp else (1, 1)
    key = (plan.spec, plan.variant, plan.limit, plan.check_stride, plan.temp, layout)
    if key in _helpers:
        return _helpers[key]
    spec = plan.spec
    suffix = VARIANTS[plan.variant].suffix
    run = _entry(spec, suffix)
    run_ts = _entry(spec, suffix, ts=True) if plan.temp else run   # never called without
    fn = _helpers[key] = _maker(plan.variant)(run, run_ts, plan.limit, plan.check_stride, layout[0], layout[1],
                                             Static(("dtype", spec.vt.code), spec.vt))
    return fn
