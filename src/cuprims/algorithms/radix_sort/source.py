"""Radix sort's CUDA C++ generator: CUB's onesweep and single-tile radix sort kernels for one
key type (floating-point keys as their NaN-last twin, see :mod:`cuprims.algorithms.sort_source`)
and values moved as opaque bytes.
"""

from __future__ import annotations

from typing import Any, Mapping

from cuprims._codegen.common import meta_export, tuned_selector, unit_head
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.algorithms.sort_source import (CUB, NAN_LAST_KEY, RADIX_META, bytes_type, check_radix_key,
                                            nan_last_radix_traits, radix_tuning)


def radix_sort_source(*, key: ValueType, value: ValueType | None, descending: bool, wide_offsets: bool,
                      arch: int, policy_overrides: Mapping[str, Any] | None = None) -> Source:
    """Source for CUB's onesweep radix sort of ``key`` keys (and ``value`` values, if given).

    Kernels, in this order (the host relies on it):
      0 single tile, 1 histogram, 2 exclusive sum, 3 zero-fill (counters, bins, look-back),
      4 onesweep pass.

    ``policy_overrides`` replaces members of CUB's policy (e.g.
    ``{"onesweep.items_per_thread": 19}``, see :func:`codegen.tuned_selector`); ``None``
    takes cuprims' measured tuning (:func:`radix_tuning`), ``{}`` CUB's policy as it is.
    """
    check_radix_key(key)
    if policy_overrides is None:
        policy_overrides = radix_tuning(key, value, wide_offsets, arch)
    offset_t = "unsigned long long" if wide_offsets else "unsigned int"
    if value is None:
        value_t, value_decl = f"{CUB}::NullType", ""
    else:
        value_t, value_decl = bytes_type(value)
    order = "Descending" if descending else "Ascending"
    # the kernels sort floating-point keys as their NaN-last twin (same bits, same size);
    # the policy is still CUB's for the real type
    sorted_key = NAN_LAST_KEY if key.kind == "f" else "cuprims_key_t"
    text = (
        unit_head((key,), arch, ("cub/device/dispatch/kernels/kernel_radix_sort.cuh",))
        + value_decl
        + (nan_last_radix_traits(key) if key.kind == "f" else "")
        + f"using cuprims_key_t = {key.cpp};\n"
        + f"using cuprims_value_t = {value_t};\n"
        + f"using cuprims_offset_t = {offset_t};\n"
        + tuned_selector(CUB + "::detail::radix_sort::policy_selector_from_types<cuprims_key_t, cuprims_value_t, "
                         "cuprims_offset_t>", policy_overrides)
        + "namespace cuprims_radix = " + CUB + "::detail::radix_sort;\n"
        + "constexpr auto cuprims_policy = cuprims_selector_t{}(::cuda::compute_capability{"
        + f"{arch // 10}, {arch % 10}" + "});\n"
        # The onesweep pipeline computes every pass's digit histogram at once with one bit
        # width; the host walks the bit range in steps of that width.
        + "static_assert(cuprims_policy.histogram.radix_bits == cuprims_policy.onesweep.radix_bits &&\n"
        + "              cuprims_policy.exclusive_sum.radix_bits == cuprims_policy.onesweep.radix_bits,\n"
        + "              \"cuprims assumes one digit width across CUB's onesweep kernels\");\n"
        # the host sizes look-back flags and counters as int (CUB's PortionOffsetT)
        + "static_assert(sizeof(int) == 4, \"cuprims sizes onesweep look-back words as 4 bytes\");\n"
        + meta_export((
            ("key_size", "sizeof(cuprims_key_t)"),
            ("value_size", "0" if value is None else "sizeof(cuprims_value_t)"),
            ("offset_size", "sizeof(cuprims_offset_t)"),
            ("key_bits", "8 * sizeof(cuprims_key_t)"),
            ("algorithm", "static_cast<int>(cuprims_policy.algorithm)"),
            ("single_tile_threads", "cuprims_policy.single_tile.threads_per_block"),
            ("single_tile_items", "cuprims_policy.single_tile.items_per_thread"),
            ("histogram_threads", "cuprims_policy.histogram.threads_per_block"),
            ("exclusive_sum_threads", "cuprims_policy.exclusive_sum.threads_per_block"),
            ("onesweep_threads", "cuprims_policy.onesweep.threads_per_block"),
            ("onesweep_items", "cuprims_policy.onesweep.items_per_thread"),
            ("radix_bits", "cuprims_policy.onesweep.radix_bits"),
        ))
    )
    o = f"cub::SortOrder::{order}"
    k, v, off = sorted_key, "cuprims_value_t", "cuprims_offset_t"
    names = (
        f"cuprims_radix::DeviceRadixSortSingleTileKernel<cuprims_selector_t, {o}, {k}, {v}, {off}>",
        f"cuprims_radix::DeviceRadixSortHistogramKernel<cuprims_selector_t, {o}, {k}, {off}>",
        f"cuprims_radix::DeviceRadixSortExclusiveSumKernel<cuprims_selector_t, {off}>",
        f"cuprims_radix::DeviceRadixSortInitKernel<cuprims_selector_t, int, {off}>",
        f"cuprims_radix::DeviceRadixSortOnesweepKernel<cuprims_selector_t, {o}, {k}, {v}, {off}, int, int>",
    )
    return Source(text=text, name_expressions=names, extern_symbols=(), meta_fields=RADIX_META)
