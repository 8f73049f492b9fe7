"""Source for reduce-by-key: cuprims' init and sweep kernels on CUB's AgentReduceByKey
(``algorithms/reduce_by_key/cuprims_reduce_by_key.cuh``), with CUB's tile shape for the key
and accumulator types (``policy_selector_from_types``, asked with ``::cuda::std::plus<>``
standing in for the operator, as the scans ask theirs: an operator CUB cannot classify gets
its generic 128 x 6 tile, a sixth of the 256 x 18 it tuned for 4-byte keys and values). The
values are reduced in the type of the aggregates' output (``accum``); a run's key is written
as the first key of the run."""

from __future__ import annotations

from typing import Any

from cuprims._codegen.common import (arg_param, converted_outputs, iterator_parts, meta_export, op_symbol,
                                     output_param, unit_head)
from cuprims._codegen.functors import binary_functor, equality_functor
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.op import OpSpec

REDUCE_BY_KEY_META = ("threads", "items", "init_threads", "tile_padding", "tile_bytes_per_tile", "tile_fixed_bytes")
_NS = "cuprims::reduce_by_key"


def reduce_by_key_source(*, keys_in: Any, values_in: Any, unique_out: Any, aggregates_out: Any, num_runs: Any,
                         equality: OpSpec, reduction: OpSpec, accum: ValueType, arch: int,
                         wide_offsets: bool = False) -> Source:
    """Source reducing each run of equal consecutive keys of ``keys_in`` (by ``equality``)
    over ``values_in`` with ``reduction`` in ``accum``; ``wide_offsets``: 64-bit offsets (past
    2^31 - 1 items) instead of 32-bit ones."""
    key = keys_in.value
    eq_text, eq_externs = equality_functor("cuprims_eq_t", equality, key, op_symbol(equality, "cuprims_op_0"))
    red_text, red_externs = binary_functor("cuprims_red_t", reduction, accum, op_symbol(reduction, "cuprims_op_1"))
    iterator_text, iterator_types, iterator_symbols = iterator_parts((keys_in, values_in, unique_out, aggregates_out))
    p_kin, p_vin = arg_param(keys_in), arg_param(values_in)
    p_kout, p_aout = output_param(unique_out, key), output_param(aggregates_out, accum)
    count, a = num_runs.value.cpp, accum.cpp
    offset = "long long" if wide_offsets else "int"
    converted = converted_outputs(((unique_out, key), (aggregates_out, accum)))
    storage = f"cuprims::by_key::tile_storage<{a}, {offset}>"
    text = (
        unit_head((key, values_in.value, accum, num_runs.value) + iterator_types, arch,
                  ("reduce_by_key/cuprims_reduce_by_key.cuh",), iterator_text, converted)
        + eq_text + red_text
        + "\nusing cuprims_selector_t = CUB_NS_QUALIFIER::detail::reduce_by_key::policy_selector_from_types<"
        + f"::cuda::std::plus<>, {a}, {key.cpp}>;\n"
        + "constexpr auto cuprims_policy = cuprims_selector_t{}(::cuda::compute_capability{"
        + f"{arch // 10}, {arch % 10}" + "}).lookback;\n"
        + meta_export((
            ("threads", "cuprims_policy.threads_per_block"),
            ("items", "cuprims_policy.items_per_thread"),
            ("init_threads", f"{_NS}::init_threads"),
            ("tile_padding", f"{storage}::padding"),
            ("tile_bytes_per_tile", f"{storage}::bytes_per_tile"),
            ("tile_fixed_bytes", f"{storage}::fixed_bytes"),
        ))
    )
    names = (
        f"{_NS}::init_kernel<{a}, {count}, {offset}>",
        f"{_NS}::sweep_kernel<cuprims_selector_t, {p_kin}, {p_kout}, {p_vin}, {p_aout}, {count}, cuprims_eq_t, "
        f"cuprims_red_t, {a}, {offset}>",
    )
    # CUB's tuning header has unannotated (host) helpers: NVRTC takes them as device code
    return Source(text=text, name_expressions=names, extern_symbols=eq_externs + red_externs + iterator_symbols,
                  meta_fields=REDUCE_BY_KEY_META, compile_options=(("device_as_default_execution_space", True),))


def non_trivial_runs_source(*, items_in: Any, offsets_out: Any, lengths_out: Any, num_runs: Any, equality: OpSpec,
                            arch: int, wide_offsets: bool = False) -> Source:
    """Source writing the offset and length of each run of more than one item of
    ``items_in`` (equal by ``equality``) on CUB's AgentRle, the lengths counted in the type
    of ``lengths_out`` (the look-back's values), with CUB's tile shape for the item and
    length types; the same init kernel readies the tile states and zeroes the run count."""
    item, length = items_in.value, lengths_out.value
    eq_text, eq_externs = equality_functor("cuprims_eq_t", equality, item, op_symbol(equality, "cuprims_op_0"))
    iterator_text, iterator_types, iterator_symbols = iterator_parts((items_in, offsets_out, lengths_out))
    p_in, p_offsets, p_lengths = arg_param(items_in), arg_param(offsets_out, output=True), arg_param(lengths_out,
                                                                                                        output=True)
    count, l = num_runs.value.cpp, length.cpp
    offset = "long long" if wide_offsets else "int"
    storage = f"cuprims::by_key::tile_storage<{l}, {offset}>"
    text = (
        unit_head((item, offsets_out.value, length, num_runs.value) + iterator_types, arch,
                  ("reduce_by_key/cuprims_reduce_by_key.cuh",), iterator_text)
        + eq_text
        + "\nusing cuprims_selector_t = CUB_NS_QUALIFIER::detail::rle::non_trivial_runs::policy_selector_from_types<"
        + f"{l}, {item.cpp}>;\n"
        + "constexpr auto cuprims_policy = cuprims_selector_t{}(::cuda::compute_capability{"
        + f"{arch // 10}, {arch % 10}" + "}).lookback;\n"
        + meta_export((
            ("threads", "cuprims_policy.threads_per_block"),
            ("items", "cuprims_policy.items_per_thread"),
            ("init_threads", f"{_NS}::init_threads"),
            ("tile_padding", f"{storage}::padding"),
            ("tile_bytes_per_tile", f"{storage}::bytes_per_tile"),
            ("tile_fixed_bytes", f"{storage}::fixed_bytes"),
        ))
    )
    names = (
        f"{_NS}::init_kernel<{l}, {count}, {offset}>",
        f"{_NS}::non_trivial_runs_kernel<cuprims_selector_t, {p_in}, {p_offsets}, {p_lengths}, {count}, "
        f"cuprims_eq_t, {l}, {offset}>",
    )
    return Source(text=text, name_expressions=names, extern_symbols=eq_externs + iterator_symbols,
                  meta_fields=REDUCE_BY_KEY_META, compile_options=(("device_as_default_execution_space", True),))
