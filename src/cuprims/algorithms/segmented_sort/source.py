"""Source for segmented sort: CUB's fallback kernel (few segments), and cuprims' kernels of
``algorithms/segmented_sort/cuprims_segmented_sort.cuh``: the classification of the segments by length
into three index lists (clear and classify), and the large- and small-segment kernels on
CUB's agents, which read the lists' sizes on the device instead of from the host.

Keys are sorted as the radix sort sorts them (``algorithms/sort_source.py``): the real C++ type for
bool and integers, the NaN-last twin for floating point. Medium and small segments are
sorted by CUB's sub-warp merge sort, which compares keys with ``<`` and ``==``: the twin
gets operators that order it as its radix traits do, -0.0 tied with +0.0 as CUB's digit
extractors tie them, so every segment comes out in numpy's order whichever path sorts it.
Values travel as opaque carriers of their size and alignment.
"""

from __future__ import annotations

from typing import Any

from cuprims._codegen.common import arg_param, iterator_parts, meta_export, unit_head
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.algorithms.sort_source import FLOAT_BITS, NAN_LAST_KEY, bytes_type, check_radix_key, nan_last_radix_traits

_CUB = "CUB_NS_QUALIFIER"
_SS = _CUB + "::detail::segmented_sort"
_NS = "cuprims::segmented_sort"
_INDEX = _NS + "::index_t"

SEGMENTED_SORT_META = (
    "key_size", "value_size", "offset_size", "key_bits", "radix_bits", "large_threads", "large_items", "mid_items",
    "medium_threads", "medium_warp", "medium_items", "small_threads", "small_warp", "small_items",
    "partitioning_threshold", "classify_threads", "classify_items",
)


def offset_size(begin: Any, wide_offsets: bool) -> int:
    """Bytes of the kernels' offset type for offsets of ``begin``'s type. The narrow build
    (problems of at most 2^31 - 1 items) takes every type as int32, reading offsets of any
    other type through ``narrow_offsets``; the wide one makes CUB's signed choice (int32
    stays int32; uint32 and 64-bit offsets are taken as int64). Either way an end below its
    start reads as an empty segment and never as a huge one."""
    return 4 if not wide_offsets or is_int32(begin) else 8


def is_int32(begin: Any) -> bool:
    """Whether the offsets are int32, the kernels' narrow offset type itself: one build
    serves every size of problem (int32 offsets address no item past 2^31 - 1)."""
    vt = begin.value
    return vt.size == 4 and vt.kind == "i"


def offset_params(begin: Any, end: Any, wide_offsets: bool) -> tuple[str, str]:
    """The C++ types the kernels take the start and end offsets as: the arguments' own, or
    wrapped in ``narrow_offsets`` where the narrow build reads them as int32."""
    if wide_offsets or is_int32(begin):
        return arg_param(begin), arg_param(end)
    wrap = "cuprims::segmented_sort::narrow_offsets<{}>"
    return wrap.format(arg_param(begin)), wrap.format(arg_param(end))


def _key_order(key: ValueType) -> str:
    """Comparison operators of the NaN-last twin for the sub-warp merge sorts."""
    bits = FLOAT_BITS[key.code][0]
    t = NAN_LAST_KEY
    cmp = "__host__ __device__ constexpr bool operator"
    return (
        "// the sub-warp merge sorts compare keys: in the twin's radix order, -0.0 tied with +0.0\n"
        f"__host__ __device__ constexpr {bits} cuprims_key_order({t} k)\n{{\n"
        f"  using traits = {_CUB}::NumericTraits<{t}>;\n"
        f"  return traits::TwiddleIn(k.bits == traits::HIGH_BIT ? traits::UnsignedBits(0) : k.bits);\n}}\n"
        f"{cmp}<({t} a, {t} b) {{ return cuprims_key_order(a) < cuprims_key_order(b); }}\n"
        f"{cmp}>({t} a, {t} b) {{ return cuprims_key_order(a) > cuprims_key_order(b); }}\n"
        f"{cmp}==({t} a, {t} b) {{ return cuprims_key_order(a) == cuprims_key_order(b); }}\n"
        f"{cmp}!=({t} a, {t} b) {{ return cuprims_key_order(a) != cuprims_key_order(b); }}\n"
    )


def _policies(arch: int, mid_items: int | None) -> str:
    """The sorts' tuning for ``arch``, and the middle tier's items."""
    mid = ("cuprims::segmented_sort::mid_tier_items(cuprims_policy.large_segment.threads_per_block, "
           "cuprims_policy.large_segment.items_per_thread)") if mid_items is None else str(int(mid_items))
    return (
        f"using cuprims_selector_t = {_SS}::policy_selector_from_types<cuprims_key_t, cuprims_value_t>;\n"
        + "constexpr auto cuprims_policy = cuprims_selector_t{}(::cuda::compute_capability{"
        + f"{arch // 10}, {arch % 10}" + "});\n"
        + f"constexpr int cuprims_mid_items = {mid};\n"
    )


# what the host packs: segment indices and counts as 32-bit values, CUB's double buffer as
# two pointers
_PACKED_SIZES = (
    f"static_assert(sizeof({_INDEX}) == 4 && sizeof({_CUB}::detail::device_double_buffer<cuprims_key_t>) == 16, "
    + "\"cuprims packs the kernels' parameters in these sizes\");\n"
)


def _narrow_layout(p_begin: str, p_end: str, begin: Any, end: Any) -> str:
    """Pins each ``narrow_offsets`` wrapper to its iterator's size and alignment (the host
    packs the iterator's state); nothing when the offsets are not wrapped."""
    pins = ""
    for wrapped, arg in dict(((p_begin, begin), (p_end, end))).items():  # once for a type both share
        own = arg_param(arg)
        if wrapped != own:
            pins += (f"static_assert(sizeof({wrapped}) == sizeof({own}) && alignof({wrapped}) == alignof({own}), "
                     "\"cuprims packs the narrowed offsets as their iterator\");\n")
    return pins


def _meta(value: ValueType | None) -> str:
    """The exported facts the host reads back (:data:`SEGMENTED_SORT_META`, in order)."""
    return meta_export((
        ("key_size", "sizeof(cuprims_key_t)"),
        ("value_size", "0" if value is None else "sizeof(cuprims_value_t)"),
        ("offset_size", "sizeof(cuprims_offset_t)"),
        ("key_bits", "8 * sizeof(cuprims_key_t)"),
        ("radix_bits", "cuprims_policy.large_segment.radix_bits"),
        ("large_threads", "cuprims_policy.large_segment.threads_per_block"),
        ("large_items", "cuprims_policy.large_segment.items_per_thread"),
        ("mid_items", "cuprims_mid_items"),
        ("medium_threads", "cuprims_policy.medium_segment.threads_per_block"),
        ("medium_warp", "cuprims_policy.medium_segment.threads_per_warp"),
        ("medium_items", "cuprims_policy.medium_segment.items_per_thread"),
        ("small_threads", "cuprims_policy.small_segment.threads_per_block"),
        ("small_warp", "cuprims_policy.small_segment.threads_per_warp"),
        ("small_items", "cuprims_policy.small_segment.items_per_thread"),
        ("partitioning_threshold", "cuprims_policy.partitioning_threshold"),
        ("classify_threads", f"{_NS}::classify_threads"),
        ("classify_items", f"{_NS}::classify_items"),
    ))


def _kernel_names(order: str, p_begin: str, p_end: str) -> tuple[str, ...]:
    """The six kernels' name expressions, in the order :func:`segmented_sort_source` gives."""
    sort_args = f"cuprims_selector_t, cuprims_key_t, cuprims_value_t, {p_begin}, {p_end}, cuprims_offset_t"
    return (
        f"{_SS}::DeviceSegmentedSortFallbackKernel<{order}, {sort_args}>",
        f"{_NS}::clear_kernel",
        f"{_NS}::classify_kernel<cuprims_selector_t, {p_begin}, {p_end}, cuprims_offset_t>",
        f"{_NS}::large_kernel<{order}, {sort_args}, cuprims_mid_items, false>",
        f"{_NS}::small_kernel<{order}, {sort_args}>",
        f"{_NS}::large_kernel<{order}, {sort_args}, cuprims_mid_items, true>",
    )


def segmented_sort_source(*, key: ValueType, value: ValueType | None, descending: bool, begin: Any, end: Any,
                          arch: int, mid_items: int | None = None, wide_offsets: bool = False) -> Source:
    """Source for sorting the segments [begin[i], end[i]) of ``key`` keys (and ``value``
    values); ``begin``/``end`` are argument kinds (arrays or iterators of one integer type).

    ``wide_offsets``: the build for problems past 2^31 - 1 items, whose kernels compute
    offsets in the offsets' own width (see :func:`offset_size`); else in 32 bits.

    ``mid_items``: items per thread of the large kernel's middle shared-memory tier
    (None: the header's default, ``mid_tier_items``; 0: CUB's tiers only).

    Kernels, in this order (the host relies on it): 0 CUB's fallback (a block per segment,
    no classification), 1 clear (zeroes the group sizes), 2 classify (lists the segments
    of each length group), 3 large segments beyond the middle tier (all of them without
    one), 4 medium and small segments, 5 large segments of the middle tier (never launched
    when ``mid_items`` is 0).
    """
    check_radix_key(key)
    iterator_text, iterator_types, iterator_symbols = iterator_parts((begin, end))
    value_t, value_decl = (f"{_CUB}::NullType", "") if value is None else bytes_type(value)
    is_float = key.kind == "f"
    order = f"cub::SortOrder::{'Descending' if descending else 'Ascending'}"
    p_begin, p_end = offset_params(begin, end, wide_offsets)
    text = (
        unit_head((key, begin.value) + iterator_types, arch,
                  ("segmented_sort/cuprims_segmented_sort.cuh",), iterator_text)
        + value_decl
        + (nan_last_radix_traits(key) + _key_order(key) if is_float else "")
        + f"using cuprims_key_t = {NAN_LAST_KEY if is_float else key.cpp};\n"
        + f"using cuprims_value_t = {value_t};\n"
        + f"using cuprims_offset_t = {'int' if offset_size(begin, wide_offsets) == 4 else 'long long'};\n"
        + _policies(arch, mid_items)
        + _narrow_layout(p_begin, p_end, begin, end)
        + _PACKED_SIZES
        + _meta(value)
    )
    # CUB's sub-warp sort headers have unannotated helpers that NVRTC 13.0 takes as host code
    # otherwise
    return Source(text=text, name_expressions=_kernel_names(order, p_begin, p_end), extern_symbols=iterator_symbols,
                  meta_fields=SEGMENTED_SORT_META, compile_options=(("device_as_default_execution_space", True),))
