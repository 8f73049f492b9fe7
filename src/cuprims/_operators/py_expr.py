"""Small Python operators as C++, compiled into the generated unit without numba.

Most operators are one expression (``a + b``, ``max(a, b)``, ``v * 2 + 1``, ``v % 2 == 0``,
``x if c else y``). For those this module writes C++ computing what numba-cuda computes,
so that the operator costs no numba import, no numba compile and no operator LTO-IR;
anything else is numba's (the functions answer None). Two steps:

* :func:`parse_op` (no types; at ``op_spec`` time): the expression as a tree (a ``repr``'d
  tuple, ``OpSpec.expr``), read from the bytecode of straight-line code, else from the
  source. Either way it is compiled again as a function in a scope with the same free
  variables and used only if that gives the function's own bytecode, constants and names.
* :func:`emit` (types known; when a functor is generated): numba-cuda's typing of the tree,
  and C++ with explicit casts computing in exactly those types, then the conversion
  numba's wrapper (:func:`.numba_ops.compile_python_op`) makes to the stored result.

The subset and the typing rules (numba-cuda 0.30's, checked against numba itself by
tests/cpu/operators/test_py_expr.py) are in docs/design/architecture.md, "Small Python operators as C++".
"""

from __future__ import annotations

import ast
import dis
import functools
import inspect
import math
import operator
import types
from typing import Any, Sequence

import numpy as np

from cuprims._operators.captures import _first_line, _in_scope
from cuprims._value_types import SCALARS

# the types an expression translates for (bool, integers, float32/64) -> their C++ names
_CPP = {code: cpp for code, (cpp, _) in SCALARS.items() if code[0] in "biu" or code in ("f4", "f8")}
_BUILTINS = {"min": min, "max": max, "abs": abs}
_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv", ast.Mod: "mod"}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_FOLD = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
         "floordiv": operator.floordiv, "mod": operator.mod}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
           "eq": "==", "ne": "!=", "and": "&&", "or": "||"}
_BAD_FLAGS = (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS | inspect.CO_GENERATOR | inspect.CO_COROUTINE
              | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE)
_MAX_NODES, _MAX_TEXT = 64, 4096
# bytecode -> AST, for straight-line code (opcode names of Python 3.10 to 3.13; anything
# misread fails the recompilation check)
_BC_BINOPS = {"+": ast.Add, "-": ast.Sub, "*": ast.Mult, "/": ast.Div, "//": ast.FloorDiv, "%": ast.Mod,
              "BINARY_ADD": ast.Add, "BINARY_SUBTRACT": ast.Sub, "BINARY_MULTIPLY": ast.Mult,
              "BINARY_TRUE_DIVIDE": ast.Div, "BINARY_FLOOR_DIVIDE": ast.FloorDiv, "BINARY_MODULO": ast.Mod}
_BC_CMPOPS = {"<": ast.Lt, "<=": ast.LtE, ">": ast.Gt, ">=": ast.GtE, "==": ast.Eq, "!=": ast.NotEq}
_BC_SKIPPED = {"RESUME", "NOP", "COPY_FREE_VARS", "PUSH_NULL", "PRECALL", "CACHE", "TO_BOOL"}


class _No(Exception):
    """Outside the subset: the operator is numba's."""


def _need(cond: Any) -> None:
    if not cond:
        raise _No


# ------------------------------------------------------------------ function -> tree

def parse_op(fn: Any) -> str | None:
    """The tree of ``fn``'s expression as text (for ``OpSpec.expr``), or None."""
    try:
        _need(type(fn) is types.FunctionType)
        co = fn.__code__
        _need(not co.co_flags & _BAD_FLAGS and not co.co_kwonlyargcount and not co.co_cellvars
              and fn.__defaults__ is None and not fn.__kwdefaults__
              and not any(isinstance(c, types.CodeType) for c in co.co_consts))
        consts = {name: cell.cell_contents for name, cell in zip(co.co_freevars, fn.__closure__ or ())}
        _need(all(type(v) in (int, float, bool) for v in consts.values()))   # constants only
        builtins = fn.__builtins__ if isinstance(fn.__builtins__, dict) else vars(fn.__builtins__)
        _need(all(n in _BUILTINS and fn.__globals__.get(n, _BUILTINS[n]) is _BUILTINS[n]
                  and builtins.get(n) is _BUILTINS[n] for n in co.co_names))
        expr = _from_bytecode(fn)
        expr = _from_source(fn) if expr is None else expr
        _need(expr is not None)
        return repr(("fn", co.co_argcount, _Builder(co.co_varnames[:co.co_argcount], consts)(expr)[0]))
    except Exception:  # noqa: BLE001 - outside the subset, or anything unexpected: numba's
        return None


def _same_code(a: types.CodeType, b: types.CodeType) -> bool:
    def consts(co: types.CodeType) -> tuple:   # by type and repr: 1 == 1.0 == True, 0.0 == -0.0
        return tuple((type(c), repr(c)) for c in co.co_consts)

    return (a.co_code == b.co_code and consts(a) == consts(b) and a.co_names == b.co_names
            and a.co_varnames == b.co_varnames and a.co_freevars == b.co_freevars
            and (a.co_argcount, a.co_posonlyargcount) == (b.co_argcount, b.co_posonlyargcount))


def _from_bytecode(fn: types.FunctionType) -> ast.expr | None:
    """The expression of straight-line bytecode (no jumps), if it compiles back to ``fn``'s code."""
    co, stack = fn.__code__, []
    instructions = list(dis.get_instructions(co))
    for n, ins in enumerate(instructions):
        op = ins.opname
        if op in _BC_SKIPPED:
            continue
        if op in ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF", "LOAD_GLOBAL"):
            stack.append(ast.Name(id=ins.argval, ctx=ast.Load()))
        elif op == "LOAD_FAST_LOAD_FAST":
            stack += [ast.Name(id=name, ctx=ast.Load()) for name in ins.argval]
        elif op in ("LOAD_CONST", "LOAD_SMALL_INT"):
            stack.append(ast.Constant(ins.argval))
        elif op in _BC_BINOPS or (op == "BINARY_OP" and ins.argrepr in _BC_BINOPS):
            y, x = stack.pop(), stack.pop()
            stack.append(ast.BinOp(left=x, op=_BC_BINOPS[ins.argrepr if op == "BINARY_OP" else op](), right=y))
        elif op == "COMPARE_OP":
            y, x = stack.pop(), stack.pop()
            symbol = str(ins.argval).removeprefix("bool(").removesuffix(")")
            stack.append(ast.Compare(left=x, ops=[_BC_CMPOPS[symbol]()], comparators=[y]))
        elif op in ("UNARY_NEGATIVE", "UNARY_NOT"):
            stack.append(ast.UnaryOp(op=ast.USub() if op == "UNARY_NEGATIVE" else ast.Not(), operand=stack.pop()))
        elif op in ("CALL", "CALL_FUNCTION") and ins.arg:
            args = stack[-ins.arg:]
            del stack[-ins.arg:]
            stack.append(ast.Call(func=stack.pop(), args=args, keywords=[]))
        elif op in ("RETURN_VALUE", "RETURN_CONST") and n == len(instructions) - 1:
            stack += [ast.Constant(ins.argval)] if op == "RETURN_CONST" else []
            if len(stack) != 1:
                return None
            names = [ast.arg(arg=a, annotation=None) for a in co.co_varnames[:co.co_argcount]]
            arguments = ast.arguments(posonlyargs=names[:co.co_posonlyargcount], args=names[co.co_posonlyargcount:],
                                      vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
            body: list[ast.stmt] = [ast.Return(value=stack[0])]
            if fn.__doc__ is not None and co.co_consts[:1] == (fn.__doc__,):
                body.insert(0, ast.Expr(value=ast.Constant(fn.__doc__)))
            node = (ast.Lambda(args=arguments, body=stack[0]) if co.co_name == "<lambda>" else
                    ast.FunctionDef(name=co.co_name, args=arguments, body=body, decorator_list=[], returns=None,
                                    type_comment=None))
            return stack[0] if _same_code(_in_scope(node, co.co_freevars, co.co_filename), co) else None
        else:
            return None
    return None


_trees: dict[str, ast.AST] = {}   # source text -> parsed (a few files)


def _from_source(fn: types.FunctionType) -> ast.expr | None:
    """The expression of ``fn``'s lambda or ``def`` in its source file, if one on its first
    line compiles to its code."""
    co = fn.__code__
    try:
        text = "".join(inspect.findsource(fn)[0])
    except (OSError, TypeError):
        return None
    tree = _trees.get(text)
    if tree is None:
        if len(_trees) >= 8:
            _trees.clear()
        tree = _trees[text] = ast.parse(text)
    for node in ast.walk(tree):
        if co.co_name == "<lambda>" and isinstance(node, ast.Lambda):
            body = node.body
        elif isinstance(node, ast.FunctionDef) and node.name == co.co_name:
            stmts = node.body[1:] if (isinstance(node.body[0], ast.Expr)
                                      and isinstance(node.body[0].value, ast.Constant)) else node.body
            body = stmts[0].value if len(stmts) == 1 and isinstance(stmts[0], ast.Return) else None
        else:
            continue
        if body is not None and _first_line(node) == co.co_firstlineno \
                and _same_code(_in_scope(node, co.co_freevars, co.co_filename), co):
            return body
    return None


def _literal(value: Any) -> tuple:
    if type(value) is bool:
        return ("bool", value)
    if type(value) is int:
        _need(-2 ** 63 <= value < 2 ** 63)
        return ("int", value)
    _need(type(value) is float and math.isfinite(value))
    return ("float", value)


def _constant(tree: tuple) -> bool:
    return tree[0] in ("int", "float", "bool")


class _Builder:
    """AST -> tree. Folds what CPython folds (operators on literals, with Python's semantics),
    refuses constant conditions and comparisons (numba may prune or fold those its own way)."""

    def __init__(self, args: tuple[str, ...], consts: dict[str, Any]):
        self.args, self.consts, self.nodes = args, consts, 0

    def __call__(self, node: ast.AST) -> tuple[tuple, bool]:   # (tree, a literal CPython folds)
        self.nodes += 1
        _need(self.nodes <= _MAX_NODES)
        if isinstance(node, ast.Constant):
            return _literal(node.value), True
        if isinstance(node, ast.Name):
            if node.id in self.args:
                return ("arg", self.args.index(node.id)), False
            _need(node.id in self.consts)
            return _literal(self.consts[node.id]), False
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
            x, folds = self(node.operand)
            if isinstance(node.op, ast.Not):
                return ("not", x), False
            return (_literal(-x[1]), True) if folds and x[0] in ("int", "float") else (("neg", x), False)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            (x, xf), (y, yf), op = self(node.left), self(node.right), _BINOPS[type(node.op)]
            if xf and yf and x[0] in ("int", "float") and y[0] in ("int", "float"):
                try:
                    return _literal(_FOLD[op](x[1], y[1])), True
                except (ZeroDivisionError, OverflowError):
                    raise _No from None
            return (op, x, y), False
        if isinstance(node, ast.Compare) and all(type(o) in _CMPOPS for o in node.ops):
            items, tree = [self(node.left)[0]] + [self(c)[0] for c in node.comparators], None
            for o, x, y in zip(node.ops, items, items[1:]):   # a < b < c: (a < b) and (b < c)
                _need(not (_constant(x) and _constant(y)))
                tree = (_CMPOPS[type(o)], x, y) if tree is None else ("and", tree, (_CMPOPS[type(o)], x, y))
            return tree, False
        if isinstance(node, ast.BoolOp):
            values = [self(v)[0] for v in node.values]
            _need(not any(_constant(v) for v in values))
            return functools.reduce(lambda t, v: ("and" if isinstance(node.op, ast.And) else "or", t, v), values), False
        if isinstance(node, ast.IfExp):
            test = self(node.test)[0]
            _need(not _constant(test))
            return ("if", test, self(node.body)[0], self(node.orelse)[0]), False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _BUILTINS:
            name = node.func.id
            _need(name not in self.args and name not in self.consts and not node.keywords
                  and len(node.args) == (1 if name == "abs" else 2)
                  and not any(isinstance(a, ast.Starred) for a in node.args))
            values = [self(a)[0] for a in node.args]
            _need(not all(_constant(v) for v in values))
            return (name, *values), False
        raise _No


# ------------------------------------------------------------------ tree -> typed C++

def _float(x: str, y: str) -> str:
    """A float with a number: float32 if both are within what float32 takes safely."""
    return "f4" if {x, y} <= {"f4", "b1", "i1", "i2", "u1"} else "f8"


def _number(t: str) -> str:
    _need(t != "b1")
    return t


def _arith(x: str, y: str) -> str:
    """numba's result type of ``+ - * // %`` (int64 if either integer is signed, else uint64)."""
    if "f" in (_number(x)[0], _number(y)[0]):
        return _float(x, y)
    return "i8" if "i" in (x[0], y[0]) else "u8"


def _compare(x: str, y: str) -> str:
    """The type both sides of a comparison are converted to (the smaller holding both)."""
    if x == y:
        return x
    if "f" in (_number(x)[0], _number(y)[0]):
        return _float(x, y)
    if x[0] == y[0]:
        return max(x, y)
    s, u = (x, y) if x[0] == "i" else (y, x)
    width = max(int(s[1]), 2 * int(u[1]))
    return f"i{width}" if width <= 8 else "f8"


def _unify(x: str, y: str) -> str:
    """The type of ``x if c else y`` and of min/max: numpy's promotion."""
    if _number(x) == _number(y):
        return x
    dt = np.promote_types(np.dtype(x), np.dtype(y))
    return f"{dt.kind}{dt.itemsize}"


def _cast(text: str, src: str, dst: str) -> str:
    return text if src == dst else f"static_cast<{_CPP[dst]}>({text})"


def _int(v: int) -> str:
    return "(-9223372036854775807LL - 1)" if v == -2 ** 63 else f"({v}LL)" if v < 0 else f"{v}LL"


def _lambda(params: str, result: str, body: str, args: str) -> str:
    return f"[]({params}) -> {result} {{ {body} }}({args})"


class _Emitter:
    def __init__(self, codes: Sequence[str], names: Sequence[str]):
        self.codes, self.names = codes, names

    def __call__(self, t: tuple) -> tuple[str, str]:   # (C++ of numba's type, that type)
        kind = t[0]
        if kind == "arg":   # numba's wrapper reads a bool as "its byte is nonzero"
            code, name = self.codes[t[1]], self.names[t[1]]
            return (f"(*reinterpret_cast<const unsigned char*>(&{name}) != 0)" if code == "b1" else name), code
        if kind == "int":
            return _int(t[1]), "i8"
        if kind == "float":   # exact: a hexadecimal literal
            return f"({float.hex(t[1])})", "f8"
        if kind == "bool":
            return ("true" if t[1] else "false"), "b1"
        if kind in ("floordiv", "mod"):   # integers by a nonzero integer constant, in int64, floored
            _need(t[2][0] == "int" and t[2][1] != 0)
            (x, tx), d = self(t[1]), t[2][1]
            _need(tx[0] in "iu")
            x = _cast(x, tx, "i8")
            if d == -1:   # numba gives MIN // -1 == 0 (no overflow trap)
                return ("0LL" if kind == "mod" else _lambda(
                    "const long long v", "long long", "return v == (-9223372036854775807LL - 1) ? 0LL : -v;", x)), "i8"
            pick = "q - 1 : q" if kind == "floordiv" else f"r + {_int(d)} : r"
            return _lambda("const long long v", "long long", f"const long long q = v / {_int(d)}, r = v % {_int(d)}; "
                           f"return (r != 0 && (r < 0) != {str(d < 0).lower()}) ? {pick};", x), "i8"
        (x, tx), *rest = [self(c) for c in t[1:]]
        if kind == "neg":   # floats: numba's -0.0 - x; integers negate in their own width, then widen
            if tx[0] == "f":
                return f"({'-0.0f' if tx == 'f4' else '-0.0'} - {x})", tx
            _need(tx[0] == "i")
            if tx == "i8":
                return f"static_cast<long long>(0ull - static_cast<unsigned long long>({x}))", "i8"
            return f"static_cast<long long>(static_cast<{_CPP[tx]}>(0u - static_cast<unsigned int>({x})))", "i8"
        if kind == "not":
            _need(tx == "b1")
            return f"(!{x})", "b1"
        if kind == "abs":   # the same type; integers wrap (abs(MIN) == MIN)
            if tx[0] in "fu":
                return (f"{'fabsf' if tx == 'f4' else 'fabs'}({x})" if tx[0] == "f" else x), tx
            _need(tx[0] == "i")
            c, (u, zero) = _CPP[tx], ("unsigned long long", "0ull") if tx == "i8" else ("unsigned int", "0u")
            return _lambda(f"const {c} v", c, f"return v < 0 ? static_cast<{c}>({zero} - static_cast<{u}>(v)) : v;",
                           x), tx
        (y, ty) = rest[0]
        if kind in ("add", "sub", "mul", "div"):   # signed C++ arithmetic is numba's add/sub/mul nsw
            r = "f8" if kind == "div" and _number(tx)[0] in "iu" and _number(ty)[0] in "iu" else _arith(tx, ty)
            return f"({_cast(x, tx, r)} {_SYMBOL[kind]} {_cast(y, ty, r)})", r
        if kind in ("lt", "le", "gt", "ge", "eq", "ne"):
            c = _compare(tx, ty)
            _need(c != "b1" or kind in ("eq", "ne"))
            return f"({_cast(x, tx, c)} {_SYMBOL[kind]} {_cast(y, ty, c)})", "b1"
        if kind in ("and", "or"):
            _need(tx == ty == "b1")
            return f"({x} {_SYMBOL[kind]} {y})", "b1"
        if kind in ("min", "max"):
            r = _unify(tx, ty)
            if {tx, ty} <= {"f4", "f8"}:   # numba-cuda calls libdevice's fmaxf/fmax/fminf/fmin here
                return f"f{kind}{'f' if r == 'f4' else ''}({_cast(x, tx, r)}, {_cast(y, ty, r)})", r
            c = _CPP[r]   # else Python's: the second if it is greater (less), else the first
            return _lambda(f"const {c} a, const {c} b", c, f"return b {'>' if kind == 'max' else '<'} a ? b : a;",
                           f"{_cast(x, tx, r)}, {_cast(y, ty, r)}"), r
        _need(kind == "if" and tx == "b1")
        (z, tz) = rest[1]
        r = ty if ty == tz else _unify(ty, tz)
        return f"({x} ? {_cast(y, ty, r)} : {_cast(z, tz, r)})", r


@functools.lru_cache(maxsize=1024)
def _typed(expr: str, codes: tuple[str, ...], names: tuple[str, ...]) -> tuple[str, str] | None:
    try:
        tree = ast.literal_eval(expr)
        _need(tree[1] == len(codes) and all(c in _CPP for c in codes))
        return _Emitter(codes, names)(tree[2])
    except Exception:  # noqa: BLE001 - outside the subset for these types (or not a tree of ours)
        return None


def result_code(expr: str, arg_codes: Sequence[str]) -> str | None:
    """The type code (``"i8"``, ``"b1"``, ...) numba gives the operator's result, or None."""
    typed = _typed(expr, tuple(arg_codes), tuple(f"a{i}" for i in range(len(arg_codes))))
    return typed[1] if typed else None


def emit(expr: str, arg_codes: Sequence[str], names: Sequence[str], out_code: str | None) -> str | None:
    """C++ of the operator on ``names`` (values of the types ``arg_codes``), converted to
    ``out_code`` as numba's wrapper stores it (None or "b1": the result's truth, a bool);
    None where it is not translatable (a float result into an integer, among others)."""
    typed = _typed(expr, tuple(arg_codes), tuple(names))
    if typed is None or (out_code is not None and out_code not in _CPP):
        return None
    text, code = typed
    if out_code in (None, "b1"):
        text = text if code == "b1" else f"static_cast<bool>({text})"
    elif code[0] == "f" and out_code[0] != "f":
        return None   # numba's fptosi is undefined out of range: nothing to be identical to
    else:
        text = _cast(text, code, out_code)
    return text if len(text) <= _MAX_TEXT else None


__all__ = ["parse_op", "emit", "result_code"]
