"""gpu_struct: user-defined value types, usable on the host and inside Python operators.

A struct type is built from its fields and their types::

    import numpy as np, cuprims

    Pixel = cuprims.gpu_struct({"r": np.int32, "g": np.float32}, name="Pixel")

    @cuprims.gpu_struct
    class Pixel:            # the same type, from annotations
        r: np.int32
        g: np.float32

The result is a class. Its ``dtype`` is an *aligned* numpy structured dtype (the
layout a C compiler gives the equivalent struct), so numpy arrays of ``Pixel.dtype``
hold the exact bytes the device sees. Fields may be nested ``gpu_struct`` types, nested
structs written as dicts or structured dtypes (each a class of its own, named
``<struct>_<field>``), and fixed-size sub-arrays (``(np.float32, 3)``)::

    Particle = cuprims.gpu_struct({"id": np.int32, "pos": {"x": np.float32, "y": np.float32}})

On the host, instances hold one value (``Pixel(1, 2.0)``, ``Pixel(r=1, g=2.0)``,
``Pixel({"r": 1, "g": 2.0})``; a nested struct's value as an instance, a dict or a
tuple: ``Particle(7, {"x": 1.5, "y": 2.0})``). Wherever an algorithm takes a struct
value (``h_init=``, ``init_value=``) it takes an instance, a numpy record or one-element
array, or the field values as a dict or (nested) tuple; a struct of the same layout
(the same field types at the same offsets) stands for the algorithm's own
(:mod:`cuprims.struct_values`).

Inside a Python operator, arguments of a struct type arrive as records with the
fields as attributes; the operator may return a record, a tuple of field values in
field order (nested tuples for nested structs), or a value built by calling the class::

    def brighter(a, b):
        return Pixel(a.r + b.r, max(a.g, b.g))

Every field is converted to its declared type when stored; host instances work in operators
too. Device support (``cuprims._operators.numba_structs``) loads with the operator compiler.
"""

from __future__ import annotations

import keyword
import sys
from typing import Any, Iterator

import numpy as np

from cuprims._value_types import MAX_STRUCT_DEPTH, check_struct, value_type
from cuprims.errors import ArgumentError
from cuprims.struct_values import fill, shown_fields, struct_fields

# Attribute names every struct class uses itself; fields may not take them.
_RESERVED = frozenset({"dtype"})


class GpuStructType(type):
    """Metaclass of every class :func:`gpu_struct` returns (lets numba recognise them)."""

    _cuprims_dtype: np.dtype

    def __repr__(cls) -> str:
        """The class, its fields and their types, its size: ``<gpu_struct Pixel(r: int32,
        g: float32), 8 bytes>`` (a nested struct shows its own fields)."""
        return f"<gpu_struct {cls.__name__}{shown_fields(cls._cuprims_dtype)}, {cls._cuprims_dtype.itemsize} bytes>"


class StructBase:
    """Behaviour shared by all gpu_struct classes (the fields come from the subclass)."""

    __slots__ = ("_cuprims_data",)
    _cuprims_data: np.ndarray  # the value: a 0-d array of the struct's dtype
    _cuprims_dtype: np.dtype
    _cuprims_fields: dict[str, Any]  # field name -> nested struct class, or its dtype

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        names = cls._cuprims_dtype.names or ()
        if len(args) > len(names):
            raise ArgumentError("args", f"at most {len(names)} field values for {cls.__name__}{_field_list(cls)}",
                                args)
        whole = args[0] if len(args) == 1 and not kwargs else None
        if isinstance(whole, dict) and set(whole) == set(names):
            args, kwargs = (), whole   # cuda.compute's S({"x": 1, "y": 2}): every field by name
        values = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in cls._cuprims_fields:
                raise ArgumentError(key, f"a field of {cls.__name__}{_field_list(cls)}", "an unknown keyword")
            if key in values:
                raise ArgumentError(key, "one value (given both by position and by keyword)", value)
            values[key] = value
        missing = [n for n in names if n not in values]
        if missing:
            raise ArgumentError(missing[0], f"a value for every field of {cls.__name__}{_field_list(cls)}",
                                "no value")
        data = np.zeros((), dtype=cls._cuprims_dtype)
        for name in names:
            fill(data[name], values[name], name)
        object.__setattr__(self, "_cuprims_data", data)

    @classmethod
    def _from_data(cls, data: np.ndarray) -> Any:
        """An instance viewing ``data`` (a 0-d array of ``cls.dtype``), without copying."""
        obj = cls.__new__(cls)
        object.__setattr__(obj, "_cuprims_data", data)
        return obj

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        data = self._cuprims_data
        if dtype is not None and np.dtype(dtype) != data.dtype:
            return data.astype(dtype)
        return data.copy() if copy else data

    def __iter__(self) -> Iterator[Any]:
        """The field values in order (nested structs as instances), like a named tuple."""
        data = self._cuprims_data
        for name, ftype in type(self)._cuprims_fields.items():
            if _is_struct_class(ftype):
                yield ftype._from_data(data[name])
            else:
                value = data[name]
                yield value.tolist() if value.ndim else value[()].item()

    def __bytes__(self) -> bytes:
        return self._cuprims_data.tobytes()

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, StructBase):
            if other._cuprims_data.dtype != self._cuprims_data.dtype:
                return NotImplemented
            return _values(self) == _values(other)
        if isinstance(other, tuple):
            return _values(self) == _plain(other)
        if isinstance(other, (np.void, np.ndarray)) and other.dtype == self._cuprims_data.dtype and other.size == 1:
            return _values(self) == _plain(np.asarray(other).reshape(())[()].item())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable (fields can be assigned)

    def __repr__(self) -> str:
        cls = type(self)
        parts = [f"{n}={_short(getattr(self, n))}" for n in cls._cuprims_dtype.names or ()]
        return f"{cls.__name__}({', '.join(parts)})"

    def __setattr__(self, name: str, value: Any) -> None:
        # only fields (properties) may be set; no stray attributes
        if name in type(self)._cuprims_fields:
            object.__setattr__(self, name, value)
        else:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}")

    def __reduce__(self) -> tuple[Any, tuple[np.ndarray]]:
        # copy.copy/deepcopy work always; pickle needs the class importable by name
        return (type(self)._from_data, (self._cuprims_data.copy(),))


def _short(value: Any) -> str:
    if isinstance(value, (np.generic, np.ndarray)):
        return repr(value.tolist()) if isinstance(value, np.ndarray) else repr(value.item())
    return repr(value)


def _field_list(cls: Any) -> str:
    return "(" + ", ".join(cls._cuprims_dtype.names) + ")"


def _values(obj: Any) -> tuple:
    """Nested tuple of Python values of a struct instance."""
    return _plain(obj._cuprims_data[()].item())


def _plain(value: Any) -> Any:
    if isinstance(value, StructBase):
        return _values(value)
    if isinstance(value, (tuple, list)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value


def _field_property(name: str, field_type: Any) -> property:
    nested = field_type if isinstance(field_type, type) and issubclass(field_type, StructBase) else None

    def get(self: Any) -> Any:
        data = self._cuprims_data
        if nested is not None:
            return nested._from_data(data[name])    # a view: assigning its fields writes here
        value = data[name]
        return value[()] if value.ndim == 0 else value

    def set_(self: Any, value: Any) -> None:
        fill(self._cuprims_data[name], value, name)

    return property(get, set_, doc=f"field {name!r}")


# ------------------------------------------------------------------ field normalisation

def _is_struct_class(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, StructBase) and hasattr(obj, "_cuprims_dtype")


def _check_scalar(dt: np.dtype, field: str) -> None:
    try:
        value_type(dt, argument="field_dict")
    except ArgumentError:
        raise ArgumentError("field_dict", f"a supported numeric dtype or a gpu_struct type for field {field!r}",
                            dt) from None


def _aligned(dt: np.dtype, field: str) -> np.dtype:
    """``dt`` with every structured part laid out as a C compiler would (align=True)."""
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        return np.dtype((_aligned(base, field), shape))
    if dt.names is None:
        if dt.byteorder not in ("=", "|"):
            dt = dt.newbyteorder("=")
        _check_scalar(dt, field)
        return dt
    if not dt.names:
        raise ArgumentError("field_dict", f"a struct with at least one field (field {field!r})", dt)
    fields = struct_fields(dt)
    for n, _, _ in fields:
        _check_name(n)
    return np.dtype([(n, _aligned(field, n)) for n, field, _ in fields], align=True)


def _field_type(spec: Any, field: str, owner: str, module: str, depth: int) -> tuple[Any, np.dtype]:
    """(struct class or dtype, aligned dtype) for one field's declared type. A dict or a
    structured dtype is a nested struct: a class of its own, named ``<owner>_<field>``
    (as cuda.compute names it), whose instances the field's attribute returns."""
    if _is_struct_class(spec):
        return spec, spec._cuprims_dtype
    if isinstance(spec, dict) or isinstance(spec, np.dtype) and spec.names is not None:
        if depth >= MAX_STRUCT_DEPTH:   # before recursing: a deep nest is an ArgumentError, not a RecursionError
            raise ArgumentError("field_dict", f"structs nested at most {MAX_STRUCT_DEPTH} deep",
                                "a deeper nest")
        nested = _build(spec, f"{owner}_{field}", module, depth + 1)
        return nested, nested._cuprims_dtype
    if isinstance(spec, tuple) and len(spec) == 2 and _is_struct_class(spec[0]):
        # a fixed-size array of structs
        cls, shape = spec
        try:
            dt = np.dtype((cls._cuprims_dtype, shape))
        except (TypeError, ValueError) as exc:
            raise ArgumentError("field_dict", f"(gpu_struct type, shape) for field {field!r}", spec) from exc
        return dt, dt
    if spec is None or spec is object or isinstance(spec, str) and not spec:
        raise ArgumentError("field_dict", f"a numpy dtype or a gpu_struct type for field {field!r}", spec)
    try:
        dt = np.dtype(spec)
    except (TypeError, ValueError, SyntaxError) as exc:
        raise ArgumentError("field_dict", f"a numpy dtype or a gpu_struct type for field {field!r}",
                            spec) from exc
    dt = _aligned(dt, field)
    return dt, dt


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ArgumentError("field_dict", "field names that are Python identifiers", name)
    if name in _RESERVED or name.startswith("_cuprims") or hasattr(StructBase, name) or \
            (name.startswith("__") and name.endswith("__")):
        raise ArgumentError("field_dict", f"field names other than {sorted(_RESERVED)}, '_cuprims*', "
                            "dunder names and gpu_struct's own attributes", name)


def _annotations(cls: type) -> dict[str, Any]:
    """The annotated fields of ``cls`` and its bases (bases first), evaluated."""
    merged: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        own = klass.__dict__.get("__annotations__", {})
        module = sys.modules.get(klass.__module__)
        namespace = dict(vars(module)) if module is not None else {}
        namespace.update(klass.__dict__)
        for name, ann in own.items():
            if isinstance(ann, str):
                try:
                    ann = eval(ann, namespace)  # noqa: S307 - annotations are the user's own code
                except Exception:
                    pass  # maybe a dtype string such as "f4"; np.dtype decides below
            merged[name] = ann
    return merged


def _fields_of(field_dict: Any) -> tuple[list[tuple[str, Any]], str | None]:
    """(list of (name, declared type), default name) from any accepted ``field_dict``."""
    if isinstance(field_dict, dict):
        return list(field_dict.items()), None
    if _is_struct_class(field_dict):
        return list(field_dict._cuprims_fields.items()), field_dict.__name__
    if isinstance(field_dict, np.dtype):
        if field_dict.names is None:
            raise ArgumentError("field_dict", "a structured dtype (with named fields)", field_dict)
        return [(n, field) for n, field, _ in struct_fields(field_dict)], None
    described = getattr(field_dict, "dtype", None)
    if isinstance(described, np.dtype) and described.names and not isinstance(field_dict, type):
        return _fields_of(described)[0], getattr(field_dict, "name", None)   # a cuprims.types struct
    if isinstance(field_dict, type):
        anns = _annotations(field_dict)
        if not anns:
            raise ArgumentError("field_dict", "a class with annotated fields (name: dtype)", field_dict)
        return list(anns.items()), field_dict.__name__
    if isinstance(field_dict, (list, tuple)):
        try:
            dt = np.dtype(list(field_dict))
        except (TypeError, ValueError) as exc:
            raise ArgumentError("field_dict", "a dict of field name -> dtype", field_dict) from exc
        return _fields_of(dt)
    raise ArgumentError("field_dict", "a dict of field name -> dtype, a structured numpy dtype, a "
                        "cuprims.types struct or an annotated class", field_dict)


def gpu_struct(field_dict: Any, name: str = "AnonymousStruct") -> type:
    """A struct value type with the given fields.

    Args:
        field_dict: ``{field name: dtype, type object or gpu_struct type}``, a structured
            numpy dtype, a struct type of :mod:`cuprims.types`, or a class whose
            annotations declare the fields (``r: np.int32``, ``r: types.int32``). A field's
            type may also be ``(dtype, shape)`` for a fixed-size array, or a dict (or a
            structured dtype) of a nested struct's fields, which becomes a class of its
            own named ``<name>_<field>`` (``Particle_pos``). A struct holds at most 1024
            bytes, nests at most 16 deep, and every field has a non-zero size.
        name: the class name (for an annotated class, its own name is the default).

    Returns:
        A class with ``dtype`` (an aligned structured dtype), whose instances are
        built with positional or keyword field values (or one dict of them all) and
        expose them as attributes.

    Example::

        Pixel = cuprims.gpu_struct({"r": np.int32, "g": np.float32}, name="Pixel")
        p = Pixel(1, g=2.0)
        assert p.r == 1 and Pixel.dtype.itemsize == 8
        Particle = cuprims.gpu_struct({"id": np.int32, "pos": {"x": np.float32, "y": np.float32}})
        assert Particle(7, {"x": 1.5, "y": 2.0}).pos.x == 1.5
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ArgumentError("name", "a Python identifier", name)
    if isinstance(field_dict, type) and not _is_struct_class(field_dict):
        module = field_dict.__module__
    else:  # like namedtuple: the caller's module, so that a module-level struct pickles by name
        try:
            module = sys._getframe(1).f_globals.get("__name__", __name__)
        except (AttributeError, ValueError):
            module = __name__
    return _build(field_dict, name, module, 1)


def _build(field_dict: Any, name: str, module: str, depth: int) -> GpuStructType:
    """The class :func:`gpu_struct` returns; ``depth`` is its nesting level (1 at the top)."""
    items, default_name = _fields_of(field_dict)
    if not items:
        raise ArgumentError("field_dict", "at least one field", field_dict)
    if default_name is not None and name == "AnonymousStruct":
        name = default_name
    declared: dict[str, Any] = {}
    dtypes: list[tuple[str, np.dtype]] = []
    for field, spec in items:
        _check_name(field)
        if field in declared:
            raise ArgumentError("field_dict", "distinct field names", field)
        declared[field], dt = _field_type(spec, field, name, module, depth)
        dtypes.append((field, dt))
    dtype = np.dtype(dtypes, align=True)
    check_struct(dtype, "field_dict")  # size, depth and zero-size fields, before any build
    namespace: dict[str, Any] = {
        "__slots__": (),
        "__module__": module,
        "__qualname__": name,
        "__doc__": f"gpu_struct {name}: " + ", ".join(f"{f}: {t.__name__ if _is_struct_class(t) else t}"
                                                        for f, t in declared.items()),
        "_cuprims_dtype": dtype,
        "_cuprims_fields": declared,
        "dtype": dtype,
    }
    for field, ftype in declared.items():
        namespace[field] = _field_property(field, ftype)
    return GpuStructType(name, (StructBase,), namespace)


__all__ = ["gpu_struct", "GpuStructType"]
