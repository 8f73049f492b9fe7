"""The two cache levels: an in-memory single-flight LRU and an on-disk artifact store.

In memory, concurrent misses of one key build once: the first caller builds, the others
wait and receive the same result or the same exception; failures are not cached.

On disk, each entry is one file written atomically (temp file + ``os.replace``), framed
as ``MAGIC | sha256(payload) | len(payload) | payload``. A file that fails the check is
deleted and reported as a miss, so a truncated or corrupt entry is rebuilt, never
loaded. Cooperating processes take a per-key lock file before building, and look again
once they hold it, so two processes never compile the same key twice.

cuda.core.utils has program caches, but they store raw bytes only and refuse
``include_path``/name expressions without a digest we would compute anyway; we need
several artifacts plus metadata per entry and a lock per key, so this module is ours.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import threading
from collections import OrderedDict
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Iterator

from . import stats

MAGIC = b"CUPRIMS\x01"
LAYOUT_VERSION = "v1"


class SingleFlightLRU:
    """A bounded mapping whose misses are built once, however many threads ask at once."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._inflight: dict[Any, Future] = {}
        self._lock = threading.Lock()

    def get_or_build(self, key: Any, build: Callable[[], Any]) -> Any:
        with self._lock:
            try:
                value = self._data[key]
            except KeyError:
                pass
            else:
                self._data.move_to_end(key)
                stats.bump("memory_hits")
                return value
            future = self._inflight.get(key)
            owner = future is None
            if owner:
                future = Future()
                self._inflight[key] = future
        if not owner:
            stats.bump("memory_hits")
            return future.result()
        stats.bump("memory_misses")
        try:
            value = build()
        except BaseException as exc:
            with self._lock:
                del self._inflight[key]
            future.set_exception(exc)
            raise
        with self._lock:
            self._data[key] = value
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)
            del self._inflight[key]
        future.set_result(value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


# ----------------------------------------------------------------------------- disk

def encode_entry(meta: dict[str, Any], blobs: dict[str, bytes]) -> bytes:
    """Frame metadata (JSON) and named binary blobs into one checksummed record."""
    names = sorted(blobs)
    header = json.dumps({"meta": meta, "blobs": [[n, len(blobs[n])] for n in names]},
                        sort_keys=True).encode()
    payload = struct.pack("<Q", len(header)) + header + b"".join(blobs[n] for n in names)
    return MAGIC + hashlib.sha256(payload).digest() + struct.pack("<Q", len(payload)) + payload


def decode_entry(raw: bytes) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Inverse of :func:`encode_entry`; raises ValueError on any damage."""
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
    (hlen,) = struct.unpack_from("<Q", payload, 0)
    header = json.loads(payload[8:8 + hlen])
    blobs, pos = {}, 8 + hlen
    for name, size in header["blobs"]:
        blobs[name] = payload[pos:pos + size]
        pos += size
    if pos != len(payload):
        raise ValueError("blob sizes do not add up")
    return header["meta"], blobs


class DiskCache:
    """Artifacts on disk under ``root/v1/<kind>/<key[:2]>/<key>``."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, kind: str, key: str) -> Path:
        return self.root / LAYOUT_VERSION / kind / key[:2] / key

    def get(self, kind: str, key: str) -> tuple[dict[str, Any], dict[str, bytes]] | None:
        path = self._path(kind, key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            stats.bump("disk_misses")
            return None
        except OSError:
            stats.bump("disk_misses")
            return None
        try:
            entry = decode_entry(raw)
        except (ValueError, KeyError, json.JSONDecodeError, struct.error):
            stats.bump("disk_corrupt_discarded")
            stats.bump("disk_misses")
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        stats.bump("disk_hits")
        return entry

    def put(self, kind: str, key: str, meta: dict[str, Any], blobs: dict[str, bytes]) -> None:
        path = self._path(kind, key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            with open(tmp, "wb") as fh:
                fh.write(encode_entry(meta, blobs))
            os.replace(tmp, path)
            stats.bump("disk_writes")
        except OSError:
            # A read-only or full disk must not break the user's program: the build
            # result is still returned, just not kept.
            with contextlib.suppress(Exception):
                tmp.unlink()

    @contextlib.contextmanager
    def lock(self, kind: str, key: str) -> Iterator[None]:
        """An inter-process lock for one key (advisory; a no-op where unsupported)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - non-POSIX
            yield
            return
        lock_path = self.root / LAYOUT_VERSION / "locks" / f"{kind}-{key}.lock"
        try:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            fh = open(lock_path, "a+b")
        except OSError:
            yield
            return
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()

    def clear(self) -> None:
        import shutil

        shutil.rmtree(self.root / LAYOUT_VERSION, ignore_errors=True)
