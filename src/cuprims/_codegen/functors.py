"""Operator functors in C++: every generated unit gets its operator functor from here.

A functor wraps the operator for its role (combiner, comparator, equality, predicate,
element-wise transform): a built-in is its C++ expression (:mod:`.builtin_ops`, which
knows what each :class:`OpKind` means and which a role accepts); a Python or raw operator
is called through the pointer ABI (``extern "C"``, every value passed by address). Pure
strings: no CUDA, no numba. A Python operator that is a small expression (``OpSpec.expr``)
and translates for the functor's types is inlined as C++ instead of called
(:func:`direct_expr`, :mod:`.py_expr`); the build then links nothing for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cuprims._codegen.accumulators import Accumulator
from cuprims._codegen.builtin_ops import (ARITHMETIC_KINDS, BITWISE_KINDS, LOGICAL_KINDS, binary_expr,
                                          check_binary_builtin, check_comparator_builtin, check_equality_builtin,
                                          common_type, comparator_expr, unary_expr)
from cuprims._value_types import ValueType
from cuprims.errors import ArgumentError
from cuprims.op import OpKind, OpSpec, check_result


def _functor(name: str, result: str, params: str, body: list[str], decl: str = "", state: str = "") -> str:
    """``struct name { [state] __device__ result operator()(params) const { body } };``,
    after ``decl`` (an extern declaration) if given."""
    lines = "\n    ".join(body)
    return (f"{decl + chr(10) if decl else ''}struct {name}\n{{\n{state}"
            f"  __device__ __forceinline__ {result} operator()({params}) const\n  {{\n    {lines}\n  }}\n}};\n")


def extern_op_call(op: OpSpec, symbol: str, addresses: list[str], *, called: bool = False) -> tuple[str, str, str]:
    """The pieces a functor needs to call a linked operator through our pointer ABI:
    its ``extern "C"`` declaration, the functor's state member (empty without state), and
    the call statement passing the state's address (if any), then ``addresses``.

    ``called``: the call goes through a ``__noinline__`` function declared after the
    operator, so that the operator's code is compiled once instead of at every call
    site (see :mod:`.accumulators`)."""
    if op.state_size:
        pointers = ["const_cast<void*>(static_cast<const void*>(&state))"] + addresses
        state = f"  struct __align__({op.state_alignment}) {{ unsigned char bytes[{op.state_size}]; }} state;\n"
    else:
        pointers, state = addresses, ""
    decl = f'extern "C" __device__ void {symbol}({", ".join(["void*"] * len(pointers))});'
    callee = symbol
    if called:
        callee = f"{symbol}_called"
        params = ", ".join(f"void* p{i}" for i in range(len(pointers)))
        args = ", ".join(f"p{i}" for i in range(len(pointers)))
        decl += f"\nstatic __noinline__ __device__ void {callee}({params}) {{ {symbol}({args}); }}"
    return decl, state, f"{callee}({', '.join(pointers)});"


def _linked_functor(name: str, op: OpSpec, symbol: str, result: str, params: list[tuple[str, str, str]],
                    out_decl: str, out_name: str, returns: str, *, called: bool = False) -> tuple[str, tuple[str, ...]]:
    """A functor calling linked operator ``symbol``: each parameter (type, name, local) is
    copied to a local whose address is passed, then the address of ``out_name`` (declared
    by ``out_decl``); the functor returns ``returns``. ``called``: see :func:`extern_op_call`."""
    decl, state, call = extern_op_call(op, symbol, [f"&{local}" for _, _, local in params] + [f"&{out_name}"],
                                       called=called)
    body = [f"{t} {local} = {p};" for t, p, local in params] + [out_decl, call, f"return {returns};"]
    signature = ", ".join(f"const {t}& {p}" for t, p, _ in params)
    return _functor(name, result, signature, body, decl, state), (symbol,)


def direct_expr(op: OpSpec, inputs: tuple[ValueType, ...], result: ValueType | None,
                names: tuple[str, ...] = ("a", "b")) -> str | None:
    """C++ computing Python operator ``op`` on ``names`` (values of ``inputs``), converted to
    ``result`` (None: a truth value), where the operator is a small expression that
    translates for these types (:mod:`.py_expr`); else None (it is compiled by numba and
    linked). What a functor inlines here, the build links nothing for
    (:func:`is_direct`): both ask this one function.

    A result the translation types as one ``result`` refuses (a float for an integer
    accumulator, :func:`cuprims.op.result_refusal`) raises OperatorResultError here, before
    any compiler runs, as numba's typing of the same operator would after compiling it."""
    if op.kind != "python" or op.expr is None:
        return None
    from cuprims._operators.py_expr import emit, result_code

    codes = tuple(vt.code for vt in inputs)
    typed = result_code(op.expr, codes)
    if typed is not None:
        check_result(inputs, result, np.dtype(typed), str(np.dtype(typed)), op_name=op.name, argument=op.argument,
                     context=op.context)
    return emit(op.expr, codes, names[:len(inputs)], result.code if result else None)


def is_direct(op: Any) -> bool:
    """Whether linked operator ``op`` (an :class:`~cuprims._build.results.OpInput`) is
    computed in the generated unit instead (nothing to compile or link for it). One called
    for its side effects only is always linked."""
    if getattr(op, "ignores_result", False):
        return False
    return direct_expr(op.spec, op.arg_types, op.result_type) is not None


def binary_functor(name: str, op: OpSpec, vt: ValueType, symbol: str,
                   accum: Accumulator | None = None) -> tuple[str, tuple[str, ...]]:
    """Combiner functor ``name`` computing ``T op(T, T)``; returns (text, extern symbols).
    ``accum`` (:func:`.accumulators.accumulator` of ``vt``): the type the collectives hold
    ``vt`` values in, which the functor then takes and returns (a linked operator reads
    and writes its bytes, the struct's own layout), and whether the operator is called."""
    if accum is not None and accum.called:   # a large struct (built-in operators take no structs)
        t = accum.cpp
        return _linked_functor(name, op, symbol, t, [(t, "a", "lhs"), (t, "b", "rhs")], f"{t} result;", "result",
                               "result", called=accum.called)
    t = vt.cpp
    if op.kind == "builtin":
        body = [f"return static_cast<{t}>({binary_expr(op.builtin, 'a', 'b')});"]
        return _functor(name, t, f"const {t}& a, const {t}& b", body), ()
    direct = direct_expr(op, (vt, vt), vt)
    if direct is not None:
        return _functor(name, t, f"const {t}& a, const {t}& b", [f"return {direct};"]), ()
    return _linked_functor(name, op, symbol, t, [(t, "a", "lhs"), (t, "b", "rhs")], f"{t} result;", "result",
                           "result")


def comparator_functor(name: str, op: OpSpec, key: ValueType, symbol: str, *,
                       zero_flag: bool = True) -> tuple[str, tuple[str, ...]]:
    """Comparator functor ``name``: ``bool operator()(const K& a, const K& b)``, true when
    ``a`` goes before ``b``; returns (text, extern symbols). A linked operator writes one
    flag byte (nonzero = true), which starts as 0 unless ``zero_flag`` is False."""
    t = key.cpp
    if op.kind == "builtin":
        body = [f"return {comparator_expr(op.builtin, key)};"]
        return _functor(name, "bool", f"const {t}& a, const {t}& b", body), ()
    direct = direct_expr(op, (key, key), None)
    if direct is not None:
        return _functor(name, "bool", f"const {t}& a, const {t}& b", [f"return {direct};"]), ()
    flag = "unsigned char flag = 0;" if zero_flag else "unsigned char flag;"
    return _linked_functor(name, op, symbol, "bool", [(t, "a", "lhs"), (t, "b", "rhs")], flag, "flag", "flag != 0")


def equality_functor(name: str, op: OpSpec, key: ValueType, symbol: str) -> tuple[str, tuple[str, ...]]:
    """Equality functor ``name``: ``bool operator()(const K& a, const K& b)``, true when the
    two keys are equal (unique-by-key); ``OpKind.EQUAL_TO`` is C++'s ``==`` on scalar keys
    (so NaN equals nothing), anything else a linked operator writing a flag byte."""
    if op.kind == "builtin":
        check_equality_builtin(op, key)
        t = key.cpp
        return _functor(name, "bool", f"const {t}& a, const {t}& b", ["return a == b;"]), ()
    return comparator_functor(name, op, key, symbol)


def flag_functor(name: str, op: OpSpec, vt: ValueType, symbol: str) -> tuple[str, tuple[str, ...]]:
    """Discontinuity flag functor ``name``: ``bool operator()(const T& a, const T& b)``, true
    where ``a`` and the item after it, ``b``, are apart: ``OpKind.NOT_EQUAL_TO`` (C++'s
    ``!=``: a NaN differs from everything) or ``OpKind.EQUAL_TO`` on scalars, anything else a
    linked operator writing a flag byte."""
    if op.kind == "builtin":
        if op.builtin not in (OpKind.NOT_EQUAL_TO, OpKind.EQUAL_TO) or vt.is_struct:
            raise ValueError(f"{op.builtin} is not a flag operator on {vt.cpp}")
        t, expr = vt.cpp, "a != b" if op.builtin is OpKind.NOT_EQUAL_TO else "a == b"
        return _functor(name, "bool", f"const {t}& a, const {t}& b", [f"return {expr};"]), ()
    return comparator_functor(name, op, vt, symbol)


def truth_value(vt: ValueType, x: str, argument: str = "op") -> str:
    """C++ of the truth value of ``x`` of type ``vt``, as numpy's ``bool`` has it: nonzero
    (a NaN is true; a complex is true when either part is nonzero)."""
    if vt.is_struct:
        raise ArgumentError(argument, "OpKind.IDENTITY as a predicate of items with a truth value (numbers, bools)",
                            f"items of struct type {vt.cpp}")
    kind = vt.dtype.kind
    if kind == "b":
        return x
    if kind == "c":
        return f"({x}.real() != 0 || {x}.imag() != 0)"
    if vt.dtype.itemsize == 2 and kind == "f":
        return f"(static_cast<float>({x}) != 0.0f)"
    return f"({x} != 0)"


def predicate_functor(name: str, op: OpSpec, vt: ValueType, symbol: str) -> tuple[str, tuple[str, ...]]:
    """Predicate functor ``name``: ``bool operator()(const T& x)`` calling linked operator
    ``symbol`` (a Python callable or RawOp writing one flag byte, nonzero = true)."""
    if op.kind == "builtin":
        if op.builtin is not OpKind.IDENTITY:
            raise ArgumentError("op", "a Python callable f(x) -> bool, a RawOp or OpKind.IDENTITY (a predicate)",
                                op.builtin)
        return _functor(name, "bool", f"const {vt.cpp}& a", [f"return {truth_value(vt, 'a', op.argument or 'op')};"]), ()
    direct = direct_expr(op, (vt,), None)
    if direct is not None:
        return _functor(name, "bool", f"const {vt.cpp}& a", [f"return {direct};"]), ()
    return _linked_functor(name, op, symbol, "bool", [(vt.cpp, "a", "arg")], "unsigned char flag = 0;", "flag",
                           "flag != 0")


def _transform_body(kind: OpKind, inputs: tuple[ValueType, ...], out: ValueType) -> list[str]:
    o = out.cpp
    if len(inputs) == 1:
        if inputs[0].is_struct:  # IDENTITY on a struct (checked)
            return ["return a;"]
        return [f"return static_cast<{o}>({unary_expr(kind, inputs[0], 'a')});"]
    c = common_type(*inputs).cpp
    x, y = "x", "y"
    if kind in LOGICAL_KINDS:
        x, y = "static_cast<bool>(x)", "static_cast<bool>(y)"
    expr = f"({binary_expr(kind, x, y)})"
    if kind in ARITHMETIC_KINDS or kind in BITWISE_KINDS:
        expr = f"static_cast<{c}>{expr}"  # back from C++'s integer promotion
    return [f"const {c} x = static_cast<{c}>(a);", f"const {c} y = static_cast<{c}>(b);",
            f"return static_cast<{o}>({expr});"]


def transform_functor(name: str, op: OpSpec, inputs: tuple[ValueType, ...], out: ValueType,
                      symbol: str) -> tuple[str, tuple[str, ...]]:
    """Element-wise functor ``name`` computing ``Out op(const In&...)`` for one or two
    inputs; returns (text, extern symbols). Python ops and RawOps are called through the
    pointer ABI ``void symbol([state,] In0* a, [In1* b,] Out* result)``."""
    o = out.cpp
    by_value = ", ".join(f"const {vt.cpp}& {p}" for vt, p in zip(inputs, "ab"))
    if op.kind == "builtin":
        return _functor(name, o, by_value, _transform_body(op.builtin, inputs, out)), ()
    direct = direct_expr(op, inputs, out)
    if direct is not None:
        return _functor(name, o, by_value, [f"return {direct};"]), ()
    params = [(vt.cpp, p, f"{p}_copy") for vt, p in zip(inputs, "ab")]
    return _linked_functor(name, op, symbol, o, params, f"{o} result;", "result", "result")


# check_binary_builtin and check_comparator_builtin stay importable from here for coop/
__all__ = ["direct_expr", "is_direct", "extern_op_call", "binary_functor", "comparator_functor", "equality_functor",
           "predicate_functor", "transform_functor", "check_binary_builtin", "check_comparator_builtin"]
