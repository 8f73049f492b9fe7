"""The layout of a struct dtype as numba code sees it, and whether a value numba typed can
be stored as it.

A :class:`Node` per dtype (scalars, structs with their field offsets, fixed-size arrays
with their count and stride), built once per dtype by :func:`layout`; :func:`store_problem`
says why a value of a numba type cannot be stored as a node (a record of the same
layout, a tuple of field values in field order, nested tuples for nested structs and
sub-arrays). Pure typing: no code is generated here (see :mod:`.numba_struct_lowering`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba.cuda import types
from numba.cuda.np.numpy_support import from_dtype

_layouts: dict[np.dtype, "Node"] = {}


class Node:
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
        self.fields: list[tuple[str, int, Node]] = []   # structs
        self.element: Node | None = None                # arrays
        self.count = 0
        self.stride = 0

    def describe(self) -> str:
        if self.kind == "scalar":
            return str(self.scalar)
        if self.kind == "array":
            return f"{self.count} x {self.element.describe()}"
        return "{" + ", ".join(f"{n}: {f.describe()}" for n, _, f in self.fields) + "}"


def layout(dt: np.dtype) -> Node:
    """The layout of ``dt``, made once per dtype."""
    node = _layouts.get(dt)
    if node is not None:
        return node
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        node = _array_node(base, tuple(shape), dt)
    elif dt.names is not None:
        node = Node("struct", dt)
        node.record = from_dtype(dt)
        node.fields = [(n, dt.fields[n][1], layout(dt.fields[n][0])) for n in dt.names]
    else:
        node = Node("scalar", dt)
        node.scalar = from_dtype(dt)
    _layouts[dt] = node
    return node


def _array_node(base: np.dtype, shape: tuple[int, ...], dt: np.dtype) -> Node:
    node = Node("array", dt)
    node.count = shape[0]
    if len(shape) > 1:
        inner = np.dtype((base, shape[1:]))
        node.element = _array_node(base, shape[1:], inner)
        node.stride = inner.itemsize
    else:
        node.element = layout(base)
        node.stride = base.itemsize
    return node


def natural_align(node: Node, offset: int) -> int:
    """The alignment a scalar ``node`` at ``offset`` bytes into the stored value may be
    accessed with: its own where the offset is a multiple of it, else 1."""
    a = node.dtype.alignment if node.kind == "scalar" else 1
    return a if a and offset % a == 0 else 1


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


def same_layout(node: Node, src: Any) -> bool:
    """Whether ``src`` (a record or a record's array field) has exactly ``node``'s layout."""
    if node.kind == "struct":
        return src == node.record
    if node.kind == "array" and isinstance(src, types.NestedArray):
        base, shape = node.dtype.subdtype
        return tuple(src.shape) == tuple(shape) and src.dtype == from_dtype(base) and src.layout == "C"
    return False


def store_problem(node: Node, src: Any, ctx: Any, path: str) -> str | None:
    """None if a value of numba type ``src`` can be stored as ``node``, else why not."""
    if node.kind == "scalar":
        if ctx.can_convert(src, node.scalar) is None:
            return f"{path or 'the result'}: expected a value convertible to {node.scalar}, got {src}"
        return None
    if same_layout(node, src):
        return None
    count = len(node.fields) if node.kind == "struct" else node.count
    children = _source_children(src, count)
    if isinstance(children, str):
        return f"{path or 'the result'}: {children} ({node.describe()})"
    if node.kind == "struct":
        for (name, _, child), ty in zip(node.fields, children):
            err = store_problem(child, ty, ctx, f"{path}.{name}" if path else name)
            if err:
                return err
    else:
        for i, ty in enumerate(children):
            err = store_problem(node.element, ty, ctx, f"{path}[{i}]")
            if err:
                return err
    return None
