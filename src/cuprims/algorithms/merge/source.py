"""Source for merges: cuprims' partition and merge kernels
(``algorithms/merge/cuprims_merge.cuh``) over CUB's merge agent, for one key type (and value
type), comparator, offset width and argument kinds (arrays or iterators).

The tile is CUB's ``DeviceMerge`` policy for the arch (on sm_90: 512 threads and 15 nominal
4-byte items a thread, fewer for wider keys and values, e.g. 15 int32 keys or 7 int32 pairs
a thread), as CUB's dispatch chooses the agent; its shape, its bulk copies into shared
memory and its virtual shared memory per tile are exported through ``cuprims_meta``.
"""

from __future__ import annotations

from typing import Any

from cuprims._codegen import functors
from cuprims._codegen.common import arg_param, iterator_parts, meta_export, op_symbol, unit_head
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.algorithms.sort_source import CUB
from cuprims.op import OpSpec

MERGE_META = ("key_size", "value_size", "offset_size", "threads", "items", "vsmem", "bulk_keys", "bulk_values",
              "partition_threads")
_NS = "cuprims::merge"


def _param(arg: Any, output: bool = False) -> str:
    """An argument's C++ type; absent values are CUB's ``NullType*`` (keys alone)."""
    return f"{CUB}::NullType*" if arg is None else arg_param(arg, output=output)


def merge_source(*, keys1: Any, values1: Any, keys2: Any, values2: Any, keys_out: Any, values_out: Any, op: OpSpec,
                 wide_offsets: bool, arch: int) -> Source:
    """Source merging ``keys1`` and ``keys2`` (argument kinds, ``algorithms.arguments.ArgKind``;
    ``values*`` None for keys alone) into ``keys_out`` (and ``values_out``), ordered by ``op``.

    Kernels, in this order: 0 partition (merge-path diagonals), 1 merge."""
    key: ValueType = keys1.value
    values = (values1, values2, values_out)
    functor, externs = functors.comparator_functor("cuprims_compare_t", op, key, op_symbol(op, "cuprims_op_0"))
    iterator_text, iterator_types, iterator_symbols = iterator_parts((keys1, keys2, keys_out) + values)
    value_types = (key,) + (() if values_out is None else (values_out.value,))
    offset_t = "long long" if wide_offsets else "int"
    k1, k2, ko = _param(keys1), _param(keys2), _param(keys_out, True)
    v1, v2, vo = _param(values1), _param(values2), _param(values_out, True)
    args = f"{k1}, {v1}, {k2}, {v2}, {ko}, {vo}, cuprims_offset_t, cuprims_compare_t"
    text = (
        unit_head(value_types + iterator_types, arch, ("merge/cuprims_merge.cuh",), iterator_text)
        + functor
        + f"using cuprims_offset_t = {offset_t};\n"
        + f"using cuprims_selector_t = {CUB}::detail::merge::policy_selector_from_types<{k1}, {v1}, {k2}, {v2}, "
        "cuprims_offset_t>;\n"
        + f"using cuprims_policy_getter_t = {CUB}::detail::device_policy_getter<cuprims_selector_t, {arch}>;\n"
        + f"using cuprims_agent_t = {_NS}::choose_agent<cuprims_policy_getter_t, {args}>::type;\n"
        + f"using cuprims_vsmem_t = {CUB}::detail::vsmem_helper_impl<cuprims_agent_t>;\n"
        + f"using cuprims_chosen_t = {_NS}::choose_agent<cuprims_policy_getter_t, {args}>;\n"
        + meta_export((
            ("key_size", f"sizeof({key.cpp})"),
            ("value_size", "0" if values_out is None else f"sizeof({values_out.value.cpp})"),
            ("offset_size", "sizeof(cuprims_offset_t)"),
            ("threads", "cuprims_agent_t::threads_per_block"),
            ("items", "cuprims_agent_t::items_per_tile / cuprims_agent_t::threads_per_block"),
            ("vsmem", "cuprims_vsmem_t::vsmem_per_block"),
            ("bulk_keys", "cuprims_chosen_t::use_bulk && cuprims_chosen_t::policy.use_bulk_copy_for_keys"),
            ("bulk_values", "cuprims_chosen_t::use_bulk && cuprims_chosen_t::policy.use_bulk_copy_for_values"),
            ("partition_threads", f"{_NS}::partition_threads"),
        ))
    )
    names = (
        f"{_NS}::partition_kernel<cuprims_agent_t::items_per_tile, {k1}, {k2}, cuprims_offset_t, cuprims_compare_t>",
        f"{_NS}::merge_kernel<cuprims_agent_t, {args}>",
    )
    return Source(text=text, name_expressions=names, extern_symbols=externs + iterator_symbols,
                  meta_fields=MERGE_META)
