"""The on-disk cache's entry format: ``MAGIC | sha256(payload) | len(payload) | payload``,
the payload a JSON header (the entry's kind and full key beside its metadata, and the
names and sizes of its binary blobs) followed by the blobs.

The checksum finds damage; an entry edited with its checksum recomputed is found by the
schema its header is read with (:data:`_HEADER`), and its metadata by the one of its kind
(the reader each caller passes to :meth:`DiskCache.get`)."""

from __future__ import annotations

import functools
import hashlib
import struct
from typing import Any

from cuprims._base.schema import IDENTIFIER, AnyJson, Fields, Int, ListOf, MapOf, Pair, Same, SchemaError, Str, validate

# The kind under which precompiled headers are kept (beside kernels' "cubin" and "ltoir"):
# the compile stage stores them, the command line reports them apart.
PCH_KIND = "pch"

MAGIC = b"CUPRIMS\x02"

#: Largest entry file read back (bytes). A larger file is rejected without being read:
#: real entries are a few hundred KiB, and the bound keeps a stray huge (or sparse) file
#: from being read into memory.
MAX_ENTRY_BYTES = 256 * 1024 * 1024

#: Most blobs one entry holds (a coop unit's LTO-IRs: its own and one per operator code).
MAX_BLOBS = 4096

_HEADER = Fields({
    "kind": Same("kind", "the kind it is read as (an entry of another kind or key is not served)"),
    "key": Same("key", "the key it is read as (an entry of another kind or key is not served)"),
    "meta": MapOf(Str(64, IDENTIFIER, "a field name"), AnyJson(), 0, 64, "metadata fields"),
    "blobs": ListOf(Pair(Str(64, IDENTIFIER, "a blob name"), Int(0, MAX_ENTRY_BYTES, "a size"),
                         what="[name, size] of a blob"), 0, MAX_BLOBS, "blobs", unique=lambda blob: blob[0],
                    unique_what="a blob name"),
}, "an entry header")


def encode_entry(meta: dict[str, Any], blobs: dict[str, bytes], *, kind: str, key: str) -> bytes:
    """Frame metadata (JSON) and named binary blobs into one checksummed record bound to
    ``kind`` and ``key``."""
    import json

    names = sorted(blobs)
    header = json.dumps({"kind": kind, "key": key, "meta": meta,
                         "blobs": [[n, len(blobs[n])] for n in names]}, sort_keys=True).encode()
    payload = struct.pack("<Q", len(header)) + header + b"".join(blobs[n] for n in names)
    return MAGIC + hashlib.sha256(payload).digest() + struct.pack("<Q", len(payload)) + payload


def decode_entry(raw: bytes, *, kind: str, key: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Inverse of :func:`encode_entry`; raises ValueError on any damage, on a header that
    does not fit :data:`_HEADER` and on an entry written for another kind or key."""
    head = len(MAGIC) + 32 + 8
    if len(raw) < head or raw[:len(MAGIC)] != MAGIC:
        raise ValueError("bad magic")
    digest = raw[len(MAGIC):len(MAGIC) + 32]
    (length,) = struct.unpack_from("<Q", raw, len(MAGIC) + 32)
    payload = raw[head:]
    if len(payload) != length:
        raise ValueError("truncated entry")
    if hashlib.sha256(payload).digest() != digest:
        raise ValueError("checksum mismatch")
    if len(payload) < 8:
        raise ValueError("no header")
    (hlen,) = struct.unpack_from("<Q", payload, 0)
    if hlen > len(payload) - 8:
        raise ValueError("header length out of range")
    try:
        header = _json_loads(payload[8:8 + hlen])
    except RecursionError:
        raise ValueError("header nested too deeply") from None
    except ValueError as exc:   # JSONDecodeError, UnicodeDecodeError, an over-long integer
        raise ValueError(f"header is not JSON: {exc}") from None
    checked = validate(_HEADER, header, "header", kind=kind, key=key)   # a SchemaError is a ValueError
    blobs, pos = {}, 8 + hlen
    for name, size in checked["blobs"]:
        blobs[name] = payload[pos:pos + size]
        pos += size
    if pos != len(payload):
        raise ValueError("blob sizes do not add up")
    return header["meta"], blobs


# -------------------------------------------------------------------- reading the header
# A process whose builds the disk cache serves reads every entry's header, and it is the
# only JSON such a process reads. Importing the json package compiles six regular
# expressions (~4 ms of that process's ~25 ms on the CPU machine), so the header is read
# with the C scanner json.decoder itself uses, set up as json.loads sets it up; where
# that accelerator is missing, json.loads reads it.
_NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class _ScannerContext:
    # the attributes _json.make_scanner reads (json.decoder.JSONDecoder's defaults)
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_NON_FINITE.__getitem__)


@functools.lru_cache(maxsize=None)
def _header_reader() -> Any:
    """The function that reads a header's text: the C scanner's, or json.loads."""
    try:
        from _json import make_scanner

        scanner = make_scanner(_ScannerContext())
    except Exception:   # noqa: BLE001 - no accelerator, or one that wants another context
        import json

        return json.loads

    def read(text: str) -> Any:
        text = text.strip(" \t\n\r")   # the whitespace json.loads allows around a value
        try:
            value, end = scanner(text, 0)
        except StopIteration:
            raise ValueError("no JSON value at the start") from None
        if end != len(text):
            raise ValueError(f"extra data at {end}")
        return value

    return read


def _json_loads(data: bytes) -> Any:
    """``json.loads(data)`` for UTF-8 ``data``: the same value, and ValueError (or
    RecursionError) where json.loads raises it."""
    return _header_reader()(data.decode("utf-8"))
