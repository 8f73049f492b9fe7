"""Compiling and linking: the toolchain's wheels and versions (``toolchain``), the unit of
generated source (``source``), NVRTC to LTO-IR (``nvrtc``), precompiled headers (``pch`` and
its ``pch_resident``, ``pch_heap_state``, ``pch_heap``, ``pch_store``, ``pch_codec``), nvJitLink
to a cubin (``link``), the cubin's ELF metadata (``elfmeta``), and the targets a build is for
(``targets``).

May import: the stages below it (``_base``, ``_runtime``, ``_cache``) and ``cuprims._value_types``.
Knows nothing of operators or algorithms: it compiles the text it is given.
"""
