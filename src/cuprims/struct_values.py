"""Host values of struct types: the forms a struct value may take, and when two struct
types are one for the device.

A value of a struct dtype may be given as a gpu_struct instance, a numpy record (an
``np.void`` or a one-element structured array), a dict of field values keyed by field
name, or a tuple or list of field values in field order; a nested struct takes any of
these forms again. A struct value of another type is taken where it has the target's
layout (:func:`same_layout`: the same field types at the same offsets, names aside): the
device sees bytes, and the bytes are the same.

Numbers are stored in their fields as numpy assigns them (as a gpu_struct's constructor
does); a value that does not fit its field, or has the wrong shape, is an ArgumentError
naming the argument and the field.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from cuprims.errors import ArgumentError


def struct_fields(dt: np.dtype) -> list[tuple[str, np.dtype, int]]:
    """(name, dtype, byte offset) of each field of a struct dtype, in order (none for a scalar)."""
    fields: Mapping[str, tuple[Any, ...]] = dt.fields or {}
    return [(name, fields[name][0], fields[name][1]) for name in dt.names or ()]


def _layout_of(dt: np.dtype) -> Any:
    if dt.names is None:
        return (dt.str if dt.subdtype is None else (_layout_of(dt.subdtype[0]), dt.subdtype[1]))
    return (dt.itemsize, tuple((_layout_of(field), offset) for _, field, offset in struct_fields(dt)))


def same_layout(a: np.dtype, b: np.dtype) -> bool:
    """Whether two dtypes store the same field types at the same offsets (names aside)."""
    return a.itemsize == b.itemsize and _layout_of(a) == _layout_of(b)


def shown_fields(dt: np.dtype) -> str:
    """A struct dtype's fields for people: ``(r: int32, g: float32)`` (nested structs show
    their own fields, arrays their shape)."""
    parts = []
    for name, field, _ in struct_fields(dt):
        if field.subdtype is not None:
            base, shape = field.subdtype
            parts.append(f"{name}: {shown_dtype(base)}[{', '.join(map(str, shape))}]")
        else:
            parts.append(f"{name}: {shown_dtype(field)}")
    return f"({', '.join(parts)})"


def shown_dtype(dt: np.dtype) -> str:
    """A dtype for people: numpy's name for a scalar, ``struct(a: int32, ...)`` for a struct."""
    return f"struct{shown_fields(dt)}" if dt.names else str(dt)


def is_field_values(value: Any) -> bool:
    """Whether ``value`` gives a struct by its field values (a dict, tuple or list), which
    say nothing of their type: the type they are read as comes from elsewhere."""
    return isinstance(value, (dict, tuple, list))


def struct_value(value: Any, dt: np.dtype, argument: str) -> np.ndarray:
    """``value`` (any form the module docstring lists) as a 0-d array of struct dtype ``dt``."""
    data = np.zeros((), dtype=dt)
    fill(data, value, argument)
    return data


def fill(target: np.ndarray, value: Any, argument: str, path: str = "") -> None:
    """Store ``value`` into ``target`` (an array or a view of one field of an array);
    ``path`` is where ``target`` sits in the argument's value, for errors."""
    dt = target.dtype
    if target.ndim:
        _fill_array(target, value, argument, path)
    elif dt.names is not None:
        _fill_struct(target, value, argument, path)
    else:
        _fill_scalar(target, value, argument, path)


def _where(path: str) -> str:
    return f" for field {path!r}" if path else ""


def _record_of(value: Any) -> np.ndarray | None:
    """A struct value held as numpy data (an instance's own, a record, a structured array)."""
    data = getattr(value, "_cuprims_data", None)
    if data is not None:
        return data
    if isinstance(value, (np.void, np.ndarray)) and value.dtype.names is not None:
        return np.asarray(value)
    return None


def _fill_struct(target: np.ndarray, value: Any, argument: str, path: str) -> None:
    dt = target.dtype
    names = dt.names or ()
    record = _record_of(value)
    if record is not None:
        if record.size != 1 or not same_layout(record.dtype, dt):
            shape = "" if record.size == 1 else f" ({record.size} items)"
            raise ArgumentError(argument, f"a value of {shown_dtype(dt)} or of a struct of the same layout"
                                f"{_where(path)}", f"{shown_dtype(record.dtype)}{shape}")
        target[()] = np.frombuffer(record.reshape(-1)[:1].tobytes(), dtype=dt)[0]
        return
    if isinstance(value, dict):
        if set(value) != set(names):
            raise ArgumentError(argument, f"a dict with the fields {list(names)}{_where(path)}",
                                f"one with the keys {list(value)}")
        parts = [value[n] for n in names]
    elif isinstance(value, (tuple, list)):
        if len(value) != len(names):
            raise ArgumentError(argument, f"{len(names)} field values {tuple(names)}{_where(path)}",
                                f"{len(value)} values")
        parts = list(value)
    else:
        raise ArgumentError(argument, f"a value of {shown_dtype(dt)}{_where(path)}: a gpu_struct instance, a numpy "
                            "record, a dict of its fields or a tuple of them in order", value)
    for name, part in zip(names, parts):
        fill(target[name], part, argument, f"{path}.{name}" if path else name)


def _fill_array(target: np.ndarray, value: Any, argument: str, path: str) -> None:
    if target.dtype.names is None and not isinstance(value, (dict, str, bytes)):
        _assign(target, value, argument, path)    # numpy checks the shape and converts
        return
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, (list, tuple)) and np.ndim(value) == 0:
        raise ArgumentError(argument, f"{target.shape[0]} values{_where(path)}", value)
    if len(value) != target.shape[0]:
        raise ArgumentError(argument, f"{target.shape[0]} values{_where(path)}", f"{len(value)} values")
    for i, part in enumerate(value):
        fill(target[i, ...], part, argument, f"{path}[{i}]")


def _fill_scalar(target: np.ndarray, value: Any, argument: str, path: str) -> None:
    if isinstance(value, (str, bytes, dict, list, tuple)) or _record_of(value) is not None or np.ndim(value) != 0:
        raise ArgumentError(argument, f"a {target.dtype} value{_where(path)}", value)
    _assign(target, value, argument, path)


def _assign(target: np.ndarray, value: Any, argument: str, path: str) -> None:
    try:
        target[...] = value
    except (TypeError, ValueError, OverflowError) as exc:
        raise ArgumentError(argument, f"a value convertible to {target.dtype}{_where(path)}", value) from exc
