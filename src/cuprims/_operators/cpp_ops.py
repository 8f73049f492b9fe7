"""C++ operators (``RawOp.from_cpp``): the user's source -> LTO-IR, cached in memory and on disk.

NVRTC compiles the text as written (:func:`cuprims._compile.nvrtc.compile_operator`), then a
probe link checks that it defines ``name`` for C to call, so a source that does not never
enters the cache. A ``rawop`` disk entry holds the LTO-IR; its key is the source text, the
symbol name, the arch, the NVRTC options and the toolchain fingerprint (CCCL, NVRTC,
nvJitLink versions), so a later process with the same source compiles nothing.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable

from cuprims._base import stats
from cuprims._base.schema import Fields, Same, SchemaError, shown, validate
from cuprims._cache.disk import configured_cache
from cuprims._cache.memory import SingleFlightLRU
from cuprims._compile.nvrtc import BASE_OPTIONS, compile_operator
from cuprims._compile.toolchain import toolchain_fingerprint
from cuprims._operators.raw_probe import LTOIR_MAGIC, check_defines

ENTRY_KIND = "rawop"

_memory = SingleFlightLRU(256)

_ENTRY = Fields({
    "arch": Same("arch", "the architecture it is read for"),
    "name": Same("name", "the symbol it is read for"),
}, "a rawop entry's metadata")


def cpp_key(source: str, name: str, arch: int) -> str:
    h = hashlib.sha256()
    for part in ("rawop", toolchain_fingerprint(), f"sm_{arch}", " ".join(BASE_OPTIONS), name, source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _reader(name: str, arch: int) -> Callable[[dict[str, Any], dict[str, bytes]], bytes]:
    """Checks a ``rawop`` entry against what it is read for; any mismatch raises, and the
    disk cache drops the entry and rebuilds."""

    def read(meta: dict[str, Any], blobs: dict[str, bytes]) -> bytes:
        validate(_ENTRY, meta, "meta", arch=arch, name=name)
        if set(blobs) != {"ltoir"} or not bytes(blobs["ltoir"]).startswith(LTOIR_MAGIC):
            raise SchemaError("blobs", "one blob, ltoir, of LTO-IR", shown(sorted(blobs)))
        return bytes(blobs["ltoir"])

    return read


def cpp_ltoir(source: str, name: str, arch: int) -> bytes:
    """LTO-IR of ``source`` for ``sm_<arch>``, which defines ``name``: from memory, from the
    disk cache, else compiled (CompileError with NVRTC's log; ArgumentError naming
    ``name`` when the source does not define it)."""
    key = cpp_key(source, name, arch)
    disk = configured_cache()

    def compile_checked() -> bytes:
        with stats.stage("nvrtc", f"sm_{arch} (C++ operator {name})"):
            ltoir = compile_operator(source, arch, f"the C++ operator '{name}'")
        check_defines(ltoir, name, arch)
        return ltoir

    def from_disk_or_compile() -> bytes:
        if disk is None:
            return compile_checked()

        def compile_and_keep() -> bytes:
            ltoir = compile_checked()
            disk.put(ENTRY_KIND, key, {"arch": arch, "name": name}, {"ltoir": ltoir})
            return ltoir

        return disk.get_or_build(ENTRY_KIND, key, _reader(name, arch), compile_and_keep)

    return _memory.get_or_build(key, from_disk_or_compile)


def clear_memory() -> None:
    _memory.clear()
