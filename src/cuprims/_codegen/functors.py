"""Built-in operators in C++: the one module that knows what each :class:`OpKind` means.

Every generated unit gets its operator functor from here: the C++ expression of each
built-in, the functor texts around it (also for Python and raw operators, called through
the pointer ABI), and the checks of which built-ins a role accepts for which value types.
Pure strings: no CUDA, no numba. A Python operator that is a small expression
(``OpSpec.expr``) and translates for the functor's types is inlined as C++ instead of
called (:func:`direct_expr`, :mod:`.py_expr`); the build then links nothing for it.

Roles
-----
A built-in is used in one of three roles, and its meaning depends on the role only where
this table says so:

* **combiner** (reduce, scan): ``T op(T a, T b)`` in the accumulator type ``T``; only
  associative operators are accepted (:func:`check_binary_builtin`);
* **comparator** (merge sort's ``op``, binary search's ``comp``): a strict weak order
  ``bool op(K a, K b)``, "a goes before b"; only LESS and GREATER
  (:func:`check_comparator_builtin`);
* **element-wise** (transforms, TransformIterator): unary operators compute in their
  input's type, binary ones in numpy's common type of the two inputs; the result is then
  converted to the output's type (:func:`check_transform_builtin`).

Meaning of each OpKind (``a``, ``b`` the operands)
--------------------------------------------------
============== ==================================================================
PLUS           ``a + b``
MINUS          ``a - b``
MULTIPLIES     ``a * b``
DIVIDES        ``a / b`` (integers: truncated, as in C++)
MODULUS        ``a % b`` (integers only: C++'s remainder, its sign that of ``a``)
EQUAL_TO ...   EQUAL_TO, NOT_EQUAL_TO, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL as
               element-wise predicates and combiners: IEEE comparisons ``==``,
               ``!=``, ``<``, ``<=``, ``>``, ``>=``; any comparison with a NaN is
               false except ``!=`` (numpy's ``np.less`` and friends)
LESS           as a comparator: ``a`` before ``b`` in ascending order; on floating
               point, NaN after every number (numpy's sort order), all NaNs
               equivalent; ``-0.0`` and ``+0.0`` equivalent
GREATER        as a comparator: the reverse, ``LESS(b, a)``: descending order, NaN
               before every number
MINIMUM        ``(b < a) ? b : a``: the smaller, ``a`` when they are equal or
               unordered (``std::min``; so a NaN propagates only as ``a``, unlike
               ``np.minimum``)
MAXIMUM        ``(a < b) ? b : a``: the larger, ``a`` when equal or unordered
LOGICAL_AND    ``bool(a) && bool(b)``
LOGICAL_OR     ``bool(a) || bool(b)``
BIT_AND        ``a & b`` (bool and integers)
BIT_OR         ``a | b``
BIT_XOR        ``a ^ b``
NEGATE         ``-a`` (unsigned integers wrap)
IDENTITY       ``a`` (also copies a struct to the same struct type)
BIT_NOT        ``~a`` on integers, ``!a`` on bool
LOGICAL_NOT    ``!bool(a)``, a bool
============== ==================================================================

Why LESS means two things: a comparator must be a strict weak order, and IEEE ``<`` is
not one once a NaN is among the keys (NaN is "equivalent" to every number, which is not
transitive), so a merge sort given ``a < b`` may return any order and a binary search any
index. Ordering NaN last is what numpy's ``np.sort`` and ``np.searchsorted`` do, so keys
sorted by numpy can be searched with LESS. As an element-wise predicate,
``binary_transform(op=OpKind.LESS)`` answers "is a < b?" per element, which for a NaN is
false, exactly as ``np.less`` answers: a NaN-last order there would claim ``1.0 < NaN``.
Radix sort, which takes no operator, orders floating-point keys as the LESS comparator
does (GREATER when descending; see :func:`cuprims.algorithms.sort_source.nan_last_radix_traits`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cuprims._codegen.accumulators import Accumulator
from cuprims.errors import ArgumentError
from cuprims.op import COMPARISON_KINDS, UNARY_KINDS, OpKind, OpSpec, check_result
from cuprims.types import ValueType, value_type

ARITHMETIC_KINDS = frozenset({OpKind.PLUS, OpKind.MINUS, OpKind.MULTIPLIES, OpKind.DIVIDES, OpKind.MODULUS})
BITWISE_KINDS = frozenset({OpKind.BIT_AND, OpKind.BIT_OR, OpKind.BIT_XOR})
LOGICAL_KINDS = frozenset({OpKind.LOGICAL_AND, OpKind.LOGICAL_OR})
MINMAX_KINDS = frozenset({OpKind.MINIMUM, OpKind.MAXIMUM})
COMPARATOR_KINDS = frozenset({OpKind.LESS, OpKind.GREATER})
# binary built-ins whose element-wise result is a bool
PREDICATE_KINDS = COMPARISON_KINDS | LOGICAL_KINDS

_OPERATOR = {
    OpKind.PLUS: "+", OpKind.MINUS: "-", OpKind.MULTIPLIES: "*", OpKind.DIVIDES: "/", OpKind.MODULUS: "%",
    OpKind.EQUAL_TO: "==", OpKind.NOT_EQUAL_TO: "!=", OpKind.GREATER: ">", OpKind.LESS: "<",
    OpKind.GREATER_EQUAL: ">=", OpKind.LESS_EQUAL: "<=", OpKind.LOGICAL_AND: "&&", OpKind.LOGICAL_OR: "||",
    OpKind.BIT_AND: "&", OpKind.BIT_OR: "|", OpKind.BIT_XOR: "^",
}

_BOOL = value_type(np.bool_)


# ------------------------------------------------------------------ expressions

def binary_expr(kind: OpKind, a: str, b: str) -> str:
    """C++ expression of binary built-in ``kind`` on the operand expressions ``a``, ``b``
    (comparisons are IEEE; see :func:`comparator_expr` for the comparator role)."""
    if kind is OpKind.MINIMUM:
        return f"({b} < {a}) ? {b} : {a}"
    if kind is OpKind.MAXIMUM:
        return f"({a} < {b}) ? {b} : {a}"
    return f"{a} {_OPERATOR[kind]} {b}"


def unary_expr(kind: OpKind, vt: ValueType, a: str) -> str:
    """C++ expression of unary built-in ``kind`` on ``a``, a scalar of type ``vt``."""
    t = vt.cpp
    if kind is OpKind.IDENTITY:
        return a
    if kind is OpKind.NEGATE:
        return f"static_cast<{t}>(-{a})"
    if kind is OpKind.BIT_NOT:
        return f"!{a}" if vt.kind == "b" else f"static_cast<{t}>(~{a})"
    if kind is OpKind.LOGICAL_NOT:
        return f"!static_cast<bool>({a})"
    raise ValueError(f"{kind} is not a unary operator")


def ordered_before(vt: ValueType, a: str, b: str) -> str:
    """``a`` before ``b`` in ascending order, NaN last (numpy's sort order): the strict
    weak order of LESS as a comparator."""
    if vt.kind != "f":
        return f"({a} < {b})"
    if vt.code == "f2":
        return f"(({a} < {b}) || (__hisnan({b}) && !__hisnan({a})))"
    return f"(({a} < {b}) || ({b} != {b} && {a} == {a}))"


def comparator_expr(kind: OpKind, vt: ValueType, a: str = "a", b: str = "b") -> str:
    """LESS (ascending, NaN last) or GREATER (descending, NaN first) as a strict weak order."""
    if kind is OpKind.LESS:
        return ordered_before(vt, a, b)
    if kind is OpKind.GREATER:
        return ordered_before(vt, b, a)
    raise ValueError(f"{kind} is not a comparator")


# ------------------------------------------------------------------ functor texts

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
    computed in the generated unit instead (nothing to compile or link for it)."""
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


def check_equality_builtin(op: OpSpec, key: ValueType, argument: str = "op") -> None:
    """Raise ArgumentError (naming ``argument``) unless built-in ``op`` is an equality on
    ``key`` values: ``OpKind.EQUAL_TO`` on scalars (struct keys need a linked operator)."""
    if op.builtin is not OpKind.EQUAL_TO or key.is_struct:
        raise ArgumentError(argument, "OpKind.EQUAL_TO on scalar keys, a Python callable or a RawOp (struct keys "
                            "need a Python or raw equality)", op.builtin)


def equality_functor(name: str, op: OpSpec, key: ValueType, symbol: str) -> tuple[str, tuple[str, ...]]:
    """Equality functor ``name``: ``bool operator()(const K& a, const K& b)``, true when the
    two keys are equal (unique-by-key); ``OpKind.EQUAL_TO`` is C++'s ``==`` on scalar keys
    (so NaN equals nothing), anything else a linked operator writing a flag byte."""
    if op.kind == "builtin":
        check_equality_builtin(op, key)
        t = key.cpp
        return _functor(name, "bool", f"const {t}& a, const {t}& b", ["return a == b;"]), ()
    return comparator_functor(name, op, key, symbol)


def predicate_functor(name: str, op: OpSpec, vt: ValueType, symbol: str) -> tuple[str, tuple[str, ...]]:
    """Predicate functor ``name``: ``bool operator()(const T& x)`` calling linked operator
    ``symbol`` (a Python callable or RawOp writing one flag byte, nonzero = true)."""
    if op.kind == "builtin":
        raise ArgumentError("op", "a Python callable f(x) -> bool or a RawOp (a predicate)", op.builtin)
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


# ------------------------------------------------------------------ which built-ins, where

_INTEGER = frozenset("iu")
_NUMERIC = frozenset("iufc")


def combiner_kinds(vt: ValueType) -> frozenset:
    """Which built-ins form a sensible associative combiner (reduce, scan) over ``vt``."""
    k = vt.kind
    allowed = set()
    if k in _NUMERIC:
        allowed |= {OpKind.PLUS, OpKind.MULTIPLIES}
    if k in "iuf":
        allowed |= MINMAX_KINDS
    if k in _INTEGER:
        allowed |= BITWISE_KINDS | LOGICAL_KINDS
    if k == "b":
        allowed |= LOGICAL_KINDS | BITWISE_KINDS | MINMAX_KINDS | {OpKind.EQUAL_TO, OpKind.NOT_EQUAL_TO}
    return frozenset(allowed)


def check_binary_builtin(op: OpSpec, vt: ValueType, argument: str = "op") -> None:
    """Raise ArgumentError if built-in ``op`` has no meaning as a combiner T x T -> T for ``vt``."""
    kind = op.builtin
    if kind in UNARY_KINDS:
        raise ArgumentError(argument, "a binary operator (this algorithm combines two values)", kind)
    if vt.is_struct:
        raise ArgumentError(argument, f"a Python callable or RawOp for struct values ({vt.cpp}); "
                            "built-in operators work on scalars", kind)
    if kind not in combiner_kinds(vt):
        hint = ""
        if kind in COMPARISON_KINDS:
            hint = " (comparison operators are comparators, for sorting and searching)"
        elif kind in (OpKind.MINUS, OpKind.DIVIDES, OpKind.MODULUS):
            hint = f" that is associative ({kind.name} is not, so its reduction would depend on the order)"
        raise ArgumentError(argument, f"an operator defined on {vt.dtype} values{hint}", kind)


def check_comparator_builtin(op: OpSpec, key: ValueType, argument: str) -> None:
    """Raise ArgumentError (naming ``argument``) unless built-in ``op`` is a strict weak
    order on ``key`` values."""
    kind = op.builtin
    if kind not in COMPARATOR_KINDS:
        raise ArgumentError(argument, "a strict weak order: OpKind.LESS (ascending), OpKind.GREATER (descending), "
                            f"a Python callable {argument}(a, b) -> bool, true when a goes before b, or a RawOp",
                            kind)
    if key.is_struct:
        raise ArgumentError(argument, f"a Python callable or RawOp comparing struct values ({key.cpp}); "
                            "built-in comparators work on scalars", kind)
    if key.kind == "c":
        raise ArgumentError(argument, "a Python callable or RawOp for complex values (complex numbers "
                            "have no built-in order)", kind)


def common_type(a: ValueType, b: ValueType) -> ValueType:
    """The type a binary element-wise built-in computes in: numpy's promotion of the two
    input types."""
    if a.is_struct or b.is_struct:
        raise ValueError("structs have no common type")
    return value_type(np.result_type(a.dtype, b.dtype))


def builtin_result_type(kind: OpKind, inputs: tuple[ValueType, ...]) -> ValueType:
    """The type element-wise built-in ``kind`` computes on ``inputs``, before conversion
    to the output's type: bool for LOGICAL_NOT, comparisons and logical operators, else
    the input's type (unary) or the common type (binary)."""
    if len(inputs) == 1:
        return _BOOL if kind is OpKind.LOGICAL_NOT else inputs[0]
    return _BOOL if kind in PREDICATE_KINDS else common_type(*inputs)


def _converts(src: ValueType, dst: ValueType) -> bool:
    """Whether a value of ``src`` may be converted to ``dst`` (static_cast in C++)."""
    if src.is_struct or dst.is_struct:
        return src.is_struct and dst.is_struct and src.code == dst.code
    if src.kind == "c":
        return dst.kind == "c"  # a complex number has no real-valued conversion
    return True


def _unary_defined(kind: OpKind, t: ValueType) -> bool:
    if kind is OpKind.NEGATE:
        return t.kind in "iufc"
    if kind is OpKind.BIT_NOT:
        return t.kind in "iub"
    if kind is OpKind.LOGICAL_NOT:
        return t.kind in "iufb"
    return True  # IDENTITY


def _binary_defined(kind: OpKind, c: ValueType) -> bool:
    """Whether element-wise ``kind`` is defined in common type ``c``."""
    k = c.kind
    if kind in (OpKind.PLUS, OpKind.MULTIPLIES):
        return k in "biufc"
    if kind in (OpKind.MINUS, OpKind.DIVIDES):
        return k in "iufc"
    if kind is OpKind.MODULUS:
        return k in "iu"
    if kind in (OpKind.EQUAL_TO, OpKind.NOT_EQUAL_TO):
        return True
    if kind in COMPARISON_KINDS or kind in MINMAX_KINDS:
        return k in "biuf"
    if kind in BITWISE_KINDS:
        return k in "biu"
    return k in "biuf"  # logical


def check_transform_builtin(op: OpSpec, inputs: tuple[ValueType, ...], out: ValueType,
                            argument: str = "op") -> None:
    """Raise ArgumentError unless element-wise built-in ``op`` is defined on ``inputs``
    giving ``out``."""
    kind = op.builtin
    arity = len(inputs)
    if arity == 1 and kind not in UNARY_KINDS:
        raise ArgumentError(argument, "a unary operator (NEGATE, IDENTITY, BIT_NOT, LOGICAL_NOT), a Python "
                            "callable or a RawOp", kind)
    if arity == 2 and kind in UNARY_KINDS:
        raise ArgumentError(argument, "a binary operator (PLUS, MINUS, ..., comparisons, MINIMUM, MAXIMUM, bit "
                            "and logical operators), a Python callable or a RawOp", kind)
    if any(vt.is_struct for vt in inputs) or out.is_struct:
        if kind is OpKind.IDENTITY and inputs[0].code == out.code:
            return
        raise ArgumentError(argument, "a Python callable or RawOp for struct values (built-in operators work on "
                            "scalars; IDENTITY copies a struct to the same struct type)", kind)
    if arity == 1:
        if not _unary_defined(kind, inputs[0]):
            raise ArgumentError(argument, f"an operator defined on {inputs[0].dtype} values", kind)
    else:
        c = common_type(*inputs)
        if not _binary_defined(kind, c):
            raise ArgumentError(argument, f"an operator defined on {inputs[0].dtype} and {inputs[1].dtype} values "
                                f"(they combine as {c.dtype})", kind)
    result = builtin_result_type(kind, inputs)
    if not _converts(result, out):
        raise ArgumentError("d_out", f"an output type that {kind.name} on {', '.join(str(v.dtype) for v in inputs)} "
                            f"(giving {result.dtype}) converts to", out.dtype)


__all__ = ["direct_expr", "is_direct", "binary_expr", "unary_expr", "ordered_before", "comparator_expr",
           "extern_op_call", "binary_functor",
           "comparator_functor", "transform_functor", "combiner_kinds", "check_binary_builtin",
           "check_comparator_builtin", "check_transform_builtin", "common_type", "builtin_result_type"]
