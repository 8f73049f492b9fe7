"""Source for unique-by-key: CUB's DeviceUniqueByKeySweepKernel (decoupled look-back over
tiles of keys) and the init kernel that readies its tile states and zeroes the count."""

from __future__ import annotations

from typing import Any

from ..op import OpSpec
from .codegen import Source, arg_param, iterator_parts, meta_export, op_symbol, preamble
from .functors import equality_functor

UNIQUE_META = ("threads", "items", "vsmem_per_block", "tile_padding", "tile_word_bytes")
_TILE_STATE = "CUB_NS_QUALIFIER::ScanTileState<long long>"


def unique_by_key_source(*, keys_in: Any, values_in: Any, keys_out: Any, values_out: Any, num_selected: Any,
                         op: OpSpec, arch: int) -> Source:
    """Source keeping the first of each run of equal consecutive keys (and its value)."""
    key, value = keys_in.value, values_in.value
    functor, externs = equality_functor("cuprims_eq_t", op, key, op_symbol(op, "cuprims_op_0"))
    iterator_text, iterator_types, iterator_symbols = iterator_parts((keys_in, values_in, keys_out, values_out))
    externs += iterator_symbols
    p_kin, p_vin = arg_param(keys_in), arg_param(values_in)
    p_kout, p_vout = arg_param(keys_out, output=True), arg_param(values_out, output=True)
    p_count = f"{num_selected.value.cpp}*"
    agents = (f"CUB_NS_QUALIFIER::detail::unique_by_key::unique_by_key_vsmem_helper_t<cuprims_policy_getter, "
              f"{p_kin}, {p_vin}, {p_kout}, {p_vout}, cuprims_eq_t, long long>")
    text = (
        preamble((key, value, num_selected.value) + iterator_types, arch)
        + "#include <cub/device/dispatch/kernels/kernel_unique_by_key.cuh>\n"
        + "#include <cub/device/dispatch/kernels/kernel_scan.cuh>\n"
        + ("#include <cuprims_iterator.cuh>\n" + iterator_text if iterator_text else "") + "\n"
        + functor
        + "\nusing cuprims_selector_t = CUB_NS_QUALIFIER::detail::unique_by_key::policy_selector_from_types<"
        + f"{key.cpp}, {value.cpp}>;\n"
        + "struct cuprims_policy_getter\n{\n  _CCCL_HOST_DEVICE_API constexpr auto operator()() const\n  {\n"
        + f"    return cuprims_selector_t{{}}(::cuda::compute_capability{{{arch // 10}, {arch % 10}}});\n  }}\n}};\n"
        + f"using cuprims_agents_t = {agents};\n"
        # the host passes the tile state and the virtual shared memory as one pointer each
        + f"static_assert(sizeof({_TILE_STATE}) == sizeof(void*), \"cuprims passes the tile state as a pointer\");\n"
        + "static_assert(sizeof(CUB_NS_QUALIFIER::detail::vsmem_t) == sizeof(void*), \"vsmem is one pointer\");\n"
        + meta_export((
            ("threads", "cuprims_agents_t::policy.threads_per_block"),
            ("items", "cuprims_agents_t::policy.items_per_thread"),
            ("vsmem_per_block",
             "CUB_NS_QUALIFIER::detail::vsmem_helper_impl<typename cuprims_agents_t::agent_t>::vsmem_per_block"),
            ("tile_padding", f"{_TILE_STATE}::TILE_STATUS_PADDING"),
            ("tile_word_bytes", f"sizeof(typename {_TILE_STATE}::TxnWord)"),
        ))
    )
    names = (
        f"CUB_NS_QUALIFIER::detail::scan::DeviceCompactInitKernel<{_TILE_STATE}, {p_count}>",
        f"CUB_NS_QUALIFIER::detail::unique_by_key::DeviceUniqueByKeySweepKernel<cuprims_selector_t, {p_kin}, "
        f"{p_vin}, {p_kout}, {p_vout}, {p_count}, {_TILE_STATE}, cuprims_eq_t, long long>",
    )
    return Source(text=text, name_expressions=names, extern_symbols=externs, meta_fields=UNIQUE_META)
