"""Source for scan-by-key: cuprims' init and sweep kernels on CUB's AgentScanByKey
(``algorithms/scan_by_key/cuprims_scan_by_key.cuh``). The values are scanned in the type of
the output (``accum``); a run is a stretch of consecutive keys equal by ``equality``.

Tuning: CUB's scan-by-key policy selector is asked with ``::cuda::std::plus<>`` standing in
for the operator, as the plain scan asks its own, so every operator over a primitive value
(built-in or LTO-inlined Python or raw code) gets the tile CUB tuned for cheap operators."""

from __future__ import annotations

from typing import Any

from cuprims._codegen.common import arg_param, init_value_type, iterator_parts, meta_export, op_symbol, unit_head
from cuprims._codegen.functors import binary_functor, equality_functor
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.op import OpSpec

SCAN_BY_KEY_META = ("threads", "items", "init_threads", "tile_bytes_per_tile", "tile_fixed_bytes")
_NS = "cuprims::scan_by_key"


def scan_by_key_source(*, keys_in: Any, values_in: Any, out: Any, equality: OpSpec, op: OpSpec, accum: ValueType,
                       init_kind: str, arch: int, wide_offsets: bool = False) -> Source:
    """Source scanning ``values_in`` into ``out`` with ``op`` in ``accum``, restarting at
    every run of keys of ``keys_in`` equal by ``equality``; ``init_kind`` is "none"
    (inclusive), "value" (passed at launch) or "device" (a pointer read by the kernel):
    an exclusive scan has an initial value, an inclusive one none. ``wide_offsets``: the
    agent's offsets are 64-bit (past 2^31 - 1 items)."""
    key = keys_in.value
    eq_text, eq_externs = equality_functor("cuprims_eq_t", equality, key, op_symbol(equality, "cuprims_op_0"))
    op_text, op_externs = binary_functor("cuprims_scan_op_t", op, accum, op_symbol(op, "cuprims_op_1"))
    iterator_text, iterator_types, iterator_symbols = iterator_parts((keys_in, values_in, out))
    p_kin, p_vin, p_out = arg_param(keys_in), arg_param(values_in), arg_param(out, output=True)
    a = accum.cpp
    init_t = init_value_type(init_kind, a)
    storage = f"cuprims::by_key::tile_storage<{a}>"
    text = (
        unit_head((key, values_in.value, accum) + iterator_types, arch, ("scan_by_key/cuprims_scan_by_key.cuh",),
                  iterator_text)
        + eq_text + op_text
        + "\nusing cuprims_selector_t = CUB_NS_QUALIFIER::detail::scan_by_key::policy_selector_from_types<"
        + f"{key.cpp}, {a}, {values_in.value.cpp}, ::cuda::std::plus<>>;\n"
        + "constexpr auto cuprims_policy = cuprims_selector_t{}(::cuda::compute_capability{"
        + f"{arch // 10}, {arch % 10}" + "}).lookback;\n"
        + meta_export((
            ("threads", "cuprims_policy.threads_per_block"),
            ("items", "cuprims_policy.items_per_thread"),
            ("init_threads", f"{_NS}::init_threads"),
            ("tile_bytes_per_tile", f"{storage}::bytes_per_tile"),
            ("tile_fixed_bytes", f"{storage}::fixed_bytes"),
        ))
    )
    names = (
        f"{_NS}::init_kernel<{a}, {p_kin}, {key.cpp}>",
        f"{_NS}::sweep_kernel<cuprims_selector_t, {p_kin}, {key.cpp}, {p_vin}, {p_out}, cuprims_eq_t, "
        f"cuprims_scan_op_t, {a}, {init_t}, {'long long' if wide_offsets else 'int'}>",
    )
    # CUB's tuning header has unannotated (host) helpers: NVRTC takes them as device code
    return Source(text=text, name_expressions=names, extern_symbols=eq_externs + op_externs + iterator_symbols,
                  meta_fields=SCAN_BY_KEY_META, compile_options=(("device_as_default_execution_space", True),))
