"""A built algorithm's description as plain JSON values, and back: the record a serialized
object stores (:mod:`cuprims.serialize`).

Only the types a description is made of are encoded, each under a tag: descriptions (by
class name, from the registry of :class:`~cuprims.algorithms.skeleton.Description`
subclasses), argument kinds, operator specs and their captures, value types and numpy
dtypes (scalars by their type string, structs by names, formats, offsets and size),
enums of cuprims, tuples, and JSON's own scalars. Decoding builds each object through
its constructor from checked fields (every field present, of its annotated type, in its
range; structs without overlapping fields): nothing is evaluated and nothing outside
these types can come out, whatever the input holds, and a record that does not fit
raises :class:`CodecError` naming the field (``description.d_out.value``). An
iterator's generated C++ (an argument kind's ``unit``) is not recorded: a deserialized
object never compiles.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from typing import Any, Callable

import numpy as np

from cuprims._base.schema import IDENTIFIER, Checked, Choice, Int, Node, SchemaError, Str, shown, validate
from cuprims._operators.captures import Capture
from cuprims._value_types import MAX_STRUCT_BYTES, MAX_STRUCT_DEPTH, ValueType, value_type
from cuprims.algorithms.arguments import ArgKind
from cuprims.enums import Determinism, SortOrder
from cuprims.errors import ArgumentError
from cuprims.op import OpKind, OpSpec

_ENUMS: dict[str, type[enum.Enum]] = {e.__name__: e for e in (SortOrder, Determinism, OpKind)}
_MAX_DEPTH = 32


class CodecError(SchemaError):
    """A record that is not one this codec writes (``field`` says where, ``expected`` what),
    or a value it cannot record."""


_known_descriptions: dict[str, type] = {}


def _description_class(name: str) -> type | None:
    """The :class:`Description` subclass called ``name`` among those imported so far.

    Deserializing imports the one algorithm module a blob names before decoding, so
    every description it may hold is defined by then; nothing else is imported for it."""
    cls = _known_descriptions.get(name)
    if cls is None:
        from cuprims.algorithms import skeleton as _skeleton

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
            raise CodecError("description", "an enum of cuprims", type(value).__name__)
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
    raise CodecError("description", "a value a serialized object can record", type(value).__name__)


# ----------------------------------------------------------------------------- decoding
#
# The schema of a description record: its tags (below), each dataclass field of the
# class a record names, typed by that field's annotation (OpSpec.captures, annotated as a
# plain tuple, by _FIELD_TYPES), ranged by _FIELD_NODES, and every field present. A
# record that does not fit raises CodecError naming the field (``description.d_out.value``).


def _power_of_two(v: int, field: str, scope: Any) -> int:
    if v & (v - 1):
        raise CodecError(field, "a power of two in 1..4096", shown(v))
    return v


_POWER_OF_TWO = Checked(Int(1, 4096, "an alignment"), _power_of_two, "a power of two in 1..4096")
_FIELD_NODES: dict[tuple[str, str], Node] = {
    ("ArgKind", "name"): Str(64, IDENTIFIER, "an argument name"),
    ("ArgKind", "key"): Str(1 << 16, what="an argument kind's code key"),
    ("ArgKind", "alignment"): _POWER_OF_TWO,
    ("ArgKind", "state_size"): Int(1, 1 << 16, "an iterator state's size"),
    ("ArgKind", "state_alignment"): _POWER_OF_TWO,
    ("ArgKind", "unit_state_size"): Int(0, 1 << 16, "an iterator's own state size"),
    ("ArgKind", "unit_state_alignment"): _POWER_OF_TWO,
    ("OpSpec", "kind"): Choice("builtin", "python", "raw"),
    ("OpSpec", "key"): Str(1024, what="an operator's code key"),
    ("OpSpec", "state_size"): Int(0, 1 << 16, "an operator state's size"),
    ("OpSpec", "state_alignment"): _POWER_OF_TWO,
    ("OpSpec", "name"): Str(256, what="an operator's name"),
    ("Capture", "where"): Choice("cell", "global", "default"),
    ("Capture", "name"): Str(256, IDENTIFIER, "a variable name"),
    ("Capture", "index"): Int(-1, 1 << 16, "a cell or default index"),
    ("Capture", "ndim"): Int(0, 32, "an array rank"),
    ("ScanDescription", "init_kind"): Choice("none", "value", "device"),
    ("SegmentedSortDescription", "mid_items"): Int(1, 1 << 16, "items per thread"),
}
# an int or str field without an entry above
_ANY_INT = Int(-(1 << 31), (1 << 31) - 1)
_ANY_STR = Str(1 << 16)
_FIELD_TYPES: dict[tuple[str, str], Any] = {("OpSpec", "captures"): tuple[Capture, ...]}
_MAX_ITEMS = 256   # items of a tuple (a transform's inputs, an operator's captures)


def _want(cond: bool, where: str, expected: str, found: Any) -> None:
    if not cond:
        raise CodecError(where, expected, shown(found))


@functools.lru_cache(maxsize=None)
def _field_types(cls: type) -> dict[str, Any]:
    """The annotated type of each recorded field of dataclass ``cls``."""
    hints = typing.get_type_hints(cls)
    return {f.name: _FIELD_TYPES.get((cls.__name__, f.name), hints[f.name]) for f in dataclasses.fields(cls)
            if not (cls is ArgKind and f.name == "unit")}


def _fits(value: Any, hint: Any) -> bool:
    """Whether decoded ``value`` is of annotated type ``hint``; an annotation this codec
    does not know fits nothing (refused rather than guessed)."""
    if hint is Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, tuple) or isinstance(value, Capture):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(v, args[0]) for v in value)
        return len(args) == len(value) and all(_fits(v, h) for v, h in zip(value, args))
    if hint in (bool, int):
        return type(value) is hint
    if hint is tuple:
        return isinstance(value, tuple) and not isinstance(value, Capture)
    return isinstance(hint, type) and isinstance(value, hint)


def _hint_text(hint: Any) -> str:
    if hint is None or hint is type(None):
        return "null"
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_hint_text(h) for h in typing.get_args(hint))
    if origin is tuple:
        return "a tuple of " + ", ".join(_hint_text(h) for h in typing.get_args(hint) if h is not Ellipsis)
    name = getattr(hint, "__name__", str(hint))
    return {bool: "true or false", int: "an integer", str: "a string", tuple: "a tuple"}.get(
        hint, f"{'an' if name[:1] in 'AEIOU' else 'a'} {name}")


def _checked_field(cls_name: str, name: str, value: Any, hint: Any, where: str) -> Any:
    if not _fits(value, hint):
        raise CodecError(where, _hint_text(hint), shown(value))
    node = _FIELD_NODES.get((cls_name, name))
    if node is None and type(value) is int:
        node = _ANY_INT
    if node is None and isinstance(value, str):
        node = _ANY_STR
    return value if node is None or value is None else validate(node, value, where)


def _decode_dtype(v: Any, where: str, depth: int = 0) -> np.dtype:
    _want(depth < MAX_STRUCT_DEPTH, where, f"structs nested at most {MAX_STRUCT_DEPTH} deep", "a deeper nest")
    if isinstance(v, str):
        try:
            dt = np.dtype(v) if len(v) <= 8 else None
        except (TypeError, ValueError):
            dt = None
        _want(dt is not None and dt.kind in "biufc" and dt.names is None and dt.subdtype is None, where,
              "a scalar dtype (like '<f4')", v)
        return dt
    if isinstance(v, dict) and set(v) == {"base", "shape"}:
        base, shape = _decode_dtype(v["base"], where, depth + 1), v["shape"]
        _want(isinstance(shape, list) and 0 < len(shape) <= 8 and all(type(d) is int and d > 0 for d in shape)
              and base.itemsize * math.prod(shape) <= MAX_STRUCT_BYTES, where,
              f"an array field's shape: 1 to 8 extents, at most {MAX_STRUCT_BYTES} bytes in all", shape)
        return np.dtype((base, tuple(shape)))
    _want(isinstance(v, dict) and set(v) == {"names", "formats", "offsets", "itemsize"}, where,
          "a dtype record (a scalar's type string, an array field or a struct)", v)
    names, formats, offsets, itemsize = v["names"], v["formats"], v["offsets"], v["itemsize"]
    _want(type(itemsize) is int and 0 < itemsize <= MAX_STRUCT_BYTES, f"{where}.itemsize",
          f"a struct size in 1..{MAX_STRUCT_BYTES}", itemsize)
    _want(isinstance(names, list) and 0 < len(names) <= MAX_STRUCT_BYTES and len(set(map(str, names))) == len(names)
          and all(isinstance(n, str) and n.isidentifier() for n in names), f"{where}.names",
          "distinct field names that are identifiers", names)
    _want(isinstance(formats, list) and len(formats) == len(names), f"{where}.formats", "a dtype per field", formats)
    _want(isinstance(offsets, list) and len(offsets) == len(names)
          and all(type(o) is int and 0 <= o < itemsize for o in offsets), f"{where}.offsets",
          "an offset inside the struct per field", offsets)
    fields = [_decode_dtype(f, f"{where}.{n}", depth + 1) for n, f in zip(names, formats)]
    end = 0
    for offset, dt, name in sorted(zip(offsets, fields, names), key=lambda t: t[0]):
        # numpy takes overlapping fields (a union); a gpu_struct never has them
        _want(offset >= end and offset + dt.itemsize <= itemsize, f"{where}.{name}",
              "a field that overlaps no other and lies inside the struct", offset)
        end = offset + dt.itemsize
    try:
        return np.dtype({"names": names, "formats": fields, "offsets": offsets, "itemsize": itemsize})
    except (TypeError, ValueError) as exc:
        raise CodecError(where, "a struct numpy takes", str(exc)[:100]) from None


def _decode_value_type(body: Any, where: str) -> ValueType:
    dt = _decode_dtype(body, where)
    try:
        return value_type(dt)
    except ArgumentError as exc:   # a dtype numpy takes but cuprims does not (big-endian, misaligned size)
        raise CodecError(where, exc.expected, shown(exc.given)) from None


def decode(v: Any, where: str = "description", depth: int = 0) -> Any:
    """The object :func:`encode` made ``v`` from; :class:`CodecError` on anything else."""
    _want(depth < _MAX_DEPTH, where, f"records nested at most {_MAX_DEPTH} deep", "a deeper nest")
    if v is None or isinstance(v, (bool, str)) or type(v) is int:
        return v
    _want(isinstance(v, dict) and isinstance(v.get("t"), str), where, "a record {\"t\": tag, \"v\": value}", v)
    tag = v["t"]
    keys = {"t", "c", "v"} if tag in ("enum", "arg", "op", "desc") else {"t", "v"}
    _want(set(v) == keys, where, f"a {tag!r} record with the keys {', '.join(sorted(keys))}", sorted(v)[:5])
    body = v["v"]
    if tag == "tuple":
        _want(isinstance(body, list) and len(body) <= _MAX_ITEMS, where, f"a tuple of at most {_MAX_ITEMS} items",
              body)
        return tuple(decode(x, f"{where}[{i}]", depth + 1) for i, x in enumerate(body))
    if tag == "enum":
        cls = _ENUMS.get(v["c"]) if isinstance(v["c"], str) else None
        _want(cls is not None, f"{where}.c", "an enum of cuprims: " + ", ".join(sorted(_ENUMS)), v["c"])
        _want(isinstance(body, str) and body in cls.__members__, f"{where}.v",
              f"a member of {cls.__name__}: " + ", ".join(cls.__members__), body)
        return cls[body]
    if tag == "dtype":
        return _decode_dtype(body, where)
    if tag == "value":
        return _decode_value_type(body, where)
    if tag == "capture":
        _want(isinstance(body, list) and len(body) == 5, where, "a capture [where, name, index, dtype, ndim]", body)
        fields = dict(zip(Capture._fields, body))
        fields["dtype"] = _decode_dtype(fields["dtype"], f"{where}.dtype", depth + 1)
        hints = typing.get_type_hints(Capture)
        return Capture(**{k: _checked_field("Capture", k, x, hints[k], f"{where}.{k}") for k, x in fields.items()})
    makers: dict[str, Callable[[Any], type | None]] = {
        "arg": {"ArgKind": ArgKind}.get, "op": {"OpSpec": OpSpec}.get,
        "desc": lambda name: _description_class(name) if isinstance(name, str) else None}
    _want(tag in makers, f"{where}.t", "a record tag: " + ", ".join(["tuple", "enum", "dtype", "value", "capture",
                                                                     *makers]), tag)
    cls = makers[tag](v["c"])
    _want(cls is not None, f"{where}.c", f"a {tag} class of cuprims", v["c"])
    _want(isinstance(body, dict), f"{where}.v", f"the fields of a {cls.__name__}", body)
    hints = _field_types(cls)
    missing = [name for name in hints if name not in body]
    if missing:
        raise CodecError(f"{where}.{missing[0]}", f"a field of {cls.__name__}", "no such field")
    extra = sorted(set(body) - set(hints))
    if extra:
        raise CodecError(f"{where}.{extra[0]}", f"only the fields of {cls.__name__}", "a field it does not have")
    fields = {k: _checked_field(cls.__name__, k, decode(x, f"{where}.{k}", depth + 1), hints[k], f"{where}.{k}")
              for k, x in body.items()}
    try:
        return cls(**fields)
    except Exception as exc:  # noqa: BLE001 - any refusal of the constructor is a bad record
        raise CodecError(where, f"fields a {cls.__name__} takes", f"{type(exc).__name__}: {str(exc)[:100]}") \
            from None
