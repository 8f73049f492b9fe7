"""Type objects: ``types.int32``, ``types.struct(...)``, ``types.from_numpy_dtype(...)``.

The names of cuda.compute's ``types`` module, for programs that describe element types
with them. Each object stands for one numpy dtype and is accepted wherever cuprims takes
a dtype: ``ProxyArray(types.int32)``, ``ProxyValue(types.float64)``, the ``value_type`` of
a :class:`~cuprims.TransformIterator` (which a :class:`~cuprims.RawOp` operator needs,
as nothing can be inferred from its LTO-IR), the fields of :func:`~cuprims.gpu_struct`
and of :func:`struct`, ``np.zeros(n, dtype=types.int32)`` (numpy reads the ``dtype``
attribute). Each has ``dtype`` (a numpy dtype), ``size`` and ``alignment`` (in bytes, as
the device lays the type out), and is equal to, and hashes like, any type object of the
same dtype.

Example::

    import numpy as np, cuprims
    from cuprims import types

    Pair = types.struct({"key": types.int32, "weight": types.float32}, name="Pair")
    assert Pair.size == 8 and Pair.alignment == 4 and Pair.fields["key"] == types.int32
    assert types.from_numpy_dtype(np.int64) is types.int64
    cuprims.ProxyArray(Pair)   # stands for a device array of Pair values, ahead of time
"""

from __future__ import annotations

import keyword
from typing import Any, Mapping

import numpy as np

from cuprims._value_types import MAX_STRUCT_BYTES, MAX_STRUCT_DEPTH, shown_dtype, struct_fields, value_type
from cuprims.errors import ArgumentError, ArgumentTypeError


class TypeDescriptor:
    """One element type: a numpy ``dtype``, with the ``size`` and ``alignment`` the device
    lays it out with. The module's names (``types.int32``...) and :func:`from_numpy_dtype`
    make them."""

    __slots__ = ("_dtype", "_alignment")

    def __init__(self, dtype: Any) -> None:
        dt = _as_dtype(dtype, "dtype")
        base = dt.subdtype[0] if dt.subdtype is not None else dt   # a fixed-size array: a struct field
        self._alignment = value_type(base, argument="dtype").alignment
        self._dtype = dt

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of this type's values."""
        return self._dtype

    @property
    def size(self) -> int:
        """Bytes per value."""
        return self._dtype.itemsize

    @property
    def alignment(self) -> int:
        """The alignment of a value in device memory, in bytes (``cuda::std::complex`` is
        aligned to its whole size, where numpy aligns complex to its parts)."""
        return self._alignment

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TypeDescriptor):
            return self._dtype == other._dtype
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._dtype)

    def __repr__(self) -> str:
        return f"TypeDescriptor({shown_dtype(self._dtype)})"


class StructTypeDescriptor(TypeDescriptor):
    """A struct type made by :func:`struct` (or :func:`from_numpy_dtype` of a structured
    dtype): its ``name``, its ``fields`` (field name -> type object, in order) and the
    aligned structured ``dtype`` a C compiler gives the same struct."""

    __slots__ = ("_name", "_fields")

    def __init__(self, fields: Mapping[str, Any], name: str = "AnonStruct") -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ArgumentError("name", "a Python identifier", name)
        declared = _struct_fields(fields)
        dt = np.dtype([(field, t.dtype) for field, t in declared.items()], align=True)
        # size, nesting depth and supported scalars, before anything is built with it
        self._alignment = value_type(dt, argument="fields").alignment
        self._dtype = dt
        self._name = name
        self._fields = declared

    @property
    def name(self) -> str:
        """The struct's name (``AnonStruct`` unless given)."""
        return self._name

    @property
    def fields(self) -> dict[str, TypeDescriptor]:
        """Field name -> type object, in field order (a copy)."""
        return dict(self._fields)

    def __repr__(self) -> str:
        return f"StructTypeDescriptor({self._name}, {shown_dtype(self._dtype)}, {self.size} bytes)"


def _as_dtype(dtype: Any, argument: str) -> np.dtype:
    if dtype is None or isinstance(dtype, (bool, int, float)):   # np.dtype(None) would quietly be float64
        raise ArgumentTypeError(argument, "a numpy dtype, a type object of cuprims.types or a gpu_struct type",
                                dtype)
    try:
        return np.dtype(getattr(dtype, "_cuprims_dtype", dtype))
    except (TypeError, ValueError, SyntaxError, RecursionError):
        raise ArgumentTypeError(argument, "a numpy dtype, a type object of cuprims.types or a gpu_struct type",
                                dtype) from None


def _struct_fields(fields: Any) -> dict[str, TypeDescriptor]:
    """``fields`` (field name -> type object, dtype or gpu_struct class) as type objects."""
    if not isinstance(fields, Mapping):
        raise ArgumentTypeError("fields", "a dict of field name -> type (types.int32, a dtype, a struct type)",
                                fields)
    if not fields:
        raise ArgumentError("fields", "at least one field", fields)
    declared: dict[str, TypeDescriptor] = {}
    for field, spec in fields.items():
        if not isinstance(field, str) or not field.isidentifier() or keyword.iskeyword(field):
            raise ArgumentError("fields", "field names that are Python identifiers", field)
        if isinstance(spec, TypeDescriptor):
            declared[field] = spec
            continue
        try:
            declared[field] = from_numpy_dtype(spec)
        except ArgumentError as exc:
            raise type(exc)("fields", f"{exc.expected} for field {field!r}", exc.given) from None
    return declared


def struct(fields: Mapping[str, Any], name: str = "AnonStruct") -> StructTypeDescriptor:
    """A struct type with ``fields`` (field name -> type object, in order; a numpy dtype
    or a gpu_struct class is taken too), laid out as a C compiler lays out the same
    struct. A struct holds at most ``MAX_STRUCT_BYTES`` (1024) bytes and nests at most
    ``MAX_STRUCT_DEPTH`` (16) deep.

    Example::

        Point = cuprims.types.struct({"x": cuprims.types.float32, "y": cuprims.types.float32}, name="Point")
        assert Point.dtype.itemsize == 8
    """
    return StructTypeDescriptor(fields, name=name)


def from_numpy_dtype(dtype: Any) -> TypeDescriptor:
    """The type object of a numpy dtype (or a scalar type such as ``np.float32``, a dtype's
    name, a gpu_struct class): the module's own object for a scalar (``types.int32``), a
    :class:`StructTypeDescriptor` for a structured dtype (named as the gpu_struct class, else
    ``AnonStruct``), its fields converted in turn and laid out aligned. A type object is
    returned as it is.

    Example::

        assert cuprims.types.from_numpy_dtype(np.dtype("float32")) is cuprims.types.float32
    """
    if isinstance(dtype, TypeDescriptor):
        return dtype
    dt = _as_dtype(dtype, "dtype")
    if dt.names is not None:
        # a gpu_struct class keeps its name
        name = dtype.__name__ if isinstance(dtype, type) and hasattr(dtype, "_cuprims_dtype") else "AnonStruct"
        return StructTypeDescriptor({field: from_numpy_dtype(t) for field, t, _ in struct_fields(dt)}, name)
    if dt.subdtype is None:
        known = _BY_DTYPE.get(dt)
        if known is not None:
            return known
    return TypeDescriptor(dt)


int8 = TypeDescriptor(np.int8)
int16 = TypeDescriptor(np.int16)
int32 = TypeDescriptor(np.int32)
int64 = TypeDescriptor(np.int64)
uint8 = TypeDescriptor(np.uint8)
uint16 = TypeDescriptor(np.uint16)
uint32 = TypeDescriptor(np.uint32)
uint64 = TypeDescriptor(np.uint64)
float16 = TypeDescriptor(np.float16)
float32 = TypeDescriptor(np.float32)
float64 = TypeDescriptor(np.float64)
boolean = TypeDescriptor(np.bool_)

_BY_DTYPE = {t.dtype: t for t in (int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32,
                                  float64, boolean)}

__all__ = ["TypeDescriptor", "StructTypeDescriptor", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
           "uint64", "float16", "float32", "float64", "boolean", "struct", "from_numpy_dtype", "MAX_STRUCT_BYTES",
           "MAX_STRUCT_DEPTH"]


def __dir__() -> list[str]:
    """The public names only."""
    return sorted(__all__)
