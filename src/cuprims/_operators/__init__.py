"""Operators: Python callables compiled by numba-cuda to LTO-IR (``numba_ops``, with user structs
in ``numba_structs``), small Python expressions written as C++ (``py_expr``), the recipe
walk that keys an operator by what it computes (``recipe``), arrays and values a stateful
operator captures (``captures``), and the probe of raw LTO-IR operators (``raw_probe``).
The public face is ``cuprims.op``.

May import: ``_base``, ``_runtime``, ``_cache``, ``_compile``, ``cuprims.types``,
``cuprims.struct``. The only stage (with ``cuprims.coop``) that imports numba.
"""
