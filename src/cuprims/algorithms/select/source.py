"""Source for select (stream compaction by a predicate): cuprims' select kernel on CUB's
AgentSelectIf (``algorithms/select/cuprims_select.cuh``) and CUB's init kernel for its tile states."""

from __future__ import annotations

import struct
from typing import Any

from cuprims._codegen.common import (arg_param, converted_outputs, iterator_parts, lookback_meta, op_symbol,
                                     output_param, unit_head)
from cuprims._codegen.functors import predicate_functor
from cuprims._compile.source import Source
from cuprims.op import OpSpec

SELECT_META = ("threads", "items", "tile_padding", "tile_word_bytes")
_TILE_STATE = "CUB_NS_QUALIFIER::ScanTileState<int>"


# select_partition_kernel's streaming context as the host packs it: items before the
# partition, the running counts' addresses (read, written), first partition, last partition
PARTITION_CONTEXT = struct.Struct("<qQQii")


def select_source(*, d_in: Any, d_out: Any, num_selected: Any, op: OpSpec, arch: int,
                  partitioned: bool = False) -> Source:
    """Source for the select of ``d_in``'s items for which ``op`` holds into ``d_out``;
    ``partitioned``: the kernel for one partition of several (inputs past 2^31 - 1 items)."""
    vt = d_in.value
    functor, externs = predicate_functor("cuprims_predicate_t", op, vt, op_symbol(op, "cuprims_op_0"))
    iterator_text, iterator_types, iterator_symbols = iterator_parts((d_in, d_out))
    p_in, p_out, p_count = arg_param(d_in), output_param(d_out, vt), f"{num_selected.value.cpp}*"
    text = (
        unit_head((vt, num_selected.value) + iterator_types, arch, ("select/cuprims_select.cuh",), iterator_text,
                  converted_outputs(((d_out, vt),)))
        + functor
        + f"\nusing cuprims_selector_t = CUB_NS_QUALIFIER::detail::select::policy_selector_from_types<{p_in}, "
        + f"CUB_NS_QUALIFIER::NullType*, {p_out}, int, CUB_NS_QUALIFIER::SelectImpl::Select>;\n"
        + "constexpr auto cuprims_policy = cuprims_selector_t{}(::cuda::compute_capability{"
        + f"{arch // 10}, {arch % 10}" + "}).lookback;\n"
        + f"static_assert(sizeof({_TILE_STATE}) == sizeof(void*), \"cuprims passes the tile state as a pointer\");\n"
        + lookback_meta("cuprims_policy", _TILE_STATE)
        + (f"static_assert(sizeof(cuprims::select::streaming_partition) == {PARTITION_CONTEXT.size}, "
           "\"cuprims packs the partition context as PARTITION_CONTEXT\");\n" if partitioned else "")
    )
    kernel = "select_partition_kernel" if partitioned else "select_kernel"
    names = (
        f"CUB_NS_QUALIFIER::detail::scan::DeviceCompactInitKernel<{_TILE_STATE}, {p_count}>",
        f"cuprims::select::{kernel}<cuprims_selector_t, {p_in}, {p_out}, {p_count}, cuprims_predicate_t>",
    )
    # CUB's select tuning header has unannotated (host) helpers: NVRTC takes them as device code
    return Source(text=text, name_expressions=names, extern_symbols=externs + iterator_symbols,
                  meta_fields=SELECT_META, compile_options=(("device_as_default_execution_space", True),))
