"""Small edits of numba-cuda's untyped IR, for the Style 2 front-end rewrite.

The rewrite runs before type inference and before SSA, so a variable may have several
definitions; everything here gives up (returns ``MISSING``/None) rather than guess
when a value is not defined exactly once. New statements keep ``func_ir._definitions``
up to date, which later passes (inlining, constant inference) read.
:class:`WholeFunction` is the shape of Style 2's two rewrites: once over all blocks.
"""

from __future__ import annotations

import types as pytypes
from typing import Any, Iterator

from numba.cuda.core import ir
from numba.cuda.core.analysis import compute_cfg_from_blocks
from numba.cuda.core.rewrites import Rewrite

MISSING = object()


def calls(func_ir: Any) -> Iterator[tuple[Any, Any, Any]]:
    """(block, statement, call expression) of every ``x = f(...)`` in label order
    (labels follow the bytecode, hence the source order)."""
    for label in sorted(func_ir.blocks):
        block = func_ir.blocks[label]
        for stmt in list(block.body):
            if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Expr) and stmt.value.op == "call":
                yield block, stmt, stmt.value


def definition(func_ir: Any, var: Any, follow: bool = True) -> Any:
    """The value assigned to ``var`` by its only assignment in the IR (following plain
    copies unless ``follow`` is false), else ``MISSING``. Where ``func_ir._definitions``
    lists several, the blocks are read: dead-branch pruning leaves stale entries there."""
    for _ in range(64):
        known = func_ir._definitions.get(var.name, ())
        if len(known) == 1:     # the common case, without a scan (this runs for every call numba compiles)
            value = known[0]
        else:
            found = defining_statement(func_ir, var.name)
            if found is None:
                return MISSING
            value = found[1].value
        if not (follow and isinstance(value, ir.Var)):
            return value
        var = value
    return MISSING


def resolve(func_ir: Any, var: Any) -> Any:
    """The Python object ``var`` holds when it is a global, a closure variable or an
    attribute of a module (``coop.load``); else ``MISSING``."""
    d = definition(func_ir, var)
    if isinstance(d, (ir.Global, ir.FreeVar)):
        return d.value
    if isinstance(d, ir.Expr) and d.op == "getattr":
        base = resolve(func_ir, d.value)
        if isinstance(base, pytypes.ModuleType):
            return getattr(base, d.attr, MISSING)
    return MISSING


def constant(func_ir: Any, var: Any) -> Any:
    """``var``'s value when numba can infer it as a constant, else ``MISSING``. A lambda
    written in the call (``binary_op=lambda a, b: a + b``) counts when it captures no
    variable of the kernel: it is rebuilt as a plain Python function."""
    d = definition(func_ir, var)
    if isinstance(d, ir.Expr) and d.op == "make_function":
        if d.closure is not None or d.defaults is not None:
            return MISSING
        return pytypes.FunctionType(d.code, func_ir.func_id.func.__globals__, d.code.co_name)
    if isinstance(d, (ir.Const, ir.Global, ir.FreeVar)):
        return d.value
    try:
        return func_ir.infer_constant(var)
    except Exception:
        return MISSING


def where(loc: Any) -> str:
    return f"{loc.filename}:{loc.line}"


def insert_before(func_ir: Any, block: Any, stmt: Any, value: Any, name: str) -> Any:
    """A new variable assigned ``value`` just before ``stmt``; returns the variable."""
    var = block.scope.redefine(name, stmt.loc)
    block.body.insert(block.body.index(stmt), ir.Assign(value, var, stmt.loc))
    func_ir._definitions[var.name] = [value]
    return var


def const_var(func_ir: Any, block: Any, stmt: Any, value: Any) -> Any:
    return insert_before(func_ir, block, stmt, ir.Const(value, stmt.loc), "$coop_const")


def global_var(func_ir: Any, block: Any, stmt: Any, value: Any, name: str) -> Any:
    return insert_before(func_ir, block, stmt, ir.Global(name, value, stmt.loc), "$coop_global")


def replace_value(func_ir: Any, stmt: Any, value: Any) -> None:
    old = stmt.value
    defs = func_ir._definitions[stmt.target.name]
    func_ir._definitions[stmt.target.name] = [value if d is old else d for d in defs]
    stmt.value = value


def defining_statement(func_ir: Any, name: str) -> tuple[Any, Any, int] | None:
    """(label, statement, index) of ``name``'s only assignment, else None."""
    found = None
    for label, block in func_ir.blocks.items():
        for i, stmt in enumerate(block.body):
            if isinstance(stmt, ir.Assign) and stmt.target.name == name:
                if found is not None:
                    return None
                found = (label, stmt, i)
    return found


class Dominance:
    """Whether one statement runs before another on every path (block dominators)."""

    def __init__(self, func_ir: Any):
        self.func_ir = func_ir
        self.doms = compute_cfg_from_blocks(func_ir.blocks).dominators()

    def position(self, stmt: Any) -> tuple[Any, int]:
        for label, block in self.func_ir.blocks.items():
            for i, s in enumerate(block.body):
                if s is stmt:
                    return label, i
        raise KeyError(stmt)

    def before(self, first: tuple[Any, int], second: tuple[Any, int]) -> bool:
        (l1, i1), (l2, i2) = first, second
        return i1 < i2 if l1 == l2 else l1 in self.doms[l2]


def drop_if_unused(func_ir: Any, var: Any) -> None:
    """Remove ``var``'s definition when nothing uses it any more, then its inputs' (a
    consumed option such as ``binary_op=my_function`` would otherwise still be typed, and
    numba cannot type a plain Python function)."""
    pending = [var.name]
    while pending:
        name = pending.pop()
        if any(v.name == name for block in func_ir.blocks.values() for stmt in block.body
               if not isinstance(stmt, ir.Del) and not (isinstance(stmt, ir.Assign) and stmt.target.name == name)
               for v in stmt.list_vars()):
            continue
        found = defining_statement(func_ir, name)
        if found is None:
            continue
        label, stmt, _ = found
        value = stmt.value
        if isinstance(value, (ir.Global, ir.FreeVar, ir.Const)):
            inputs = []
        elif isinstance(value, ir.Var):
            inputs = [value.name]
        elif isinstance(value, ir.Expr) and value.op == "getattr":
            inputs = [value.value.name]
        elif isinstance(value, ir.Expr) and value.op == "make_function" and value.closure is None:
            inputs = []
        else:
            continue   # may have side effects: keep
        body = func_ir.blocks[label].body
        body[:] = [s for s in body if s is not stmt and not (isinstance(s, ir.Del) and s.value == name)]
        func_ir._definitions.pop(name, None)
        pending += inputs


class WholeFunction(Rewrite):
    """A rewrite that runs :meth:`once` over the whole function, at its first ``match``
    (numba calls ``match`` per block; these rewrites need all blocks at once) and never
    asks numba to ``apply`` anything."""

    def __init__(self, state: Any):
        super().__init__(state)
        self._state, self._done = state, False

    def match(self, func_ir: Any, block: Any, typemap: Any, calltypes: Any) -> bool:
        if not self._done:
            self._done = True
            self.once(self._state, func_ir)
        return False

    def once(self, state: Any, func_ir: Any) -> None:
        raise NotImplementedError
