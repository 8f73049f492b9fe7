"""The one place where the stages meet: ``build`` turns generated source and operators into a
loaded kernel through the caches, NVRTC, nvJitLink and the driver; ``results`` checks and
holds what a build produced (kernels, metadata, cubin). Algorithms and ``cuprims.coop``
build through it.

May import every stage below it: ``_base``, ``_runtime``, ``_cache``, ``_compile``,
``_operators``, ``_codegen``, ``cuprims.iterators``.
"""
