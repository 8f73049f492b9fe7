"""One Style 2 call's numba types -> its provider (a Style 1 :class:`ProviderSpec`) and
how to call it (a :class:`~.operands.Plan`). Pure function of the types, memoised: the
typing of a call, the kernel's one-unit collection (:mod:`.kernel_unit`) and the
lowering all ask.

A call reaches here as ``_coop_call(options, group, a, b, c, d, e, f)``: ``options`` a
:class:`~.nbtypes.StaticType` holding :class:`~.operands.CallOptions` (the primitive and
its compile-time options), then the operands and runtime options in the stub's order,
``none`` where left out (see :mod:`.rewrite`). The record serving the call for the group
(a block's or a warp's) plans it; ``temp_storage``, always the last of a stub's, is
handled here for every primitive (:func:`_with_temp`).

Example::

    plan_call(options_type, BlockGroupType((128, 1, 1)), (ThreadDataType(float32, 4), none, none, none, none))
    # -> Plan(spec=ProviderSpec("reduce", f4, (128, 1, 1), 4, "warp_reductions", +), variant="items_out", ...)
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from numba import types

from cuprims.coop._records import CALLS, STATIC, logical_warp_lanes, serving
from cuprims.coop._style2.calls import STUBS
from cuprims.coop._style2.nbtypes import BlockGroupType, StaticType, ThreadDataType, WarpGroupType
from cuprims.coop._style2.operands import CallOptions, Plan, absent, fail
from cuprims.errors import ArgumentError

OPERAND_SLOTS = 6     # operands and runtime options of the widest stub (flag_heads_and_tails: items, two flag
                      # arrays, two neighbour items, storage)

assert set(STUBS) == set(CALLS), "a Style 2 call without a stub, or a stub without a record's call"
assert all(set(CALLS[name].roles) == set(list(stub.signature.parameters)[1:]) for name, stub in STUBS.items())


@functools.lru_cache(maxsize=None)
def _temp_index(primitive: str) -> int:
    """The operand index of ``temp_storage``: the stub's last operand or runtime option."""
    roles = CALLS[primitive].roles
    names = [p for p in list(STUBS[primitive].signature.parameters)[1:] if roles[p] != STATIC]
    assert names[-1] == "temp_storage" and len(names) <= OPERAND_SLOTS, names
    return len(names) - 1


def _with_temp(plan: Plan, temp: Any, index: int) -> Plan:
    """``plan`` with its last helper argument: the caller's temporary storage, if given."""
    if absent(temp):
        return dataclasses.replace(plan, slots=plan.slots + (("none",),))
    if (not isinstance(temp, types.Array) or isinstance(temp, ThreadDataType) or temp.ndim != 1
            or temp.dtype != types.uint8 or not temp.mutable):
        raise ArgumentError("temp_storage", "a writable 1-D uint8 shared array (cuda.shared.array(nbytes, "
                            "numba.uint8, alignment=align))", temp)
    return dataclasses.replace(plan, slots=plan.slots + (index,), temp=True)


@functools.lru_cache(maxsize=4096)
def plan_call(options: StaticType, group: Any, operands: tuple) -> Plan:
    """The :class:`~.operands.Plan` of a call typed ``(options, group, *operands)``
    (``OPERAND_SLOTS`` operands, ``none`` where left out)."""
    o: CallOptions = options.value
    if not isinstance(group, (BlockGroupType, WarpGroupType)):
        raise ArgumentError("group", f"coop.this_block() or coop.this_warp() (coop.{o.primitive}() at {o.where})",
                            group)
    index = _temp_index(o.primitive)
    rest = tuple(operands[:index]) + (types.none,) * (OPERAND_SLOTS - 1 - index)
    warp = isinstance(group, WarpGroupType)
    record = serving(o.primitive, warp)
    if record is None and not warp:
        raise fail(o, "takes coop.this_warp(): it is a warp's primitive")
    if record is None:
        raise fail(o, "takes coop.this_block(): CUB has no warp-wide version of it here yet")
    try:
        if warp:
            logical_warp_lanes(record.kind, group.threads, "threads")
        return _with_temp(CALLS[o.primitive].planner(record, o, group, *rest), operands[index], index)
    except ArgumentError as exc:
        raise type(exc)(exc.argument, f"{exc.expected} (coop.{o.primitive}() at {o.where})", exc.given) from None
