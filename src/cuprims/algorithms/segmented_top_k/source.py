"""Source for segmented top-k: one instance of ``top_k_kernel``
(``algorithms/segmented_top_k/cuprims_segmented_top_k.cuh``) per tier of row length, for one
key type, value size, order and kind of rows (fixed, or offsets of an array or iterator type).

Keys are moved as unsigned words of their width (the kernel ranks their bits: see the
header), so no key type's own C++ header is needed; values as opaque carriers of their
size and alignment. The tiers' shapes are exported through ``cuprims_meta``.
"""

from __future__ import annotations

from typing import Any

from cuprims._codegen.common import arg_param, iterator_parts, meta_export, unit_head
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.algorithms.sort_source import FLOAT_BITS, bytes_type

_NS = "cuprims::segmented_top_k"
_CUB = "CUB_NS_QUALIFIER"
_UNSIGNED = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
# +inf's bits (a magnitude above it is a NaN)
_INF = {"f2": "0x7c00ull", "f4": "0x7f800000ull", "f8": "0x7ff0000000000000ull"}
assert set(_INF) == set(FLOAT_BITS)

# (threads, items per thread, a warp per row) of the tiers, shortest rows first: a row
# goes to the first tier whose tile (items x the threads of a row's group: the block, or
# a warp) holds it, the longest ones to the last, which reads a row of more than its tile
# again for each radix pass. 8-byte keys take half the items.
TIERS = ((256, 8, True), (256, 8, False), (1024, 16, False))
MAX_K = 1024  # the kernel's max_k: the slots of the kept items
SEGMENTED_TOP_K_META = ("max_k",) + tuple(f"{what}_{i}" for i in range(len(TIERS)) for what in ("tile", "rows"))


def tier_shapes(key: ValueType) -> tuple[tuple[int, int, bool], ...]:
    """The tiers' (threads, items, warp per row) for ``key`` keys."""
    return tuple((threads, items if key.size < 8 else max(1, items // 2), warp) for threads, items, warp in TIERS)


def _kind(key: ValueType) -> int:
    return 2 if key.kind == "f" else 1 if key.kind == "i" else 0


def segmented_top_k_source(*, key: ValueType, value: ValueType | None, descending: bool, begin: Any, end: Any,
                           arch: int) -> Source:
    """Source selecting the top ``k`` keys (and their values) of each row; ``begin``/``end``
    are the offsets' argument kinds, or None for rows of a fixed size. One kernel per tier
    (:data:`TIERS`), in that order."""
    offsets = () if begin is None else (begin, end)
    iterator_text, iterator_types, iterator_symbols = iterator_parts(offsets)
    value_t, value_decl = (f"{_CUB}::NullType", "") if value is None else bytes_type(value)
    if begin is None:
        p_begin, p_end = f"{_NS}::fixed_rows<false>", f"{_NS}::fixed_rows<true>"
        head_types: tuple[ValueType, ...] = ()
    else:
        p_begin, p_end = arg_param(begin), arg_param(end)
        head_types = (begin.value,)
    bits = _UNSIGNED[key.size]
    text = (
        unit_head(head_types + iterator_types, arch, ("segmented_top_k/cuprims_segmented_top_k.cuh",), iterator_text)
        + value_decl
        + f"using cuprims_value_t = {value_t};\n"
        + (f"static_assert(sizeof({p_begin}) == 8 && sizeof({p_end}) == 8, "
           "\"cuprims packs a fixed row size as one 64-bit parameter\");\n" if begin is None else "")
        + meta_export((("max_k", f"{_NS}::max_k"),) + tuple(
            (f"{what}_{i}", f"{_NS}::shape<{t}, {n}, true, {str(w).lower()}>::{what}")
            for i, (t, n, w) in enumerate(tier_shapes(key)) for what in ("tile", "rows")))
    )
    inf = _INF.get(key.code, "0ull")
    order = "true" if descending else "false"
    shapes = tier_shapes(key)
    names = tuple(
        f"{_NS}::top_k_kernel<{t}, {n}, {'true' if i < len(shapes) - 1 else 'false'}, {str(w).lower()}, "
        f"{_kind(key)}, {order}, {bits}, {inf}, cuprims_value_t, {p_begin}, {p_end}>"
        for i, (t, n, w) in enumerate(shapes))
    return Source(text=text, name_expressions=names, extern_symbols=iterator_symbols,
                  meta_fields=SEGMENTED_TOP_K_META)
