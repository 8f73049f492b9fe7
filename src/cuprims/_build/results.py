"""What a build takes and gives, as plain data: the operators to link and the compiled,
device-independent payload, and the schema of that payload where it is read back from
outside the process (a disk cache entry, a serialized object). Kept apart from
:mod:`cuprims._build.build` so that calling an already-built (or deserialized) object never
imports the compiler side."""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass, field
from typing import Any

from cuprims._base.schema import IDENTIFIER, Int, MapOf, Node, SchemaError, Str, child, shown
from cuprims._compile.elfmeta import cuda_arch, read_meta, sections
from cuprims._compile.source import META_SYMBOL, Source
from cuprims._value_types import ValueType
from cuprims.op import OpSpec


@dataclass(frozen=True)
class OpInput:
    """An operator to link: the symbol the kernel calls and the types it is called with.
    ``result_type`` None: the result is a truth value, stored as a flag byte; with
    ``ignores_result`` the operator is called for its side effects and whatever it returns
    is dropped (its result pointer is still passed, to one byte nobody reads)."""

    symbol: str
    spec: OpSpec
    arg_types: tuple[ValueType, ...]
    result_type: ValueType | None
    ignores_result: bool = False


@dataclass
class BuildResult:
    """Compiled, device-independent payload for one compute capability."""

    arch: int
    cubin: bytes
    kernels: dict[str, str]           # name expression -> lowered (mangled) name
    meta: dict[str, int]
    loaded: dict[int, Any] = field(default_factory=dict, repr=False)   # device ordinal -> Module
    load_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


# ----------------------------------------------------------------------------- read back

#: A kernel's name expression, as the code generator writes it (C++ of a template instance).
NAME_EXPRESSION = Str(4096, r"[A-Za-z_:][A-Za-z0-9_:<>,*&() .\-]*", "a kernel's C++ name expression")
#: A kernel's lowered (mangled) name: what NVRTC gives for a name expression.
LOWERED_NAME = Str(4096, r"[A-Za-z_$][A-Za-z0-9_$.]*", "a lowered kernel name")
#: The kernels of a build: name expression -> lowered name.
KERNELS = MapOf(NAME_EXPRESSION, LOWERED_NAME, 1, 64, "kernels (name expression: lowered name)")
#: A build's exported metadata (tile shapes, sizes of types, ...): what ``cuprims_meta`` holds.
META = MapOf(Str(64, IDENTIFIER, "a metadata field name"), Int(0, 2 ** 31 - 1, "a metadata value"), 0, 64,
             "metadata values")
#: Block sizes: what a launch passes as threads per block.
_THREADS = Int(1, 1024, "threads per block")


def _meta_value(name: str) -> Node | None:
    """The narrower range of metadata field ``name``, if it has one."""
    return _THREADS if name == "threads" or name.endswith("_threads") else None


def checked_result(arch: int, cubin: bytes, kernels: dict[str, str], meta: dict[str, int], source: Source,
                   field: str) -> BuildResult:
    """The build result these parts make, checked against the unit they claim to be built
    from (``source``: its kernels and metadata fields) and against the cubin itself: an
    ELF image for ``sm_<arch>`` that holds every kernel and exports exactly ``meta``.
    ``kernels`` and ``meta`` have been walked by :data:`KERNELS` and :data:`META`; a part
    that does not fit raises :class:`~cuprims._base.schema.SchemaError` naming
    ``<field>.kernels``, ``<field>.meta`` or ``<field>.cubin``."""
    names, fields = source.name_expressions, source.meta_fields
    if set(kernels) != set(names):
        raise SchemaError(child(field, "kernels"), f"the kernels {', '.join(sorted(set(names)))}",
                          shown(sorted(kernels), 300))
    if set(meta) != set(fields):
        raise SchemaError(child(field, "meta"), f"the fields {', '.join(fields)}", shown(sorted(meta), 300))
    for name in fields:
        node = _meta_value(name)
        if node is not None:
            node.walk(meta[name], child(child(field, "meta"), name), {})
    where = child(field, "cubin")
    try:
        built_for = cuda_arch(cubin)
        held = sections(cubin)
        exported = read_meta(cubin, META_SYMBOL, fields) if fields else {}
    except (ValueError, KeyError, IndexError, struct.error) as exc:   # an image that is not whole
        raise SchemaError(where, f"a CUDA ELF image for sm_{arch}", f"{type(exc).__name__}: {str(exc)[:100]}") \
            from None
    if built_for != arch:
        raise SchemaError(where, f"a CUDA ELF image for sm_{arch}", f"one for sm_{built_for}")
    for name in names:
        lowered = kernels[name]
        if ".text." + lowered not in held or ".nv.info." + lowered not in held:
            raise SchemaError(child(child(field, "kernels"), name), "a kernel of the cubin", shown(lowered, 200))
    if exported != meta:
        raise SchemaError(child(field, "meta"), f"the values its cubin exports, {exported}", shown(meta, 300))
    return BuildResult(arch=arch, cubin=cubin, kernels={n: kernels[n] for n in names},
                       meta={f: meta[f] for f in fields})
