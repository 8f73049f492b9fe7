"""numba-cuda support for struct values (gpu_struct types and structured dtypes).

The operator wrapper that :mod:`cuprims._operators.numba_ops` generates passes struct values
by ``void*``. This module supplies the pieces of Python text it splices in:

* :func:`load_expression` turns a ``void*`` into a numba ``Record`` of the struct's
  dtype (a per-dtype intrinsic that only reinterprets the pointer; numba reads the
  fields the operator uses, where it uses them);
* :func:`store_statement` stores the operator's result through a ``void*``. The result
  may be a ``Record`` (``return a``), a tuple of field values in field order (nested
  tuples for nested structs and sub-arrays), or a value built by calling a gpu_struct
  class. Every field is converted to its declared type and stored with a typed store;
  padding is left alone.

It also teaches numba to call gpu_struct classes in device code: ``Pixel(x, y)`` or
``Pixel(r=x, g=y)`` makes a named tuple whose fields already have the declared types
(``p.r``, ``p[0]`` work), with nested struct fields given as constructor calls, tuples
or records of the nested type.

Everything here is pure typing and code generation: nothing asks for a driver. A struct's
layout and the typing checks of what may be stored as it are :mod:`.numba_struct_layout`'s,
the LLVM code that stores and converts values :mod:`.numba_struct_lowering`'s.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any

import numpy as np
from numba.cuda import types
from numba.cuda.core.errors import TypingError
from numba.cuda.extending import intrinsic, lower_builtin, lower_cast, typeof_impl
from numba.cuda.np.numpy_support import from_dtype
from numba.cuda.typeconv import Conversion
from numba.cuda.typeconv.rules import default_type_manager
from numba.cuda.typing.templates import AbstractTemplate, signature

from cuprims._operators.numba_struct_layout import Node, layout, store_problem
from cuprims._operators.numba_struct_lowering import I8P, emit_convert, emit_store
from cuprims._value_types import ValueType
from cuprims.struct import GpuStructType, StructBase

_lock = threading.RLock()
_names: dict[str, Any] = {}          # wrapper-visible name -> intrinsic
_helpers: dict[tuple[str, np.dtype], type] = {}
_ctor_types: dict[type, Any] = {}


# --------------------------------------------------- value types for constructor results

def _helper_class(name: str, dt: np.dtype) -> type:
    """A named-tuple-like class numba uses for field names of a constructed struct."""
    key = (name, dt)
    cls = _helpers.get(key)
    if cls is None:
        cls = type(name, (), {"_fields": tuple(dt.names), "_cuprims_dtype": dt,
                              "__module__": __name__})
        _helpers[key] = cls
    return cls


def _tuple_type(node: Node, struct_cls: Any = None) -> Any:
    """The numba type of a constructed value of ``node`` (fields in declared types)."""
    if node.kind == "scalar":
        return node.scalar
    if node.kind == "array":
        return types.UniTuple(_tuple_type(node.element), node.count)
    declared = getattr(struct_cls, "_cuprims_fields", {}) if struct_cls is not None else {}
    members = []
    for name, _, child in node.fields:
        nested = declared.get(name)
        members.append(_tuple_type(child, nested if isinstance(nested, GpuStructType) else None))
    name = struct_cls.__name__ if struct_cls is not None else "Struct"
    helper = _helper_class(name, node.dtype)
    if all(m == members[0] for m in members):
        result = types.NamedUniTuple(members[0], len(members), helper)
    else:
        result = types.NamedTuple(members, helper)
    # A record of the dtype converts to this type, so that merging the two
    # (``Pixel(...) if c else a``) type-checks; the cast is _cast_record_to_constructed.
    tm = default_type_manager
    if tm.check_compatible(node.record, result) is None:
        tm.set_compatible(node.record, result, Conversion.safe)
    return result


# ------------------------------------------------------------------ gpu_struct classes in device code

class _StructConstructor:
    """Typing/lowering key shared by all gpu_struct constructors (the result type says which)."""

    def __repr__(self) -> str:
        return "gpu_struct constructor"


_CTOR_KEY = _StructConstructor()


def _constructor_type(cls: Any) -> Any:
    with _lock:
        fnty = _ctor_types.get(cls)
        if fnty is None:
            fnty = _ctor_types[cls] = _make_constructor_type(cls)
        return fnty


def _make_constructor_type(cls: Any) -> Any:
    dt = cls._cuprims_dtype
    node = layout(dt)
    result = _tuple_type(node, cls)
    names = list(dt.names)
    pysig = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])

    class Constructor(AbstractTemplate):
        key = _CTOR_KEY

        def generic(self, args, kws):
            try:
                bound = pysig.bind(*args, **dict(kws))
            except TypeError as exc:
                raise TypingError(f"{cls.__name__}{pysig}: {exc}") from None
            ordered = [bound.arguments[n] for n in names]
            for (name, _, child), ty in zip(node.fields, ordered):
                err = store_problem(child, ty, self.context, name)
                if err:
                    raise TypingError(f"{cls.__name__}(...): {err}")
            return signature(result, *ordered).replace(pysig=pysig)

    Constructor.__name__ = f"{cls.__name__}_constructor"
    return types.Function(Constructor)


@lower_cast(types.Record, types.BaseNamedTuple)
def _cast_record_to_constructed(context: Any, builder: Any, fromty: Any, toty: Any, val: Any) -> Any:
    dt = getattr(toty.instance_class, "_cuprims_dtype", None)
    if dt is None:
        raise NotImplementedError(f"cannot convert {fromty} to {toty}")
    return emit_convert(context, builder, layout(dt), toty, fromty, val)


@typeof_impl.register(GpuStructType)
def _typeof_struct_class(val: Any, c: Any) -> Any:
    return _constructor_type(val)


@typeof_impl.register(StructBase)
def _typeof_struct_value(val: Any, c: Any) -> Any:
    # a host instance used in device code (a captured constant): its constructed type;
    # numba's tuple constants read it by iterating, which instances support
    cls = type(val)
    return _tuple_type(layout(cls._cuprims_dtype), cls)


@lower_builtin(_CTOR_KEY, types.VarArg(types.Any))
def _lower_constructor(context: Any, builder: Any, sig: Any, args: Any) -> Any:
    target = sig.return_type
    node = layout(target.instance_class._cuprims_dtype)
    parts = []
    for i, (src, value) in enumerate(zip(sig.args, args)):
        parts.append(emit_convert(context, builder, node.fields[i][2], target.types[i], src, value))
    return context.make_tuple(builder, target, parts)


# ------------------------------------------------------------------ pointer loads and stores

def _holds_record(ty: Any) -> bool:
    if isinstance(ty, types.Record):
        return True
    return isinstance(ty, types.BaseTuple) and any(_holds_record(t) for t in ty.types)


def _suffix(vt: ValueType) -> str:
    return vt.code.rsplit(":", 1)[-1]


def _load_intrinsic(vt: ValueType) -> Any:
    rec = from_dtype(vt.dtype)

    def load(typingctx, ptr):
        if not isinstance(ptr, (types.RawPointer, types.CPointer)):
            return None

        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], context.get_value_type(rec))

        return rec(ptr), codegen

    load.__name__ = f"cuprims_load_{_suffix(vt)}"
    return intrinsic(load)


def _store_intrinsic(vt: ValueType) -> Any:
    node = layout(vt.dtype)
    what = f"struct {node.describe()}"

    def store(typingctx, ptr, value):
        if not isinstance(ptr, (types.RawPointer, types.CPointer)):
            return None
        err = store_problem(node, value, typingctx, "")
        if not err and isinstance(value, types.BaseTuple) and _holds_record(value):
            err = ("numba cannot return a record inside a tuple (such as a.p in (x, a.p)); call the "
                   "gpu_struct class instead, which copies record fields (Outer(x, a.p))")
        if err:
            raise TypingError(f"the operator returned {value}, which cannot be stored as {what}: {err}. "
                              "Return a record of the struct type, a tuple of field values in field "
                              "order, or a value built by calling the gpu_struct class.")

        def codegen(context, builder, sig, args):
            dst = builder.bitcast(args[0], I8P)
            emit_store(context, builder, node, dst, 0, sig.args[1], args[1])
            return context.get_dummy_value()

        return types.void(ptr, value), codegen

    store.__name__ = f"cuprims_store_{_suffix(vt)}"
    return intrinsic(store)


def _name(kind: str, vt: ValueType) -> str:
    name = f"__cuprims_{kind}_{_suffix(vt)}"
    with _lock:
        if name not in _names:
            _names[name] = _load_intrinsic(vt) if kind == "load" else _store_intrinsic(vt)
    return name


def load_expression(vt: ValueType, ptr: str) -> str:
    """Python expression: the struct at ``void*`` ``ptr`` as a numba Record."""
    return f"{_name('load', vt)}({ptr})"


def store_statement(vt: ValueType, ptr: str, value_expr: str) -> str:
    """Python statement: store ``value_expr`` (record, tuple or constructed struct) at ``ptr``."""
    return f"{_name('store', vt)}({ptr}, {value_expr})"


def wrapper_namespace() -> dict[str, Any]:
    """The names :func:`load_expression` and :func:`store_statement` texts refer to."""
    with _lock:
        return dict(_names)
