"""Source for reduce-by-key: cuprims' init and sweep kernels on CUB's AgentReduceByKey
(``algorithms/reduce_by_key/cuprims_reduce_by_key.cuh``), with CUB's tile shape for the key
and accumulator types (``policy_selector_from_types``, asked with ``::cuda::std::plus<>``
standing in for the operator, as the scans ask theirs: an operator CUB cannot classify gets
its generic 128 x 6 tile, a sixth of the 256 x 18 it tuned for 4-byte keys and values). The
values are reduced in the type of the aggregates' output (``accum``); a run's key is written
as its last key, where CUB writes it (the key before the next run's head)."""

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


def _plan_meta(threads: str, items: str, storage: str) -> str:
    """The exported launch facts every kernel pair of this home shares (REDUCE_BY_KEY_META):
    the tile shape, the init block and the layout of the tile states ``storage``."""
    return meta_export((
        ("threads", threads),
        ("items", items),
        ("init_threads", f"{_NS}::init_threads"),
        ("tile_padding", f"{storage}::padding"),
        ("tile_bytes_per_tile", f"{storage}::bytes_per_tile"),
        ("tile_fixed_bytes", f"{storage}::fixed_bytes"),
    ))


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
        + _plan_meta("cuprims_policy.threads_per_block", "cuprims_policy.items_per_thread", storage)
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
        + _plan_meta("cuprims_policy.threads_per_block", "cuprims_policy.items_per_thread", storage)
    )
    names = (
        f"{_NS}::init_kernel<{l}, {count}, {offset}>",
        f"{_NS}::non_trivial_runs_kernel<cuprims_selector_t, {p_in}, {p_offsets}, {p_lengths}, {count}, "
        f"cuprims_eq_t, {l}, {offset}>",
    )
    return Source(text=text, name_expressions=names, extern_symbols=eq_externs + iterator_symbols,
                  meta_fields=REDUCE_BY_KEY_META, compile_options=(("device_as_default_execution_space", True),))


_RL_NS = "cuprims::run_length"


def run_length_tile(item: ValueType) -> tuple[int, int, str]:
    """(threads, items per thread, CUB load algorithm) of the encoding's tile for ``item``:
    64 bytes of items a thread and at most 16 items (32 int8 took 103 registers a thread, 16
    take 48), loaded through a warp transpose so that each load of a warp is one contiguous
    stretch (on an H100 this beats CUB's select tile for int32, 384 x 17 loaded directly, by
    7%, and 16 items loaded as vectors by 13%)."""
    return 256, max(1, min(16, 64 // item.size)), "BLOCK_LOAD_WARP_TRANSPOSE"


def run_length_source(*, items_in: Any, unique_out: Any, counts_out: Any, num_runs: Any, equality: OpSpec, arch: int,
                      wide_offsets: bool = False) -> Source:
    """Source writing the first item and the length of each run of equal consecutive items of
    ``items_in`` (by ``equality``) in one pass (``algorithms/reduce_by_key/cuprims_run_length.cuh``);
    reduce-by-key's init kernel readies its tile states and zeroes the run count."""
    item, count_t = items_in.value, counts_out.value
    eq_text, eq_externs = equality_functor("cuprims_eq_t", equality, item, op_symbol(equality, "cuprims_op_0"))
    iterator_text, iterator_types, iterator_symbols = iterator_parts((items_in, unique_out, counts_out))
    p_in, p_unique, p_counts = arg_param(items_in), output_param(unique_out, item), arg_param(counts_out, output=True)
    count = num_runs.value.cpp
    offset = "long long" if wide_offsets else "int"
    storage = f"cuprims::by_key::tile_storage<{offset}, {offset}>"
    threads, items, load = run_length_tile(item)
    policy = f"{_RL_NS}::policy<{threads}, {items}, CUB_NS_QUALIFIER::{load}>"
    text = (
        unit_head((item, count_t, num_runs.value) + iterator_types, arch,
                  ("reduce_by_key/cuprims_reduce_by_key.cuh", "reduce_by_key/cuprims_run_length.cuh"), iterator_text,
                  converted_outputs(((unique_out, item),)))
        + eq_text
        + _plan_meta(str(threads), str(items), storage)
    )
    names = (
        f"{_NS}::init_kernel<{offset}, {count}, {offset}>",
        f"{_RL_NS}::encode_kernel<{policy}, {p_in}, {p_unique}, {p_counts}, {count_t.cpp}, {count}, cuprims_eq_t, "
        f"{offset}>",
    )
    return Source(text=text, name_expressions=names, extern_symbols=eq_externs + iterator_symbols,
                  meta_fields=REDUCE_BY_KEY_META, compile_options=(("device_as_default_execution_space", True),))
