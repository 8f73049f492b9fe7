"""TransformIterator: an operator applied to each item of an array or iterator as it is read."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from cuprims._value_types import ValueType, shown_dtype
from cuprims._value_types import value_type as make_value_type
from cuprims.errors import ArgumentError
from cuprims.iterators.base import (IteratorBase, IteratorCode, LinkedOp, Member, StateWriter, as_input, as_iterator,
                                    emit_member, pack_member)
from cuprims.op import OpSpec, RawOp, op_spec, shown_operator
from cuprims.typing import ArrayIteratorOrProxy, DTypeLike, OperatorLike

_inferred: dict[tuple[str, str], np.dtype] = {}


class _OperatorIterator(IteratorBase):
    """What both transform iterators share: an underlying sequence, a unary operator
    between it and the algorithm (``_spec``, ``_op``), and the value type the algorithm sees."""

    __slots__ = ("_under", "_op", "_spec", "_vt")
    _under: IteratorBase
    _op: Any
    _spec: OpSpec
    _vt: ValueType

    @property
    def value_type(self) -> ValueType:
        return self._vt

    def _inner(self) -> tuple[IteratorBase, ...]:
        return (self._under,)

    def _persistent(self) -> bool:
        return self._spec.persistent and super()._persistent()

    def _linked_objects(self) -> list[Any]:
        own = [] if self._spec.kind == "builtin" else [self._op]
        return super()._linked_objects() + own

    def _shown(self) -> list[str]:
        return [repr(self._under), f"transform_op={shown_operator(self._spec)}",
                f"value_type={shown_dtype(self._vt.dtype)}"]

    def _spec_key(self) -> str:
        spec = self._spec
        direct = ":direct" if spec.expr is not None else ""   # the unit computes it (functors.direct_expr)
        return f"{spec.kind}:{spec.key}:{spec.state_size}/{spec.state_alignment}{direct}"

    def _emit_operator(self, code: IteratorCode, in_vt: ValueType, out_vt: ValueType,
                       operand: str) -> tuple[list[Member], str]:
        """Define the ``under`` member and the operator's functor (linking a Python or raw
        operator); return the struct's members and the C++ call on ``operand``."""
        from cuprims._codegen.common import op_symbol
        from cuprims._codegen.functors import transform_functor

        spec = self._spec
        if code.argument is not None:   # errors about the operator name the algorithm's argument
            spec = dataclasses.replace(spec, argument=code.argument,
                                       context=f"the transform_op of a {type(self).__name__}")
        code.note_type(self._vt)
        members = [emit_member(code, self._under, "under")]
        fn_name = code.new_name() + "_fn"
        symbol = op_symbol(spec, code.new_op_symbol())
        functor, _ = transform_functor(fn_name, spec, (in_vt,), out_vt, symbol)
        code.definitions.append(functor)
        if spec.kind != "builtin":
            code.ops.append(LinkedOp(symbol, spec, (in_vt,), out_vt, self._op))
        if not spec.state_size:
            return members, f"{fn_name}{{}}({operand})"
        size = -(-spec.state_size // spec.state_alignment) * spec.state_alignment
        members.append(Member("fn", fn_name, size, spec.state_alignment))
        return members, f"fn({operand})"

    def _pack(self, state: StateWriter, count: int | None, argument: str) -> None:
        pack_member(state, self._under, count, argument)
        if self._spec.state_size:
            # a RawOp's bytes, or the pointers and extents of the device arrays a Python
            # operator captures, read from it now
            op, spec = self._op, self._spec
            if isinstance(op, RawOp):
                state.raw(op.state, spec.state_alignment)
            else:
                from cuprims._operators.captures import captured_state

                state.raw(captured_state(op, spec, argument), spec.state_alignment)


class TransformIterator(_OperatorIterator):
    """Item i is ``transform_op(underlying[i])``: ``underlying`` is a device array or an
    iterator with items to read (not a DiscardIterator or TransformOutputIterator). It is
    read-only: an input.

    ``transform_op`` is a unary OpKind (NEGATE, IDENTITY, BIT_NOT, LOGICAL_NOT), a Python
    callable (compiled by numba-cuda, inlined by link-time optimisation) or a RawOp
    ``void name([state,] In* x, Out* result)``. ``value_type`` (a dtype, a type object such
    as ``cuprims.types.int32``, or a gpu_struct class) is the result type; when omitted it is
    the built-in's result type, or what numba infers for a Python callable: a callable that
    builds a struct by calling its gpu_struct class (``lambda v: MinMax(abs(v), abs(v))``)
    gives that struct (a RawOp needs it).

    ``is_input=False`` makes a :class:`TransformOutputIterator` (``value_type`` is then the
    type written through it).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(4, dtype=np.int32)
        it = cuprims.TransformIterator(x, lambda v: v * v)   # 0, 1, 4, 9
    """

    __slots__ = ()

    def __new__(cls, underlying: ArrayIteratorOrProxy | None = None, transform_op: OperatorLike | None = None,
                value_type: DTypeLike | None = None, is_input: bool = True) -> Any:
        if not is_input:  # cuda.compute's spelling of a TransformOutputIterator (which refuses a None)
            return TransformOutputIterator(underlying, transform_op, value_type)  # type: ignore[arg-type]
        return super().__new__(cls)

    def __init__(self, underlying: ArrayIteratorOrProxy, transform_op: OperatorLike,
                 value_type: DTypeLike | None = None, is_input: bool = True):
        super().__init__()
        self._under = as_input(underlying, "underlying")
        self._spec = spec = op_spec(transform_op, argument="transform_op", bind_captures=True)
        self._op = transform_op
        in_vt = self._under.value_type
        if value_type is not None:
            self._vt = make_value_type(value_type, argument="value_type")
        elif spec.kind == "builtin":
            from cuprims._codegen.builtin_ops import builtin_result_type

            self._vt = builtin_result_type(spec.builtin, (in_vt,))  # type: ignore[arg-type]  # a built-in's kind
        elif spec.kind == "python":
            self._vt = make_value_type(_infer(transform_op, spec, in_vt), argument="value_type")
        else:
            raise ArgumentError("value_type", "the result type, such as cuprims.types.int32 or np.int32 (a RawOp's "
                                "result type cannot be inferred)", None)
        if spec.kind == "builtin":
            from cuprims._codegen.builtin_ops import check_transform_builtin

            check_transform_builtin(spec, (in_vt,), self._vt, argument="transform_op")

    def _kind_key(self) -> str:
        return f"transform({self._under._key()},{self._spec_key()}->{self._vt.code})"

    def _emit(self, code: IteratorCode) -> tuple[str, list[Member]]:
        members, call = self._emit_operator(code, self._under.value_type, self._vt, "under[i]")
        name = code.new_name()
        code.define(name, members, self._vt, f"return {call};")
        return name, members


def _infer(fn: Any, spec: Any, in_vt: ValueType) -> np.dtype:
    memo_key = (spec.key, in_vt.code)
    dt = _inferred.get(memo_key)
    if dt is None and spec.expr is not None:
        from cuprims._operators.py_expr import result_code

        code = result_code(spec.expr, (in_vt.code,))   # numba's typing, without numba
        if code is not None:
            dt = _inferred[memo_key] = np.dtype(code)
    if dt is None:
        from cuprims._operators.numba_ops import infer_result_dtype

        dt = _inferred[memo_key] = infer_result_dtype(fn, (in_vt,), op_name=spec.name, captures=spec.captures,
                                                      argument="transform_op")
    return dt


class TransformOutputIterator(_OperatorIterator):
    """An output: writing ``v`` at ``i`` stores ``transform_op(v)`` at ``underlying[i]``
    (a device array or a writable iterator).

    ``output_value_type`` (a dtype, type object or gpu_struct class) is the type written through it,
    which ``transform_op`` takes; without it, the op's annotation of its argument, else
    ``underlying``'s value type. The op's result is converted to ``underlying``'s type.

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(1000, dtype=np.float32); mean = cp.empty(1, np.float32)
        out = cuprims.TransformOutputIterator(mean, lambda s: s / 1000)
        cuprims.reduce_into(d_in=x, d_out=out, num_items=1000, op=cuprims.OpKind.PLUS,
                            h_init=np.float32(0))
    """

    __slots__ = ()

    def __init__(self, underlying: ArrayIteratorOrProxy, transform_op: OperatorLike,
                 output_value_type: DTypeLike | None = None):
        super().__init__()
        self._under = as_iterator(underlying, "underlying")
        if not self._under._writable():
            raise ArgumentError("underlying", "a device array or a writable iterator", underlying)
        self._spec = spec = op_spec(transform_op, argument="transform_op", bind_captures=True)
        self._op = transform_op
        if output_value_type is None:
            output_value_type = _annotated_argument(transform_op)
        self._vt = (make_value_type(output_value_type, argument="output_value_type")
                    if output_value_type is not None else self._under.value_type)
        if spec.kind == "builtin":
            from cuprims._codegen.builtin_ops import check_transform_builtin

            check_transform_builtin(spec, (self._vt,), self._under.value_type, argument="transform_op")

    def _writable(self) -> bool:
        return True

    def _readable(self) -> bool:
        return False

    def _kind_key(self) -> str:
        return f"transform_output({self._under._key()},{self._spec_key()}<-{self._vt.code})"

    def _emit(self, code: IteratorCode) -> tuple[str, list[Member]]:
        members, call = self._emit_operator(code, self._vt, self._under.value_type, "v")
        name = code.new_name()
        # read as an input it has nothing to give: a zero value
        code.define(name, members, self._vt, "return {};", write=f"under.write(i, {call});" if code.output else None)
        return name, members


def _annotated_argument(fn: Any) -> Any:
    """The annotated type of a callable's single argument, if it has one."""
    import inspect

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    if len(params) != 1 or params[0].annotation is inspect.Parameter.empty:
        return None
    return params[0].annotation
