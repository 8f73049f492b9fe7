"""Source for segmented reductions: CUB's DeviceSegmentedReduceKernel, and cuprims' slice and
combine kernels for few segments, warp kernel for short ones and adaptive kernel for any
(``algorithms/segmented_reduce/cuprims_segmented_reduce.cuh``)."""

from __future__ import annotations

from typing import Any

from cuprims._codegen.common import arg_param, iterator_parts, meta_export, op_symbol, unit_head
from cuprims._codegen.functors import binary_functor
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.op import OpSpec

SEGMENTED_META = ("threads", "items", "medium_items_per_tile", "medium_segments_per_block", "small_items_per_tile",
                  "small_segments_per_block", "accum_size", "accum_align", "warp_threads")


def segmented_reduce_source(*, d_in: Any, d_out: Any, begin: Any, end: Any, accum: ValueType, op: OpSpec,
                            arch: int) -> Source:
    """Source for reducing segments of ``d_in`` into ``d_out`` (argument kinds) in type ``accum``,
    segment i being [begin[i], end[i]) (argument kinds of one integer type)."""
    functor, externs = binary_functor("cuprims_op_t", op, accum, op_symbol(op, "cuprims_op_0"))
    iterator_text, iterator_types, iterator_symbols = iterator_parts((d_in, d_out, begin, end))
    externs += iterator_symbols
    t, offset = accum.cpp, begin.value.cpp
    selector = f"CUB_NS_QUALIFIER::detail::segmented_reduce::policy_selector_from_types<{t}, {offset}, cuprims_op_t>"
    text = (
        unit_head((d_in.value, accum, begin.value) + iterator_types, arch,
                  ("segmented_reduce/cuprims_segmented_reduce.cuh",), iterator_text)
        + functor
        + f"\nusing cuprims_selector_t = {selector};\n"
        + "constexpr auto cuprims_policy = cuprims_selector_t{}(::cuda::compute_capability{"
        + f"{arch // 10}, {arch % 10}" + "});\n"
        + meta_export((
            ("threads", "cuprims_policy.large_reduce.threads_per_block"),
            ("items", "cuprims_policy.large_reduce.items_per_thread"),
            ("medium_items_per_tile", "cuprims_policy.medium_reduce.items_per_tile()"),
            ("medium_segments_per_block", "cuprims_policy.medium_reduce.segments_per_block()"),
            ("small_items_per_tile", "cuprims_policy.small_reduce.items_per_tile()"),
            ("small_segments_per_block", "cuprims_policy.small_reduce.segments_per_block()"),
            ("accum_size", f"sizeof({t})"),
            ("accum_align", f"alignof({t})"),
            ("warp_threads", "cuprims::segmented_reduce::warp_threads"),
        ))
    )
    p_in, p_out = arg_param(d_in), arg_param(d_out, output=True)
    p_begin, p_end = arg_param(begin), arg_param(end)
    names = (
        # CUB's kernel: a thread, a warp or a block per segment
        f"CUB_NS_QUALIFIER::detail::segmented_reduce::DeviceSegmentedReduceKernel<cuprims_selector_t, {p_in}, "
        f"{p_out}, {p_begin}, {p_end}, {offset}, cuprims_op_t, {t}, {t}>",
        # few segments: slices of each, then their combination
        f"cuprims::segmented_reduce::slice_kernel<cuprims_selector_t, {p_in}, {p_begin}, {p_end}, {t}, cuprims_op_t>",
        f"cuprims::segmented_reduce::combine_kernel<cuprims_selector_t, {p_out}, {p_begin}, {p_end}, {t}, "
        "cuprims_op_t>",
        # a warp per segment (segments within CUB's medium tile)
        f"cuprims::segmented_reduce::warp_kernel<{p_in}, {p_out}, {p_begin}, {p_end}, {t}, cuprims_op_t>",
        # no hint: a warp per short segment, the block for each long one
        f"cuprims::segmented_reduce::adaptive_kernel<cuprims_selector_t, {p_in}, {p_out}, {p_begin}, {p_end}, {t}, "
        "cuprims_op_t>",
    )
    # CUB's kernel dispatches through an unannotated lambda, which NVRTC 13.0 treats as host code
    return Source(text=text, name_expressions=names, extern_symbols=externs, meta_fields=SEGMENTED_META,
                  compile_options=(("device_as_default_execution_space", True),))
