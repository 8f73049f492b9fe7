"""Source for unique-by-key, in two builds chosen per call by the item count.

* Up to 2^31 - 1 items (``wide_offsets=False``): cuprims' unique kernel
  (``algorithms/unique_by_key/cuprims_unique.cuh``): run heads found from the keys alone, with decoupled
  look-back over ``ScanTileState<int>``, and the item read for each head only. Its tile
  shape is CUB's select policy for the key type (the one CUB's ``DeviceSelect::Unique``
  runs).
* Beyond (``wide_offsets=True``): CUB's DeviceUniqueByKeySweepKernel with 64-bit offsets,
  which loads keys and items tile by tile.

Both use CUB's init kernel to ready their tile states and zero the count, and export the
same metadata fields (the narrow kernel needs no virtual shared memory: 0)."""

from __future__ import annotations

from typing import Any

from cuprims._codegen.common import (arg_param, converted_outputs, iterator_parts, meta_export, op_symbol,
                                     output_param, unit_head)
from cuprims._codegen.functors import equality_functor
from cuprims._compile.source import Source
from cuprims.op import OpSpec

UNIQUE_META = ("threads", "items", "vsmem_per_block", "tile_padding", "tile_word_bytes")
_WIDE_TILE_STATE = "CUB_NS_QUALIFIER::ScanTileState<long long>"
_TILE_STATE = "CUB_NS_QUALIFIER::ScanTileState<int>"
_WIDE_HEADERS = ("cub/device/dispatch/kernels/kernel_unique_by_key.cuh", "cub/device/dispatch/kernels/kernel_scan.cuh")


def unique_by_key_source(*, keys_in: Any, values_in: Any, keys_out: Any, values_out: Any, num_selected: Any,
                         op: OpSpec, arch: int, wide_offsets: bool = False) -> Source:
    """Source keeping the first of each run of equal consecutive keys (and its value)."""
    key, value = keys_in.value, values_in.value
    functor, externs = equality_functor("cuprims_eq_t", op, key, op_symbol(op, "cuprims_op_0"))
    iterator_text, iterator_types, iterator_symbols = iterator_parts((keys_in, values_in, keys_out, values_out))
    params = (arg_param(keys_in), arg_param(values_in), output_param(keys_out, key), output_param(values_out, value),
              f"{num_selected.value.cpp}*")
    headers = _WIDE_HEADERS if wide_offsets else ("unique_by_key/cuprims_unique.cuh",)
    converted = converted_outputs(((keys_out, key), (values_out, value)))
    head = unit_head((key, value, num_selected.value) + iterator_types, arch, headers, iterator_text,
                     converted) + functor
    text, names, options = (_wide if wide_offsets else _narrow)(head, key, value, params, arch)
    return Source(text=text, name_expressions=names, extern_symbols=externs + iterator_symbols,
                  meta_fields=UNIQUE_META, compile_options=options)


def _narrow(head: str, key: Any, value: Any, params: tuple[str, ...], arch: int) -> tuple[str, tuple, tuple]:
    p_kin, p_vin, p_kout, p_vout, p_count = params
    text = (
        head
        + f"\nusing cuprims_selector_t = CUB_NS_QUALIFIER::detail::select::policy_selector_from_types<{p_kin}, "
        + f"CUB_NS_QUALIFIER::NullType*, {p_kout}, int, CUB_NS_QUALIFIER::SelectImpl::Select>;\n"
        + "constexpr auto cuprims_policy = cuprims_selector_t{}(::cuda::compute_capability{"
        + f"{arch // 10}, {arch % 10}" + "}).lookback;\n"
        + f"static_assert(sizeof({_TILE_STATE}) == sizeof(void*), \"cuprims passes the tile state as a pointer\");\n"
        + meta_export((
            ("threads", "cuprims_policy.threads_per_block"),
            ("items", "cuprims_policy.items_per_thread"),
            ("vsmem_per_block", "0"),
            ("tile_padding", f"{_TILE_STATE}::TILE_STATUS_PADDING"),
            ("tile_word_bytes", f"sizeof(typename {_TILE_STATE}::TxnWord)"),
        ))
    )
    names = (
        f"CUB_NS_QUALIFIER::detail::scan::DeviceCompactInitKernel<{_TILE_STATE}, {p_count}>",
        f"cuprims::unique::unique_kernel<cuprims_selector_t, {p_kin}, {p_vin}, {p_kout}, {p_vout}, {p_count}, "
        "cuprims_eq_t>",
    )
    # CUB's select tuning header has unannotated (host) helpers: NVRTC takes them as device code
    return text, names, (("device_as_default_execution_space", True),)


def _wide(head: str, key: Any, value: Any, params: tuple[str, ...], arch: int) -> tuple[str, tuple, tuple]:
    p_kin, p_vin, p_kout, p_vout, p_count = params
    agents = (f"CUB_NS_QUALIFIER::detail::unique_by_key::unique_by_key_vsmem_helper_t<cuprims_policy_getter, "
              f"{p_kin}, {p_vin}, {p_kout}, {p_vout}, cuprims_eq_t, long long>")
    text = (
        head
        + "\nusing cuprims_selector_t = CUB_NS_QUALIFIER::detail::unique_by_key::policy_selector_from_types<"
        + f"{key.cpp}, {value.cpp}>;\n"
        + "struct cuprims_policy_getter\n{\n  _CCCL_HOST_DEVICE_API constexpr auto operator()() const\n  {\n"
        + f"    return cuprims_selector_t{{}}(::cuda::compute_capability{{{arch // 10}, {arch % 10}}});\n  }}\n}};\n"
        + f"using cuprims_agents_t = {agents};\n"
        # the host passes the tile state and the virtual shared memory as one pointer each
        + f"static_assert(sizeof({_WIDE_TILE_STATE}) == sizeof(void*), \"cuprims passes the tile state as a "
        + "pointer\");\n"
        + "static_assert(sizeof(CUB_NS_QUALIFIER::detail::vsmem_t) == sizeof(void*), \"vsmem is one pointer\");\n"
        + meta_export((
            ("threads", "cuprims_agents_t::policy.threads_per_block"),
            ("items", "cuprims_agents_t::policy.items_per_thread"),
            ("vsmem_per_block",
             "CUB_NS_QUALIFIER::detail::vsmem_helper_impl<typename cuprims_agents_t::agent_t>::vsmem_per_block"),
            ("tile_padding", f"{_WIDE_TILE_STATE}::TILE_STATUS_PADDING"),
            ("tile_word_bytes", f"sizeof(typename {_WIDE_TILE_STATE}::TxnWord)"),
        ))
    )
    names = (
        f"CUB_NS_QUALIFIER::detail::scan::DeviceCompactInitKernel<{_WIDE_TILE_STATE}, {p_count}>",
        f"CUB_NS_QUALIFIER::detail::unique_by_key::DeviceUniqueByKeySweepKernel<cuprims_selector_t, {p_kin}, "
        f"{p_vin}, {p_kout}, {p_vout}, {p_count}, {_WIDE_TILE_STATE}, cuprims_eq_t, long long>",
    )
    return text, names, ()
