"""``_coop_call``: the typed intrinsic every Style 2 call becomes, and its lowering.

Typing asks :func:`.plans.plan_call` for the call's provider and result type. Lowering
(once per call site, in the function being compiled, so nothing here is cached per
kernel by numba):

1. takes the NVRTC unit that holds the provider: the one :mod:`.kernel_unit` built for
   all of this function's calls, else one of its own;
2. adds the unit's LTO-IR to the function's code library (numba-cuda's
   ``add_linking_file``; the files of a device function's library reach its callers'),
   so the user's ``@cuda.jit`` needs no ``link=``. Equal units hand out the same
   ``LTOIR`` objects, which numba keeps in a set: each is linked once (a Python
   operator's, whose symbol is strong, once even from two units);
3. emits a call of the plan's device helper (:mod:`.helpers`: it checks counts, puts
   scalars in local arrays and calls the provider's ``extern "C"`` entry point).

Example (what ``total = coop.sum(block, items)`` lowers to, in effect)::

    out = local array of 1 element
    cuprims_coop_reduce_<digest>(&items[0], &out[0])
    total = out[0]
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir as llvm
from numba import types
from numba.cuda import cgutils
from numba.cuda.extending import intrinsic

from cuprims.coop._style2.helpers import helper
from cuprims.coop._style2.nbtypes import StaticType
from cuprims.coop._style2.operands import CallOptions
from cuprims.coop._style2.plans import plan_call


def _slot_value(context: Any, builder: Any, slot: Any, sig: Any, args: Any) -> tuple[Any, Any]:
    """(value, numba type) of one helper argument: an operand, or what stands for an option left out."""
    if isinstance(slot, int):
        return args[2 + slot], sig.args[2 + slot]
    if slot[0] == "const":
        return context.get_constant(slot[1], slot[2]), slot[1]
    if slot[0] == "none":   # no temp_storage: the helper's last argument is None
        return context.get_dummy_value(), types.none
    if isinstance(slot[1], types.Record):
        # ("null", record): a record is a pointer to its bytes, so its all-zero value
        # is zeroed bytes of this function's (a null pointer would be read: UB, which
        # LLVM turns into a trap)
        zeros = cgutils.alloca_once(builder, context.get_data_type(slot[1]))
        builder.store(llvm.Constant(context.get_data_type(slot[1]), None), zeros)
        return zeros, slot[1]
    return context.get_constant_null(slot[1]), slot[1]   # ("null", type): the type's all-zero value


@intrinsic
def _coop_call(typingctx: Any, options: Any, group: Any, a: Any, b: Any, c: Any, d: Any, e: Any, f: Any) -> Any:
    if not (isinstance(options, StaticType) and isinstance(options.value, CallOptions)):
        return None
    plan = plan_call(options, group, (a, b, c, d, e, f))      # checks the group too
    sig = plan.return_type(options, group, a, b, c, d, e, f)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        from cuprims.coop._style2.kernel_unit import unit_for

        library = context.active_code_library
        for f in unit_for(plan):
            library.add_linking_file(f)
        values, argtypes = zip(*(_slot_value(context, builder, slot, sig, args) for slot in plan.slots))
        result = plan.return_type(*argtypes)
        if not isinstance(result.return_type, types.Record):
            return context.compile_internal(builder, helper(plan), result, list(values))
        # a record is a pointer to its bytes: the helper's own would die with its frame once
        # LLVM inlines it (and reuses the slot for the next call's), so it hands the bytes
        # back by value and they are kept in a slot of this function's entry block
        record = result.return_type
        by_value = types.UniTuple(types.uint8, record.size)
        value = context.compile_internal(builder, helper(plan), by_value(*result.args), list(values))
        slot = cgutils.alloca_once(builder, context.get_data_type(record))
        builder.store(value, slot)
        return slot

    return sig, codegen
