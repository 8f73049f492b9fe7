"""Foundations every other stage may use: the metadata schema checker (``schema``), lazy imports
(``lazy``), the debug log (``log``), the counters tests and benchmarks read (``stats``).

Owns no CUDA, numba or compiler state. May import: the standard library, ``cuprims.errors``,
``cuprims.config``.
"""
