"""Source for segmented scans: cuprims' init and scan kernels
(``algorithms/segmented_scan/cuprims_segmented_scan.cuh``) for one input, output, offset and
accumulator type, operator, init kind and direction. The tile is 128 threads and a number of
items per thread by the accumulator's size (as many bytes a thread as CUB's scan tiles
hold); every launch fact is exported through ``cuprims_meta``."""

from __future__ import annotations

from typing import Any

from cuprims._codegen.common import arg_param, init_value_type, iterator_parts, meta_export, op_symbol, unit_head
from cuprims._codegen.functors import binary_functor
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.op import OpSpec

SEGMENTED_SCAN_META = ("threads", "items", "init_threads", "tile_bytes_per_tile", "tile_fixed_bytes")
THREADS = 128
_ITEMS_BY_SIZE = {1: 16, 2: 16, 4: 24, 8: 12}
_NS = "cuprims::segmented_scan"


def items_per_thread(accum: ValueType) -> int:
    """Items each thread scans: 24 four-byte values, fewer of wider ones (at least 2), 16 of
    narrower ones (32 would take 155 registers a thread for int8, against 72). On an H100,
    128 x 24 four-byte values scan 2^16 irregular segments 15% faster than 256 x 12 (fewer
    blocks to search for their segments, each with more items)."""
    return _ITEMS_BY_SIZE.get(accum.size, max(2, 96 // max(accum.size, 1)))


def segmented_scan_source(*, d_in: Any, d_out: Any, begin: Any, end: Any, op: OpSpec, accum: ValueType,
                          init_kind: str, inclusive: bool, arch: int) -> Source:
    """Source scanning each segment ``[begin[s], end[s])`` of ``d_in`` into the same positions
    of ``d_out`` with ``op`` in ``accum``; ``init_kind`` is "none" (inclusive only), "value"
    (passed at launch) or "device" (a pointer read by the kernel)."""
    if init_kind == "none" and not inclusive:
        raise ValueError("an exclusive scan needs an initial value")
    op_text, op_externs = binary_functor("cuprims_scan_op_t", op, accum, op_symbol(op, "cuprims_op_0"))
    iterator_text, iterator_types, iterator_symbols = iterator_parts((d_in, d_out, begin, end))
    p_in, p_out = arg_param(d_in), arg_param(d_out, output=True)
    p_begin, p_end = arg_param(begin), arg_param(end)
    a = accum.cpp
    init_t = init_value_type(init_kind, a)
    storage = f"cuprims::by_key::tile_storage<{a}>"
    items = items_per_thread(accum)
    text = (
        unit_head((d_in.value, accum, begin.value) + iterator_types, arch,
                  ("segmented_scan/cuprims_segmented_scan.cuh",), iterator_text)
        + op_text
        + meta_export((
            ("threads", str(THREADS)),
            ("items", str(items)),
            ("init_threads", f"{_NS}::init_threads"),
            ("tile_bytes_per_tile", f"{storage}::bytes_per_tile"),
            ("tile_fixed_bytes", f"{storage}::fixed_bytes"),
        ))
    )
    direction = "true" if inclusive else "false"
    names = (
        f"{_NS}::init_kernel<{a}, {p_begin}, {p_end}>",
        f"{_NS}::scan_kernel<{THREADS}, {items}, {p_in}, {p_out}, {p_begin}, {p_end}, {a}, cuprims_scan_op_t, "
        f"{init_t}, {direction}>",
    )
    return Source(text=text, name_expressions=names, extern_symbols=op_externs + iterator_symbols,
                  meta_fields=SEGMENTED_SCAN_META)
