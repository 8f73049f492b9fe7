"""Kernel LTO-IR + operator LTO-IR -> cubin through nvJitLink (link-time optimised)."""

from __future__ import annotations

from typing import Sequence

from cuprims._base import lazy, stats
from cuprims.errors import LinkError


def link_cubin(kernel_ltoir: bytes, extra_ltoirs: Sequence[bytes], arch: int, *,
               source_path: str | None = None) -> bytes:
    core = lazy.cuda_core()
    Linker, LinkerOptions, ObjectCode = core.Linker, core.LinkerOptions, core.ObjectCode

    objects = [ObjectCode.from_ltoir(kernel_ltoir, name="kernels")]
    objects += [ObjectCode.from_ltoir(code, name=f"op{i}") for i, code in enumerate(extra_ltoirs)]
    stats.bump("links")
    try:
        # options must be passed by keyword: positionally it would be taken as an input.
        linker = Linker(*objects, options=LinkerOptions(arch=f"sm_{arch}", link_time_optimization=True))
        try:
            return bytes(linker.link("cubin").code)
        finally:
            # nvJitLink's state (~0.16 MB a link) is freed here, not whenever the collector gets to it
            linker.close()
    except Exception as exc:
        raise LinkError(f"nvJitLink could not link the kernels for sm_{arch}", log=str(exc),
                        source_path=source_path) from None
