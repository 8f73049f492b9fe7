"""LLVM code for struct values in numba device code: storing a value (a record, a tuple of
field values, a constructed struct) as a struct's layout through an ``i8*``
(:func:`emit_store`), and converting one to a struct's constructed tuple type
(:func:`emit_convert`).

Every scalar is converted to its declared type and moved with a typed load or store at
its natural alignment where its offset allows; padding is left alone. A source with the
struct's own layout (a record) is copied field by field rather than converted.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba.cuda import types

from cuprims._operators.numba_struct_layout import Node, natural_align, same_layout

I8P = ir.IntType(8).as_pointer()
_I64 = ir.IntType(64)


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


def _store_scalar(context: Any, builder: Any, node: Node, dst: Any, align: int, src: Any, value: Any) -> None:
    value = context.cast(builder, value, src, node.scalar)
    ptr = builder.bitcast(dst, context.get_data_type(node.scalar).as_pointer())
    context.pack_value(builder, node.scalar, value, ptr, align=align)


def _copy_raw(context: Any, builder: Any, node: Node, dst: Any, src: Any, offset: int, src_aligned: bool) -> None:
    """Typed copy of ``node`` between two i8* places with identical layout (``offset``: into the result)."""
    if node.kind == "scalar":
        align = natural_align(node, offset)
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
        return builder.bitcast(value, I8P)
    return builder.bitcast(context.make_array(src)(context, builder, value).data, I8P)


def _load_raw(context: Any, builder: Any, node: Node, target: Any, ptr: Any, offset: int, aligned: bool) -> Any:
    """The value of type ``target`` (``node``'s tuple type) read from i8* ``ptr``."""
    if node.kind == "scalar":
        llty = context.get_data_type(node.scalar).as_pointer()
        align = natural_align(node, offset) if aligned else 1
        return context.unpack_value(builder, node.scalar, builder.bitcast(ptr, llty), align=align)
    if node.kind == "struct":
        parts = [_load_raw(context, builder, child, target.types[i], _at(builder, ptr, off), offset + off, aligned)
                 for i, (_, off, child) in enumerate(node.fields)]
    else:
        parts = [_load_raw(context, builder, node.element, target.types[i], _at(builder, ptr, i * node.stride),
                           offset + i * node.stride, aligned) for i in range(node.count)]
    return context.make_tuple(builder, target, parts)


def emit_store(context: Any, builder: Any, node: Node, dst: Any, offset: int, src: Any, value: Any) -> None:
    """Store ``value`` (numba type ``src``) as ``node`` at i8* ``dst`` (``offset`` bytes into the result)."""
    if node.kind == "scalar":
        _store_scalar(context, builder, node, dst, natural_align(node, offset), src, value)
        return
    if same_layout(node, src):
        _copy_raw(context, builder, node, dst, _raw_pointer(context, builder, src, value), offset,
                  _aligned_source(src))
        return
    if node.kind == "struct":
        for i, (_, off, child) in enumerate(node.fields):
            cty, cval = _child(context, builder, src, value, i)
            emit_store(context, builder, child, _at(builder, dst, off), offset + off, cty, cval)
    else:
        for i in range(node.count):
            cty, cval = _child(context, builder, src, value, i)
            off = i * node.stride
            emit_store(context, builder, node.element, _at(builder, dst, off), offset + off, cty, cval)


def emit_convert(context: Any, builder: Any, node: Node, target: Any, src: Any, value: Any) -> Any:
    """``value`` (numba type ``src``) converted to ``target`` (the tuple type of ``node``)."""
    if src == target:
        return value
    if node.kind == "scalar":
        return context.cast(builder, value, src, node.scalar)
    if same_layout(node, src):
        return _load_raw(context, builder, node, target, _raw_pointer(context, builder, src, value), 0,
                         _aligned_source(src))
    count = len(node.fields) if node.kind == "struct" else node.count
    parts = []
    for i in range(count):
        child = node.fields[i][2] if node.kind == "struct" else node.element
        cty, cval = _child(context, builder, src, value, i)
        parts.append(emit_convert(context, builder, child, target.types[i], cty, cval))
    return context.make_tuple(builder, target, parts)
