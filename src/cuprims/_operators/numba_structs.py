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

Everything here is pure typing and code generation: nothing asks for a driver.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any

import numpy as np
from llvmlite import ir
from numba.cuda import types
from numba.cuda.core.errors import TypingError
from numba.cuda.extending import intrinsic, lower_builtin, lower_cast, typeof_impl
from numba.cuda.np.numpy_support import from_dtype
from numba.cuda.typeconv import Conversion
from numba.cuda.typeconv.rules import default_type_manager
from numba.cuda.typing.templates import AbstractTemplate, signature

from cuprims.struct import GpuStructType, StructBase
from cuprims.types import ValueType

_lock = threading.RLock()
_names: dict[str, Any] = {}          # wrapper-visible name -> intrinsic
_layouts: dict[np.dtype, "_Node"] = {}
_helpers: dict[tuple[str, np.dtype], type] = {}
_ctor_types: dict[type, Any] = {}

_I8P = ir.IntType(8).as_pointer()
_I64 = ir.IntType(64)


# ------------------------------------------------------------------ layout of a dtype

class _Node:
    """The layout of one part of a struct: a scalar, a struct or a fixed-size array.

    Struct fields carry their byte offsets; arrays their item count and stride. Code
    that walks a node also tracks the absolute offset into the stored value: the value's
    storage is aligned to the struct's alignment, so a scalar whose absolute offset is a
    multiple of its natural alignment may be accessed with that alignment.
    """

    __slots__ = ("kind", "dtype", "scalar", "record", "fields", "element", "count", "stride")

    def __init__(self, kind: str, dtype: np.dtype):
        self.kind = kind          # "scalar", "struct" or "array"
        self.dtype = dtype
        self.scalar = None        # numba type (scalars)
        self.record = None        # numba Record type (structs)
        self.fields: list[tuple[str, int, _Node]] = []   # structs
        self.element: _Node | None = None                # arrays
        self.count = 0
        self.stride = 0

    def describe(self) -> str:
        if self.kind == "scalar":
            return str(self.scalar)
        if self.kind == "array":
            return f"{self.count} x {self.element.describe()}"
        return "{" + ", ".join(f"{n}: {f.describe()}" for n, _, f in self.fields) + "}"


def _layout(dt: np.dtype) -> _Node:
    node = _layouts.get(dt)
    if node is not None:
        return node
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        node = _array_node(base, tuple(shape), dt)
    elif dt.names is not None:
        node = _Node("struct", dt)
        node.record = from_dtype(dt)
        node.fields = [(n, dt.fields[n][1], _layout(dt.fields[n][0])) for n in dt.names]
    else:
        node = _Node("scalar", dt)
        node.scalar = from_dtype(dt)
    _layouts[dt] = node
    return node


def _array_node(base: np.dtype, shape: tuple[int, ...], dt: np.dtype) -> _Node:
    node = _Node("array", dt)
    node.count = shape[0]
    if len(shape) > 1:
        inner = np.dtype((base, shape[1:]))
        node.element = _array_node(base, shape[1:], inner)
        node.stride = inner.itemsize
    else:
        node.element = _layout(base)
        node.stride = base.itemsize
    return node


def _natural_align(node: _Node, offset: int) -> int:
    a = node.dtype.alignment if node.kind == "scalar" else 1
    return a if a and offset % a == 0 else 1


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


def _tuple_type(node: _Node, struct_cls: Any = None) -> Any:
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


# ------------------------------------------------------------------ typing checks

def _source_children(src: Any, count: int) -> list[Any] | str:
    """The numba types of the parts of ``src`` taken in order, or why it has none."""
    if isinstance(src, types.Record):
        if len(src.members) != count:
            return f"a record with {len(src.members)} fields where {count} are needed"
        return [t for _, t in src.members]
    if isinstance(src, types.BaseTuple):
        if len(src) != count:
            return f"a tuple of {len(src)} values where {count} are needed"
        return list(src.types)
    if isinstance(src, types.NestedArray):
        if src.ndim != 1:
            return f"a {src.ndim}-d array field (give nested tuples instead)"
        if src.shape[0] != count:
            return f"an array of {src.shape[0]} items where {count} are needed"
        return [src.dtype] * count
    return f"a single {src} value where {count} values are needed"


def _same_layout(node: _Node, src: Any) -> bool:
    """Whether ``src`` (a record or a record's array field) has exactly ``node``'s layout."""
    if node.kind == "struct":
        return src == node.record
    if node.kind == "array" and isinstance(src, types.NestedArray):
        base, shape = node.dtype.subdtype
        return tuple(src.shape) == tuple(shape) and src.dtype == from_dtype(base) and src.layout == "C"
    return False


def _check(node: _Node, src: Any, ctx: Any, path: str) -> str | None:
    """None if a value of numba type ``src`` can be stored as ``node``, else why not."""
    if node.kind == "scalar":
        if ctx.can_convert(src, node.scalar) is None:
            return f"{path or 'the result'}: expected a value convertible to {node.scalar}, got {src}"
        return None
    if _same_layout(node, src):
        return None
    count = len(node.fields) if node.kind == "struct" else node.count
    children = _source_children(src, count)
    if isinstance(children, str):
        return f"{path or 'the result'}: {children} ({node.describe()})"
    if node.kind == "struct":
        for (name, _, child), ty in zip(node.fields, children):
            err = _check(child, ty, ctx, f"{path}.{name}" if path else name)
            if err:
                return err
    else:
        for i, ty in enumerate(children):
            err = _check(node.element, ty, ctx, f"{path}[{i}]")
            if err:
                return err
    return None


# ------------------------------------------------------------------ code generation

def _child(context: Any, builder: Any, src: Any, value: Any, index: int) -> tuple[Any, Any]:
    """(numba type, LLVM value) of part ``index`` of ``value`` (of type ``src``)."""
    if isinstance(src, types.Record):
        name = src.members[index][0]
        impl = context.get_getattr(src, name)
        ty = src.typeof(name)
        return ty, impl(context, builder, src, value, name)
    if isinstance(src, types.BaseTuple):
        return src.types[index], builder.extract_value(value, index)
    # NestedArray (1-d): load element ``index``
    ary = context.make_array(src)(context, builder, value)
    ptr = builder.gep(ary.data, [ir.Constant(_I64, index)], inbounds=True)
    return src.dtype, context.unpack_value(builder, src.dtype, ptr)


def _at(builder: Any, base: Any, offset: int) -> Any:
    return builder.gep(base, [ir.Constant(_I64, offset)], inbounds=True) if offset else base


def _store_scalar(context: Any, builder: Any, node: _Node, dst: Any, align: int, src: Any, value: Any) -> None:
    value = context.cast(builder, value, src, node.scalar)
    ptr = builder.bitcast(dst, context.get_data_type(node.scalar).as_pointer())
    context.pack_value(builder, node.scalar, value, ptr, align=align)


def _copy_raw(context: Any, builder: Any, node: _Node, dst: Any, src: Any, offset: int, src_aligned: bool) -> None:
    """Typed copy of ``node`` between two i8* places with identical layout (``offset``: into the result)."""
    if node.kind == "scalar":
        align = _natural_align(node, offset)
        llty = context.get_data_type(node.scalar).as_pointer()
        val = builder.load(builder.bitcast(src, llty), align=align if src_aligned else 1)
        builder.store(val, builder.bitcast(dst, llty), align=align)
    elif node.kind == "struct":
        for _, off, child in node.fields:
            _copy_raw(context, builder, child, _at(builder, dst, off), _at(builder, src, off), offset + off,
                      src_aligned)
    else:
        for i in range(node.count):
            off = i * node.stride
            _copy_raw(context, builder, node.element, _at(builder, dst, off), _at(builder, src, off), offset + off,
                      src_aligned)


def _aligned_source(src: Any) -> bool:
    """Whether the parts of ``src`` sit at their natural alignment (numba's own rule for
    records and arrays, which its field and item loads follow too)."""
    return bool(getattr(src, "aligned", False))


def _raw_pointer(context: Any, builder: Any, src: Any, value: Any) -> Any:
    """i8* to the bytes of a record, or of a record's array field."""
    if isinstance(src, types.Record):
        return builder.bitcast(value, _I8P)
    return builder.bitcast(context.make_array(src)(context, builder, value).data, _I8P)


def _load_raw(context: Any, builder: Any, node: _Node, target: Any, ptr: Any, offset: int, aligned: bool) -> Any:
    """The value of type ``target`` (``node``'s tuple type) read from i8* ``ptr``."""
    if node.kind == "scalar":
        llty = context.get_data_type(node.scalar).as_pointer()
        align = _natural_align(node, offset) if aligned else 1
        return context.unpack_value(builder, node.scalar, builder.bitcast(ptr, llty), align=align)
    if node.kind == "struct":
        parts = [_load_raw(context, builder, child, target.types[i], _at(builder, ptr, off), offset + off, aligned)
                 for i, (_, off, child) in enumerate(node.fields)]
    else:
        parts = [_load_raw(context, builder, node.element, target.types[i], _at(builder, ptr, i * node.stride),
                           offset + i * node.stride, aligned) for i in range(node.count)]
    return context.make_tuple(builder, target, parts)


def _emit_store(context: Any, builder: Any, node: _Node, dst: Any, offset: int, src: Any, value: Any) -> None:
    """Store ``value`` (numba type ``src``) as ``node`` at i8* ``dst`` (``offset`` bytes into the result)."""
    if node.kind == "scalar":
        _store_scalar(context, builder, node, dst, _natural_align(node, offset), src, value)
        return
    if _same_layout(node, src):
        _copy_raw(context, builder, node, dst, _raw_pointer(context, builder, src, value), offset,
                  _aligned_source(src))
        return
    if node.kind == "struct":
        for i, (_, off, child) in enumerate(node.fields):
            cty, cval = _child(context, builder, src, value, i)
            _emit_store(context, builder, child, _at(builder, dst, off), offset + off, cty, cval)
    else:
        for i in range(node.count):
            cty, cval = _child(context, builder, src, value, i)
            off = i * node.stride
            _emit_store(context, builder, node.element, _at(builder, dst, off), offset + off, cty, cval)


def _emit_convert(context: Any, builder: Any, node: _Node, target: Any, src: Any, value: Any) -> Any:
    """``value`` (numba type ``src``) converted to ``target`` (the tuple type of ``node``)."""
    if src == target:
        return value
    if node.kind == "scalar":
        return context.cast(builder, value, src, node.scalar)
    if _same_layout(node, src):
        return _load_raw(context, builder, node, target, _raw_pointer(context, builder, src, value), 0,
                         _aligned_source(src))
    count = len(node.fields) if node.kind == "struct" else node.count
    parts = []
    for i in range(count):
        child = node.fields[i][2] if node.kind == "struct" else node.element
        cty, cval = _child(context, builder, src, value, i)
        parts.append(_emit_convert(context, builder, child, target.types[i], cty, cval))
    return context.make_tuple(builder, target, parts)


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
    node = _layout(dt)
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
                err = _check(child, ty, self.context, name)
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
    return _emit_convert(context, builder, _layout(dt), toty, fromty, val)


@typeof_impl.register(GpuStructType)
def _typeof_struct_class(val: Any, c: Any) -> Any:
    return _constructor_type(val)


@typeof_impl.register(StructBase)
def _typeof_struct_value(val: Any, c: Any) -> Any:
    # a host instance used in device code (a captured constant): its constructed type;
    # numba's tuple constants read it by iterating, which instances support
    cls = type(val)
    return _tuple_type(_layout(cls._cuprims_dtype), cls)


@lower_builtin(_CTOR_KEY, types.VarArg(types.Any))
def _lower_constructor(context: Any, builder: Any, sig: Any, args: Any) -> Any:
    target = sig.return_type
    node = _layout(target.instance_class._cuprims_dtype)
    parts = []
    for i, (src, value) in enumerate(zip(sig.args, args)):
        parts.append(_emit_convert(context, builder, node.fields[i][2], target.types[i], src, value))
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
    node = _layout(vt.dtype)
    what = f"struct {node.describe()}"

    def store(typingctx, ptr, value):
        if not isinstance(ptr, (types.RawPointer, types.CPointer)):
            return None
        err = _check(node, value, typingctx, "")
        if not err and isinstance(value, types.BaseTuple) and _holds_record(value):
            err = ("numba cannot return a record inside a tuple (such as a.p in (x, a.p)); call the "
                   "gpu_struct class instead, which copies record fields (Outer(x, a.p))")
        if err:
            raise TypingError(f"the operator returned {value}, which cannot be stored as {what}: {err}. "
                              "Return a record of the struct type, a tuple of field values in field "
                              "order, or a value built by calling the gpu_struct class.")

        def codegen(context, builder, sig, args):
            dst = builder.bitcast(args[0], _I8P)
            _emit_store(context, builder, node, dst, 0, sig.args[1], args[1])
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
