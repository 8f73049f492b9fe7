"""Operators: the built-in :class:`OpKind` values, :class:`RawOp`, and Python callables.

Every public algorithm takes ``op=`` as one of

* an :class:`OpKind` built-in (``OpKind.PLUS``), compiled straight into the C++ kernel;
* a Python callable (function, lambda, closure over scalars), compiled by numba-cuda to
  LTO-IR and inlined into the kernel at link time;
* a :class:`RawOp` holding LTO-IR you compiled yourself.

Example::

    import cuprims
    from cuprims import OpKind
    cuprims.reduce_into(d_in=x, d_out=out, op=OpKind.MAXIMUM, num_items=x.size)
    cuprims.reduce_into(d_in=x, d_out=out, op=lambda a, b: a if a > b else b, num_items=x.size)

What a Python operator must return
----------------------------------
Its result type (as numba-cuda types it, or the C++ translation of a small expression,
which types it the same way) is checked when the algorithm is built, per kind of argument:

* **predicates** (select's ``cond``, three_way_partition's ``select_first_part_op`` and
  ``select_second_part_op``), **comparators** (merge_sort's ``op``, lower_bound's and
  upper_bound's ``comp``) and **equalities** (unique_by_key's ``op``) return a truth
  value: a bool, or a real number (int or float; nonzero is true). A string, None, a
  tuple, a complex number or a struct is refused, and so is a function that always
  raises (numba types its result as none).
* **combining** operators (reduce's, scan's and segmented_reduce's ``op``) and
  **element-wise** ones (transforms' ``op``, a TransformIterator's or
  TransformOutputIterator's ``transform_op`` with its value type) return a value that
  converts to the accumulator's or output's type under numpy's ``same_kind`` casting rule
  (``np.can_cast(result, target, "same_kind")``): a float result for an integer
  accumulator is refused (``a / b`` is a float: write ``a // b``, or convert explicitly),
  as is a complex result for a real one. One departure: any integer converts to any
  integer type, as numba types a Python int literal as int64 (``v + 1`` on uint32 values
  is an int64). For a struct accumulator or output, numba's store into the struct checks
  the result.

A refused result raises :class:`cuprims.errors.OperatorResultError`; an operator numba
cannot type or compile (wrong number of parameters, an unsupported construct) raises
:class:`cuprims.errors.OperatorCompileError`. Both name the argument the operator was
given as (``argument``; for an operator inside an iterator, the argument holding the
iterator) and the operator (``op_name``; a ``functools.partial`` by the function it wraps).
``async def`` functions, generators and async generators cannot run on the device: they
raise :class:`cuprims.errors.ArgumentTypeError` naming the argument.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, Union

import numpy as np

from cuprims.config import settings
from cuprims.errors import ArgumentError, ArgumentTypeError, OperatorResultError
from cuprims.typing import ComputeCapabilityLike


class OpKind(enum.Enum):
    """Built-in operators, compiled directly into the generated C++.

    Each algorithm accepts those that make sense for it and its types (a reduction takes
    associative binary ones such as PLUS, MAXIMUM or BIT_XOR; sorting and searching take
    the comparators LESS and GREATER; unary transforms take NEGATE, IDENTITY, BIT_NOT and
    LOGICAL_NOT) and names the argument when given another.

    Example::

        cuprims.reduce_into(d_in=x, d_out=out, num_items=x.size, op=cuprims.OpKind.MAXIMUM,
                            h_init=np.float32(-np.inf))
    """

    STATELESS = "stateless"
    STATEFUL = "stateful"
    PLUS = "plus"
    MINUS = "minus"
    MULTIPLIES = "multiplies"
    DIVIDES = "divides"
    MODULUS = "modulus"
    EQUAL_TO = "equal_to"
    NOT_EQUAL_TO = "not_equal_to"
    GREATER = "greater"
    LESS = "less"
    GREATER_EQUAL = "greater_equal"
    LESS_EQUAL = "less_equal"
    LOGICAL_AND = "logical_and"
    LOGICAL_OR = "logical_or"
    LOGICAL_NOT = "logical_not"
    BIT_AND = "bit_and"
    BIT_OR = "bit_or"
    BIT_XOR = "bit_xor"
    BIT_NOT = "bit_not"
    IDENTITY = "identity"
    NEGATE = "negate"
    MINIMUM = "minimum"
    MAXIMUM = "maximum"


UNARY_KINDS = frozenset({OpKind.LOGICAL_NOT, OpKind.BIT_NOT, OpKind.IDENTITY, OpKind.NEGATE})
COMPARISON_KINDS = frozenset({OpKind.EQUAL_TO, OpKind.NOT_EQUAL_TO, OpKind.GREATER, OpKind.LESS,
                              OpKind.GREATER_EQUAL, OpKind.LESS_EQUAL})


# Operator state travels by value in kernel parameters (4 KiB in all, shared with the
# algorithm's own arguments and iterators).
MAX_STATE_BYTES = 1024

class RawOp:
    """An operator given as LTO-IR that you compiled yourself.

    ``name`` is the ``extern "C" __device__`` symbol to call. A stateless binary operator
    has the signature ``void name(void* lhs, void* rhs, void* result)`` (a unary one
    ``void name(void* in, void* result)``); with ``state`` the state's address comes
    first: ``void name(void* state, void* lhs, void* rhs, void* result)``.

    Example::

        op = cuprims.RawOp(ltoir=my_ltoir_bytes, name="my_add")
        cuprims.reduce_into(d_in=x, d_out=out, op=op, num_items=n, h_init=np.float32(0))
    """

    def __init__(self, *, ltoir: Any, name: str, state: bytes = b"", state_alignment: int = 1,
                 extra_ltoirs: list[Any] | None = None):
        from cuprims._operators import raw_probe

        raw_probe.check_symbol_name(name)
        self.ltoir = raw_probe.ltoir_bytes(ltoir, "ltoir")
        self.name = name
        self.state = bytes(state)
        if len(self.state) > MAX_STATE_BYTES:
            raise ArgumentError("state", f"at most {MAX_STATE_BYTES} bytes of operator state (it travels in the "
                                "kernel's parameters; cuprims.op.MAX_STATE_BYTES)", f"{len(self.state)} bytes")
        if not isinstance(state_alignment, int) or state_alignment < 1 or state_alignment & (state_alignment - 1):
            raise ArgumentError("state_alignment", "a power of two >= 1", state_alignment)
        self.state_alignment = state_alignment
        self.extra_ltoirs = tuple(raw_probe.ltoir_bytes(x, "extra_ltoirs") for x in (extra_ltoirs or ()))
        raw_probe.check_ltoir(self.ltoir, "ltoir")
        for code in self.extra_ltoirs:
            raw_probe.check_ltoir_readable(code, "extra_ltoirs")

    @classmethod
    def from_cpp(cls, source: str, name: str, *, compute_capability: ComputeCapabilityLike | None = None,
                 state: bytes = b"", state_alignment: int = 1) -> RawOp:
        """A RawOp compiled from C++: ``source`` defines ``extern "C" __device__ void
        name(...)`` with the pointer ABI above. NVRTC compiles it to LTO-IR for the lowest
        target of ``compute_capability`` (the current device's without it), with the CCCL
        and CUDA headers on the include path; the LTO-IR is cached in memory and on disk,
        so a later process compiles nothing. NVRTC's errors raise
        :class:`~cuprims.errors.CompileError` with its log and where the source was
        written; a ``name`` that ``source`` does not define raises ArgumentError.

        Example::

            add = cuprims.RawOp.from_cpp('''
                extern "C" __device__ void add(void* a, void* b, void* out) {
                    *(int*)out = *(int*)a + *(int*)b;
                }''', "add", compute_capability=90)
        """
        from cuprims._compile.targets import targets
        from cuprims._operators import raw_probe
        from cuprims._operators.cpp_ops import cpp_ltoir

        if not isinstance(source, str):
            raise ArgumentTypeError("source", "C++ source text (a str)", source)
        raw_probe.check_symbol_name(name)
        ltoir = cpp_ltoir(source, name, min(targets(compute_capability)))
        return cls(ltoir=ltoir, name=name, state=state, state_alignment=state_alignment)

    def digest(self) -> str:
        cached = self.__dict__.get("_digest")
        if cached is not None:
            return cached
        h = hashlib.sha256()
        for part in (self.ltoir, self.name.encode(), len(self.state).to_bytes(8, "little"),
                     str(self.state_alignment).encode(), *self.extra_ltoirs):
            h.update(hashlib.sha256(part).digest())
        self._digest = h.hexdigest()
        return self._digest

    def __repr__(self) -> str:
        return f"RawOp(name={self.name!r}, ltoir=<{len(self.ltoir)} bytes>, state=<{len(self.state)} bytes>)"


Operator = Union[OpKind, Callable[..., Any], RawOp]


@dataclass(frozen=True)
class OpSpec:
    """What the code generator needs to know of an operator (hashable; no user objects).

    ``kind`` is "builtin", "python" or "raw". ``key`` identifies the operator's code:
    the OpKind name, the Python recipe digest, or the RawOp digest.

    ``expr``: for a Python operator that is one small expression (``a + b``, ``max(a, b)``;
    see :mod:`cuprims._operators.py_expr`), its expression tree as text. Where it translates for
    the operator's types, the generated unit computes it in C++ itself and nothing is
    linked (no numba); elsewhere the operator is compiled by numba as any other. None when
    the operator is not such an expression or ``settings.direct_ops`` is off.

    ``argument`` is the argument the operator was given as (``"cond"``; for an operator
    inside an iterator, the argument holding the iterator) and ``context`` where in it the
    operator sits (``"the transform_op of a TransformIterator"``, else empty): what an
    error about the operator names. Like ``name``, neither is part of its identity.

    A Python operator that captures device arrays has state: ``captures`` lists them
    (:class:`cuprims._operators.captures.Capture`: where each is found, its dtype and rank), and
    ``state_size`` is 8 bytes per array (its data pointer) plus 8 per dimension (its
    extents), alignment 8; the state is packed at each call by
    :func:`cuprims._operators.captures.captured_state`.
    """

    kind: str
    key: str
    builtin: OpKind | None = None
    state_size: int = 0
    state_alignment: int = 1
    persistent: bool = True  # False: the key holds an object identity; never stored on disk
    captures: tuple = ()
    name: str = field(default="op", compare=False)
    expr: str | None = None
    argument: str = field(default="op", compare=False)
    context: str = field(default="", compare=False)


_BUILTIN_SPECS: dict[OpKind, OpSpec] = {}


def op_spec(op: Any, *, argument: str = "op", bind_captures: bool = False) -> OpSpec:
    """Describe ``op`` (an OpKind, a Python callable or a RawOp) for the code generator.

    ``bind_captures``: device arrays a Python operator captures become its state, bound
    at each call; the caller must then pass that state to the functor (see
    ``algorithms.operators.functor_state`` and the transform iterators). Without it they
    are compiled in as constants, as numba does (keyed by address, never on disk), for
    algorithms that do not pack a Python operator's state yet."""
    if isinstance(op, OpKind):
        spec = _BUILTIN_SPECS.get(op)
        if spec is not None:
            return spec
        if op in (OpKind.STATELESS, OpKind.STATEFUL):
            raise ArgumentError(argument, "a built-in operator such as OpKind.PLUS, a Python callable "
                                "or a RawOp (STATELESS/STATEFUL only label raw operators)", op)
        spec = _BUILTIN_SPECS[op] = OpSpec("builtin", op.name, builtin=op, name=op.name.lower())
        return spec
    if isinstance(op, str):
        try:
            return op_spec(OpKind[op.upper()], argument=argument, bind_captures=bind_captures)
        except KeyError:
            raise ArgumentError(argument, "an OpKind name such as 'plus'", op) from None
    if isinstance(op, RawOp):
        return OpSpec("raw", op.digest(), state_size=len(op.state), state_alignment=op.state_alignment,
                      name=op.name, argument=argument)
    if callable(op):
        global _op_recipe_cached
        if _op_recipe_cached is None:
            from cuprims._operators.recipe import op_recipe_cached as _op_recipe_cached
        recipe = _op_recipe_cached(op, bind_captures, argument)
        name = operator_name(op)
        direct = settings.direct_ops and not recipe.captures and recipe.persistent
        memo = (recipe, name, direct, argument)
        spec = _PYTHON_SPECS.get(memo)   # one-shot calls ask for the same spec again and again
        if spec is not None:
            return spec
        _check_runs_to_a_result(op, argument)
        if direct:
            from cuprims._operators.py_expr import parse_op

            spec = OpSpec("python", recipe.digest, name=name, expr=parse_op(op), argument=argument)
        elif recipe.captures:
            from cuprims._operators.captures import state_layout

            size, alignment = state_layout(recipe.captures)
            spec = OpSpec("python", recipe.digest, state_size=size, state_alignment=alignment,
                          persistent=recipe.persistent, captures=recipe.captures, name=name, argument=argument)
        else:
            spec = OpSpec("python", recipe.digest, persistent=recipe.persistent, name=name, argument=argument)
        if len(_PYTHON_SPECS) >= 4096:
            _PYTHON_SPECS.clear()
        _PYTHON_SPECS[memo] = spec
        return spec
    raise ArgumentTypeError(argument, "an OpKind, a Python callable or a RawOp", op)


def shown_operator(spec: OpSpec) -> str:
    """An operator as reprs show it: ``OpKind.PLUS`` for a built-in, its name for a Python
    operator (``<lambda>``), ``RawOp <symbol>`` for a raw one."""
    if spec.kind == "builtin":
        return f"OpKind.{spec.builtin.name}" if spec.builtin is not None else "built-in"
    return f"RawOp {spec.name}" if spec.kind == "raw" else spec.name


def operator_name(op: Any) -> str:
    """A readable name of operator ``op`` for messages: a function's ``__name__``
    (``<lambda>`` for a lambda), ``partial(f)`` for a ``functools.partial`` of ``f``, a
    RawOp's symbol, else the callable's class name."""
    if isinstance(op, functools.partial):
        return f"partial({operator_name(op.func)})"
    if isinstance(op, RawOp):
        return op.name
    name = getattr(op, "__name__", None)
    if isinstance(name, str):
        return name
    return type(op).__name__


def _check_runs_to_a_result(op: Any, argument: str) -> None:
    """Refuse an ``async def`` function, a generator or an async generator (a partial of
    one too): called, each gives an object to iterate or await, not a value, and none can
    run on the device."""
    fn = getattr(op, "py_func", op)   # a numba dispatcher: the Python function it compiles
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise ArgumentTypeError(argument, "a plain function returning a value (an async def function cannot run "
                                "on the device)", op)
    if inspect.isgeneratorfunction(fn):
        raise ArgumentTypeError(argument, "a plain function returning a value (a generator function, one with "
                                "yield, cannot run on the device)", op)


# ------------------------------------------------------------------ what an operator returns

TRUTH_VALUE = "a truth value: a bool or a real number (int or float), which converts to bool"


def result_refusal(result: np.dtype | None, target: Any) -> str | None:
    """What a Python operator's result must be, where one of type ``result`` (None: not a
    number, e.g. a string, None, a tuple or a struct) cannot be stored as ``target``
    (a :class:`~cuprims._value_types.ValueType`; None: a truth value, for predicates, comparators
    and equalities); None where it can. The rules are in this module's docstring."""
    if target is None:
        if result is not None and result.names is None and result.kind in "biuf":
            return None
        return TRUTH_VALUE
    if target.is_struct:
        return None     # numba's store into the struct checks each field
    dst = target.dtype
    if result is None or result.names is not None or result.kind not in "biufc":
        return f"a number that numpy's same_kind casting rule converts to {dst}"
    if np.can_cast(result, dst, "same_kind") or (result.kind in "iu" and dst.kind in "iu"):
        return None
    expected = f"a result that numpy's same_kind casting rule converts to {dst}"
    if result.kind in "fc" and dst.kind in "iu":
        return (f"{expected} (an integer or a bool: the fraction would be lost); use // for integer division, "
                f"or convert explicitly, e.g. int(...) or np.{dst}(...)")
    if result.kind == "c":
        return f"{expected} (a real number: the imaginary part would be lost); take .real or abs(...) explicitly"
    if dst.kind == "b":
        return f"{expected} (a bool); compare explicitly, e.g. (...) != 0"
    return expected


def operator_signature(arg_types: Sequence[Any], result_type: Any, *, result_dropped: bool = False) -> str:
    """``(int32, int32) -> int32``: the types an operator is compiled for (a result type of
    None: a truth value, stored as a bool; ``result_dropped``: called for its side effects,
    its result ignored)."""
    result = "anything (dropped)" if result_dropped else str(result_type.dtype) if result_type is not None \
        else "bool"
    return f"({', '.join(str(vt.dtype) for vt in arg_types)}) -> {result}"


def check_result(arg_types: Sequence[Any], result_type: Any, result: np.dtype | None, shown: str, *,
                 op_name: str, argument: str | None, context: str = "") -> None:
    """Raise :class:`~cuprims.errors.OperatorResultError` naming ``argument`` and operator
    ``op_name`` when its result (``result``, shown as ``shown``) on ``arg_types`` cannot be
    stored as ``result_type`` (:func:`result_refusal`)."""
    expected = result_refusal(result, result_type)
    if expected is not None:
        raise OperatorResultError(op_name, operator_signature(arg_types, result_type), shown, expected,
                                  argument=argument, context=context)


_op_recipe_cached: Any = None   # bound on first use (keeps `import cuprims` light)
# (recipe, name, direct, argument) -> OpSpec: recipes hold digests and capture descriptions, no user objects
_PYTHON_SPECS: dict[Any, OpSpec] = {}


def forget_python_specs() -> None:
    """Drop the remembered descriptions of Python operators (``cuprims.clear_all_caches``):
    each names one build's operator, so after a clear nothing of those builds stays here."""
    _PYTHON_SPECS.clear()


__all__ = ["OpKind", "RawOp", "Operator", "OpSpec", "op_spec", "operator_name", "shown_operator", "result_refusal",
           "check_result", "operator_signature"]
