"""Saving built algorithm objects and loading them elsewhere: :func:`serialize` and
:func:`deserialize`.

A blob is data only (no pickle, no eval)::

    MAGIC (8) | format version (u32) | reserved (u32) | sha256 of the rest (32)
      | header length (u64) | header (JSON) | cubins

The header holds cuprims' version and the build contract it was made under (code
generator, cuprims' own sources, CCCL: what fixes the kernels' parameter layouts), the
whole toolchain fingerprint (for people), the algorithm's class, its description
(:mod:`cuprims._serial_codec`), and per build variant and architecture the kernels'
names, lowered names and exported metadata, and where its cubin lies.

Loading compiles nothing, imports no numba and needs no GPU: the object loads its cubin
on a device at its first call there, and refuses a device whose architecture it has no
cubin for. Any problem with a blob is a :class:`~cuprims.errors.BlobError` (also a
ValueError) naming what was expected and what was found.
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
from typing import Any

from ._serial_codec import CodecError, decode, encode
from .errors import ArgumentTypeError, BlobError

__all__ = ["serialize", "deserialize"]

MAGIC = b"CUPRIMSO"
FORMAT_VERSION = 1
_HEAD = struct.Struct("<8sII32sQ")
_MAX_HEADER = 64 << 20
_ELF = b"\x7fELF"


def _contract() -> dict[str, str]:
    """What a blob and the loading cuprims must share (see toolchain.build_contract)."""
    from ._jit.toolchain import build_contract

    return dict(build_contract())


def _algorithm_class(name: Any) -> type | None:
    """The algorithm class a header names (``cuprims.algorithms.<module>.<class>``), importing
    only that one module, and only if it is one of ours: a blob never picks what is imported."""
    from .algorithms import MODULES

    if not isinstance(name, str) or name.count(".") != 3:
        return None
    package, sub, module, qualname = name.split(".")
    if f"{package}.{sub}" != "cuprims.algorithms" or module not in MODULES:
        return None
    import importlib

    from .algorithms._skeleton import Algorithm

    cls = getattr(importlib.import_module(f"cuprims.algorithms.{module}"), qualname, None)
    ok = isinstance(cls, type) and issubclass(cls, Algorithm) and cls is not Algorithm and cls.__module__ == \
        f"cuprims.algorithms.{module}"
    return cls if ok else None


def serialize(obj: Any) -> bytes:
    """The bytes of a built algorithm object: its description and every cubin it holds
    (each architecture it was built for, each build variant made so far).

    Example::

        import numpy as np, cuprims
        r = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32),
                                     op=cuprims.OpKind.PLUS, h_init=cuprims.ProxyValue(np.float32),
                                     compute_capability=[80, 90])    # no GPU needed
        blob = cuprims.serialize(r)
        again = cuprims.deserialize(blob)                             # anywhere with this cuprims
        assert again.compute_capabilities == [80, 90]
    """
    from .algorithms._skeleton import Algorithm

    if not isinstance(obj, Algorithm):
        raise ArgumentTypeError("obj", "an algorithm object made by a cuprims make_* function", obj)
    builds, cubins, offset = [], [], 0
    for variant, variant_builds in sorted(obj._variant_builds.items()):
        for arch in variant_builds.archs:
            result = variant_builds.result(arch)
            names = list(variant_builds.source(arch).name_expressions)
            builds.append({"variant": variant, "arch": arch, "names": names, "kernels": dict(result.kernels),
                           "meta": dict(result.meta), "cubin": [offset, len(result.cubin)]})
            cubins.append(result.cubin)
            offset += len(result.cubin)
    from . import __version__
    from ._jit.toolchain import toolchain_fingerprint

    cls = type(obj)
    header = json.dumps({"cuprims": __version__, "contract": _contract(), "toolchain": toolchain_fingerprint(),
                         "algorithm": f"{cls.__module__}.{cls.__qualname__}", "description": encode(obj.desc),
                         "builds": builds}, sort_keys=True).encode()
    rest = struct.pack("<Q", len(header)) + header + b"".join(cubins)
    return _HEAD.pack(MAGIC, FORMAT_VERSION, 0, hashlib.sha256(rest).digest(), len(header)) + header + \
        b"".join(cubins)


def _framed(blob: Any) -> tuple[dict[str, Any], memoryview]:
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
        header = json.loads(bytes(data[_HEAD.size:_HEAD.size + hlen]))
    except (ValueError, RecursionError) as exc:
        raise BlobError("damaged header", "JSON", f"{type(exc).__name__}") from None
    if not isinstance(header, dict):
        raise BlobError("damaged header", "a JSON object", type(header).__name__)
    return header, data[_HEAD.size + hlen:]


def deserialize(blob: bytes) -> Any:
    """The algorithm object ``blob`` (from :func:`serialize`) holds, ready to call.

    Nothing is compiled and numba is not imported; the cubin for a device's architecture
    is loaded at the object's first call on that device. Calls take the same arguments as
    the original object's (pass a stateful operator again, as you would there). The
    object may be called from several threads at once.

    Raises :class:`~cuprims.errors.BlobError` for a blob that is malformed, truncated, of
    another format version or made by another cuprims build, and, at a call, for a device
    it holds no cubin for.
    """
    header, cubins = _framed(blob)
    contract = _contract()
    if header.get("contract") != contract:
        raise BlobError("made by another cuprims build", f"the build contract {contract}",
                        str(header.get("contract"))[:300])
    cls = _algorithm_class(header.get("algorithm"))
    if cls is None:
        raise BlobError("an unknown algorithm", "a cuprims algorithm class", str(header.get("algorithm"))[:100])
    try:
        desc = decode(header.get("description"))
    except CodecError as exc:
        raise BlobError("a damaged description", "the record cuprims.serialize writes", str(exc)) from None
    want = _description_class(cls)
    if type(desc) is not want:
        raise BlobError("a description of another algorithm", want.__name__, type(desc).__name__)
    from ._frozen import frozen_object

    return frozen_object(cls, desc, _results(header.get("builds"), cubins, desc))


def _description_class(cls: type) -> type:
    for klass in cls.__mro__:
        annotation = klass.__dict__.get("__annotations__", {}).get("desc")
        if annotation is not None:
            module = sys.modules[klass.__module__]
            return getattr(module, annotation) if isinstance(annotation, str) else annotation
    raise BlobError("an algorithm without a description", "a description class", cls.__name__)


def _results(builds: Any, cubins: memoryview, desc: Any) -> dict[int, dict[int, Any]]:
    from ._jit.results import BuildResult

    if not isinstance(builds, list) or not builds:
        raise BlobError("no compiled code", "at least one build", str(builds)[:60])
    out: dict[int, dict[int, Any]] = {}
    for b in builds:
        if not (isinstance(b, dict) and set(b) == {"variant", "arch", "names", "kernels", "meta", "cubin"}):
            raise BlobError("a damaged build record", "variant, arch, names, kernels, meta, cubin", str(b)[:80])
        variant, arch, names, kernels, meta, (start, size) = (b["variant"], b["arch"], b["names"], b["kernels"],
                                                             b["meta"], b["cubin"])
        try:
            kernel_count = len(desc.variant(variant).kernel_params()) if type(variant) is int and variant >= 0 else -1
        except (IndexError, ValueError, TypeError):   # a variant this algorithm does not have
            kernel_count = -1
        ok = (type(arch) is int and isinstance(names, list) and len(names) == kernel_count
              and isinstance(kernels, dict) and all(isinstance(n, str) and kernels.get(n) for n in names)
              and all(isinstance(k, str) and isinstance(v, str) for k, v in kernels.items())
              and isinstance(meta, dict) and all(isinstance(k, str) and type(v) is int for k, v in meta.items())
              and type(start) is int and type(size) is int and 0 <= start and start + size <= len(cubins))
        if not ok:
            raise BlobError("a damaged build record", "kernels, metadata and a cubin range that fit the algorithm",
                            str(b)[:120])
        if not 30 <= arch < 1000:
            raise BlobError("a damaged build record", "an architecture like 90", arch)
        cubin = bytes(cubins[start:start + size])
        if cubin[:4] != _ELF:
            raise BlobError("a damaged cubin", "an ELF image", repr(cubin[:4]))
        result = BuildResult(arch=arch, cubin=cubin, kernels=dict(kernels), meta=dict(meta))
        out.setdefault(variant, {})[arch] = (result, tuple(names))
    if 0 not in out:
        raise BlobError("no build of the object itself", "variant 0", sorted(out))
    return out
