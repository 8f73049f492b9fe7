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
the array, a non-contiguous array (1-D arrays not known to be contiguous are checked).

Example (what ``total = coop.sum(block, items)`` lowers to, in effect)::

    out = local array of 1 element
    cuprims_coop_reduce_<digest>(&items[0], &out[0])
    total = out[0]
"""

from __future__ import annotations

from typing import Any, Callable

from numba import types
from numba.cuda.extending import intrinsic

from ._codegen import entry_points
from ._nbtypes import Static, StaticType
from ._numba import _addr, declare, state_pointer
from ._plans import CallOptions, Plan, plan_call
from ._spec import ProviderSpec
from ._thread_data import _local_array, _trap

# parameter kinds of each entry point (the provider ABI of _codegen.py)
_PARAMS = {
    ("load", ""): ("ptr", "ptr"), ("load", "_valid"): ("ptr", "ptr", "int", "ptr"),
    ("store", ""): ("ptr", "ptr"), ("store", "_valid"): ("ptr", "ptr", "int"),
    ("reduce", ""): ("ptr", "ptr"), ("reduce", "_valid"): ("ptr", "ptr", "int"),
    ("warp_reduce", ""): ("ptr", "ptr"), ("warp_reduce", "_valid"): ("ptr", "ptr", "int"),
    ("scan", ""): ("ptr", "ptr"), ("warp_scan", ""): ("ptr", "ptr"), ("exchange", ""): ("ptr", "ptr"),
    ("radix_sort", ""): ("ptr", "int", "int"),
    ("merge_sort", ""): ("ptr",), ("merge_sort", "_valid"): ("ptr", "int", "ptr"),
    ("warp_merge_sort", ""): ("ptr",), ("warp_merge_sort", "_valid"): ("ptr", "int", "ptr"),
}
_PREFIX_PARAMS = ("ptr", "ptr", "state", "i64")   # a scan with a block prefix callback
_declared: dict[tuple[str, tuple[str, ...]], Any] = {}
_helpers: dict[tuple[ProviderSpec, str, int, bool], Callable] = {}


def _entry(spec: ProviderSpec, suffix: str) -> Any:
    symbol = spec.symbol + suffix
    if symbol not in entry_points(spec):
        raise AssertionError(f"{symbol} is not an entry point of {spec.key}")
    params = _PREFIX_PARAMS if spec.prefix is not None else _PARAMS[(spec.kind, suffix)]
    if (symbol, params) not in _declared:
        _declared[(symbol, params)] = declare(symbol, params, spec.vt)
    return _declared[(symbol, params)]


def _helper(plan: Plan) -> Callable:
    """The device helper of ``plan``'s variant (plain Python; numba compiles it)."""
    key = (plan.spec, plan.variant, plan.limit, plan.check_stride)
    if key in _helpers:
        return _helpers[key]
    spec, limit, check_stride = plan.spec, plan.limit, plan.check_stride
    addr, trap, local, i32, i64, state_addr = _addr(), _trap, _local_array, types.int32, types.int64, state_pointer()
    vts = Static(("dtype", spec.vt.code), spec.vt)
    run = _entry(spec, "")
    run_valid = _entry(spec, "_valid") if plan.variant.endswith("_valid") else None

    def load(src, items):
        if src.shape[0] < limit or (check_stride and src.strides[0] != src.itemsize):
            trap()
        run(addr(src), addr(items))

    def load_valid(src, items, valid, oob_default):
        if (valid < 0 or valid > limit or valid > src.shape[0]
                or (check_stride and src.strides[0] != src.itemsize)):
            trap()
        oob = local(1, vts)
        oob[0] = oob_default
        run_valid(addr(src), addr(items), i32(valid), addr(oob))

    def store(dst, items):
        if dst.shape[0] < limit or (check_stride and dst.strides[0] != dst.itemsize):
            trap()
        run(addr(dst), addr(items))

    def store_valid(dst, items, valid):
        if (valid < 0 or valid > limit or valid > dst.shape[0]
                or (check_stride and dst.strides[0] != dst.itemsize)):
            trap()
        run_valid(addr(dst), addr(items), i32(valid))

    def value_out(value):
        inp = local(1, vts)
        inp[0] = value
        out = local(1, vts)
        run(addr(inp), addr(out))
        return out[0]

    def value_out_valid(value, valid):
        if valid < 0 or valid > limit:
            trap()
        inp = local(1, vts)
        inp[0] = value
        out = local(1, vts)
        run_valid(addr(inp), addr(out), i32(valid))
        return out[0]

    def items_out(items):
        out = local(1, vts)
        run(addr(items), addr(out))
        return out[0]

    def in_place(items):
        run(addr(items), addr(items))

    def into(items, out):
        run(addr(items), addr(out))

    def value_out_prefix(value, state):
        inp = local(1, vts)
        inp[0] = value
        out = local(1, vts)
        run(addr(inp), addr(out), state_addr(state), i64(state.size))
        return out[0]

    def in_place_prefix(items, state):
        run(addr(items), addr(items), state_addr(state), i64(state.size))

    def into_prefix(items, out, state):
        run(addr(items), addr(out), state_addr(state), i64(state.size))

    def radix(keys, begin_bit, end_bit):
        run(addr(keys), i32(begin_bit), i32(end_bit))

    def sort(keys):
        run(addr(keys))

    def sort_valid(keys, valid, oob_default):
        if valid < 0 or valid > limit:
            trap()
        oob = local(1, vts)
        oob[0] = oob_default
        run_valid(addr(keys), i32(valid), addr(oob))

    variants = dict(load=load, load_valid=load_valid, store=store, store_valid=store_valid, value_out=value_out,
                    value_out_valid=value_out_valid, items_out=items_out, in_place=in_place, into=into,
                    value_out_prefix=value_out_prefix, in_place_prefix=in_place_prefix, into_prefix=into_prefix,
                    radix=radix, sort=sort, sort_valid=sort_valid)
    fn = _helpers[key] = variants[plan.variant]
    return fn


@intrinsic
def _coop_call(typingctx: Any, options: Any, group: Any, a: Any, b: Any, c: Any, d: Any) -> Any:
    if not (isinstance(options, StaticType) and isinstance(options.value, CallOptions)):
        return None
    plan = plan_call(options, group, (a, b, c, d))      # checks the group too
    sig = plan.return_type(options, group, a, b, c, d)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        from ._kernel_unit import unit_for

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
            else:   # ("null", type): the type's all-zero value
                values.append(context.get_constant_null(slot[1]))
                argtypes.append(slot[1])
        return context.compile_internal(builder, _helper(plan), plan.return_type(*argtypes), values)

    return sig, codegen
