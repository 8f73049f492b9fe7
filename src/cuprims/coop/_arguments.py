"""The arguments both styles share: operators, comparators, block prefix callbacks,
values given as C++ bytes, and the exchanges' arrangements.

Example::

    combiner("max", value_type("int32"), "binary_op")       # OpSpec of OpKind.MAXIMUM
    block_exchange_kind("StripedToBlocked")                  # BlockExchangeType.StripedToBlocked
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from cuprims._value_types import ValueType, host_bytes
from cuprims.errors import ArgumentError
from cuprims.op import OpKind, OpSpec, op_spec

# operator spellings of the established interface
_OPERATOR_NAMES = {"+": OpKind.PLUS, "*": OpKind.MULTIPLIES, "min": OpKind.MINIMUM, "max": OpKind.MAXIMUM,
                   "&": OpKind.BIT_AND, "|": OpKind.BIT_OR, "^": OpKind.BIT_XOR}
_COMPARATOR_NAMES = {"<": OpKind.LESS, ">": OpKind.GREATER}


def combiner(op: Any, vt: ValueType, argument: str) -> OpSpec:
    """A binary operator argument (an OpKind, its name, '+', 'min'..., or a Python callable)."""
    from cuprims._codegen.functors import check_binary_builtin

    return _operator(_OPERATOR_NAMES.get(op, op) if isinstance(op, str) else op, vt, argument, check_binary_builtin,
                     "an OpKind, a Python callable or a RawOp", "an operator")


def comparator(op: Any, vt: ValueType, argument: str) -> OpSpec:
    """A comparator argument (OpKind.LESS / GREATER, their names, '<' / '>', or a Python
    callable ``op(a, b) -> bool``, true when ``a`` goes before ``b``)."""
    from cuprims._codegen.functors import check_comparator_builtin

    return _operator(_COMPARATOR_NAMES.get(op, op) if isinstance(op, str) else op, vt, argument,
                     check_comparator_builtin, "OpKind.LESS, OpKind.GREATER, a Python callable or a RawOp",
                     "a comparator")


def _operator(op: Any, vt: ValueType, argument: str, check_builtin: Any, expected: str, what: str) -> OpSpec:
    """``op`` as the OpSpec a provider calls: a built-in one checked against ``vt``, a
    Python one without captured device arrays, a RawOp without state (a primitive has no
    state to hand it: its state travels in a device-wide kernel's parameters)."""
    spec = op_spec(op, argument=argument, bind_captures=True)   # to see (and refuse) captured arrays
    if spec.kind == "raw" and spec.state_size:
        raise ArgumentError(argument, f"{expected}, or a RawOp without state (a kernel's primitive has no state to "
                            "hand it)", op)
    if spec.kind == "builtin":
        check_builtin(spec, vt, argument)
    if spec.captures:
        raise ArgumentError(argument, f"{what} that captures no device arrays", op)
    return _linked(spec)


def _linked(spec: OpSpec) -> OpSpec:
    """``spec`` compiled by numba and linked, as providers expect (numba is there anyway for
    the kernel calling them): without the C++ translation a small expression has elsewhere."""
    return dataclasses.replace(spec, expr=None) if spec.expr is not None else spec


class PrefixCallback:
    """A block prefix callback whose state array is not of the scan's element type:
    ``coop.block.PrefixCallback(fn, state_dtype)`` as a scan factory's ``prefix_op=``
    (a plain function there means ``PrefixCallback(fn, <the scan's dtype>)``).

    ``fn(state, block_aggregate) -> prefix``: ``state`` is the 1-D array of
    ``state_dtype`` the kernel passes to each scan call (``prefix_state``), which ``fn``
    may read and write; ``block_aggregate`` and the result are of the scan's type.

    Example::

        def prefix(state, aggregate):          # state: int64[:], aggregate: int32
            old = state[0]
            state[0] = old + aggregate
            return old

        scan = coop.block.make_inclusive_sum(numba.int32, 128, 4,
                                             prefix_op=coop.block.PrefixCallback(prefix, numba.int64))
    """

    def __init__(self, fn: Any, state_dtype: Any):
        self.fn = fn
        self.state_dtype = state_dtype

    def __repr__(self) -> str:
        return f"PrefixCallback({getattr(self.fn, '__name__', self.fn)!r}, state_dtype={self.state_dtype!r})"


def prefix_callback(op: Any, vt: ValueType, argument: str, state: ValueType | None = None
                    ) -> tuple[OpSpec, ValueType, Any]:
    """A block prefix callback argument (a Python function ``op(state, block_aggregate)``,
    or a :class:`PrefixCallback`) -> (its OpSpec, its state's element type, the function).
    ``state`` (Style 2: the state array's element type) stands in for a missing state dtype."""
    from cuprims.coop._spec import element_type

    fn, state_dtype = (op.fn, op.state_dtype) if isinstance(op, PrefixCallback) else (op, None)
    if isinstance(fn, (OpKind, str)) or not callable(fn) or isinstance(fn, type):
        raise ArgumentError(argument, "a Python function prefix(state, block_aggregate) -> prefix (or a "
                            "coop.block.PrefixCallback)", op)
    state_vt = (element_type(state_dtype, argument) if state_dtype is not None
                else state if state is not None else vt)
    spec = op_spec(fn, argument=argument, bind_captures=True)
    if spec.kind != "python":
        raise ArgumentError(argument, "a Python function prefix(state, block_aggregate) -> prefix", op)
    if spec.captures:
        raise ArgumentError(argument, "a callback that captures no device arrays (it gets its state array at "
                            "each call)", op)
    return _linked(spec), state_vt, fn


def value_bytes(value: Any, vt: ValueType, argument: str) -> str:
    """``value`` converted to ``vt``, as the comma-separated bytes the provider's C++ holds."""
    if vt.numba is not None:
        raise ArgumentError(argument, f"None: a value of the numba extension type {vt.numba} has no host form "
                            "here", value)
    return ",".join(str(b) for b in host_bytes(value, vt, argument=argument))


def python_callable(op: OpSpec, obj: Any) -> Any:
    """``obj``, what is behind ``op``, when the provider calls it: a Python operator (which
    the build compiles) or a RawOp (whose LTO-IR the kernel links); None for a built-in one."""
    return obj if op.kind in ("python", "raw") else None


class BlockExchangeType(enum.Enum):
    """Which rearrangement :func:`make_exchange` performs (the value is CUB's method)."""

    StripedToBlocked = "StripedToBlocked"
    BlockedToStriped = "BlockedToStriped"
    WarpStripedToBlocked = "WarpStripedToBlocked"
    BlockedToWarpStriped = "BlockedToWarpStriped"


def block_exchange_kind(value: Any) -> BlockExchangeType:
    """``value`` (a :class:`BlockExchangeType`, or its name) as a :class:`BlockExchangeType`."""
    if isinstance(value, BlockExchangeType):
        return value
    if isinstance(value, str) and value in BlockExchangeType.__members__:
        return BlockExchangeType[value]
    raise ArgumentError("block_exchange_type", "a coop.block.BlockExchangeType", value)


class WarpExchangeType(enum.Enum):
    """Which rearrangement :func:`make_exchange` performs (the value is CUB's method).
    Blocked: lane ``l`` holds the tile's items ``l * items_per_thread ...``; striped: lane
    ``l`` holds ``l, l + threads_in_warp, ...``."""

    StripedToBlocked = "StripedToBlocked"
    BlockedToStriped = "BlockedToStriped"


def warp_exchange_kind(value: Any, argument: str = "warp_exchange_type") -> WarpExchangeType:
    """``value`` (a :class:`WarpExchangeType`, or its name) as a :class:`WarpExchangeType`."""
    if isinstance(value, WarpExchangeType):
        return value
    name = getattr(value, "name", value)      # a BlockExchangeType of the same name too
    if isinstance(name, str) and name in WarpExchangeType.__members__:
        return WarpExchangeType[name]
    raise ArgumentError(argument, "a coop.warp.WarpExchangeType ('StripedToBlocked' or 'BlockedToStriped')", value)


class BlockDiscontinuityType(enum.Enum):
    """Which flags :func:`~cuprims.coop.block.make_discontinuity` sets: at each run's first
    item (``HEADS``), its last (``TAILS``), or both."""

    HEADS = "heads"
    TAILS = "tails"
    HEADS_AND_TAILS = "heads_and_tails"


class BlockAdjacentDifferenceType(enum.Enum):
    """Which neighbour :func:`~cuprims.coop.block.make_adjacent_difference` takes each item
    against: the one before it (``SubtractLeft``) or after it (``SubtractRight``)."""

    SubtractLeft = "left"
    SubtractRight = "right"


class BlockShuffleType(enum.Enum):
    """Which shuffle :func:`~cuprims.coop.block.make_shuffle` makes: one value a thread from
    the thread ``distance`` after (``Offset``) or around the block (``Rotate``), or the
    blocked tile moved up (``Up``) or down (``Down``) one item."""

    Offset = "offset"
    Rotate = "rotate"
    Up = "up"
    Down = "down"


def enum_member(kind: type[enum.Enum], value: Any, argument: str) -> Any:
    """``value`` (a member of ``kind``, or its name) as a member of ``kind``."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str) and value in kind.__members__:
        return kind[value]
    names = ", ".join(repr(n) for n in kind.__members__)
    raise ArgumentError(argument, f"a coop.block.{kind.__name__} ({names})", value)


def flag_operator(op: Any, vt: ValueType, argument: str = "flag_op") -> OpSpec:
    """A discontinuity's flag operator: None or OpKind.NOT_EQUAL_TO ('!='), OpKind.EQUAL_TO
    ('=='), or a Python callable ``op(a, b)`` whose truth is the flag."""
    if op is None or op == "!=":
        op = OpKind.NOT_EQUAL_TO
    elif op == "==":
        op = OpKind.EQUAL_TO

    def check(spec: OpSpec, vt: ValueType, argument: str) -> None:
        if spec.builtin not in (OpKind.NOT_EQUAL_TO, OpKind.EQUAL_TO) or vt.is_struct:
            raise ArgumentError(argument, "OpKind.NOT_EQUAL_TO or OpKind.EQUAL_TO on numbers, or a Python callable "
                                f"{argument}(a, b) whose truth is the flag", spec.builtin)

    return _operator(op, vt, argument, check, "None, OpKind.NOT_EQUAL_TO, OpKind.EQUAL_TO or a Python callable",
                     "a flag operator")


def difference_operator(op: Any, vt: ValueType, argument: str = "difference_op") -> OpSpec:
    """An adjacent difference's operator: None or '-' (OpKind.MINUS), another binary
    built-in defined on ``vt`` (associative or not: each pair is combined once), or a
    Python callable ``op(item, neighbour) -> item``."""
    from cuprims._codegen.builtin_ops import combiner_kinds

    if op is None or op == "-":
        op = OpKind.MINUS

    def check(spec: OpSpec, vt: ValueType, argument: str) -> None:
        allowed = combiner_kinds(vt) | ({OpKind.MINUS} if vt.kind in "iufc" else set())
        if vt.is_struct or spec.builtin not in allowed:
            raise ArgumentError(argument, f"a binary operator defined on {vt.dtype} values (OpKind.MINUS, PLUS...) "
                                "or a Python callable", spec.builtin)

    return _operator(_OPERATOR_NAMES.get(op, op) if isinstance(op, str) else op, vt, argument, check,
                     "an OpKind, a Python callable or a RawOp", "an operator")
