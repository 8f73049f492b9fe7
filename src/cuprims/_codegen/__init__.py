"""Generating CUDA C++ that every algorithm shares: the preamble, functor and iterator parts,
metadata export and tuning helpers (``common``), what each built-in operator means in C++
and which a role accepts (``builtin_ops``), functors for built-in and user operators
(``functors``), accumulator types (``accumulators``). Each algorithm's own generator lives
in its home under ``cuprims.algorithms``.

Pure string work: no CUDA, no numba. May import: ``_base``, ``_compile.source``,
``cuprims.op``, ``cuprims._value_types``.
"""
