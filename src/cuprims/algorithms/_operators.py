"""Operators as the kernels take them: the spec of a combining operator, the operators to
link beside a kernel, and the bytes of a functor parameter (a RawOp's state, or the
device arrays a Python operator captures, bound at each call)."""

from __future__ import annotations

from typing import Any

from .._jit.build import OpInput
from .._jit.captures import captured_state
from .._jit.codegen import op_symbol
from .._jit.functors import check_binary_builtin
from ..op import OpSpec, RawOp, op_spec
from ..types import ValueType


def combiner_spec(op: Any, accum: ValueType) -> OpSpec:
    """The spec of an operator combining two ``accum`` values (reduce, scan), checked;
    captured arrays become state packed at each call (:func:`functor_state`)."""
    spec = op_spec(op, bind_captures=True)
    if spec.kind == "builtin":
        check_binary_builtin(spec, accum)
    return spec


def combiner_ops(op: OpSpec, accum: ValueType) -> tuple[OpInput, ...]:
    """The linked operator of an algorithm combining two ``accum`` values (none for a built-in)."""
    if op.kind == "builtin":
        return ()
    return (OpInput(op_symbol(op, "cuprims_op_0"), op, (accum, accum), accum),)


def functor_size(spec: OpSpec) -> int:
    """Bytes of an operator's functor parameter (its state, padded; 1 for an empty functor)."""
    if not spec.state_size:
        return 1
    return -(-spec.state_size // spec.state_alignment) * spec.state_alignment


def functor_state(spec: OpSpec, op: Any, argument: str = "op") -> bytes:
    """The functor parameter's bytes: a RawOp's state, the pointers and extents of the
    device arrays a Python operator captures (read from ``op`` now), else one empty byte.

    A Python operator with captures must be given (``op`` None raises ArgumentError
    naming ``argument``): its arrays are bound at each call, never kept."""
    if spec.state_size:
        if isinstance(op, RawOp):
            return op.state.ljust(functor_size(spec), b"\0")
        if spec.captures:
            return captured_state(op, spec, argument).ljust(functor_size(spec), b"\0")
    return b"\0"
