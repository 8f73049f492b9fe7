"""Style 2, single-phase calls (``coop.load(coop.this_block(), src, items)``...) inside a
plain ``@cuda.jit`` kernel: their stubs and numba types, the front-end rewrite that turns
each call into a typed intrinsic, the planning of a call from its types (each record's
planner), the lowering, and one NVRTC unit per compiled function.

Nothing here is imported by ``import cuprims.coop``: :mod:`cuprims.coop._extension`
registers it with numba-cuda.
"""
