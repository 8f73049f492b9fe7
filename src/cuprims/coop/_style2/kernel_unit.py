"""All of a function's Style 2 providers in one NVRTC unit.

An after-inference rewrite runs once per compiled function (kernel or device function),
when every call in it is typed and before any is lowered. It collects the provider of
each ``_coop_call`` (from the calls' signatures: :func:`.plans.plan_call`) and builds
them with one ``build_unit(specs, arch)`` call (cached in memory and on disk as Style 1's
units are; the key is the unit's whole source, so the same set of calls compiles once).
``arch`` is the compute capability numba compiles the function for.

The lowering of each call then takes the link inputs of "the unit that holds its
provider" from :data:`_units`, filled by the rewrite that just ran for the function being lowered:
numba compiles a callee (device function, helper) entirely while typing its caller, so
between a function's rewrite and its lowering no other function's rewrite adds a unit
holding the same provider. Should that ever not hold, a call links another unit that
also defines its provider (inline definitions, merged: still correct, only larger). A call that finds
none (rewrites disabled) builds a unit of its own.

So a kernel with N calls compiles one unit; a device function with calls has its own
(its library's link inputs reach the kernel's). Example::

    @cuda.jit
    def kernel(x, y):
        block = coop.this_block()
        items = coop.ThreadData(4)
        coop.load(block, x, items)          # \\
        coop.inclusive_sum(block, items)    #  } one NVRTC unit holding three providers
        coop.store(block, y, items)         # /
"""

from __future__ import annotations

from typing import Any

from numba.cuda.core import ir
from numba.cuda.core.rewrites import register_rewrite

from cuprims.coop._build import UnitBuild, build_unit, raw_link_files
from cuprims.coop._numba import link_files
from cuprims.coop._spec import ProviderSpec
from cuprims.coop._style2.ir import WholeFunction
from cuprims.coop._style2.nbtypes import StaticType
from cuprims.coop._style2.operands import CallOptions, Plan
from cuprims.coop._style2.plans import OPERAND_SLOTS, plan_call
from cuprims.coop._target import current_arch

_units: dict[ProviderSpec, list] = {}          # spec -> link inputs of the latest unit holding it
_layouts: dict[ProviderSpec, tuple[int, int]] = {}   # spec -> its TempStorage's (bytes, alignment)
_operators: dict[tuple[str, int], Any] = {}    # (operator symbol, arch) -> its first LTOIR object
_MAX_UNITS = 4096


def _arch(state: Any) -> int:
    cc = getattr(state.flags, "compute_capability", None)
    return cc[0] * 10 + cc[1] if cc else current_arch()


def function_plans(state: Any) -> list[Plan]:
    """The plans of every Style 2 call in the typed function ``state`` compiles."""
    plans = []
    for block in state.func_ir.blocks.values():
        for stmt in block.body:
            if not (isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Expr) and stmt.value.op == "call"):
                continue
            sig = state.calltypes.get(stmt.value)
            if (sig is not None and len(sig.args) == 2 + OPERAND_SLOTS and isinstance(sig.args[0], StaticType)
                    and isinstance(sig.args[0].value, CallOptions)):
                plans.append(plan_call(sig.args[0], sig.args[1], tuple(sig.args[2:])))
    return plans


def _link_inputs(specs: list[ProviderSpec], unit: UnitBuild) -> list:
    """``numba.cuda.LTOIR`` objects of ``unit``. A Python operator's LTO-IR defines its
    symbol strongly, and one provider may be in two units linked into one kernel (the
    kernel's and a device function's): each operator symbol (per arch) is therefore
    always linked from the first object made for it, which numba's set of link inputs
    then holds once. The providers' own definitions are inline, merged by the linker."""
    files = link_files("cuprims_coop_unit", (unit.ltoir,))
    symbols = [symbol for sp in specs for symbol, _ in sp.python_ops]
    if len(symbols) != len(unit.op_ltoirs):   # not one LTO-IR per operator: keep them together
        return files + link_files("cuprims_coop_ops", unit.op_ltoirs)
    for symbol, code in zip(symbols, unit.op_ltoirs):
        if (symbol, unit.arch) not in _operators:
            _operators[(symbol, unit.arch)] = link_files(symbol, (code,))[0]
        files.append(_operators[(symbol, unit.arch)])
    return files


def _build(plans: list[Plan], arch: int) -> list:
    specs = list(dict.fromkeys(p.spec for p in plans))
    objs = {}
    for p in plans:
        if p.op is not None:
            objs[p.spec.op_symbol] = p.op        # a Python operator, or a RawOp
        if p.prefix_op is not None:
            objs[p.spec.prefix_symbol] = p.prefix_op
    unit = build_unit(specs, arch, objs)
    files = _link_inputs(specs, unit) + raw_link_files(specs, objs)
    if len(_units) > _MAX_UNITS:
        _units.clear()
        _operators.clear()
        _layouts.clear()
    for spec in specs:
        _units[spec] = files
        _layouts[spec] = unit.temp[spec.symbol]
    return files


def unit_for(plan: Plan) -> list:
    """The link inputs for ``plan``'s call: its function's unit (see the module)."""
    files = _units.get(plan.spec)
    return files if files is not None else _build([plan], current_arch())


def layout_for(plan: Plan) -> tuple[int, int]:
    """(bytes, alignment) of ``plan``'s provider's TempStorage (what ``temp_storage=`` needs)."""
    if plan.spec not in _layouts:
        unit_for(plan)
    return _layouts[plan.spec]


@register_rewrite("after-inference")
class OneUnitPerFunction(WholeFunction):
    """Builds the function's providers in one unit; changes no IR."""

    def once(self, state: Any, func_ir: Any) -> None:
        plans = function_plans(state)
        if plans:
            _build(plans, _arch(state))
