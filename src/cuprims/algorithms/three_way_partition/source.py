"""Source for three-way partition: CUB's DeviceThreeWayPartitionKernel (decoupled look-back
over the tiles of one partition of at most 2^31 - 1 items) and its init kernel; the host
runs the pair once per partition, passing each its streaming context."""

from __future__ import annotations

from typing import Any

from cuprims._codegen.common import (arg_param, converted_outputs, iterator_parts, lookback_meta, op_symbol,
                                     output_param, unit_head)
from cuprims._codegen.functors import predicate_functor
from cuprims._compile.source import Source
from cuprims.algorithms.lookback import CONTEXT_SIZE
from cuprims.op import OpSpec

PARTITION_META = ("threads", "items", "tile_padding", "tile_word_bytes")
_TILE_STATE = "CUB_NS_QUALIFIER::detail::three_way_partition::ScanTileStateT"
_CONTEXT = "CUB_NS_QUALIFIER::detail::three_way_partition::streaming_context_t<long long>"


def three_way_partition_source(*, d_in: Any, first: Any, second: Any, unselected: Any, num_selected: Any,
                               first_op: OpSpec, second_op: OpSpec, arch: int) -> Source:
    vt = d_in.value
    f1, e1 = predicate_functor("cuprims_first_t", first_op, vt, op_symbol(first_op, "cuprims_op_0"))
    f2, e2 = predicate_functor("cuprims_second_t", second_op, vt, op_symbol(second_op, "cuprims_op_1"))
    iterator_text, iterator_types, iterator_symbols = iterator_parts((d_in, first, second, unselected))
    p_in, p_count = arg_param(d_in), f"{num_selected.value.cpp}*"
    outputs = tuple((a, vt) for a in (first, second, unselected))
    p_outs = ", ".join(output_param(a, vt) for a in (first, second, unselected))
    text = (
        unit_head((vt, num_selected.value) + iterator_types, arch,
                  ("cub/device/dispatch/kernels/kernel_three_way_partition.cuh",), iterator_text,
                  converted_outputs(outputs))
        + f1 + f2
        + "\nusing cuprims_selector_t = CUB_NS_QUALIFIER::detail::three_way_partition::policy_selector_from_types<"
        + f"{vt.cpp}, CUB_NS_QUALIFIER::detail::three_way_partition::per_partition_offset_t>;\n"
        + "constexpr auto cuprims_policy = cuprims_selector_t{}(::cuda::compute_capability{"
        + f"{arch // 10}, {arch % 10}" + "}).lookback;\n"
        + f"static_assert(sizeof({_TILE_STATE}) == sizeof(void*), \"cuprims passes the tile state as a pointer\");\n"
        + f"static_assert(sizeof({_CONTEXT}) == {CONTEXT_SIZE} && alignof({_CONTEXT}) == 8, "
        + "\"cuprims packs the streaming context as context_bytes does\");\n"
        + lookback_meta("cuprims_policy", _TILE_STATE)
    )
    names = (
        f"CUB_NS_QUALIFIER::detail::three_way_partition::DeviceThreeWayPartitionInitKernel<{_TILE_STATE}, {p_count}>",
        f"CUB_NS_QUALIFIER::detail::three_way_partition::DeviceThreeWayPartitionKernel<cuprims_selector_t, {p_in}, "
        f"{p_outs}, {p_count}, {_TILE_STATE}, cuprims_first_t, cuprims_second_t, "
        f"CUB_NS_QUALIFIER::detail::three_way_partition::per_partition_offset_t, {_CONTEXT}>",
    )
    return Source(text=text, name_expressions=names, extern_symbols=e1 + e2 + iterator_symbols,
                  meta_fields=PARTITION_META)
