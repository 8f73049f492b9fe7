"""Operators as the kernels take them: the spec of a combining operator, the operators to
link beside a kernel, and the bytes of a functor parameter (a RawOp's state, or the
device arrays a Python operator captures, bound at each call)."""

from __future__ import annotations

from typing import Any

from cuprims._build.results import OpInput
from cuprims._codegen.builtin_ops import check_binary_builtin
from cuprims._codegen.common import op_symbol
from cuprims._operators.captures import captured_state
from cuprims._value_types import ValueType, same_layout, shown_dtype
from cuprims.errors import ArgumentError
from cuprims.op import OpSpec, RawOp, op_spec


def combiner_spec(op: Any, accum: ValueType, argument: str = "op") -> OpSpec:
    """The spec of an operator combining two ``accum`` values (reduce, scan), checked (an
    error names ``argument``); captured arrays become state packed at each call
    (:func:`functor_state`)."""
    spec = op_spec(op, argument=argument, bind_captures=True)
    if spec.kind == "builtin":
        check_binary_builtin(spec, accum, argument)
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


def combined_input(in_arg: Any, out_arg: Any, in_name: str = "d_in", out_name: str = "d_out") -> Any:
    """The input argument kind of an algorithm combining its items in the output's type
    (reduce, segmented reduce, scan, reduce-by-key), checked against that type: items of a
    struct of the output's layout (a ZipIterator's (v0, v1), an array of another struct with
    the same field types at the same offsets) are read as the output's struct, byte for
    byte. Errors name the arguments ``in_name`` and ``out_name``."""
    in_vt, accum = in_arg.value, out_arg.value
    if in_vt.is_struct and accum.is_struct and in_vt.code != accum.code and same_layout(in_vt.dtype, accum.dtype):
        in_arg = in_arg.viewed_as(accum)
        in_vt = accum
    if accum.is_struct != in_vt.is_struct or (accum.is_struct and in_vt.code != accum.code):
        raise ArgumentError(in_name, f"items of the output's type {shown_dtype(accum.dtype)} (or of a struct of "
                            "its layout: the same field types at the same offsets)", shown_dtype(in_vt.dtype))
    if in_vt.kind == "c" and accum.kind != "c":
        raise ArgumentError(out_name, f"a complex output for {in_vt.dtype} input items (the imaginary part "
                            "would be lost)", accum.dtype)
    return in_arg
