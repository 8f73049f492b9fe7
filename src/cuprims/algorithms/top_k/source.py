"""Source for top-k: cuprims' init, pass, choose and sort kernels
(``algorithms/top_k/cuprims_top_k.cuh``) for one key type, value type (or keys alone) and
order. The passes are 256 threads of 64 bytes of keys each (at most 16 keys); a sort sorts tiles of 256
threads of 16 items and merges them 8 items a thread. The shapes are exported through
``cuprims_meta``."""

from __future__ import annotations

from typing import Any

from cuprims._codegen.common import arg_param, iterator_parts, meta_export, unit_head
from cuprims._compile.source import Source

TOP_K_META = ("threads", "items", "word_bits", "sort_threads", "sort_items", "merge_threads", "merge_items")
THREADS = 256
SORT_THREADS = 256
SORT_ITEMS = 16
SORT_TILE = SORT_THREADS * SORT_ITEMS
MERGE_THREADS = 256
MERGE_ITEMS = 8
_NS = "cuprims::top_k"
_KINDS = {"b": 0, "u": 0, "i": 1, "f": 2}


def items_per_thread(size: int) -> int:
    """Keys each thread of a pass loads per tile: 64 bytes of them, 8 to 16 (a tile takes
    one global atomic per output counter when it writes anything)."""
    return max(1, min(16, 64 // max(size, 1)))


def top_k_source(*, d_in_keys: Any, d_in_values: Any | None, descending: bool, arch: int) -> Source:
    """Source selecting the k best keys of ``d_in_keys`` (the largest where ``descending``),
    with their values from ``d_in_values`` when given.

    Kernels, in this order (the host relies on it): 0 init, 1 pass, 2 choose, 3 sort (of
    tiles), 4 merge.
    """
    key = d_in_keys.value
    pairs = d_in_values is not None
    iterator_text, iterator_types, iterator_symbols = iterator_parts((d_in_keys, d_in_values))
    value_types = (key,) + ((d_in_values.value,) if d_in_values is not None else ())
    items = items_per_thread(key.size)
    text = (
        unit_head(value_types + iterator_types, arch, ("top_k/cuprims_top_k.cuh",), iterator_text)
        + f"using cuprims_word_of_t = {_NS}::ordered_word<{key.cpp}, {_KINDS[key.kind]}, "
        + f"{'true' if descending else 'false'}>;\n"
        + meta_export((("threads", str(THREADS)), ("items", str(items)),
                       ("word_bits", "8 * sizeof(cuprims_word_of_t::word_t)"),
                       ("sort_threads", str(SORT_THREADS)), ("sort_items", str(SORT_ITEMS)),
                       ("merge_threads", str(MERGE_THREADS)), ("merge_items", str(MERGE_ITEMS))))
    )
    p_keys = arg_param(d_in_keys)
    p_values, value_t = (arg_param(d_in_values), d_in_values.value.cpp) if d_in_values is not None \
        else ("const char*", "char")
    flag = "true" if pairs else "false"
    names = (
        f"{_NS}::init_kernel<{THREADS}>",
        f"{_NS}::pass_kernel<{THREADS}, {items}, {p_keys}, {p_values}, {key.cpp}, {value_t}, cuprims_word_of_t, "
        f"{flag}>",
        f"{_NS}::choose_kernel<cuprims_word_of_t::word_t>",
        f"{_NS}::sort_kernel<{SORT_THREADS}, {SORT_ITEMS}, {key.cpp}, {value_t}, cuprims_word_of_t, {flag}>",
        f"{_NS}::merge_kernel<{MERGE_THREADS}, {MERGE_ITEMS}, {key.cpp}, {value_t}, cuprims_word_of_t, {flag}>",
    )
    return Source(text=text, name_expressions=names, extern_symbols=iterator_symbols, meta_fields=TOP_K_META)
