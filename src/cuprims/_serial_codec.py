"""A built algorithm's description as plain JSON values, and back: the record a serialized
object stores (:mod:`cuprims.serialize`).

Only the types a description is made of are encoded, each under a tag: descriptions (by
class name, from the registry of :class:`~cuprims.algorithms._skeleton.Description`
subclasses), argument kinds, operator specs and their captures, value types and numpy
dtypes (scalars by their type string, structs by names, formats, offsets and size),
enums of cuprims, tuples, and JSON's own scalars. Decoding builds each object through
its constructor from checked fields: nothing is evaluated and nothing outside these
types can come out, whatever the input holds. An iterator's generated C++ (an argument
kind's ``unit``) is not recorded: a deserialized object never compiles.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Callable

import numpy as np

from ._enums import Determinism, SortOrder
from ._jit.captures import Capture
from .algorithms._arguments import ArgKind
from .op import OpKind, OpSpec
from .types import ValueType, value_type

_ENUMS: dict[str, type[enum.Enum]] = {e.__name__: e for e in (SortOrder, Determinism, OpKind)}
_MAX_DEPTH = 32


class CodecError(ValueError):
    """A record that is not one this codec writes (the message says where and what)."""


_known_descriptions: dict[str, type] = {}


def _description_class(name: str) -> type | None:
    """The :class:`Description` subclass called ``name`` among those imported so far.

    Deserializing imports the one algorithm module a blob names before decoding, so
    every description it may hold is defined by then; nothing else is imported for it."""
    cls = _known_descriptions.get(name)
    if cls is None:
        from .algorithms import _skeleton

        todo = [_skeleton.Description]
        while todo:
            for sub in todo.pop().__subclasses__():
                _known_descriptions.setdefault(sub.__name__, sub)
                todo.append(sub)
        cls = _known_descriptions.get(name)
    return cls


# ----------------------------------------------------------------------------- encoding

def _dtype(dt: np.dtype) -> Any:
    if dt.subdtype is not None:   # an array field: its item type and shape
        base, shape = dt.subdtype
        return {"base": _dtype(base), "shape": list(shape)}
    if dt.names is None:
        return dt.str
    return {"names": list(dt.names), "formats": [_dtype(dt.fields[n][0]) for n in dt.names],
            "offsets": [dt.fields[n][1] for n in dt.names], "itemsize": dt.itemsize}


def encode(value: Any) -> Any:
    """``value`` (a description or any part of one) as JSON values."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, tuple) and not isinstance(value, Capture):
        return {"t": "tuple", "v": [encode(v) for v in value]}
    if isinstance(value, enum.Enum):
        if _ENUMS.get(type(value).__name__) is not type(value):
            raise CodecError(f"an enum this codec does not know: {type(value).__name__}")
        return {"t": "enum", "c": type(value).__name__, "v": value.name}
    if isinstance(value, np.dtype):
        return {"t": "dtype", "v": _dtype(value)}
    if isinstance(value, ValueType):
        return {"t": "value", "v": _dtype(value.dtype)}
    if isinstance(value, Capture):
        return {"t": "capture", "v": [value.where, value.name, value.index, _dtype(value.dtype), value.ndim]}
    if isinstance(value, (ArgKind, OpSpec)) or _description_class(type(value).__name__) is type(value):
        tag = "arg" if isinstance(value, ArgKind) else "op" if isinstance(value, OpSpec) else "desc"
        fields = {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)
                  if not (tag == "arg" and f.name == "unit")}
        return {"t": tag, "c": type(value).__name__, "v": fields}
    raise CodecError(f"cannot record a {type(value).__name__} in a serialized object")


# ----------------------------------------------------------------------------- decoding

def _want(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise CodecError(f"{where}: {what}")


def _decode_dtype(v: Any, where: str, depth: int = 0) -> np.dtype:
    _want(depth < _MAX_DEPTH, where, "a struct nested too deeply")
    if isinstance(v, str):
        try:
            dt = np.dtype(v)
        except (TypeError, ValueError):
            raise CodecError(f"{where}: not a dtype: {v[:40]!r}") from None
        _want(dt.kind in "biufc" and dt.names is None, where, f"not a scalar dtype: {v[:40]!r}")
        return dt
    if isinstance(v, dict) and set(v) == {"base", "shape"}:
        shape = v["shape"]
        _want(isinstance(shape, list) and 0 < len(shape) <= 8 and all(type(d) is int and 0 < d < 1 << 20 for d in shape),
              where, "an array field's shape")
        return np.dtype((_decode_dtype(v["base"], where, depth + 1), tuple(shape)))
    _want(isinstance(v, dict) and set(v) == {"names", "formats", "offsets", "itemsize"}, where, "a struct dtype")
    names, formats, offsets, itemsize = v["names"], v["formats"], v["offsets"], v["itemsize"]
    _want(isinstance(names, list) and isinstance(formats, list) and isinstance(offsets, list)
          and len(names) == len(formats) == len(offsets) and names
          and all(isinstance(n, str) for n in names) and all(type(o) is int and o >= 0 for o in offsets)
          and type(itemsize) is int and 0 < itemsize < 1 << 20, where, "struct fields")
    fields = [_decode_dtype(f, f"{where}.{n}", depth + 1) for n, f in zip(names, formats)]
    try:
        return np.dtype({"names": names, "formats": fields, "offsets": offsets, "itemsize": itemsize})
    except (TypeError, ValueError) as exc:
        raise CodecError(f"{where}: a struct numpy refuses ({exc})") from None


def decode(v: Any, where: str = "description", depth: int = 0) -> Any:
    """The object :func:`encode` made ``v`` from; :class:`CodecError` on anything else."""
    _want(depth < _MAX_DEPTH, where, "nested too deeply")
    if v is None or isinstance(v, (bool, str)) or type(v) is int:
        return v
    _want(isinstance(v, dict) and isinstance(v.get("t"), str) and "v" in v, where, f"not a record: {str(v)[:60]}")
    tag, body = v["t"], v["v"]
    if tag == "tuple":
        _want(isinstance(body, list), where, "a tuple")
        return tuple(decode(x, f"{where}[{i}]", depth + 1) for i, x in enumerate(body))
    if tag == "enum":
        cls = _ENUMS.get(v.get("c"))
        _want(cls is not None and isinstance(body, str) and body in cls.__members__, where, "an enum of cuprims")
        return cls[body]
    if tag == "dtype":
        return _decode_dtype(body, where)
    if tag == "value":
        return value_type(_decode_dtype(body, where))
    if tag == "capture":
        _want(isinstance(body, list) and len(body) == 5, where, "a capture")
        where_, name, index, dt, ndim = body
        _want(isinstance(where_, str) and isinstance(name, str) and type(index) is int and type(ndim) is int,
              where, "capture fields")
        return Capture(where_, name, index, _decode_dtype(dt, where), ndim)
    makers: dict[str, Callable[[Any], type | None]] = {
        "arg": {"ArgKind": ArgKind}.get, "op": {"OpSpec": OpSpec}.get,
        "desc": lambda name: _description_class(name) if isinstance(name, str) else None}
    _want(tag in makers, where, f"an unknown record type {tag!r}")
    cls = makers[tag](v.get("c"))
    _want(cls is not None, where, f"an unknown {tag} class {str(v.get('c'))[:40]!r}")
    _want(isinstance(body, dict), where, "fields")
    names = {f.name for f in dataclasses.fields(cls) if not (tag == "arg" and f.name == "unit")}
    _want(set(body) <= names, where, f"fields {sorted(set(body) - names)[:3]} that {cls.__name__} has not")
    fields = {k: decode(x, f"{where}.{k}", depth + 1) for k, x in body.items()}
    try:
        return cls(**fields)
    except Exception as exc:  # noqa: BLE001 - any refusal of the constructor is a bad record
        raise CodecError(f"{where}: {cls.__name__} refuses these fields ({type(exc).__name__}: {exc})") from None
