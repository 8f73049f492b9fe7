"""The Style 2 front end: a before-inference rewrite of every function numba-cuda compiles.

For each call of a :class:`~.nbtypes.Stub` in the function's IR:

* ``coop.this_block()`` -> ``_block_group(x, y, z)`` with the launch's block shape
  (:func:`.groups.block_shape`); ``coop.this_warp()`` -> ``_warp_group(32)``;
* ``coop.load(block, src, items, algorithm=..., valid_items=n)`` and the other calls:
  bound against the stub's Python signature (so positional-only operands and
  keyword-only options follow Python's own rules and messages), compile-time options
  resolved to constants and packed in one :class:`~.operands.CallOptions`, then
  ``_coop_call(<options>, block, src, items, n, None)``: operands and runtime options
  in the stub's order, ``None`` where left out (:mod:`.lowering` types and lowers it);
* ``coop.ThreadData(n[, dtype=])`` -> a typed local array; without ``dtype`` the type
  comes from a witness such as the source of a load into it (:mod:`.thread_data`).

Definitions left unused (an operator global, the stub's load) are removed: numba types
every statement, and it cannot type a plain Python function.

Example (IR, simplified)::

    $f = getattr(coop, 'sum');  t = call $f(block, items, algorithm='raking')
    # becomes
    $o = global(<CallOptions sum algorithm='raking'>);  $c = global(_coop_call)
    t = call $c($o, block, items, None, None, None, None)
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from typing import Any

from numba.cuda.core import ir
from numba.cuda.core.rewrites import register_rewrite

from cuprims.coop._records import CALLS, STATIC
from cuprims.coop._style2 import ir as _ir
from cuprims.coop._style2.groups import WARP_THREADS, _block_group, _warp_group, block_shape
from cuprims.coop._style2.lowering import _coop_call
from cuprims.coop._style2.nbtypes import Static, Stub
from cuprims.coop._style2.operands import CallOptions
from cuprims.coop._style2.plans import OPERAND_SLOTS
from cuprims.coop._style2.thread_data import rewrite_creation
from cuprims.errors import CoopError


def _root(func_ir: Any, var: Any) -> str:
    """The variable a chain of plain copies (``items = $call``) starts from."""
    for _ in range(32):
        d = _ir.definition(func_ir, var, follow=False)
        if not isinstance(d, ir.Var):
            break
        var = d
    return var.name


class _FrontEnd:
    def __init__(self, state: Any, func_ir: Any):
        self.state, self.func_ir = state, func_ir
        self.consumed: list[Any] = []
        self.creations: list[tuple[Any, Any, int, Any]] = []
        self.witnesses: dict[str, list[tuple[int, int, Any]]] = defaultdict(list)

    def run(self) -> None:
        found = [(block, stmt, expr, obj) for block, stmt, expr in _ir.calls(self.func_ir)
                 if isinstance(obj := _ir.resolve(self.func_ir, expr.func), Stub)]
        if found:
            # Style 2 may have been registered during this very compilation (resolving
            # `coop.load` imports it): let the contexts pick up its intrinsics and types
            self.state.typingctx.refresh()
            self.state.targetctx.refresh()
        for order, (block, stmt, expr, stub) in enumerate(found):
            self.call(order, block, stmt, expr, stub)
        if self.creations:
            dom = _ir.Dominance(self.func_ir)
            for block, stmt, count, dtype in self.creations:
                ranked = sorted(self.witnesses.get(stmt.target.name, ()), key=lambda w: w[:2])
                rewrite_creation(self.func_ir, block, stmt, count, dtype, [w[2] for w in ranked], dom)
        for var in self.consumed:
            _ir.drop_if_unused(self.func_ir, var)

    def call(self, order: int, block: Any, stmt: Any, expr: Any, stub: Stub) -> None:
        name, where = stub.__name__, _ir.where(stmt.loc)
        if expr.vararg is not None or getattr(expr, "varkwarg", None) is not None:
            raise CoopError(f"coop.{name}() at {where}: pass its arguments by name or position (no * or **)")
        try:
            bound = stub.signature.bind(*expr.args, **dict(expr.kws))
        except TypeError as exc:
            raise CoopError(f"coop.{name}() at {where}: {exc}") from None
        self.consumed.append(expr.func)
        args = bound.arguments
        if name in ("this_block", "this_warp"):
            if name == "this_block":
                values, fn = block_shape(self.state, where), _block_group
            else:
                lanes = WARP_THREADS
                if "threads" in args:
                    lanes = self.constant(name, where, "threads", args["threads"])
                    self.consumed.append(args["threads"])
                values, fn = (lanes,), _warp_group
            consts = [_ir.const_var(self.func_ir, block, stmt, v) for v in values]
            fn_var = _ir.global_var(self.func_ir, block, stmt, fn, f"_{name}")
            _ir.replace_value(self.func_ir, stmt, ir.Expr.call(fn_var, consts, (), stmt.loc))
        elif name == "ThreadData":
            count = self.constant(name, where, "items_per_thread", args["items_per_thread"])
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise CoopError(f"coop.ThreadData() at {where}: items_per_thread must be a positive int, "
                                f"got {count!r}")
            dtype = _ir.MISSING
            if "dtype" in args:
                dtype = self.constant(name, where, "dtype", args["dtype"])
                self.consumed.append(args["dtype"])
            self.creations.append((block, stmt, count, dtype))
        else:
            self.primitive(order, block, stmt, name, where, stub, args)

    def constant(self, name: str, where: str, param: str, var: Any) -> Any:
        value = _ir.constant(self.func_ir, var)
        if value is _ir.MISSING:
            raise CoopError(f"coop.{name}() at {where}: {param}= must be known when the kernel compiles (a "
                            "literal, a global or a closure variable), not a value the kernel computes")
        return value

    def primitive(self, order: int, block: Any, stmt: Any, name: str, where: str, stub: Stub,
                  args: dict[str, Any]) -> None:
        call = CALLS[name]
        statics: dict[str, Any] = {}
        slots: list[Any] = []
        for param in list(stub.signature.parameters.values())[1:]:
            given = param.name in args
            if call.roles[param.name] == STATIC:
                if given:
                    statics[param.name] = self.constant(name, where, param.name, args[param.name])
                    self.consumed.append(args[param.name])
                else:
                    assert param.default is not inspect.Parameter.empty   # bind() asked for it
                    statics[param.name] = param.default
            else:
                slots.append(args[param.name] if given else None)
        slots += [None] * (OPERAND_SLOTS - len(slots))
        for thread_data, source in call.witnesses:
            if thread_data in args and source in args:
                self.witnesses[_root(self.func_ir, args[thread_data])].append((call.rank, order, args[source]))
        options = CallOptions(name, statics, where)
        f = self.func_ir
        operands = [v if v is not None else _ir.const_var(f, block, stmt, None) for v in slots]
        opts = _ir.global_var(f, block, stmt, Static(options.key(), options), f"coop_{name}_options")
        fn = _ir.global_var(f, block, stmt, _coop_call, "_coop_call")
        _ir.replace_value(f, stmt, ir.Expr.call(fn, [opts, args["group"]] + operands, (), stmt.loc))


@register_rewrite("before-inference")
class SinglePhaseCalls(_ir.WholeFunction):
    """Runs :class:`_FrontEnd` once over the whole function (all blocks at once: a
    ``ThreadData``'s creation and the load that types it may be in different blocks)."""

    def once(self, state: Any, func_ir: Any) -> None:
        _FrontEnd(state, func_ir).run()
