"""The unit of generated source that the compiler stage takes: :class:`Source` (the text, its
kernel name expressions and the metadata fields exported through ``cuprims_meta``), the
code generator's version that is part of every key, and :func:`headers_first`, which
moves a unit's ``#include`` lines ahead of its body so precompiled headers can cover them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Bump when generated code changes meaning in a way the source text would not show
# (it always is part of the cache key together with the text itself).
CODEGEN_VERSION = 1


META_SYMBOL = "cuprims_meta"


_META_NAME = re.compile(r"/\* (\w+) \*/")  # meta_export's name comment after each value


@dataclass(frozen=True)
class Source:
    """A generated translation unit: its text, the kernels to instantiate, and the
    external operator symbols it expects from LTO-IR linked beside it."""

    text: str
    name_expressions: tuple[str, ...]
    extern_symbols: tuple[str, ...]
    meta_fields: tuple[str, ...]
    # extra cuda.core ProgramOptions for this unit, as (name, value) pairs (part of the key)
    compile_options: tuple[tuple[str, object], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", headers_first(self.text))
        # the host reads the metadata by position: a field exported out of order would hand
        # it the wrong launch facts without any error, so the order is checked here
        if f"{META_SYMBOL}[" not in self.text:
            return   # no metadata here (a test's unit; a deserialized object's, which has no text)
        exported = tuple(_META_NAME.findall(self.text.split(f"{META_SYMBOL}[", 1)[1].split("};", 1)[0]))
        if exported != tuple(self.meta_fields):
            raise ValueError(f"cuprims_meta exports {exported}, the host reads {tuple(self.meta_fields)}")

    @property
    def header_prefix(self) -> str:
        """The unit's leading preprocessor lines (defines and includes): units that share
        them can share one NVRTC precompiled header (:mod:`.pch`). Comments and blank lines
        among them are left out: a PCH depends on the directives only, and a unit's own
        comment (a coop provider's description, say) must not make its PCH its own."""
        lines = self.text.split("\n")
        stop, _ = _header_stop(lines)
        return "".join(line + "\n" for line in lines[:stop] if line.strip().startswith("#"))


def _is_directive(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#") or stripped.startswith("//")


def _header_stop(lines: list[str]) -> tuple[int, int]:
    """(index of the first line that is not a directive, comment or blank; its offset)."""
    offset = 0
    for i, line in enumerate(lines):
        if not _is_directive(line):
            return i, offset
        offset += len(line) + 1
    return len(lines), offset


def headers_first(text: str) -> str:
    """``text`` with its top-level ``#include`` lines moved up to the end of its leading
    directives (in order, each once), so that every unit starts with all of its headers.

    Our headers never depend on a unit's own declarations; with the headers first, units
    with the same headers share a precompiled header (NVRTC's header stop is the first
    declaration)."""
    lines = text.split("\n")
    stop, _ = _header_stop(lines)
    head, moved, body, depth = lines[:stop], [], [], 0
    seen = {line.strip() for line in head if line.strip().startswith("#include")}
    for line in lines[stop:]:
        stripped = line.strip()
        if stripped.startswith("#if"):
            depth += 1
        elif stripped.startswith("#endif"):
            depth -= 1
        if depth == 0 and stripped.startswith("#include"):
            if stripped not in seen:
                seen.add(stripped)
                moved.append(stripped)
            continue
        body.append(line)
    if not moved:
        return text
    return "\n".join(head + moved + body)
