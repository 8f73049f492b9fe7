"""Source for adjacent differences: cuprims' save and difference kernels
(``algorithms/adjacent_difference/cuprims_adjacent_difference.cuh``) for one input and output
type, operator and direction. The tile is 256 threads of 32 bytes of items each (at most 16
items); the shape is exported through ``cuprims_meta``."""

from __future__ import annotations

from typing import Any

from cuprims._codegen.common import arg_param, iterator_parts, meta_export, op_symbol, unit_head
from cuprims._codegen.functors import transform_functor
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.op import OpSpec

ADJACENT_DIFFERENCE_META = ("threads", "items")
THREADS = 256
_NS = "cuprims::adjacent_difference"


def items_per_thread(item: ValueType) -> int:
    """Items each thread takes: 32 bytes of them, 1 to 16."""
    return max(1, min(16, 32 // max(item.size, 1)))


def adjacent_difference_source(*, d_in: Any, d_out: Any, op: OpSpec, left: bool, arch: int) -> Source:
    """Source combining each item of ``d_in`` with its neighbour (the one before it where
    ``left``, else the one after it) by ``op`` into ``d_out``; the item without a neighbour
    is copied."""
    item, out = d_in.value, d_out.value
    op_text, op_externs = transform_functor("cuprims_diff_op_t", op, (item, item), out, op_symbol(op, "cuprims_op_0"))
    iterator_text, iterator_types, iterator_symbols = iterator_parts((d_in, d_out))
    p_in, p_out = arg_param(d_in), arg_param(d_out, output=True)
    items = items_per_thread(item)
    text = (
        unit_head((item, out) + iterator_types, arch, ("adjacent_difference/cuprims_adjacent_difference.cuh",),
                  iterator_text)
        + op_text
        + meta_export((("threads", str(THREADS)), ("items", str(items))))
    )
    direction = "true" if left else "false"
    names = (
        f"{_NS}::save_kernel<{THREADS}, {items}, {direction}, {p_in}, {item.cpp}>",
        f"{_NS}::difference_kernel<{THREADS}, {items}, {direction}, {p_in}, {p_out}, {item.cpp}, {out.cpp}, "
        "cuprims_diff_op_t>",
    )
    return Source(text=text, name_expressions=names, extern_symbols=op_externs + iterator_symbols,
                  meta_fields=ADJACENT_DIFFERENCE_META)
