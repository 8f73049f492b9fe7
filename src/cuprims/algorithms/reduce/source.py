"""Reduce's CUDA C++ generator: one unit holding CUB's single-tile and two-pass reduce kernels
(``cuprims_reduce.cuh`` beside this file) for an input, an accumulator type and an operator.
"""

from __future__ import annotations

from typing import Any

from cuprims._codegen.accumulators import accumulator
from cuprims._codegen.common import combiner_head, iterator_parts, meta_export, op_symbol
from cuprims._codegen.functors import binary_functor
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.op import OpSpec


def reduce_source(*, in_type: ValueType, accum: ValueType, op: OpSpec, has_init: bool,
                  deterministic_across_gpus: bool, arch: int, d_in: Any = None, d_out: Any = None) -> Source:
    """Source for a device-wide reduction of ``in_type`` items into an ``accum`` value;
    ``d_in``/``d_out`` (argument kinds) give the C++ types of iterator arguments.

    The kernel accumulates in :func:`.accumulators.accumulator`'s type for ``accum`` (a
    struct's word form where CUB would move it byte by byte); the init value, the result
    and the per-block partials keep ``accum``'s own type."""
    acc = accumulator(accum)
    externs: tuple[str, ...]
    if _plain_sum(op, accum):
        # CUB recognises cuda::std::plus by its type: a thread's items are then summed as a
        # tree, not one after another (the chain of dependent adds is what a misaligned
        # float32 input, read without vector loads, waits on), and its tunings for sums apply
        functor, externs = "using cuprims_op_t = ::cuda::std::plus<>;\n", ()
    else:
        functor, externs = binary_functor("cuprims_op_t", op, accum, op_symbol(op, "cuprims_op_0"), acc)
    iterator_text, iterator_types, iterator_symbols = iterator_parts((d_in, d_out))
    externs += iterator_symbols
    t, a = accum.cpp, acc.cpp
    base_selector = f"CUB_NS_QUALIFIER::detail::reduce::policy_selector_from_types<{a}, long long, cuprims_op_t%s>"
    if deterministic_across_gpus:
        selector = ("cuprims::reduce::fixed_arch_selector<" + base_selector %
                    ", ::cuda::execution::determinism::__determinism_t::__gpu_to_gpu" + ", 6, 0>")
    else:
        selector = base_selector % ""
    init_t = t if has_init else "cuprims::reduce::no_init"
    overrides: dict[str, object] = {}
    if accum.is_struct and d_in is not None and d_in.unit is not None:
        # CUB scales items per thread down by the accumulator's size (16-byte pairs: 4), but
        # an iterator's items (an argmax's Zip(x, Counting) loads 4 bytes) are not that
        # large: with so few loads in flight the reduction falls 10% short of bandwidth
        # (H200, bench/tune_reduce_policy.py). Up to 256 bytes of items per thread instead.
        items = max(1, min(16, 256 // accum.size))
        overrides = {"multi_tile.items_per_thread": items, "single_tile.items_per_thread": items}
    elif a != t:
        # A large struct's items are read in pieces as small as its alignment, and CUB's
        # LDG loads are inline assembly: a statement and an address register per piece
        # (300 for a 300-byte int8 struct), which plain loads are not: with them nvJitLink
        # takes a quarter longer over such a reduction (see .accumulators).
        overrides = {f"{tile}.load_modifier": "CUB_NS_QUALIFIER::LOAD_DEFAULT" for tile in ("multi_tile", "single_tile")}
    text = (
        combiner_head((in_type, accum) + iterator_types, arch, "reduce/cuprims_reduce.cuh", iterator_text,
                      acc.decl + functor, selector, overrides)
        + "constexpr auto cuprims_policy = cuprims_selector_t{}(::cuda::compute_capability{"
        + f"{arch // 10}, {arch % 10}" + "});\n"
        + meta_export((
            ("threads", "cuprims_policy.multi_tile.threads_per_block"),
            ("items", "cuprims_policy.multi_tile.items_per_thread"),
            # of a partial (the partials hold accum's own type)
            ("accum_size", f"sizeof({t})"),
            ("accum_align", f"alignof({t})"),
        ))
    )
    # first: over the input (every pass when the input is of the accumulator's type);
    # second: over the per-block partials (the same kernel when the types agree)
    in_param = f"const {in_type.cpp}*" if d_in is None or d_in.unit is None else d_in.cpp()
    if a == t:
        out_param = "" if d_out is None or d_out.unit is None else f", {d_out.cpp()}"
    else:  # the result and the partials are stored as accum's own type
        out_param = f", {t}*" if d_out is None or d_out.unit is None else f", {d_out.cpp()}"
        out_param += f", {t}"
    kernel = "cuprims::reduce::reduce_kernel<cuprims_selector_t, {}, " + f"{a}, cuprims_op_t, {init_t}{out_param}>"
    names = (kernel.format(in_param), kernel.format(f"const {t}*"))
    return Source(text=text, name_expressions=names, extern_symbols=externs,
                  meta_fields=("threads", "items", "accum_size", "accum_align"))


def _plain_sum(op: OpSpec, accum: ValueType) -> bool:
    """Whether ``op`` is the built-in PLUS over a number type C++'s ``+`` adds as numpy
    does (not bool, whose sum saturates, nor a struct)."""
    return (op.kind == "builtin" and op.builtin is not None and op.builtin.name == "PLUS"
            and not accum.is_struct and accum.dtype.kind in "iufc")

