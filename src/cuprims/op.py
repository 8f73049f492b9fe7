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
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from .config import settings
from .errors import ArgumentError, ArgumentTypeError


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


def _as_bytes(code: Any, argument: str) -> bytes:
    if isinstance(code, (bytes, bytearray, memoryview)):
        return bytes(code)
    inner = getattr(code, "code", None)  # cuda.core ObjectCode and similar holders
    if isinstance(inner, (bytes, bytearray, memoryview)):
        return bytes(inner)
    raise ArgumentTypeError(argument, "LTO-IR as bytes (or an object with a .code bytes attribute)", code)


# The first bytes of every LTO-IR module NVVM writes (numba-cuda's and NVRTC's alike).
_LTOIR_MAGIC = b"\xedCN\x7f"

# Operator state travels by value in kernel parameters (4 KiB in all, shared with the
# algorithm's own arguments and iterators).
MAX_STATE_BYTES = 1024

_CPP_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch template
this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t
while xor xor_eq main memcpy memset malloc free printf
""".split())


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
        if not isinstance(name, str) or not name.isidentifier() or not name.isascii():
            raise ArgumentError("name", "a C identifier naming the operator's symbol", name)
        if name in _CPP_KEYWORDS or name.startswith("__") or (name[0] == "_" and name[1:2].isupper()) \
                or name.startswith("cuprims_"):
            raise ArgumentError("name", "a symbol name that is not a C++ keyword, not reserved (__x, _X) and not "
                                "cuprims' own (cuprims_*)", name)
        self.ltoir = _as_bytes(ltoir, "ltoir")
        self.name = name
        self.state = bytes(state)
        if len(self.state) > MAX_STATE_BYTES:
            raise ArgumentError("state", f"at most {MAX_STATE_BYTES} bytes of operator state (it travels in the "
                                "kernel's parameters; cuprims.op.MAX_STATE_BYTES)", f"{len(self.state)} bytes")
        if not isinstance(state_alignment, int) or state_alignment < 1 or state_alignment & (state_alignment - 1):
            raise ArgumentError("state_alignment", "a power of two >= 1", state_alignment)
        self.state_alignment = state_alignment
        if not self.ltoir.startswith(_LTOIR_MAGIC):
            raise ArgumentError("ltoir", "LTO-IR (NVVM's output, as numba-cuda's output='ltoir' or NVRTC's "
                                "-dlto give)", f"{len(self.ltoir)} bytes starting {self.ltoir[:4]!r}")
        self.extra_ltoirs = tuple(_as_bytes(x, "extra_ltoirs") for x in (extra_ltoirs or ()))

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
    see :mod:`cuprims._jit.py_expr`), its expression tree as text. Where it translates for
    the operator's types, the generated unit computes it in C++ itself and nothing is
    linked (no numba); elsewhere the operator is compiled by numba as any other. None when
    the operator is not such an expression or ``settings.direct_ops`` is off.

    A Python operator that captures device arrays has state: ``captures`` lists them
    (:class:`cuprims._jit.captures.Capture`: where each is found, its dtype and rank), and
    ``state_size`` is 8 bytes per array (its data pointer) plus 8 per dimension (its
    extents), alignment 8; the state is packed at each call by
    :func:`cuprims._jit.captures.captured_state`.
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


_BUILTIN_SPECS: dict[OpKind, OpSpec] = {}


def op_spec(op: Any, *, argument: str = "op", bind_captures: bool = False) -> OpSpec:
    """Describe ``op`` (an OpKind, a Python callable or a RawOp) for the code generator.

    ``bind_captures``: device arrays a Python operator captures become its state, bound
    at each call; the caller must then pass that state to the functor (see
    ``algorithms._skeleton.functor_state`` and the transform iterators). Without it they
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
                      name=op.name)
    if callable(op):
        global _op_recipe_cached
        if _op_recipe_cached is None:
            from ._jit.recipe import op_recipe_cached as _op_recipe_cached
        recipe = _op_recipe_cached(op, bind_captures, argument)
        name = getattr(op, "__name__", "op")
        direct = settings.direct_ops and not recipe.captures and recipe.persistent
        spec = _PYTHON_SPECS.get((recipe, name, direct))   # one-shot calls ask for the same spec again and again
        if spec is not None:
            return spec
        if direct:
            from ._jit.py_expr import parse_op

            spec = OpSpec("python", recipe.digest, name=name, expr=parse_op(op))
        elif recipe.captures:
            from ._jit.captures import state_layout

            size, alignment = state_layout(recipe.captures)
            spec = OpSpec("python", recipe.digest, state_size=size, state_alignment=alignment,
                          persistent=recipe.persistent, captures=recipe.captures, name=name)
        else:
            spec = OpSpec("python", recipe.digest, persistent=recipe.persistent, name=name)
        if len(_PYTHON_SPECS) >= 4096:
            _PYTHON_SPECS.clear()
        _PYTHON_SPECS[(recipe, name, direct)] = spec
        return spec
    raise ArgumentTypeError(argument, "an OpKind, a Python callable or a RawOp", op)


_op_recipe_cached = None   # bound on first use (keeps `import cuprims` light)
# (recipe, name, direct) -> OpSpec: recipes hold digests and capture descriptions, no user objects
_PYTHON_SPECS: dict[Any, OpSpec] = {}


__all__ = ["OpKind", "RawOp", "Operator", "OpSpec", "op_spec"]
