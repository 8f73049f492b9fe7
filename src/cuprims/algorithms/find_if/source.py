"""Source for find_if: cuprims' init and search kernels
(``algorithms/find_if/cuprims_find_if.cuh``) for one input type, index type and predicate.
The tile is 256 threads of 64 bytes of items each (at most 16 items); the shape is exported
through ``cuprims_meta``."""

from __future__ import annotations

from typing import Any

from cuprims._codegen.common import arg_param, iterator_parts, meta_export, op_symbol, unit_head
from cuprims._codegen.functors import predicate_functor
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.op import OpSpec

FIND_IF_META = ("threads", "items")
THREADS = 256
_NS = "cuprims::find_if"


def items_per_thread(item: ValueType) -> int:
    """Items each thread loads per tile: 64 bytes of them, 1 to 16."""
    return max(1, min(16, 64 // max(item.size, 1)))


def find_if_source(*, d_in: Any, d_out_index: Any, op: OpSpec, arch: int) -> Source:
    """Source finding the first item of ``d_in`` for which ``op`` holds, its index written
    to ``d_out_index[0]`` (``num_items`` when there is none)."""
    item, index = d_in.value, d_out_index.value
    cond_text, cond_externs = predicate_functor("cuprims_cond_t", op, item, op_symbol(op, "cuprims_op_0"))
    iterator_text, iterator_types, iterator_symbols = iterator_parts((d_in,))
    items = items_per_thread(item)
    text = (
        unit_head((item, index) + iterator_types, arch, ("find_if/cuprims_find_if.cuh",), iterator_text)
        + cond_text
        + meta_export((("threads", str(THREADS)), ("items", str(items))))
    )
    names = (
        f"{_NS}::init_kernel<{index.cpp}>",
        f"{_NS}::search_kernel<{THREADS}, {items}, {arg_param(d_in)}, {item.cpp}, {index.cpp}, cuprims_cond_t>",
    )
    return Source(text=text, name_expressions=names, extern_symbols=cond_externs + iterator_symbols,
                  meta_fields=FIND_IF_META)
