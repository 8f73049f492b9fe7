"""One Style 2 call's numba types -> its provider (a Style 1 :class:`ProviderSpec`) and
how to call it (a :class:`Plan`). Pure function of the types, memoised: the typing of a
call, the kernel's one-unit collection (:mod:`._kernel_unit`) and the lowering all ask.

A call reaches here as ``_coop_call(options, group, a, b, c, d, e)``: ``options`` a
:class:`~._nbtypes.StaticType` holding :class:`CallOptions` (the primitive and its
compile-time options), then the operands and runtime options in the stub's order,
``none`` where left out (see :mod:`._rewrite`); ``temp_storage`` is always the last of a
stub's, handled here for every primitive (:func:`_with_temp`).

Example::

    plan_call(options_type, BlockGroupType((128, 1, 1)), (ThreadDataType(float32, 4), none, none, none, none))
    # -> Plan(spec=ProviderSpec("reduce", f4, (128, 1, 1), 4, "warp_reductions", +), variant="items_out", ...)
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from numba import types

from cuprims.coop._block_data import BlockExchangeType, _exchange_type
from cuprims.coop._factory import combiner, comparator, prefix_callback, value_bytes
from cuprims.coop._nbtypes import BlockGroupType, StaticType, ThreadDataType, WarpGroupType
from cuprims.coop._single_phase import PRIMITIVES
from cuprims.coop._spec import (
    LOAD_ALGORITHMS,
    REDUCE_ALGORITHMS,
    SCAN_ALGORITHMS,
    STORE_ALGORITHMS,
    WARP_LOAD_ALGORITHMS,
    WARP_STORE_ALGORITHMS,
    ProviderSpec,
    algorithm_of,
)
from cuprims.coop._thread_data import numba_dtype, vt_of
from cuprims.errors import ArgumentError, CoopError
from cuprims.op import OpKind, op_spec

OPERAND_SLOTS = 5     # operands and runtime options of the widest stub (load: src, items, two counts, storage)


class CallOptions:
    """A call's primitive, compile-time options (name -> value) and source position."""

    def __init__(self, primitive: str, options: dict[str, Any], where: str):
        self.primitive, self.options, self.where = primitive, options, where

    def key(self) -> Any:
        def value_key(v: Any) -> Any:
            if isinstance(v, float):
                return ("float", repr(v))      # 0.0 and -0.0 are different initial values
            if v is None or isinstance(v, (str, int, bool)):
                return (type(v).__name__, v)
            return (type(v).__qualname__, id(v))   # held by the options' type, so the id stays unique
        return ("call", self.primitive, tuple(sorted((k, value_key(v)) for k, v in self.options.items())),
                self.where)


@dataclass(frozen=True)
class Plan:
    """``spec``: the provider. ``op``: its Python operator (for build_unit), or None.
    ``variant``: which device helper calls it (:mod:`._lowering`); ``slots``: the helper's
    arguments, each an operand index (0..4) or ``("const", type, value)`` / ``("null",
    type)`` standing for an option left out, the last one the caller's temporary storage
    (``("none",)`` without it); ``limit``: the largest valid count. ``temp``: the call
    passes ``temp_storage=`` (checked by the lowering: size, alignment, stride)."""

    spec: ProviderSpec
    op: Any
    return_type: Any
    variant: str
    slots: tuple
    limit: int = 0
    check_stride: bool = False
    temp: bool = False
    prefix_op: Any = None     # a scan's block prefix callback (the Python function), for build_unit


def _absent(t: Any) -> bool:
    return t is None or isinstance(t, types.NoneType)


def _fail(o: CallOptions, message: str) -> CoopError:
    return CoopError(f"coop.{o.primitive}() at {o.where}: {message}")


def _block(o: CallOptions, group: Any) -> tuple[int, int, int]:
    if isinstance(group, WarpGroupType):
        raise _fail(o, "takes coop.this_block(): CUB has no warp-wide version of it here yet")
    return group.dims


def _items(t: Any, argument: str) -> tuple[Any, int]:
    if not isinstance(t, ThreadDataType):
        raise ArgumentError(argument, "a coop.ThreadData (its length must be known when the kernel compiles)", t)
    return vt_of(t.dtype, argument), t.count


def _array(t: Any, items: ThreadDataType, argument: str, writable: bool) -> None:
    if not (isinstance(t, types.Array) and t.ndim == 1 and t.dtype == items.dtype
            and (t.mutable or not writable)):
        what = "a writable" if writable else "a"
        raise ArgumentError(argument, f"{what} 1-D array of {items.dtype} (the items' element type)", t)


def _integer(t: Any, argument: str) -> None:
    if not isinstance(types.unliteral(t), types.Integer):
        raise ArgumentError(argument, "an integer", t)


def _value(t: Any, argument: str) -> tuple[Any, int, bool]:
    """(value type, items, is a ThreadData) of an operand that may be either."""
    if isinstance(t, ThreadDataType):
        return vt_of(t.dtype, argument), t.count, True
    if isinstance(types.unliteral(t), (types.Number, types.Boolean, types.Record)):
        return vt_of(t, argument), 1, False
    raise ArgumentError(argument, "a coop.ThreadData or a scalar (number, bool, complex, struct)", t)


def _default_algorithm(o: CallOptions, group: Any, default: str) -> None:
    if isinstance(group, WarpGroupType) and o.options["algorithm"] != default:
        raise _fail(o, "algorithm= is a block option; warps have one algorithm")


def _mover(kind: str, o: CallOptions, group: Any, vt: Any, n: int) -> ProviderSpec:
    """A block's BlockLoad/BlockStore, or a warp's WarpLoad/WarpStore (its own algorithms)."""
    if isinstance(group, WarpGroupType):
        table = WARP_LOAD_ALGORITHMS if kind == "load" else WARP_STORE_ALGORITHMS
        return ProviderSpec(f"warp_{kind}", vt, (group.threads, 1, 1), n, algorithm_of(table, o.options["algorithm"]))
    table = LOAD_ALGORITHMS if kind == "load" else STORE_ALGORITHMS
    return ProviderSpec(kind, vt, group.dims, n, algorithm_of(table, o.options["algorithm"]))


def _load(o: CallOptions, group: Any, src: Any, items: Any, valid: Any, oob: Any) -> Plan:
    vt, n = _items(items, "items")
    _array(src, items, "src", writable=False)
    spec = _mover("load", o, group, vt, n)
    stride = src.layout != "C"
    if _absent(valid):
        if not _absent(oob):
            raise _fail(o, "oob_default= fills the items past valid_items=, which is missing")
        return Plan(spec, None, types.none, "load", (0, 1), spec.threads * n, stride)
    _integer(valid, "valid_items")
    if _absent(oob):
        fill: Any = ("null", items.dtype)   # 0 (all bytes zero), whatever the type
    elif isinstance(types.unliteral(oob), (types.Number, types.Boolean)) or oob == items.dtype:
        fill = 3
    else:
        raise ArgumentError("oob_default", f"a value convertible to {items.dtype}", oob)
    return Plan(spec, None, types.none, "load_valid", (0, 1, 2, fill), spec.threads * n, stride)


def _store(o: CallOptions, group: Any, dst: Any, items: Any, valid: Any, _: Any) -> Plan:
    vt, n = _items(items, "items")
    _array(dst, items, "dst", writable=True)
    spec = _mover("store", o, group, vt, n)
    stride = dst.layout != "C"
    if _absent(valid):
        return Plan(spec, None, types.none, "store", (0, 1), spec.threads * n, stride)
    _integer(valid, "valid_items")
    return Plan(spec, None, types.none, "store_valid", (0, 1, 2), spec.threads * n, stride)


def _reduction(o: CallOptions, group: Any, value: Any, valid: Any, *_: Any) -> Plan:
    vt, n, is_items = _value(value, "value")
    if o.primitive == "sum":
        op, obj = op_spec(OpKind.PLUS), None
    else:
        op, obj = combiner(o.options["binary_op"], vt, "binary_op"), o.options["binary_op"]
    obj = obj if op.kind == "python" else None
    if isinstance(group, WarpGroupType):
        _default_algorithm(o, group, "warp_reductions")
        if n != 1:
            raise _fail(o, "a warp reduces one value per lane: pass a scalar (or a ThreadData of 1)")
        spec = ProviderSpec("warp_reduce", vt, (group.threads, 1, 1), 1, "", op)
    else:
        spec = ProviderSpec("reduce", vt, group.dims, n, algorithm_of(REDUCE_ALGORITHMS, o.options["algorithm"]),
                            op)
    ret = numba_dtype(vt)
    if not _absent(valid):
        _integer(valid, "valid_items")
        if n != 1:
            raise _fail(o, "valid_items= counts threads holding one value each: give a scalar value (for "
                        "several items per thread, load with valid_items= and an oob_default= that does not "
                        "change the result)")
        return Plan(spec, obj, ret, "value_out_valid", (0, 1), spec.threads)
    return Plan(spec, obj, ret, "items_out" if is_items else "value_out", (0,))


def _scan(o: CallOptions, group: Any, items: Any, out: Any, state: Any, _: Any) -> Plan:
    vt, n, is_items = _value(items, "items")
    mode = o.primitive.split("_")[0]
    if o.primitive.endswith("_sum"):
        op, obj, init = op_spec(OpKind.PLUS), None, None
    else:
        op, obj = combiner(o.options["scan_op"], vt, "scan_op"), o.options["scan_op"]
        init_value = o.options["initial_value"]
        init = None if init_value is None else value_bytes(init_value, vt, "initial_value")
    obj = obj if op.kind == "python" else None
    prefix = prefix_state = prefix_fn = None
    if o.options["prefix_op"] is not None or not _absent(state):
        if o.options["prefix_op"] is None or _absent(state):
            raise _fail(o, "a block prefix callback takes both prefix_op= (the function) and prefix_state= (the "
                        "array it keeps its state in)")
        if isinstance(group, WarpGroupType):
            raise _fail(o, "prefix_op= is a block scan's: CUB's warp scans take no prefix callback")
        if init is not None:
            raise _fail(o, "initial_value= and prefix_op= exclude each other: the callback's prefix seeds the scan")
        if not (isinstance(state, types.Array) and state.ndim == 1 and state.layout == "C"):
            raise ArgumentError("prefix_state", "a 1-D C-contiguous array (the block prefix callback's state, "
                                "e.g. cuda.local.array(1, ...))", state)
        prefix, prefix_state, prefix_fn = prefix_callback(o.options["prefix_op"], vt, "prefix_op",
                                                          state=vt_of(state.dtype, "prefix_state"))
        if prefix_state != vt_of(state.dtype, "prefix_state"):
            raise ArgumentError("prefix_state", f"a 1-D array of {prefix_state.dtype} (the PrefixCallback's "
                                "state_dtype)", state)
    if isinstance(group, WarpGroupType):
        _default_algorithm(o, group, "raking")
        if n != 1:
            raise _fail(o, "a warp scans one value per lane: pass a scalar (or a ThreadData of 1)")
        spec = ProviderSpec("warp_scan", vt, (group.threads, 1, 1), 1, "", op, mode=mode, init=init)
    else:
        spec = ProviderSpec("scan", vt, group.dims, n, algorithm_of(SCAN_ALGORITHMS, o.options["algorithm"]), op,
                            mode=mode, init=init, prefix=prefix, prefix_state=prefix_state)
    suffix = "" if prefix is None else "_prefix"
    if not is_items:
        if not _absent(out):
            raise _fail(o, "a scalar's scan is returned: out= takes a ThreadData when items is one")
        slots = (0,) if prefix is None else (0, 2)
        return Plan(spec, obj, numba_dtype(vt), "value_out" + suffix, slots, prefix_op=prefix_fn)
    plan = _in_place_or_into(spec, obj, items, out)
    if prefix is None:
        return plan
    return Plan(spec, obj, types.none, plan.variant + suffix, plan.slots + (2,), prefix_op=prefix_fn)


def _in_place_or_into(spec: ProviderSpec, obj: Any, items: Any, out: Any) -> Plan:
    if _absent(out):
        return Plan(spec, obj, types.none, "in_place", (0,))
    if out != items:
        raise ArgumentError("out", f"a coop.ThreadData like items ({items})", out)
    return Plan(spec, obj, types.none, "into", (0, 1))


def _exchange(o: CallOptions, group: Any, items: Any, out: Any, *_: Any) -> Plan:
    vt, n = _items(items, "items")
    sliced = o.options["warp_time_slicing"]
    if not isinstance(sliced, bool):
        raise ArgumentError("warp_time_slicing", "a bool", sliced)
    if isinstance(group, WarpGroupType):
        # CUB's WarpExchange: blocked <-> striped over the logical warp's tile
        from cuprims.coop.warp import exchange_kind

        if sliced:
            raise _fail(o, "warp_time_slicing= is a block option; a warp's exchange has one algorithm")
        wkind = exchange_kind(o.options["block_exchange_type"], "block_exchange_type")
        spec = ProviderSpec("warp_exchange", vt, (group.threads, 1, 1), n, "", mode=wkind.value)
        return _in_place_or_into(spec, None, items, out)
    dims = _block(o, group)
    kind: BlockExchangeType = _exchange_type(o.options["block_exchange_type"])
    if "Warp" in kind.value and (dims[0] * dims[1] * dims[2]) % 32:
        raise _fail(o, f"a warp-striped exchange needs whole warps; the block has {dims} threads")
    spec = ProviderSpec("exchange", vt, dims, n, "timesliced" if sliced else "", mode=kind.value)
    return _in_place_or_into(spec, None, items, out)


def _values(keys: ThreadDataType, values: Any) -> Any:
    """The value type of a sort of pairs (``values`` as long as ``keys``)."""
    vvt, count = _items(values, "values")
    if count != keys.count:
        raise ArgumentError("values", f"a coop.ThreadData of {keys.count} items (as many as keys)", values)
    return vvt


def _radix_sort(o: CallOptions, group: Any, keys: Any, begin: Any, end: Any, _: Any) -> Plan:
    return _radix(o, group, keys, None, begin, end)


def _radix_sort_pairs(o: CallOptions, group: Any, keys: Any, values: Any, begin: Any, end: Any) -> Plan:
    return _radix(o, group, keys, values, begin, end)


def _radix(o: CallOptions, group: Any, keys: Any, values: Any, begin: Any, end: Any) -> Plan:
    dims = _block(o, group)
    vt, n = _items(keys, "keys")
    if vt.dtype.kind not in "iuf" or vt.is_struct:
        raise ArgumentError("keys", "a ThreadData of integers or floats (radix sort keys)", keys)
    vvt = None if values is None else _values(keys, values)
    descending = o.options["descending"]
    if not isinstance(descending, bool):
        raise ArgumentError("descending", "a bool", descending)
    first = 1 if values is None else 2           # the operand index of begin_bit
    slots: list[Any] = list(range(first))
    for t, index, default, name in ((begin, first, 0, "begin_bit"), (end, first + 1, -1, "end_bit")):
        if _absent(t):
            slots.append(("const", types.int32, default))   # end < 0: every bit (the provider's rule)
        else:
            _integer(t, name)
            slots.append(index)
    spec = ProviderSpec("radix_sort", vt, dims, n, "", mode="descending" if descending else "ascending",
                        values=vvt)
    return Plan(spec, None, types.none, "radix" if values is None else "radix_pairs", tuple(slots))


def _merge_sort(o: CallOptions, group: Any, keys: Any, valid: Any, oob: Any, _: Any) -> Plan:
    return _merge(o, group, keys, None, valid, oob)


def _merge_sort_pairs(o: CallOptions, group: Any, keys: Any, values: Any, valid: Any, oob: Any) -> Plan:
    return _merge(o, group, keys, values, valid, oob)


def _merge(o: CallOptions, group: Any, keys: Any, values: Any, valid: Any, oob: Any) -> Plan:
    vt, n = _items(keys, "keys")
    vvt = None if values is None else _values(keys, values)
    op = comparator(o.options["compare_op"], vt, "compare_op")
    obj = o.options["compare_op"] if op.kind == "python" else None
    if isinstance(group, WarpGroupType):
        spec = ProviderSpec("warp_merge_sort", vt, (group.threads, 1, 1), n, "", op, values=vvt)
    else:
        threads = group.dims[0] * group.dims[1] * group.dims[2]
        if threads & (threads - 1):
            raise _fail(o, f"CUB's block merge sort merges halves: the block's {threads} threads must be a "
                        "power of two")
        spec = ProviderSpec("merge_sort", vt, group.dims, n, "", op, values=vvt)
    variant, first = ("sort", 1) if values is None else ("sort_pairs", 2)    # first: valid_items' index
    if _absent(valid):
        if not _absent(oob):
            raise _fail(o, "oob_default= fills the keys past valid_items=, which is missing")
        return Plan(spec, obj, types.none, variant, tuple(range(first)))
    _integer(valid, "valid_items")
    if _absent(oob):
        raise _fail(o, "valid_items= needs oob_default= too: a key ordered after every valid key (CUB's merge "
                    "sort pads the tile past valid_items with it)")
    if not (isinstance(types.unliteral(oob), (types.Number, types.Boolean)) or oob == keys.dtype):
        raise ArgumentError("oob_default", f"a value convertible to {keys.dtype}", oob)
    return Plan(spec, obj, types.none, variant + "_valid", tuple(range(first + 2)), spec.threads * n)


_PLANNERS = {"load": _load, "store": _store, "sum": _reduction, "reduce": _reduction,
             "inclusive_sum": _scan, "exclusive_sum": _scan, "inclusive_scan": _scan, "exclusive_scan": _scan,
             "exchange": _exchange, "radix_sort_keys": _radix_sort, "merge_sort_keys": _merge_sort,
             "radix_sort_pairs": _radix_sort_pairs, "merge_sort_pairs": _merge_sort_pairs}


@functools.lru_cache(maxsize=None)
def _temp_index(primitive: str) -> int:
    """The operand index of ``temp_storage``: the stub's last operand or runtime option."""
    from cuprims.coop._single_phase import ROLES

    names = [p for p in list(PRIMITIVES[primitive].signature.parameters)[1:] if ROLES[primitive][p] != "static"]
    assert names[-1] == "temp_storage" and len(names) <= OPERAND_SLOTS, names
    return len(names) - 1


def _with_temp(plan: Plan, temp: Any, index: int) -> Plan:
    """``plan`` with its last helper argument: the caller's temporary storage, if given."""
    if _absent(temp):
        return dataclasses.replace(plan, slots=plan.slots + (("none",),))
    if (not isinstance(temp, types.Array) or isinstance(temp, ThreadDataType) or temp.ndim != 1
            or temp.dtype != types.uint8 or not temp.mutable):
        raise ArgumentError("temp_storage", "a writable 1-D uint8 shared array (cuda.shared.array(nbytes, "
                            "numba.uint8, alignment=align))", temp)
    return dataclasses.replace(plan, slots=plan.slots + (index,), temp=True)


@functools.lru_cache(maxsize=4096)
def plan_call(options: StaticType, group: Any, operands: tuple) -> Plan:
    """The :class:`Plan` of a call typed ``(options, group, *operands)`` (``OPERAND_SLOTS``
    operands, ``none`` where left out)."""
    o: CallOptions = options.value
    if not isinstance(group, (BlockGroupType, WarpGroupType)):
        raise ArgumentError("group", f"coop.this_block() or coop.this_warp() (coop.{o.primitive}() at {o.where})",
                            group)
    index = _temp_index(o.primitive)
    rest = tuple(operands[:index]) + (types.none,) * (OPERAND_SLOTS - 1 - index)
    try:
        return _with_temp(_PLANNERS[o.primitive](o, group, *rest), operands[index], index)
    except ArgumentError as exc:
        raise type(exc)(exc.argument, f"{exc.expected} (coop.{o.primitive}() at {o.where})", exc.given) from None
