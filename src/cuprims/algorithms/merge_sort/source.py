"""Merge sort's CUDA C++ generator: CUB's block-sort, partition and merge kernels for one key
type and comparator, with values moved as opaque bytes and inputs that may be iterators.
"""

from __future__ import annotations

from typing import Any

from cuprims._codegen import functors
from cuprims._codegen.common import iterator_parts, meta_export, op_symbol, unit_head
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.algorithms.sort_source import CUB, bytes_type, check_comparator_builtin
from cuprims.op import OpSpec

MERGE_META = (
    "key_size", "value_size", "offset_size", "threads", "items", "block_sort_vsmem", "merge_vsmem",
    "partition_threads",
)


# DeviceMergeSortPartitionKernel has no launch bounds; CUB's host dispatch launches it
# with this many threads per block (a host-side constant of CUB's dispatch, mirrored here).
MERGE_PARTITION_THREADS = 256


def converted_values(values_in: Any, value: ValueType | None) -> bool:
    """Whether a values iterator's items are numbers of another type than the sorted values'
    (converted as they are read, before the sort moves them as bytes)."""
    if value is None or values_in is None or values_in.unit is None:
        return False
    own = values_in.value
    return own.code != value.code and own.kind in "biufc" and value.kind in "biufc"


def _values_as_bytes(values_in: Any, value: ValueType) -> str:
    """C++ reading a values iterator's items as the opaque carrier the sort moves
    (``cuprims_value_t``): its state struct wrapped in one whose items are the same bytes
    (a bitwise copy; numbers of another type are first converted to the values' type, as
    static_cast converts), and ``cuprims_values_in_t``, the kernel parameter over it, laid
    out as ``values_in``'s own iterator."""
    state, own = values_in.unit.type_name, values_in.value.cpp
    read = f"const {own} v = inner[i];"
    if converted_values(values_in, value):
        own = value.cpp
        read = f"const {own} v = static_cast<{own}>(inner[i]);"
    name = "cuprims_values_bytes_t"
    adapted = f"cuprims::input_iterator<{name}, cuprims_value_t>"
    return (
        "// the values iterator's items, bit for bit, as the bytes the sort moves\n"
        f"struct {name}\n{{\n  {state} inner;\n"
        "  __device__ __forceinline__ cuprims_value_t operator[](long long i) const\n  {\n"
        f"    {read}\n    cuprims_value_t r;\n"
        "    ::cuda::std::memcpy(&r, &v, sizeof(r));\n    return r;\n  }\n};\n"
        f"static_assert(sizeof({own}) == sizeof(cuprims_value_t) && sizeof(cuprims_value_t) == {value.size}, "
        "\"values iterator items differ in size from the sorted values\");\n"
        f"using cuprims_values_in_t = {adapted};\n"
        f"static_assert(sizeof(cuprims_values_in_t) == {values_in.state_size} && alignof(cuprims_values_in_t) == "
        f"{values_in.state_alignment}, \"iterator layout differs from cuprims' packing\");\n"
    )


def merge_sort_source(*, key: ValueType, value: ValueType | None, op: OpSpec, wide_offsets: bool,
                      arch: int, keys_in: Any = None, values_in: Any = None) -> Source:
    """Source for CUB's merge sort of ``key`` keys (and ``value`` values) ordered by ``op``.

    ``keys_in``/``values_in`` (argument kinds, ``algorithms.arguments.ArgKind``; None or
    an array kind for arrays) give the C++ of iterator inputs: CUB's block-sort kernel
    reads them through iterators of items of ``key`` (converted as
    ``cuprims::input_iterator`` does) and of the values' opaque carrier (the iterator's
    items copied bitwise); every other kernel works on the output and scratch arrays.

    Kernels, in this order: 0 block sort, 1 partition, 2 merge.
    """
    if op.kind == "builtin":
        check_comparator_builtin(op, key)
    # merge sort's unit never zeroed the flag a linked comparator writes (its text, and so
    # every cache key, stays as it was)
    functor, externs = functors.comparator_functor("cuprims_compare_t", op, key, op_symbol(op, "cuprims_op_0"),
                                                   zero_flag=False)
    keys_in = keys_in if keys_in is not None and keys_in.unit is not None else None
    values_in = values_in if value is not None and values_in is not None and values_in.unit is not None else None
    iterator_text, iterator_types, iterator_symbols = iterator_parts((keys_in, values_in))
    externs += iterator_symbols
    offset_t = "unsigned long long" if wide_offsets else "unsigned int"
    if value is None:
        value_t, value_decl = f"{CUB}::NullType", ""
    else:
        value_t, value_decl = bytes_type(value)
    # what the block-sort kernel reads: arrays as pointers (the text of a sort of arrays is
    # as it always was), iterators under the aliases declared below
    # the values' own type, where the values iterator's numbers are converted to it (its header, if any)
    converted: tuple[ValueType, ...] = (value,) if value is not None and converted_values(values_in, value) else ()
    key_in_t = "cuprims_key_t*" if keys_in is None else "cuprims_keys_in_t"
    value_in_t = "cuprims_value_t*" if values_in is None else "cuprims_values_in_t"
    inputs = "" if keys_in is None else f"using cuprims_keys_in_t = {keys_in.cpp()};\n"
    if values_in is not None:
        inputs += _values_as_bytes(values_in, value)  # type: ignore[arg-type]  # values come with their type
    agents = (f"cuprims_merge::merge_sort_vsmem_helper_t<cuprims_policy_getter_t, {key_in_t}, {value_in_t}, "
              "cuprims_key_t*, cuprims_value_t*, cuprims_offset_t, cuprims_compare_t, cuprims_key_t, cuprims_value_t>")
    text = (
        unit_head((key,) + iterator_types + converted, arch, ("cub/device/dispatch/kernels/kernel_merge_sort.cuh",),
                  iterator_text)
        + value_decl
        + functor
        + f"using cuprims_key_t = {key.cpp};\n"
        + f"using cuprims_value_t = {value_t};\n"
        + f"using cuprims_offset_t = {offset_t};\n"
        + inputs
        + "using cuprims_selector_t = " + CUB + "::detail::merge_sort::policy_selector_from_types<cuprims_key_t*>;\n"
        + "namespace cuprims_merge = " + CUB + "::detail::merge_sort;\n"
        # the policy the kernels use on this arch, after CUB's fallback for large types
        + "using cuprims_policy_getter_t = " + CUB + "::detail::device_policy_getter<cuprims_selector_t, "
        + f"{arch}>;\n"
        + f"using cuprims_agents_t = {agents};\n"
        + "constexpr auto cuprims_policy = cuprims_agents_t::policy;\n"
        + "using cuprims_block_sort_vsmem_t = " + CUB
        + "::detail::vsmem_helper_impl<typename cuprims_agents_t::block_sort_agent_t>;\n"
        + "using cuprims_merge_vsmem_t = " + CUB
        + "::detail::vsmem_helper_impl<typename cuprims_agents_t::merge_agent_t>;\n"
        + meta_export((
            ("key_size", "sizeof(cuprims_key_t)"),
            ("value_size", "0" if value is None else "sizeof(cuprims_value_t)"),
            ("offset_size", "sizeof(cuprims_offset_t)"),
            ("threads", "cuprims_policy.threads_per_block"),
            ("items", "cuprims_policy.items_per_thread"),
            ("block_sort_vsmem", "cuprims_block_sort_vsmem_t::vsmem_per_block"),
            ("merge_vsmem", "cuprims_merge_vsmem_t::vsmem_per_block"),
            ("partition_threads", str(MERGE_PARTITION_THREADS)),
        ))
    )
    # the merge kernel names the block sort's input types too (CUB sizes both agents' shared
    # memory together)
    args = (f"cuprims_selector_t, {key_in_t}, {value_in_t}, cuprims_key_t*, cuprims_value_t*, "
            "cuprims_offset_t, cuprims_compare_t, cuprims_key_t, cuprims_value_t")
    names = (
        f"cuprims_merge::DeviceMergeSortBlockSortKernel<{args}>",
        "cuprims_merge::DeviceMergeSortPartitionKernel<cuprims_key_t*, cuprims_offset_t, cuprims_compare_t, "
        "cuprims_key_t>",
        f"cuprims_merge::DeviceMergeSortMergeKernel<{args}>",
    )
    return Source(text=text, name_expressions=names, extern_symbols=externs, meta_fields=MERGE_META)
