"""``_coop_call``: the typed intrinsic every Style 2 call becomes, and its lowering.

Typing asks :func:`._plans.plan_call` for the call's provider and result type. Lowering
(once per call site, in the function being compiled, so nothing here is cached per
kernel by numba):

1. takes the NVRTC unit that holds the provider: the one :mod:`._kernel_unit` built for
   all of this function's calls, else one of its own;
2. adds the unit's LTO-IR to the function's code library (numba-cuda's
   ``add_linking_file``; the files of a device function's library reach its callers'),
   so the user's ``@cuda.jit`` needs no ``link=``. Equal units hand out the same
   ``LTOIR`` objects, which numba keeps in a set: each is linked once (a Python
   operator's, whose symbol is strong, once even from two units);
3. emits a call of a small device helper (``context.compile_internal``; memoised per
   provider and variant) that checks counts, puts scalars in local arrays and calls the
   provider's ``extern "C"`` entry point (declared with ``cuda.declare_device``, as in
   Style 1) with their addresses. nvJitLink's LTO inlines the provider.

Counts out of range trap (``trap;``) instead of letting CUB read or write past an array:
``valid_items`` outside ``0..tile`` or past the array's length, a full tile longer than
the array, a non-contiguous array (1-D arrays not known to be contiguous are checked), a
``temp_storage=`` array smaller than the provider's TempStorage, not aligned for it, or
not contiguous. With ``temp_storage=`` the helper calls the ``_ts`` entry point.

Example (what ``total = coop.sum(block, items)`` lowers to, in effect)::

    out = local array of 1 element
    cuprims_coop_reduce_<digest>(&items[0], &out[0])
    total = out[0]
"""


from __future__ import annotations

from typing import Any, Callable

from llvmlite import ir as llvm
from numba import types
from numba.cuda import cgutils
from numba.cuda.extending import intrinsic

from cuprims.coop._codegen import entry_points
from cuprims.coop._nbtypes import Static, StaticType
from cuprims.coop._numba import _addr, declare, state_pointer, trap_if
from cuprims.coop._plans import CallOptions, Plan, plan_call
from cuprims.coop._spec import ProviderSpec
from cuprims.coop._thread_data import _local_array, _trap

# parameter kinds of each entry point (the provider ABI of _codegen.py); a sort of pairs
# takes its values ("vptr") after the keys, a ``_ts`` twin the storage ("void*") last
_PARAMS = {
    ("load", ""): ("ptr", "ptr"), ("load", "_valid"): ("ptr", "ptr", "int", "ptr"),
    ("store", ""): ("ptr", "ptr"), ("store", "_valid"): ("ptr", "ptr", "int"),
    ("warp_load", ""): ("ptr", "ptr"), ("warp_load", "_valid"): ("ptr", "ptr", "int", "ptr"),
    ("warp_store", ""): ("ptr", "ptr"), ("warp_store", "_valid"): ("ptr", "ptr", "int"),
    ("reduce", ""): ("ptr", "ptr"), ("reduce", "_valid"): ("ptr", "ptr", "int"),
    ("warp_reduce", ""): ("ptr", "ptr"), ("warp_reduce", "_valid"): ("ptr", "ptr", "int"),
    ("scan", ""): ("ptr", "ptr"), ("warp_scan", ""): ("ptr", "ptr"), ("exchange", ""): ("ptr", "ptr"),
    ("warp_exchange", ""): ("ptr", "ptr"),
    ("radix_sort", ""): ("ptr", "int", "int"),
    ("merge_sort", ""): ("ptr",), ("merge_sort", "_valid"): ("ptr", "int", "ptr"),
    ("warp_merge_sort", ""): ("ptr",), ("warp_merge_sort", "_valid"): ("ptr", "int", "ptr"),
}
_PREFIX_PARAMS = ("ptr", "ptr", "state", "i64")   # a scan with a block prefix callback
_declared: dict[tuple[str, tuple[str, ...]], Any] = {}
_helpers: dict[tuple, Callable] = {}


def _entry(spec: ProviderSpec, suffix: str, ts: bool = False) -> Any:
    symbol = spec.symbol + suffix + ("_ts" if ts else "")
    if symbol not in entry_points(spec):
        raise AssertionError(f"{symbol} is not an entry point of {spec.key}")
    if spec.prefix is not None:
        params = _PREFIX_PARAMS
    else:
        params = _PARAMS[(spec.kind, suffix)]
    if spec.values is not None:
        params = params[:1] + ("vptr",) + params[1:]
    if ts:
        params += ("void*",)
    if (symbol, params) not in _declared:
        _declared[(symbol, params)] = declare(symbol, params, spec.vt, spec.values)
    return _declared[(symbol, params)]


@intrinsic
def _temp_pointer(typingctx: Any, arr: Any, nbytes: Any, align: Any) -> Any:
    """``temp_storage``'s data pointer, after a trap unless it has ``nbytes`` contiguous
    bytes aligned to ``align`` (the provider's TempStorage)."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.uint8):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        aryty = sig.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        size = cgutils.unpack_tuple(builder, ary.shape, 1)[0]
        need, alignment = args[1], args[2]
        bad = builder.icmp_signed("<", size, need)
        if aryty.layout != "C":
            stride = cgutils.unpack_tuple(builder, ary.strides, 1)[0]
            bad = builder.or_(bad, builder.icmp_signed("!=", stride, llvm.Constant(stride.type, 1)))
        address = builder.ptrtoint(ary.data, need.type)
        bad = builder.or_(bad, builder.icmp_unsigned("!=", builder.urem(address, alignment),
                                                     llvm.Constant(need.type, 0)))
        trap_if(builder, bad)
        return ary.data

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


def _helper(plan: Plan) -> Callable:
    """The device helper of ``plan``'s variant (plain Python; numba compiles it). Its last
    argument is the caller's storage, typed ``none`` without it (numba prunes the branch)."""
    from cuprims.coop._kernel_unit import layout_for

    layout = layout_for(plan) if plan.temp else (1, 1)
    key = (plan.spec, plan.variant, plan.limit, plan.check_stride, plan.temp, layout)
    if key in _helpers:
        return _helpers[key]
    spec, limit, check_stride = plan.spec, plan.limit, plan.check_stride
    nbytes, align = layout
    addr, trap, local, i32, i64, tp = _addr(), _trap, _local_array, types.int32, types.int64, _temp_pointer
    state_addr = state_pointer()
    vts = Static(("dtype", spec.vt.code), spec.vt)
    valid = plan.variant.endswith("_valid")
    run = _entry(spec, "_valid" if valid else "")
    run_ts = _entry(spec, "_valid" if valid else "", ts=True) if plan.temp else run   # never called without

    def whole_tile(array, items, temp):
        """A full-tile load or store: the two differ only in which pointer CUB reads."""
        if array.shape[0] < limit or (check_stride and array.strides[0] != array.itemsize):
            trap()
        if temp is None:
            run(addr(array), addr(items))
        else:
            run_ts(addr(array), addr(items), tp(temp, nbytes, align))

    def load_valid(src, items, valid, oob_default, temp):
        if (valid < 0 or valid > limit or valid > src.shape[0]
                or (check_stride and src.strides[0] != src.itemsize)):
            trap()
        oob = local(1, vts)
        oob[0] = oob_default
        if temp is None:
            run(addr(src), addr(items), i32(valid), addr(oob))
        else:
            run_ts(addr(src), addr(items), i32(valid), addr(oob), tp(temp, nbytes, align))

    def store_valid(dst, items, valid, temp):
        if (valid < 0 or valid > limit or valid > dst.shape[0]
                or (check_stride and dst.strides[0] != dst.itemsize)):
            trap()
        if temp is None:
            run(addr(dst), addr(items), i32(valid))
        else:
            run_ts(addr(dst), addr(items), i32(valid), tp(temp, nbytes, align))

    def value_out(value, temp):
        inp = local(1, vts)
        inp[0] = value
        out = local(1, vts)
        if temp is None:
            run(addr(inp), addr(out))
        else:
            run_ts(addr(inp), addr(out), tp(temp, nbytes, align))
        return _result(out)

    def value_out_valid(value, valid, temp):
        if valid < 0 or valid > limit:
            trap()
        inp = local(1, vts)
        inp[0] = value
        out = local(1, vts)
        if temp is None:
            run(addr(inp), addr(out), i32(valid))
        else:
            run_ts(addr(inp), addr(out), i32(valid), tp(temp, nbytes, align))
        return _result(out)

    def items_out(items, temp):
        out = local(1, vts)
        if temp is None:
            run(addr(items), addr(out))
        else:
            run_ts(addr(items), addr(out), tp(temp, nbytes, align))
        return _result(out)

    def in_place(items, temp):
        if temp is None:
            run(addr(items), addr(items))
        else:
            run_ts(addr(items), addr(items), tp(temp, nbytes, align))

    def into(items, out, temp):
        if temp is None:
            run(addr(items), addr(out))
        else:
            run_ts(addr(items), addr(out), tp(temp, nbytes, align))

    def value_out_prefix(value, state, temp):
        inp = local(1, vts)
        inp[0] = value
        out = local(1, vts)
        if temp is None:
            run(addr(inp), addr(out), state_addr(state), i64(state.size))
        else:
            run_ts(addr(inp), addr(out), state_addr(state), i64(state.size), tp(temp, nbytes, align))
        return _result(out)

    def in_place_prefix(items, state, temp):
        if temp is None:
            run(addr(items), addr(items), state_addr(state), i64(state.size))
        else:
            run_ts(addr(items), addr(items), state_addr(state), i64(state.size), tp(temp, nbytes, align))

    def into_prefix(items, out, state, temp):
        if temp is None:
            run(addr(items), addr(out), state_addr(state), i64(state.size))
        else:
            run_ts(addr(items), addr(out), state_addr(state), i64(state.size), tp(temp, nbytes, align))

    def radix(keys, begin_bit, end_bit, temp):
        if temp is None:
            run(addr(keys), i32(begin_bit), i32(end_bit))
        else:
            run_ts(addr(keys), i32(begin_bit), i32(end_bit), tp(temp, nbytes, align))

    def radix_pairs(keys, values, begin_bit, end_bit, temp):
        if temp is None:
            run(addr(keys), addr(values), i32(begin_bit), i32(end_bit))
        else:
            run_ts(addr(keys), addr(values), i32(begin_bit), i32(end_bit), tp(temp, nbytes, align))

    def sort(keys, temp):
        if temp is None:
            run(addr(keys))
        else:
            run_ts(addr(keys), tp(temp, nbytes, align))

    def sort_valid(keys, valid, oob_default, temp):
        if valid < 0 or valid > limit:
            trap()
        oob = local(1, vts)
        oob[0] = oob_default
        if temp is None:
            run(addr(keys), i32(valid), addr(oob))
        else:
            run_ts(addr(keys), i32(valid), addr(oob), tp(temp, nbytes, align))

    def sort_pairs(keys, values, temp):
        if temp is None:
            run(addr(keys), addr(values))
        else:
            run_ts(addr(keys), addr(values), tp(temp, nbytes, align))

    def sort_pairs_valid(keys, values, valid, oob_default, temp):
        if valid < 0 or valid > limit:
            trap()
        oob = local(1, vts)
        oob[0] = oob_default
        if temp is None:
            run(addr(keys), addr(values), i32(valid), addr(oob))
        else:
            run_ts(addr(keys), addr(values), i32(valid), addr(oob), tp(temp, nbytes, align))

    variants = dict(load=whole_tile, load_valid=load_valid, store=whole_tile, store_valid=store_valid,
                    value_out=value_out, value_out_valid=value_out_valid, items_out=items_out, in_place=in_place,
                    into=into,
                    value_out_prefix=value_out_prefix, in_place_prefix=in_place_prefix, into_prefix=into_prefix,
                    radix=radix, radix_pairs=radix_pairs, sort=sort, sort_valid=sort_valid, sort_pairs=sort_pairs,
                    sort_pairs_valid=sort_pairs_valid)
    fn = _helpers[key] = variants[plan.variant]
    return fn


@intrinsic
def _coop_call(typingctx: Any, options: Any, group: Any, a: Any, b: Any, c: Any, d: Any, e: Any) -> Any:
    if not (isinstance(options, StaticType) and isinstance(options.value, CallOptions)):
        return None
    plan = plan_call(options, group, (a, b, c, d, e))      # checks the group too
    sig = plan.return_type(options, group, a, b, c, d, e)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        from cuprims.coop._kernel_unit import unit_for

        library = context.active_code_library
        for f in unit_for(plan):
            library.add_linking_file(f)
        values, argtypes = [], []
        for slot in plan.slots:
            if isinstance(slot, int):
                values.append(args[2 + slot])
                argtypes.append(sig.args[2 + slot])
            elif slot[0] == "const":
                values.append(context.get_constant(slot[1], slot[2]))
                argtypes.append(slot[1])
            elif slot[0] == "none":   # no temp_storage: the helper's last argument is None
                values.append(context.get_dummy_value())
                argtypes.append(types.none)
            elif isinstance(slot[1], types.Record):
                # ("null", record): a record is a pointer to its bytes, so its all-zero value
                # is zeroed bytes of this function's (a null pointer would be read: UB, which
                # LLVM turns into a trap)
                zeros = cgutils.alloca_once(builder, context.get_data_type(slot[1]))
                builder.store(llvm.Constant(context.get_data_type(slot[1]), None), zeros)
                values.append(zeros)
                argtypes.append(slot[1])
            else:   # ("null", type): the type's all-zero value
                values.append(context.get_constant_null(slot[1]))
                argtypes.append(slot[1])
        result = plan.return_type(*argtypes)
        if not isinstance(result.return_type, types.Record):
            return context.compile_internal(builder, _helper(plan), result, values)
        # a record is a pointer to its bytes: the helper's own would die with its frame once
        # LLVM inlines it (and reuses the slot for the next call's), so it hands the bytes
        # back by value and they are kept in a slot of this function's entry block
        record = result.return_type
        by_value = types.UniTuple(types.uint8, record.size)
        value = context.compile_internal(builder, _helper(plan), by_value(*result.args), values)
        slot = cgutils.alloca_once(builder, context.get_data_type(record))
        builder.store(value, slot)
        return slot

    return sig, codegen
