"""Built-in operators in C++: the one module that knows what each :class:`OpKind` means.

The C++ expression of each built-in, the kinds grouped by what they do, and the checks of
which built-ins a role accepts for which value types (with the type a built-in computes
in). Pure strings and value types: no CUDA, no numba. The functors around these
expressions, for built-in, Python and raw operators, are :mod:`.functors`'.

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

import numpy as np

from cuprims._value_types import ValueType, value_type
from cuprims.errors import ArgumentError
from cuprims.op import COMPARISON_KINDS, UNARY_KINDS, OpKind, OpSpec

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


def check_equality_builtin(op: OpSpec, key: ValueType, argument: str = "op") -> None:
    """Raise ArgumentError (naming ``argument``) unless built-in ``op`` is an equality on
    ``key`` values: ``OpKind.EQUAL_TO`` on scalars (struct keys need a linked operator)."""
    if op.builtin is not OpKind.EQUAL_TO or key.is_struct:
        raise ArgumentError(argument, "OpKind.EQUAL_TO on scalar keys, a Python callable or a RawOp (struct keys "
                            "need a Python or raw equality)", op.builtin)


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
