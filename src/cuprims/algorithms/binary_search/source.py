"""Generated source for vectorised binary search (lower / upper bound). Pure strings.

The kernel template is ours (``algorithms/binary_search/cuprims_binary_search.cuh``; CUB's find-bound
kernels live in a dispatch header NVRTC cannot compile, and they expect sorted values).
One kernel serves both bounds, so the source depends only on the data type, the output
(index) type and the comparator.

The comparator is a strict weak order ``comp(a, b) -> bool`` ("a goes before b"):

* ``None`` / ``OpKind.LESS``: ascending data. On floating-point data NaN sorts last
  (numpy's order), so ``comp(a, b) = a < b || (isnan(b) && !isnan(a))``;
* ``OpKind.GREATER``: descending data (NaN first, the reverse of the above);
* a Python callable, compiled by numba with a bool result stored as a flag byte;
* a ``RawOp`` ``void name([void* state,] void* a, void* b, void* result)`` that writes one
  byte (nonzero = true).
"""

from __future__ import annotations

from cuprims._codegen import builtin_ops, functors
from cuprims._codegen.common import meta_export, op_symbol, preamble
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.iterators.units import IteratorUnit
from cuprims.op import OpSpec

META_FIELDS = ("threads", "value_size", "out_size")

INDEX_CODES = ("i4", "i8", "u4", "u8")


def check_comparator_builtin(op: OpSpec, data: ValueType, argument: str = "comp") -> None:
    """Raise ArgumentError unless built-in ``op`` is a strict weak order on ``data`` (LESS
    or GREATER; see :func:`.builtin_ops.check_comparator_builtin`)."""
    builtin_ops.check_comparator_builtin(op, data, argument)


def binary_search_source(*, data: ValueType, out: ValueType, op: OpSpec, arch: int,
                         values: IteratorUnit | None = None) -> Source:
    """Source for lower/upper-bound searches of ``data`` values writing ``out`` indices.

    ``values`` is the iterator the values are read from (see
    :func:`cuprims.iterators.units.iterator_unit`), or None for a plain array."""
    if out.code not in INDEX_CODES:
        raise ValueError(f"index type {out.code} is not one of {INDEX_CODES}")
    functor, externs = functors.comparator_functor("cuprims_comp_t", op, data, op_symbol(op, "cuprims_op_0"))
    values_t = f"const {data.cpp}*"
    iterator_text = ""
    if values is not None:
        values_t = values.type_name
        iterator_text = values.text + "\n"
        externs = externs + tuple(o.symbol for o in values.ops)
    text = (
        preamble((data, out) + (values.value_types if values else ()), arch)
        + "#include <binary_search/cuprims_binary_search.cuh>\n\n"
        + iterator_text
        + functor
        + "\n"
        + meta_export((
            ("threads", "cuprims::binary_search::policy::threads_per_block"),
            ("value_size", f"sizeof({data.cpp})"),
            ("out_size", f"sizeof({out.cpp})"),
        ))
    )
    name = f"cuprims::binary_search::binary_search_kernel<{data.cpp}, {out.cpp}, cuprims_comp_t, {values_t}>"
    return Source(text=text, name_expressions=(name,), extern_symbols=externs, meta_fields=META_FIELDS)
