"""Value types: numpy dtype <-> C++ type <-> numba type (the public type objects of
:mod:`cuprims.types` are a face over these).

A :class:`ValueType` is the frozen, hashable description of one element type that
flows through the pipeline. Scalars map to C++ built-in types; structs (from
:func:`cuprims.gpu_struct` or a structured numpy dtype) map to a storage struct of the
same layout: typed fields (f0, f1, ... with explicit padding) where the layout allows, so
that the compiler keeps values in registers, else an aligned byte array.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cuprims.errors import ArgumentError
# struct dtypes' fields, layouts and display, kept beside the struct values that use them
from cuprims.struct_values import same_layout as same_layout
from cuprims.struct_values import shown_dtype as shown_dtype
from cuprims.struct_values import shown_fields as shown_fields
from cuprims.struct_values import struct_fields as struct_fields
from cuprims.struct_values import struct_value

# numpy kind+itemsize -> (C++ type, numba type name)
SCALARS: dict[str, tuple[str, str]] = {
    "b1": ("bool", "boolean"),
    "i1": ("signed char", "int8"),
    "i2": ("short", "int16"),
    "i4": ("int", "int32"),
    "i8": ("long long", "int64"),
    "u1": ("unsigned char", "uint8"),
    "u2": ("unsigned short", "uint16"),
    "u4": ("unsigned int", "uint32"),
    "u8": ("unsigned long long", "uint64"),
    "f2": ("__half", "float16"),
    "f4": ("float", "float32"),
    "f8": ("double", "float64"),
    "c8": ("::cuda::std::complex<float>", "complex64"),
    "c16": ("::cuda::std::complex<double>", "complex128"),
}

SUPPORTED_SCALARS = tuple(np.dtype(k) for k in SCALARS)

# Limits on struct value types, checked before anything is compiled: larger structs make
# NVRTC and nvJitLink take minutes (a 4 KiB value: over 300 s to link), and deeper nesting
# than any real record is a mistake.
MAX_STRUCT_BYTES = 1024
MAX_STRUCT_DEPTH = 16


@dataclass(frozen=True)
class ValueType:
    """One element type. ``code`` is its canonical text, used in cache keys."""

    code: str            # "f4", "i8", ... or "struct:<name>:<hash>" (or "ext:<hash>")
    dtype: np.dtype
    cpp: str             # C++ spelling used in generated code
    size: int
    alignment: int
    # a numba extension type (its own ``types.Type`` and data model) whose values these
    # are: ``dtype`` is then a struct of the same layout, which C++ stores and copies
    numba: Any = field(default=None, compare=False, repr=False)

    @property
    def is_struct(self) -> bool:
        return self.dtype.names is not None

    @property
    def kind(self) -> str:
        """numpy kind letter: 'b', 'i', 'u', 'f', 'c' or 'V' for structs."""
        return self.dtype.kind

    def storage_decl(self) -> str:
        """C++ declaration (and layout check) of the storage struct (structs only), after
        those of the structs it nests (see :func:`struct_decls`)."""
        return "\n".join(decl for _, decl in struct_decls(self))

    def __repr__(self) -> str:  # short, for error messages
        return f"ValueType({self.dtype!r})" if not self.is_struct else f"ValueType({self.cpp})"


_cache: dict[Any, ValueType] = {}
_DTYPE_EXPECTED = "a numpy dtype, a cuprims.types type (types.int32) or a gpu_struct type"


def _struct_alignment(dt: np.dtype) -> int:
    if dt.names is None:
        if dt.subdtype is not None:
            return _struct_alignment(dt.subdtype[0])
        return dt.alignment
    return max([_struct_alignment(field) for _, field, _ in struct_fields(dt)] + [1])


def struct_code(dt: np.dtype) -> str:
    return hashlib.sha256(repr(dt.descr).encode() + str(dt.itemsize).encode()).hexdigest()[:16]


def check_struct(dt: np.dtype, argument: str) -> None:
    """Size, nesting depth and field sizes of a struct dtype against the limits, walked
    without recursion (so a 600-deep nest is an ArgumentError, not a RecursionError)."""
    if dt.itemsize > MAX_STRUCT_BYTES:
        raise ArgumentError(argument, f"a struct of at most {MAX_STRUCT_BYTES} bytes (cuprims.types.MAX_STRUCT_BYTES)",
                            f"{dt.itemsize} bytes")
    stack = [(dt, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_STRUCT_DEPTH:
            raise ArgumentError(argument, f"structs nested at most {MAX_STRUCT_DEPTH} deep "
                                "(cuprims.types.MAX_STRUCT_DEPTH)", f"a deeper nest")
        if node.subdtype is not None:
            stack.append((node.subdtype[0], depth))
            if node.itemsize == 0:
                raise ArgumentError(argument, "fields of non-zero size", f"a zero-length array field in {node}")
            continue
        for name, field, _ in struct_fields(node):
            if field.itemsize == 0:
                raise ArgumentError(argument, "fields of non-zero size", f"field {name!r} of {field}")
            stack.append((field, depth + 1))


def value_type(dtype: Any, *, argument: str = "dtype") -> ValueType:
    """The :class:`ValueType` of a numpy dtype (or anything ``np.dtype`` accepts: a
    :mod:`cuprims.types` type object through its ``dtype`` attribute), or a gpu_struct."""
    try:
        return _cache[dtype]
    except (KeyError, TypeError):
        pass
    if dtype is None:  # np.dtype(None) would quietly be float64
        raise ArgumentError(argument, _DTYPE_EXPECTED, None)
    struct_dtype = getattr(dtype, "_cuprims_dtype", None)
    try:
        dt = struct_dtype if struct_dtype is not None else np.dtype(dtype)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ArgumentError(argument, _DTYPE_EXPECTED, type(dtype).__name__) from None
    if dt.names is not None:
        check_struct(dt, argument)
        align = _struct_alignment(dt)
        if dt.itemsize % align:
            raise ArgumentError(argument, "a struct dtype whose size is a multiple of its alignment "
                                "(build it with gpu_struct or np.dtype(..., align=True))", dt)
        h = struct_code(dt)
        vt = ValueType(code=f"struct:{h}", dtype=dt, cpp=f"cuprims_struct_{h}",
                       size=dt.itemsize, alignment=align)
    else:
        key = f"{dt.kind}{dt.itemsize}"
        if key not in SCALARS or dt.byteorder == ">":
            raise ArgumentError(argument, "one of bool, int8..int64, uint8..uint64, float16/32/64, "
                                "complex64/128 or a gpu_struct", dt)
        cpp, _ = SCALARS[key]
        # cuda::std::complex<T> is aligned to its whole size; numpy's complex only to T's
        alignment = dt.itemsize if dt.kind == "c" else dt.alignment
        vt = ValueType(code=key, dtype=dt if dt.byteorder in "=|" else dt.newbyteorder("="),
                       cpp=cpp, size=dt.itemsize, alignment=alignment)
    try:
        _cache[dtype] = vt
    except TypeError:
        pass
    return vt


# C++ types standing for a field's bytes. They only carry layout (C++ never computes with
# a struct's fields): half as its 16 bits, complex as two reals (numpy aligns complex to
# its parts, cuda::std::complex to its whole size).
_FIELD_CPP = {**{k: v[0] for k, v in SCALARS.items()}, "f2": "unsigned short", "c8": "float", "c16": "double"}


def _field_cpp(dt: np.dtype) -> tuple[str, int, int] | None:
    """(C++ element type, element count, alignment) of a field, or None when it has no
    typed C++ spelling (a byte-swapped scalar, an odd kind)."""
    count = 1
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        for extent in shape:
            count *= extent
        dt = base
    if dt.names is not None:
        vt = value_type(dt, argument="field")
        return vt.cpp, count, vt.alignment
    key = f"{dt.kind}{dt.itemsize}"
    if key not in _FIELD_CPP or dt.byteorder == ">":
        return None
    if key in ("c8", "c16"):
        return _FIELD_CPP[key], 2 * count, dt.itemsize // 2
    return _FIELD_CPP[key], count, dt.itemsize


def struct_decls(vt: ValueType) -> list[tuple[str, str]]:
    """(C++ name, declaration) of ``vt``'s storage struct and, first, of the structs it
    nests, each once. Fields are typed and named f0, f1, ... with explicit padding, so a
    copy moves typed values (a byte array makes NVVM copy byte by byte through local
    memory); a layout C++ cannot state (a misaligned field) falls back to bytes."""
    out: list[tuple[str, str]] = []
    dt = vt.dtype
    members: list[str] = []
    offset, pad, typed = 0, 0, True
    for k, (_, field, field_offset) in enumerate(struct_fields(dt)):
        spelled = _field_cpp(field)
        if spelled is None or field_offset < offset or field_offset % spelled[2]:
            typed = False
            break
        if spelled[0].startswith("cuprims_struct_"):
            for nested in struct_decls(value_type(field.subdtype[0] if field.subdtype else field, argument="field")):
                if nested not in out:
                    out.append(nested)
        if field_offset > offset:
            members.append(f"unsigned char pad{pad}[{field_offset - offset}];")
            pad += 1
        cpp, count, _ = spelled
        members.append(f"{cpp} f{k}[{count}];" if field.subdtype is not None or count > 1 else f"{cpp} f{k};")
        offset = field_offset + field.itemsize
    if typed and offset < vt.size:
        members.append(f"unsigned char pad{pad}[{vt.size - offset}];")
    body = " ".join(members) if typed and members else f"unsigned char bytes[{vt.size}];"
    out.append((vt.cpp, f"struct __align__({vt.alignment}) {vt.cpp} {{ {body} }};\n"
                        f"static_assert(sizeof({vt.cpp}) == {vt.size} && alignof({vt.cpp}) == {vt.alignment});"))
    return out


def numba_type_name(vt: ValueType) -> str:
    """numba's name for a scalar type (structs are handled by the operator compiler)."""
    return SCALARS[vt.code][1]


def host_bytes(value: Any, vt: ValueType, *, argument: str) -> bytes:
    """The bytes of a host value converted to ``vt`` (used for init values passed at launch).

    Conversions follow numpy's ``same_kind`` rule (float64 -> float32 is fine, 3.7 -> int32
    is not), and a value that does not fit the target is an ArgumentError, never wrapped
    or truncated. A struct value may take any form :mod:`cuprims.struct_values` lists (an
    instance or record of ``vt``'s struct or of one of its layout, a dict or tuple of field
    values)."""
    if type(value) is np.ndarray and value.size == 1 and value.dtype == vt.dtype and not vt.is_struct:
        return value.tobytes()        # cuda.compute's usual form: a 1-element array of the type
    data = getattr(value, "_cuprims_data", None)
    if data is not None:
        value = data
    if vt.is_struct:
        if isinstance(value, np.ndarray | np.void) and value.dtype == vt.dtype and value.size == 1:
            return value.tobytes()    # the common case: the struct's own value
        return struct_value(value, vt.dtype, argument).tobytes()
    raw = _scalar_array(value, vt, argument).reshape(-1)[:1].tobytes()
    if len(raw) != vt.size:
        raise ArgumentError(argument, f"one {vt.dtype} value", value)
    return raw


def _scalar_array(value: Any, vt: ValueType, argument: str) -> np.ndarray:
    """``value`` as a one-element array of ``vt``'s dtype, converted by numpy's same_kind rule
    and range-checked."""
    target = vt.dtype
    if isinstance(value, (bool, int, float, complex)) and not isinstance(value, np.generic):
        kind = "b" if isinstance(value, bool) else "i" if isinstance(value, int) else \
            "f" if isinstance(value, float) else "c"
        if not np.can_cast(np.dtype({"b": "?", "i": "i8", "f": "f8", "c": "c16"}[kind]), target, "same_kind") \
                and not (kind == "i" and target.kind == "u"):
            raise ArgumentError(argument, f"a value convertible to {target} (numpy's same_kind rule)", value)
        if kind == "i" and target.kind in "iu":
            _check_range(value, target, argument)  # type: ignore[arg-type]  # kind "i": an int
        return np.asarray(value).astype(target) if kind != "i" or target.kind not in "iu" \
            else np.asarray(value, dtype=target)
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(argument, f"a value convertible to {target}", value) from exc
    if arr.size != 1:
        raise ArgumentError(argument, f"one {target} value", value)
    if arr.dtype.kind not in "biufc" or not np.can_cast(arr.dtype, target, "same_kind"):
        raise ArgumentError(argument, f"a value convertible to {target} (numpy's same_kind rule)", arr.dtype)
    if arr.dtype.kind in "iu" and target.kind in "iu":
        _check_range(int(arr.reshape(-1)[0]), target, argument)
    return arr.astype(target, copy=False)


def _check_range(v: int, target: np.dtype, argument: str) -> None:
    info = np.iinfo(target)
    if not info.min <= v <= info.max:
        raise ArgumentError(argument, f"a value in the range of {target} ({info.min}..{info.max})", v)
