"""What every iterator is made of: a code key, a device struct, and runtime state.

An iterator reaches the device as a small C++ struct passed to the kernel by value; the
struct's ``operator[](long long i)`` yields item ``i``. Three things describe it:

* ``_key()``: text naming its kind and value types (and those of any iterator or
  operator inside it). It goes into code keys; runtime values (start values, pointers)
  never do, so iterators of one kind share one build whatever their state.
* ``_emit(code)``: the C++ struct definition, appended to ``code`` (an
  :class:`IteratorCode`), with ``static_assert``s pinning the struct size and alignment
  the host packs to.
* ``_pack(state, count)``: the struct's bytes for one launch, member by member in
  declaration order (``count`` is how many items the algorithm will read, or ``None``
  when unknown, e.g. the values behind a permutation).

Plain device arrays are themselves an iterator kind (``pointer``) when they appear
inside another iterator, so composition needs no special cases. Compositions nest at
most :data:`MAX_ITERATOR_DEPTH` levels deep: every walk over an iterator tree (its key,
its C++, its state) visits each level, and a deeper one is refused when it is made.
"""

from __future__ import annotations

import struct as _struct
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from cuprims._runtime import arrays as _arrays
from cuprims._value_types import ValueType, shown_dtype, value_type
from cuprims.errors import ArgumentError, ArgumentTypeError
from cuprims.op import OpSpec

MAX_ITERATOR_DEPTH = 64
"""How many levels an iterator tree may have (an array or a leaf iterator is one level;
``TransformIterator(TransformIterator(x, f), g)`` over an array ``x`` is three). Each
level is a nested C++ struct and a Python frame in each walk over the tree; 64 leaves
room below Python's recursion limit and is far beyond any useful composition."""


@dataclass(frozen=True)
class Member:
    """One data member of an iterator's device struct."""

    name: str
    cpp: str
    size: int
    alignment: int


def adapted_layout(size: int, alignment: int) -> tuple[int, int]:
    """(size, alignment) of ``cuprims::input_iterator<S, V>`` / ``output_iterator<S, V>``
    (iterators/cuprims_iterator.cuh) over a state struct S of ``size`` and ``alignment``:
    S, then a 64-bit position."""
    align = max(alignment, 8)
    position = -(-size // 8) * 8
    return -(-(position + 8) // align) * align, align


def layout(members: list[Member]) -> tuple[list[int], int, int]:
    """C++ layout of ``members`` in order: (offsets, struct size, struct alignment)."""
    offsets, offset, align = [], 0, 1
    for m in members:
        offset = -(-offset // m.alignment) * m.alignment
        offsets.append(offset)
        offset += m.size
        align = max(align, m.alignment)
    return offsets, max(-(-offset // align) * align, 1), align


@dataclass
class LinkedOp:
    """An operator an iterator calls through the pointer ABI (linked like algorithm ops)."""

    symbol: str
    spec: OpSpec
    arg_types: tuple[ValueType, ...]
    result_type: ValueType
    obj: Any


@dataclass
class IteratorCode:
    """Struct definitions (in dependency order) and linked operators of one iterator tree."""

    prefix: str
    output: bool = False  # the tree is written through: writable kinds emit write()
    argument: str | None = None  # the algorithm's argument holding the tree: what operator errors name
    definitions: list[str] = field(default_factory=list)
    ops: list[LinkedOp] = field(default_factory=list)
    value_types: list[ValueType] = field(default_factory=list)
    includes: list[str] = field(default_factory=list)
    _names: int = 0

    def require(self, include_line: str) -> None:
        if include_line not in self.includes:
            self.includes.append(include_line)

    def new_name(self) -> str:
        name = f"{self.prefix}_{self._names}"
        self._names += 1
        return name

    def new_op_symbol(self) -> str:
        return f"{self.prefix}_op_{len(self.ops)}"

    def note_type(self, vt: ValueType) -> None:
        if all(v.code != vt.code for v in self.value_types):
            self.value_types.append(vt)

    def define(self, name: str, members: list[Member], value: ValueType, body: str, extra: str = "",
               write: str | None = None) -> None:
        """Add ``struct name { members; value operator[](long long i) const { body } }``
        (and, for a writable kind, ``void write(long long i, const value& v) const { write }``)
        with asserts that pin the struct size and alignment the host packs to."""
        _, size, align = layout(members)
        fields = "".join(f"  {m.cpp} {m.name};\n" for m in members)
        writer = ""
        if write is not None:
            writer = (f"  __device__ __forceinline__ void write(long long i, const {value.cpp}& v) const\n"
                      f"  {{\n    {write}\n  }}\n")
        # Member offsets follow from sizes and alignments (standard layout); they are not
        # asserted because NVRTC 13.0 has no constant-expression offsetof.
        checks = [f"sizeof({name}) == {size}", f"alignof({name}) == {align}"]
        self.definitions.append(
            f"struct {name}\n{{\n{fields}{extra}"
            f"  __device__ __forceinline__ {value.cpp} operator[](long long i) const\n  {{\n    {body}\n  }}\n{writer}}};\n"
            f"static_assert({' && '.join(checks)}, \"iterator layout differs from cuprims' packing\");\n")


class StateWriter:
    """Bytes of an iterator struct, written member by member with C++ alignment."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def align(self, alignment: int) -> None:
        pad = -len(self._buf) % alignment
        self._buf += b"\0" * pad

    def raw(self, data: bytes, alignment: int) -> None:
        self.align(alignment)
        self._buf += data

    def pointer(self, ptr: int) -> None:
        self.raw(_struct.pack("<Q", ptr), 8)

    def finish(self, size: int) -> bytes:
        out = bytes(self._buf).ljust(size, b"\0")
        if len(out) != size:
            raise AssertionError(f"iterator state packed to {len(out)} bytes, its struct has {size}")
        return out


class IteratorBase:
    """Base of every cuprims iterator. The readable ones (``_readable``: all but a
    DiscardIterator, a TransformOutputIterator and iterators over one) are inputs; the
    writable ones (``_writable``: an array inside, reversed or permuted, a
    TransformOutputIterator, a DiscardIterator, a zip of those) are outputs. An algorithm
    argument takes only the direction it needs (:func:`check_direction`)."""

    __slots__ = ("_cached_key", "_cached_layout", "_cached_depth")

    def __init__(self) -> None:
        self._cached_key: str | None = None
        self._cached_layout: tuple[int, int] | None = None
        self._cached_depth: int | None = None

    # -- what subclasses provide ---------------------------------------------------------
    @property
    def value_type(self) -> ValueType:
        raise NotImplementedError

    def _kind_key(self) -> str:
        raise NotImplementedError

    def _emit(self, code: IteratorCode) -> tuple[str, list[Member]]:
        """Define this iterator's struct in ``code``; return (struct name, members)."""
        raise NotImplementedError

    def _pack(self, state: StateWriter, count: int | None, argument: str) -> None:
        raise NotImplementedError

    def _inner(self) -> tuple["IteratorBase", ...]:
        """The iterators this one reads from."""
        return ()

    def _persistent(self) -> bool:
        """Whether the code key holds no object identity (so a build may be stored on disk)."""
        return all(inner._persistent() for inner in self._inner())

    def _writable(self) -> bool:
        """Whether the kernel can write through this iterator (an output iterator)."""
        return False

    def _readable(self) -> bool:
        """Whether reading gives items of a sequence: false for the output-only kinds
        (DiscardIterator, TransformOutputIterator, which read as zeros) and anything
        built over one."""
        return all(inner._readable() for inner in self._inner())

    def _linked_objects(self) -> list[Any]:
        """The callables and RawOps behind the operators this tree links, in ``_emit``'s order."""
        return [obj for inner in self._inner() for obj in inner._linked_objects()]

    # -- shared ------------------------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        """numpy dtype of the items (a structured dtype for gpu_struct values)."""
        return self.value_type.dtype

    def _depth(self) -> int:
        """Levels of this tree (1 for a leaf); computed as it is composed, so never walking deep."""
        depth = self._cached_depth
        if depth is None:
            depth = self._cached_depth = 1 + max((inner._depth() for inner in self._inner()), default=0)
        return depth

    def _key(self) -> str:
        key = self._cached_key
        if key is None:
            key = self._cached_key = self._kind_key()
        return key

    def _struct_layout(self) -> tuple[int, int]:
        """(size, alignment) of this iterator's device struct."""
        lay = self._cached_layout
        if lay is None:
            _, members = self._emit(IteratorCode("layout"))
            _, size, align = layout(members)
            lay = self._cached_layout = (size, align)
        return lay

    def _state(self, count: int | None, argument: str) -> bytes:  # the struct's bytes for `count` items
        writer = StateWriter()
        self._pack(writer, count, argument)
        return writer.finish(self._struct_layout()[0])

    def _shown(self) -> list[str]:
        """The arguments a repr shows: what the iterator was made of, for people."""
        return [repr(inner) for inner in self._inner()]

    def __repr__(self) -> str:
        """The iterator and what it was made of, e.g. ``TransformIterator(CountingIterator(
        start=0, dtype=int32), transform_op=<lambda>, value_type=int32)``."""
        return f"{type(self).__name__}({', '.join(self._shown())})"

    def __add__(self, n: Any) -> Any:
        """``it + n``: item ``i`` is this iterator's item ``i + n`` (``_advanced.py``)."""
        return _advance(self, n)

    __radd__ = __add__


_advance: Callable[[Any, Any], Any]   # ``it + n``: _advanced.advanced, set by the package (it builds on this module)


def shown_value(data: bytes, vt: ValueType) -> str:
    """A host value's bytes, as the value (for reprs)."""
    value = np.frombuffer(data, vt.dtype, count=1)[0]
    return repr(value.item()) if vt.dtype.names is None else repr(value.tolist())


def iterator_value_type_of(x: Any, argument: str) -> ValueType:
    """Value type of an iterator or a device array."""
    if isinstance(x, IteratorBase):
        return x.value_type
    return value_type(_arrays.array_dtype(x, argument), argument=argument)


class PointerIterator(IteratorBase):
    """A device array seen as an iterator (inside other iterators).

    With ``from_end`` item 0 is the array's last item (for a reversed array)."""

    __slots__ = ("_array", "_vt", "_from_end")

    def __init__(self, array: Any, *, argument: str = "array", from_end: bool = False):
        super().__init__()
        self._vt = value_type(_arrays.array_dtype(array, argument), argument=argument)
        self._array = array
        self._from_end = from_end

    @property
    def value_type(self) -> ValueType:
        return self._vt

    def _kind_key(self) -> str:
        return f"pointer({self._vt.code})"

    def __repr__(self) -> str:
        return f"{shown_dtype(self._vt.dtype)} array"

    def _read(self, code: IteratorCode) -> str:
        """C++ expression reading item ``i`` through the member ``ptr``."""
        return "ptr[i]"

    def _writable(self) -> bool:
        return True

    def _emit(self, code: IteratorCode) -> tuple[str, list[Member]]:
        code.note_type(self._vt)
        name = code.new_name()
        if not (code.output and self._writable()):
            members = [Member("ptr", f"const {self._vt.cpp}*", 8, 8)]
            code.define(name, members, self._vt, f"return {self._read(code)};")
            return name, members
        members = [Member("ptr", f"{self._vt.cpp}*", 8, 8)]
        code.define(name, members, self._vt, f"return {self._read(code)};", write="ptr[i] = v;")
        return name, members

    def _pack(self, state: StateWriter, count: int | None, argument: str) -> None:
        vt = self._vt
        ptr, size = _arrays.checked_array(self._array, argument, vt.dtype, count or 0, vt.alignment - 1, None)
        if self._from_end and size:
            ptr += (size - 1) * self._vt.size
        state.pointer(ptr)


def as_iterator(x: Any, argument: str, *, from_end: bool = False) -> IteratorBase:
    """``x`` as a part of a new iterator: ``x`` itself if it is an iterator (checked against
    :data:`MAX_ITERATOR_DEPTH`), else the device array ``x`` as a :class:`PointerIterator`."""
    if isinstance(x, IteratorBase):
        depth = x._depth()
        if depth >= MAX_ITERATOR_DEPTH:
            raise ArgumentError(argument, f"an iterator at most {MAX_ITERATOR_DEPTH - 1} levels deep (iterators "
                                f"nest at most {MAX_ITERATOR_DEPTH} levels)", f"an iterator {depth} levels deep")
        return x
    return PointerIterator(x, argument=argument, from_end=from_end)


def check_direction(it: IteratorBase, argument: str, output: bool) -> None:
    """The one rule for an iterator in an argument or inside another: one read takes only
    iterators with items to read, one written only iterators the kernel can write through.
    Counting, Constant, Shuffle, CacheModifiedInput and Transform iterators are read-only;
    Discard and TransformOutput ones write-only (read as zeros, a silent wrong answer);
    Reverse, Permutation, Zip and advanced ones are what their parts allow."""
    if output and not it._writable():
        raise ArgumentTypeError(argument, "a device array or an output iterator (DiscardIterator, "
                                "TransformOutputIterator, or a Reverse/Permutation/Zip iterator over arrays)", it)
    if not output and not it._readable():
        raise ArgumentTypeError(argument, "a device array or an input iterator (a DiscardIterator or "
                                "TransformOutputIterator, or an iterator over one, is an output: it has no items "
                                "to read)", it)


def as_input(x: Any, argument: str) -> IteratorBase:
    """:func:`as_iterator` for a part the new iterator reads (:func:`check_direction`)."""
    it = as_iterator(x, argument)
    check_direction(it, argument, output=False)
    return it


def emit_member(code: IteratorCode, inner: IteratorBase, name: str) -> Member:
    """Define ``inner``'s struct and return the member that holds it."""
    struct_name, members = inner._emit(code)
    _, size, align = layout(members)
    return Member(name, struct_name, size, align)


def pack_member(state: StateWriter, inner: IteratorBase, count: int | None, argument: str) -> None:
    """Pack ``inner`` as a member: aligned to its struct, padded to its struct's size."""
    state.raw(inner._state(count, argument), inner._struct_layout()[1])


class ValueStateIterator(IteratorBase):
    """An iterator whose whole state is one value of its own type (counting, constant):
    subclasses set ``_vt``, ``_value`` (the value's bytes), ``_kind`` and ``_body``."""

    __slots__ = ("_vt", "_value")
    _vt: ValueType
    _value: bytes
    _kind = ""
    _value_name = "value"   # the constructor's name for the value

    def _body(self) -> str:
        """C++ statements returning item ``i`` from the member ``value``."""
        raise NotImplementedError

    @property
    def value_type(self) -> ValueType:
        return self._vt

    def _kind_key(self) -> str:
        return f"{self._kind}({self._vt.code})"

    def _shown(self) -> list[str]:
        return [f"{self._value_name}={shown_value(self._value, self._vt)}", f"dtype={shown_dtype(self._vt.dtype)}"]

    def _emit(self, code: IteratorCode) -> tuple[str, list[Member]]:
        vt = self._vt
        code.note_type(vt)
        name = code.new_name()
        members = [Member("value", vt.cpp, vt.size, vt.alignment)]
        code.define(name, members, vt, self._body())
        return name, members

    def _pack(self, state: StateWriter, count: int | None, argument: str) -> None:
        state.raw(self._value, self._vt.alignment)
