"""Operators: Python callables compiled by numba-cuda to LTO-IR (``numba_ops``; numba made
ready in ``numba_device``, captured arrays as state in ``numba_state``, user structs in
``numba_structs`` with ``numba_struct_layout`` and ``numba_struct_lowering``), small Python
expressions written as C++ (``py_expr``), the recipe
walk that keys an operator by what it computes (``recipe``), arrays and values a stateful
operator captures (``captures``), the checks and probe of raw LTO-IR operators (``raw_probe``), and
C++ operators compiled to LTO-IR (``cpp_ops``).
The public face is ``cuprims.op``.

May import: ``_base``, ``_runtime``, ``_cache``, ``_compile``, ``cuprims._value_types``,
``cuprims.struct``. The only stage (with ``cuprims.coop``) that imports numba.
"""
