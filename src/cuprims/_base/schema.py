"""Schemas of the records cuprims reads back from outside the process: a serialized
object's header (:mod:`cuprims._serialization.blobs`), the description inside it
(:mod:`cuprims._serialization.codec`) and the disk cache's entries (:mod:`cuprims._cache.entries`,
:mod:`cuprims._build.build`).

Their checksums tell that a record is the one that was written, not who wrote it: anyone
can edit one and recompute its checksum. So every field is checked, as one tree of nodes
declared per record (types, ranges, sizes, key sets, uniqueness, and checks against what
the reader knows: the payload, the description, the cubin) walked by :func:`validate`,
which names the first field that does not fit in a :class:`SchemaError`.

A walk returns the record as its nodes convert it (a :class:`Checked` node may turn a
value into an object, a description record into a description), and the nodes of a
record see its fields converted so far, and those of the records around it, through
their ``scope`` (with whatever the caller passed to :func:`validate`).
"""

from __future__ import annotations

import re
from collections import ChainMap
from typing import Any, Callable, Hashable, Mapping, Sequence

__all__ = ["SchemaError", "shown", "validate", "Node", "Int", "Str", "Bool", "Choice", "Same", "AnyJson",
           "Optional", "Pair", "ListOf", "MapOf", "Fields", "Checked", "IDENTIFIER"]

#: A C/Python identifier: argument, metadata and struct field names.
IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"

Scope = Mapping[str, Any]


class SchemaError(ValueError):
    """A field that does not fit its schema: ``field`` is its path (``builds[0].cubin``),
    ``expected`` what the schema wants, ``found`` a short rendering of what is there."""

    def __init__(self, field: str, expected: str, found: Any):
        self.field = field
        self.expected = expected
        self.found = found
        super().__init__(f"field {field}: expected {expected}, found {found}")


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def shown(value: Any, limit: int = 80) -> str:
    """``value`` as an error shows it: the start of its repr and its JSON type."""
    if value is None:
        return "null"
    text = repr(value)
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    return f"{text} ({_json_kind(value)})"


def child(field: str, name: str | int) -> str:
    """The path of member ``name`` (a key, or a list index) of ``field``."""
    if isinstance(name, int):
        return f"{field}[{name}]"
    return f"{field}.{name}" if field else name


class Node:
    """One field's schema; ``expected`` says in words what it accepts."""

    expected = "a value"

    def walk(self, value: Any, field: str, scope: Scope) -> Any:
        """``value`` checked (and converted); raises :class:`SchemaError` naming ``field``."""
        raise NotImplementedError

    def fail(self, field: str, value: Any, expected: str | None = None) -> SchemaError:
        return SchemaError(field, expected or self.expected, shown(value))


class AnyJson(Node):
    """Any JSON value (a field whose content another schema checks later)."""

    expected = "a JSON value"

    def walk(self, value: Any, field: str, scope: Scope) -> Any:
        return value


class Int(Node):
    """An integer (not a boolean) in ``lo..hi``."""

    def __init__(self, lo: int, hi: int, what: str = "an integer"):
        self.lo, self.hi = lo, hi
        self.expected = f"{what} in {lo}..{hi}"

    def walk(self, value: Any, field: str, scope: Scope) -> Any:
        if type(value) is not int or not self.lo <= value <= self.hi:
            raise self.fail(field, value)
        return value


class Str(Node):
    """A string of at most ``max_len`` characters, matching ``pattern`` where one is given."""

    def __init__(self, max_len: int, pattern: str | None = None, what: str = "a string"):
        self.max_len = max_len
        self.pattern = re.compile(pattern) if pattern is not None else None
        self.expected = f"{what} of at most {max_len} characters"

    def walk(self, value: Any, field: str, scope: Scope) -> Any:
        if (not isinstance(value, str) or len(value) > self.max_len
                or (self.pattern is not None and not self.pattern.fullmatch(value))):
            raise self.fail(field, value)
        return value


class Bool(Node):
    expected = "true or false"

    def walk(self, value: Any, field: str, scope: Scope) -> Any:
        if type(value) is not bool:
            raise self.fail(field, value)
        return value


class Choice(Node):
    """One of a few values (compared with their types: ``1`` is not ``True``)."""

    def __init__(self, *values: Any):
        self.values = values
        self.expected = "one of " + ", ".join(repr(v) for v in values)

    def walk(self, value: Any, field: str, scope: Scope) -> Any:
        if not any(type(value) is type(v) and value == v for v in self.values):
            raise self.fail(field, value)
        return value


class Same(Node):
    """The value the caller passed to :func:`validate` as ``key`` (a kind, a key, a contract)."""

    def __init__(self, key: str, what: str):
        self.key = key
        self.expected = what

    def walk(self, value: Any, field: str, scope: Scope) -> Any:
        want = scope[self.key]
        if type(value) is not type(want) or value != want:
            raise SchemaError(field, f"{self.expected} ({shown(want, 300)})", shown(value, 300))
        return value


class Optional(Node):
    """null, or what ``node`` accepts."""

    def __init__(self, node: Node):
        self.node = node
        self.expected = f"null or {node.expected}"

    def walk(self, value: Any, field: str, scope: Scope) -> Any:
        return None if value is None else self.node.walk(value, field, scope)


class Pair(Node):
    """A list of exactly ``len(items)`` values, each checked by its own node."""

    def __init__(self, *items: Node, what: str):
        self.items = items
        self.expected = what

    def walk(self, value: Any, field: str, scope: Scope) -> Any:
        if not isinstance(value, list) or len(value) != len(self.items):
            raise self.fail(field, value)
        return [node.walk(v, child(field, i), scope) for i, (node, v) in enumerate(zip(self.items, value))]


class ListOf(Node):
    """A list of ``lo..hi`` items of ``item``; with ``unique``, no two items may have the
    same ``unique(item)`` (of the converted items)."""

    def __init__(self, item: Node, lo: int, hi: int, what: str,
                 unique: Callable[[Any], Hashable] | None = None, unique_what: str = ""):
        self.item, self.lo, self.hi, self.unique, self.unique_what = item, lo, hi, unique, unique_what
        self.what = what
        self.expected = f"a list of {lo} to {hi} {what}"

    def walk(self, value: Any, field: str, scope: Scope) -> Any:
        if not isinstance(value, list) or not self.lo <= len(value) <= self.hi:
            # a list's length only, not its items (it may hold thousands)
            found = f"a list of {len(value)}" if isinstance(value, list) else shown(value)
            raise SchemaError(field, self.expected, found)
        out, seen = [], {}
        for i, item in enumerate(value):
            converted = self.item.walk(item, child(field, i), scope)
            if self.unique is not None:
                key = self.unique(converted)
                if key in seen:
                    raise SchemaError(child(field, i), f"{self.unique_what} other than {child(field, seen[key])}'s",
                                      shown(key))
                seen[key] = i
            out.append(converted)
        return out


class MapOf(Node):
    """A JSON object of ``lo..hi`` members, keys checked by ``key``, values by ``value``."""

    def __init__(self, key: Node, value: Node, lo: int, hi: int, what: str):
        self.key, self.value, self.lo, self.hi = key, value, lo, hi
        self.expected = f"an object of {lo} to {hi} {what}"

    def walk(self, value: Any, field: str, scope: Scope) -> Any:
        if not isinstance(value, dict) or not self.lo <= len(value) <= self.hi:
            found = f"an object of {len(value)} members" if isinstance(value, dict) else shown(value)
            raise SchemaError(field, self.expected, found)
        out = {}
        for k, v in value.items():
            self.key.walk(k, child(field, "<key>"), scope)
            out[k] = self.value.walk(v, child(field, k), scope)
        return out


class Fields(Node):
    """A JSON object with exactly these members, checked in the order given here; each
    member's node sees the members before it, converted, in its scope."""

    def __init__(self, fields: dict[str, Node], what: str = "a record"):
        self.fields = fields
        self.expected = f"{what} with the fields {', '.join(fields)}"

    def walk(self, value: Any, field: str, scope: Scope) -> Any:
        if not isinstance(value, dict):
            raise self.fail(field, value)
        missing = [name for name in self.fields if name not in value]
        if missing:
            raise SchemaError(child(field, missing[0]), "a field of " + (field or "the record"), "no such field")
        extra = sorted(set(value) - set(self.fields))
        if extra:
            raise SchemaError(child(field, extra[0]), f"only the fields {', '.join(self.fields)}",
                              "a field this record does not have")
        out: dict[str, Any] = {}
        inner = ChainMap(out, scope)
        for name, node in self.fields.items():
            out[name] = node.walk(value[name], child(field, name), inner)
        return out


class Checked(Node):
    """``node``, then ``test(value, field, scope)`` on its result: the test returns the
    value (converted as it likes) or raises :class:`SchemaError`.

    A test reads what the record describes (a cubin, generated code); whatever else it
    raises means that the record is not what it claims to be, so it is reported as this
    field not fitting, never as a bare exception."""

    def __init__(self, node: Node, test: Callable[[Any, str, Scope], Any], what: str | None = None):
        self.node, self.test = node, test
        self.expected = what or node.expected

    def walk(self, value: Any, field: str, scope: Scope) -> Any:
        value = self.node.walk(value, field, scope)
        try:
            return self.test(value, field, scope)
        except SchemaError:
            raise
        except Exception as exc:  # noqa: BLE001 - see the class docstring
            raise SchemaError(field, self.expected, f"{type(exc).__name__}: {str(exc)[:200]}") from None


def validate(node: Node, value: Any, field: str = "", **context: Any) -> Any:
    """``value`` walked by ``node`` (converted where its nodes convert); ``context`` is what
    :class:`Same` and :class:`Checked` nodes may read from their scope."""
    return node.walk(value, field, ChainMap({}, context))


def unique_keys(pairs: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members, for ``json.loads(object_pairs_hook=...)``: a key given twice
    is refused (json keeps the last one silently, so a record could say two things)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise SchemaError(repr(twice)[:80], "each key of a JSON object once", "it twice")
    return out
