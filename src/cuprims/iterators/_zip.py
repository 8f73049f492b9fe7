"""ZipIterator: several sequences read (or written) side by side as one of structs."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from cuprims._value_types import ValueType, struct_fields, value_type
from cuprims.errors import ArgumentError
from cuprims.iterators.base import (IteratorBase, IteratorCode, Member, StateWriter, as_iterator, emit_member,
                                    pack_member)
from cuprims.typing import ArrayIteratorOrProxy


class ZipIterator(IteratorBase):
    """Item i is the struct ``(a[i], b[i], ...)`` of the items of ``a, b, ...`` (device
    arrays or iterators). Operators read its fields as ``v[0]``, ``v[1]``, ... (they are
    also named ``v0``, ``v1``, ...); a reduction or scan over it may write into a
    ``gpu_struct`` output of its layout (the same field types in the same order), whose
    field names its operator then reads. Over arrays (or writable iterators) it is also an
    output: writing a struct stores each field into its sequence.

    Example (the index of the largest value, the first on ties, as numpy's argmax)::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray([3.0, 7.0, 7.0, 1.0], dtype=np.float32)
        Pair = cuprims.gpu_struct({"value": np.float32, "index": np.int64})
        def better(a, b):
            if a[0] > b[0] or (a[0] == b[0] and a[1] < b[1]):
                return a
            return b
        out = cp.empty(1, Pair.dtype)
        cuprims.reduce_into(d_in=cuprims.ZipIterator(x, cuprims.CountingIterator(np.int64(0))),
                            d_out=out, num_items=x.size, op=better,
                            h_init=Pair(-np.inf, np.iinfo(np.int64).max))
        assert int(out.get()["index"][0]) == 1
    """

    __slots__ = ("_parts", "_vt", "_offsets")

    def __init__(self, *args: ArrayIteratorOrProxy | Sequence[ArrayIteratorOrProxy]):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        if not args:
            raise ArgumentError("args", "one or more device arrays or iterators", "none")
        self._parts = tuple(as_iterator(a, f"args[{k}]") for k, a in enumerate(args))
        dt = np.dtype({"names": [f"v{k}" for k in range(len(args))],
                       "formats": [p.value_type.dtype for p in self._parts]}, align=True)
        self._vt = value_type(dt, argument="args")
        self._offsets = tuple(offset for _, _, offset in struct_fields(dt))

    @property
    def value_type(self) -> ValueType:
        return self._vt

    def _inner(self) -> tuple[IteratorBase, ...]:
        return self._parts

    def _writable(self) -> bool:
        return all(p._writable() for p in self._parts)

    def _kind_key(self) -> str:
        return "zip(" + ",".join(p._key() for p in self._parts) + ")"

    def _emit(self, code: IteratorCode) -> tuple[str, list[Member]]:
        members = [emit_member(code, p, f"part{k}") for k, p in enumerate(self._parts)]
        vt = self._vt
        code.note_type(vt)
        code.require("#include <cuda/std/cstring>")
        reads, writes = [], []
        for k, (p, off) in enumerate(zip(self._parts, self._offsets)):
            t = p.value_type.cpp
            # copied by address and size: the storage struct's fields are f0, f1, ... or bytes
            # (types.struct_decls); a copy that covers one field whole compiles to a move
            reads.append(f"{{ const {t} x = part{k}[i]; ::cuda::std::memcpy(reinterpret_cast<unsigned char*>(&r) + "
                         f"{off}, &x, sizeof(x)); }}")
            writes.append(f"{{ {t} x; ::cuda::std::memcpy(&x, reinterpret_cast<const unsigned char*>(&v) + {off}, "
                          f"sizeof(x)); part{k}.write(i, x); }}")
        body = f"{vt.cpp} r;\n    " + "\n    ".join(reads) + "\n    return r;"
        write = "\n    ".join(writes) if code.output and self._writable() else None
        name = code.new_name()
        code.define(name, members, vt, body, write=write)
        return name, members

    def _pack(self, state: StateWriter, count: int | None, argument: str) -> None:
        for k, p in enumerate(self._parts):
            pack_member(state, p, count, f"{argument} (part {k})")
