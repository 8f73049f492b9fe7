"""Saving built algorithm objects and loading them elsewhere: :func:`serialize` and
:func:`deserialize`.

A blob is data only (no pickle, no eval)::

    MAGIC (8) | format version (u32) | reserved (u32) | sha256 of the rest (32)
      | header length (u64) | header (JSON) | cubins

The header holds cuprims' version and the build contract it was made under (code
generator, cuprims' own sources, CCCL: what fixes the kernels' parameter layouts), the
whole toolchain fingerprint (for people), the algorithm's class, its description
(:mod:`cuprims._serialization.codec`), and per build variant and architecture the kernels'
names, lowered names and exported metadata, the digest of the code the description
generates for it, and where its cubin lies (the cubins lie back to back, in the order
of the builds).

The checksum finds damage, not forgery: anyone can edit a blob and recompute it. So
loading checks every header field against one schema (:data:`_HEADER`, walked by
:func:`cuprims._base.schema.validate`): its type and range, and its agreement with the
description and with the cubin (an ELF image for the recorded architecture that holds
the recorded kernels, with the parameter sizes the description packs, and exports the
recorded metadata). Still, a blob is not signed: a deliberate forgery that agrees with
itself loads, and runs its cubins. Load only blobs you trust.

Loading compiles nothing, imports no numba and needs no GPU: the object loads its cubin
on a device at its first call there, and refuses a device whose architecture it has no
cubin for. Any problem with a blob is a :class:`~cuprims.errors.BlobError` (also a
ValueError) naming the field, what was expected and what was found.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import struct
import sys
from typing import Any, NamedTuple

from cuprims._base.schema import (AnyJson, Checked, Fields, Int, ListOf, Pair, Same, SchemaError, Scope, Str, child,
                                  shown, unique_keys, validate)
from cuprims._build.results import KERNELS, META, NAME_EXPRESSION, checked_result
from cuprims._compile.elfmeta import param_layout, sections
from cuprims._compile.source import Source
from cuprims._runtime.params import param_size
from cuprims._serialization.codec import decode, encode
from cuprims.errors import ArgumentTypeError, BlobError

__all__ = ["serialize", "deserialize"]

MAGIC = b"CUPRIMSO"
FORMAT_VERSION = 2
_HEAD = struct.Struct("<8sII32sQ")
_MAX_HEADER = 64 << 20
_MAX_BUILDS = 256      # build records (variants x architectures); an object has a handful
_MAX_CUBIN = 1 << 31   # bytes of one cubin (a large one is a few MiB)
# the C++ type name an iterator's (unrecorded) struct is generated under when a blob is
# written and read (see _stood_in); a recorded kernel name has the real one there
_STAND_IN = "cuprims_recorded_iterator_t"


def _contract() -> dict[str, str]:
    """What a blob and the loading cuprims must share (see toolchain.build_contract)."""
    from cuprims._compile.toolchain import build_contract

    return dict(build_contract())


def _algorithm_class(name: str) -> type | None:
    """The algorithm class a header names (``cuprims.algorithms.<home>.api.<class>``), importing
    only that one module, and only if it is one of ours: a blob never picks what is imported."""
    from cuprims.algorithms import MODULES

    if name.count(".") != 4:
        return None
    package, sub, home, api, qualname = name.split(".")
    if f"{package}.{sub}" != "cuprims.algorithms" or home not in MODULES or api != "api":
        return None
    module = f"{home}.api"
    import importlib

    from cuprims.algorithms.skeleton import Algorithm

    cls = getattr(importlib.import_module(f"cuprims.algorithms.{module}"), qualname, None)
    ok = isinstance(cls, type) and issubclass(cls, Algorithm) and cls is not Algorithm and cls.__module__ == \
        f"cuprims.algorithms.{module}"
    return cls if ok else None


def _stood_in(desc: Any) -> Any:
    """``desc`` with each iterator's generated C++ (not recorded in a blob) replaced by a
    stand-in struct named :data:`_STAND_IN`: what writing and reading a blob generate
    code from, so that both see the same code."""
    from cuprims._operators.captures import Capture
    from cuprims.algorithms.arguments import ArgKind
    from cuprims.iterators.units import IteratorUnit

    def stand_in(value: Any) -> Any:
        if isinstance(value, ArgKind) and not value.is_pointer:
            return dataclasses.replace(value, unit=IteratorUnit(
                type_name=_STAND_IN, text="", value_types=(), ops=(), state_size=value.unit_state_size,
                state_alignment=value.unit_state_alignment))
        if isinstance(value, tuple) and not isinstance(value, Capture):
            return tuple(stand_in(v) for v in value)
        return value

    return dataclasses.replace(desc, **{f.name: stand_in(getattr(desc, f.name)) for f in dataclasses.fields(desc)})


def _code_digest(source: Any) -> str:
    """The digest of a generated unit: its text, kernels and metadata fields."""
    text = "\0".join((source.text, *source.name_expressions, "", *source.meta_fields))
    return hashlib.sha256(text.encode()).hexdigest()


def serialize(obj: Any) -> bytes:
    """The bytes of a built algorithm object: its description and every cubin it holds
    (each architecture it was built for, each build variant made so far).

    A blob carries a checksum, which finds damage, and loading checks every field of it,
    but it is not signed: :func:`deserialize` only blobs you trust (see there).

    Example::

        import numpy as np, cuprims
        r = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32),
                                     op=cuprims.OpKind.PLUS, h_init=cuprims.ProxyValue(np.float32),
                                     compute_capability=[80, 90])    # no GPU needed
        blob = cuprims.serialize(r)
        again = cuprims.deserialize(blob)                             # anywhere with this cuprims
        assert again.compute_capabilities == [80, 90]
    """
    from cuprims.algorithms.skeleton import Algorithm

    if not isinstance(obj, Algorithm):
        raise ArgumentTypeError("obj", "an algorithm object made by a cuprims make_* function", obj)
    builds, cubins, offset = [], [], 0
    recorded = _stood_in(obj.desc)
    for variant, variant_builds in sorted(obj._variant_builds.items()):
        for arch in variant_builds.archs:
            result = variant_builds.result(arch)
            names = list(variant_builds.source(arch).name_expressions)
            builds.append({"variant": variant, "arch": arch, "names": names, "kernels": dict(result.kernels),
                           "meta": dict(result.meta), "cubin": [offset, len(result.cubin)],
                           "code": _code_digest(recorded.variant(variant).source(arch))})
            cubins.append(result.cubin)
            offset += len(result.cubin)
    from cuprims._base.version import VERSION as __version__
    from cuprims._compile.toolchain import toolchain_fingerprint

    cls = type(obj)
    header = json.dumps({"cuprims": __version__, "contract": _contract(), "toolchain": toolchain_fingerprint(),
                         "algorithm": f"{cls.__module__}.{cls.__qualname__}", "description": encode(obj.desc),
                         "builds": builds}, sort_keys=True).encode()
    rest = struct.pack("<Q", len(header)) + header + b"".join(cubins)
    return _HEAD.pack(MAGIC, FORMAT_VERSION, 0, hashlib.sha256(rest).digest(), len(header)) + header + \
        b"".join(cubins)


def _framed(blob: Any) -> tuple[Any, memoryview]:
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise BlobError("not a blob", "bytes from cuprims.serialize", type(blob).__name__)
    data = memoryview(bytes(blob))
    if len(data) < _HEAD.size:
        raise BlobError("too short to be a blob", f"at least {_HEAD.size} bytes", f"{len(data)} bytes")
    magic, version, _, digest, hlen = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise BlobError("not a cuprims blob", f"magic {MAGIC!r}", repr(bytes(magic)))
    if version != FORMAT_VERSION:
        raise BlobError("another format version", f"format {FORMAT_VERSION}", f"format {version}")
    if hlen > min(_MAX_HEADER, len(data) - _HEAD.size):
        raise BlobError("truncated or damaged", f"a header within the blob's {len(data)} bytes",
                        f"a header of {hlen} bytes")
    rest = bytes(data[_HEAD.size - 8:])
    if hashlib.sha256(rest).digest() != digest:
        raise BlobError("truncated or damaged", "the checksum the blob records", "other bytes")
    try:
        # a key given twice is refused (json would keep the last one), and so are NaN and
        # Infinity (not JSON)
        header = json.loads(bytes(data[_HEAD.size:_HEAD.size + hlen]), object_pairs_hook=unique_keys,
                            parse_constant=_no_constant)
    except SchemaError as exc:
        raise BlobError(f"a damaged header: key {exc.field}", exc.expected, exc.found) from None
    except (ValueError, RecursionError) as exc:
        raise BlobError("a damaged header", "JSON", f"{type(exc).__name__}") from None
    return header, data[_HEAD.size + hlen:]


def _no_constant(name: str) -> Any:
    raise SchemaError(name, "a JSON value", name)


def deserialize(blob: bytes) -> Any:
    """The algorithm object ``blob`` (from :func:`serialize`) holds, ready to call.

    Nothing is compiled and numba is not imported; the cubin for a device's architecture
    is loaded at the object's first call on that device. Calls take the same arguments as
    the original object's (pass a stateful operator again, as you would there). The
    object may be called from several threads at once.

    A blob is checksummed (damage is found) and every field of its header is checked:
    its type and range, and its agreement with the description and with the cubins (an
    ELF image for the recorded architecture, holding the recorded kernels with the
    parameters the description packs, exporting the recorded metadata). A blob is not
    signed, though: one forged with care to agree with itself loads, and its cubins run
    on your GPU. Load only blobs you trust, as you would a library.

    Raises :class:`~cuprims.errors.BlobError` for a blob that is malformed, truncated, of
    another format version or made by another cuprims build, naming the field that does
    not fit, and, at a call, for a device it holds no cubin for.
    """
    header, cubins = _framed(blob)
    try:
        checked = validate(_HEADER, header, "", contract=_contract(), payload=cubins)
    except SchemaError as exc:
        raise BlobError(f"field {exc.field}" if exc.field else "a damaged header", exc.expected, exc.found) from None
    results: dict[int, dict[int, Any]] = {}
    for build in checked["builds"]:
        results.setdefault(build.variant, {})[build.arch] = (build.result, build.names)
    from cuprims._serialization.frozen import frozen_object

    return frozen_object(checked["algorithm"], checked["description"], results)


# ----------------------------------------------------------------------------- the header's schema

class _Build(NamedTuple):
    variant: int
    arch: int
    names: tuple[str, ...]
    result: Any          # BuildResult
    cubin: tuple[int, int]


def _checked_algorithm(name: str, field: str, scope: Scope) -> type:
    cls = _algorithm_class(name)
    if cls is None:
        raise SchemaError(field, "a cuprims algorithm class", shown(name))
    return cls


def _description_class(cls: type) -> type | None:
    for klass in cls.__mro__:
        annotation = klass.__dict__.get("__annotations__", {}).get("desc")
        if annotation is not None:
            module = sys.modules[klass.__module__]
            return getattr(module, annotation) if isinstance(annotation, str) else annotation
    return None


def _checked_description(record: Any, field: str, scope: Scope) -> Any:
    desc = decode(record, field)   # a CodecError is a SchemaError naming the field
    want = _description_class(scope["algorithm"])
    if want is None or type(desc) is not want:
        raise SchemaError(field, f"a {getattr(want, '__name__', 'description')} (the algorithm's description)",
                          type(desc).__name__)
    return desc


def _same_kernel(recorded: str, generated: str) -> bool:
    """Whether a recorded kernel name is the one generated, an iterator's struct there
    (a stand-in in the generated one) excepted."""
    if _STAND_IN not in generated:
        return recorded == generated
    pattern = re.escape(generated).replace(_STAND_IN, "[A-Za-z_][A-Za-z0-9_]*")
    return re.fullmatch(pattern, recorded) is not None


def _checked_build(record: dict[str, Any], field: str, scope: Scope) -> _Build:
    """A build record against the description (the variant, its kernels, the code it
    generates, the parameters it packs) and its cubin."""
    variant, arch, names = record["variant"], record["arch"], tuple(record["names"])
    try:
        desc = _stood_in(scope["description"]).variant(variant)
    except (IndexError, KeyError, ValueError, TypeError):
        raise SchemaError(child(field, "variant"), "a build variant of this algorithm", shown(variant)) from None
    unit, kinds = desc.source(arch), desc.kernel_params()
    if len(names) != len(unit.name_expressions):
        raise SchemaError(child(field, "names"), f"the {len(unit.name_expressions)} kernels the description generates",
                          f"{len(names)} kernels")
    start, size = record["cubin"]
    payload = scope["payload"]
    if start + size > len(payload):
        raise SchemaError(child(field, "cubin"), f"a range inside the {len(payload)} bytes of cubins",
                          shown(record["cubin"]))
    cubin = bytes(payload[start:start + size])
    # the record against its cubin first (what was built), then against the description
    result = checked_result(arch, cubin, record["kernels"], record["meta"],
                            Source(text="", name_expressions=names, extern_symbols=(), meta_fields=unit.meta_fields),
                            field)
    for i, (name, generated) in enumerate(zip(names, unit.name_expressions)):
        if not _same_kernel(name, generated):
            raise SchemaError(child(child(field, "names"), i), f"the kernel the description generates, {generated}",
                              shown(name, 300))
    digest = _code_digest(unit)
    if record["code"] != digest:
        raise SchemaError(child(field, "code"), f"{digest} (the digest of the code the description generates for "
                          f"variant {variant} on sm_{arch})", shown(record["code"]))
    # a careful forgery recomputes that digest: the parameters the cubin's kernels take
    # must still be those the description packs at a call
    held = sections(cubin)
    for name, params in zip(names, kinds):
        packed = [param_size(kind) for kind in params]
        taken = [size for _, size in param_layout(held[".nv.info." + result.kernels[name]])]
        if taken != packed:
            raise SchemaError(child(child(field, "kernels"), name),
                              f"a kernel taking parameters of {packed} bytes (what the description packs)",
                              f"one taking {taken}")
    return _Build(variant, arch, names, result, (start, size))


def _checked_builds(builds: list[_Build], field: str, scope: Scope) -> list[_Build]:
    """The builds together: their cubins back to back from offset 0 to the blob's end (no
    two overlap, no byte lies outside one), and the object's own build (variant 0) there."""
    offset = 0
    for i, build in enumerate(builds):
        if build.cubin[0] != offset:
            raise SchemaError(child(child(field, i), "cubin"),
                              f"[{offset}, size] (each cubin starting where the one before ends)", shown(build.cubin))
        offset += build.cubin[1]
    if offset != len(scope["payload"]):
        raise SchemaError(field, f"cubins covering the blob's {len(scope['payload'])} bytes of them",
                          f"cubins of {offset} bytes")
    if all(build.variant for build in builds):
        raise SchemaError(field, "a build of variant 0 (the object itself)",
                          f"variants {sorted({b.variant for b in builds})}")
    return builds


_BUILD = Fields({
    "variant": Int(0, 63, "a build variant"),
    "arch": Int(50, 200, "an architecture like 90"),
    "names": ListOf(NAME_EXPRESSION, 1, 64, "kernel name expressions"),
    "kernels": KERNELS,
    "meta": META,
    "cubin": Pair(Int(0, _MAX_HEADER + _MAX_BUILDS * _MAX_CUBIN, "an offset"), Int(1, _MAX_CUBIN, "a size"),
                  what="[offset, size] of its cubin"),
    "code": Str(64, "[0-9a-f]{64}", "a sha256 digest in hex"),
}, "a build record")

_HEADER = Fields({
    "contract": Same("contract", "the build contract of this cuprims (a blob made by another cuprims build does not "
                                 "load here)"),
    "cuprims": Str(64, r"[0-9A-Za-z][0-9A-Za-z.+!_-]*", "a version"),
    "toolchain": Str(1024, r"[ -~]*", "a toolchain fingerprint"),
    "algorithm": Checked(Str(200, r"cuprims\.algorithms\.\w+\.api\.\w+", "a cuprims algorithm class"),
                         _checked_algorithm),
    "description": Checked(AnyJson(), _checked_description, "the algorithm's description record"),
    "builds": Checked(ListOf(Checked(_BUILD, _checked_build), 1, _MAX_BUILDS, "build records",
                             unique=lambda b: (b.variant, b.arch), unique_what="a (variant, architecture)"),
                      _checked_builds),
}, "a header")
