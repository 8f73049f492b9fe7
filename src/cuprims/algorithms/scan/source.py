"""Scan spec -> CUDA C++ source (pure strings: no CUDA, no numba; golden-tested).

The unit instantiates the two kernels of ``algorithms/scan/cuprims_scan.cuh`` (tile-state init
and the decoupled look-back scan) and exports, through ``cuprims_meta``, everything the
host dispatch needs: block size, items per thread, init-kernel block size, tile-state
bytes per tile and fixed bytes, the largest tile count, accumulator size and alignment.
"""

from __future__ import annotations

from typing import Any, Mapping

from cuprims._codegen.accumulators import accumulator
from cuprims._codegen.common import combiner_head, init_value_type, iterator_parts, meta_export, op_symbol
from cuprims._codegen.functors import binary_functor
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.op import OpSpec

SCAN_META_FIELDS = ("threads", "items", "init_threads", "tile_bytes_per_tile", "tile_fixed_bytes", "max_tiles",
                    "accum_size", "accum_align")


# sm_90 look-back tile shapes (threads per block, items per thread) for accumulators of
# each size, measured on the H200 with 2^28-item PLUS scans (bench/tune_probe.py; figures
# in bench/results/tune-*.md): against CUB's sm_90 tuning (1 B: 192 x 22, 2 B: 512 x 12,
# 4 B: 128 x 24, 8 B: 224 x 24) they were 1.26x, 1.05x, 1.09x and 1.08x as fast.
_SM90_SCAN_TILES = {1: (128, 64), 2: (128, 32), 4: (128, 32), 8: (64, 32)}


def scan_tuning(accum: ValueType, arch: int) -> dict[str, int]:
    """cuprims' departures from CUB's scan policy: larger tiles for bool, integer and
    floating-point accumulators on sm_90 (structs and complex values keep CUB's)."""
    if arch == 90 and accum.kind in "biuf" and accum.size in _SM90_SCAN_TILES:
        threads, items = _SM90_SCAN_TILES[accum.size]
        return {"lookback.threads_per_block": threads, "lookback.items_per_thread": items}
    return {}


def scan_source(*, in_type: ValueType, accum: ValueType, op: OpSpec, init_kind: str, inclusive: bool,
                arch: int, policy_overrides: Mapping[str, Any] | None = None, d_in: Any = None,
                d_out: Any = None) -> Source:
    """Source for a device-wide scan of ``in_type`` items into ``accum`` outputs.

    ``init_kind`` is "none" (inclusive only), "value" (passed at launch) or "device" (a
    pointer to one ``accum`` value, read by the kernel when it runs). ``policy_overrides``
    replaces members of the look-back policy; ``None`` takes :func:`scan_tuning`, ``{}``
    CUB's policy as it is. ``d_in``/``d_out`` (argument kinds) give the C++ types of
    iterator arguments; arrays take the plain kernel.

    Tuning: CUB's scan policy selector is asked with ``::cuda::std::plus<>`` standing in
    for the operator, so every operator over a primitive accumulator (built-in or
    LTO-inlined Python/raw code) gets CUB's tuned policy for cheap operators; CUB gives
    an operator it cannot classify its generic 128x15 policy, which is slower for
    memory-bound scans like ``a + b``. Structs and complex values get CUB's generic
    policy either way (their accumulator is not primitive).
    """
    if policy_overrides is None:
        policy_overrides = scan_tuning(accum, arch)
    if init_kind == "none" and not inclusive:
        raise ValueError("an exclusive scan needs an init value")
    acc = accumulator(accum)
    functor, externs = binary_functor("cuprims_op_t", op, accum, op_symbol(op, "cuprims_op_0"), acc)
    iterator_text, iterator_types, iterator_symbols = iterator_parts((d_in, d_out))
    externs += iterator_symbols
    # the tiles accumulate in ``a`` (a struct's word form, see .accumulators); the outputs
    # and the init value keep accum's own type ``t``
    t, a = accum.cpp, acc.cpp
    selector = (f"CUB_NS_QUALIFIER::detail::scan::policy_selector_from_types<const {in_type.cpp}*, {t}*, {a}, "
                "unsigned long long, ::cuda::std::plus<>>")
    init_t = init_value_type(init_kind, t)
    layout = f"cuprims::scan::tile_layout<{a}>"
    text = (
        combiner_head((in_type, accum) + iterator_types, arch, "scan/cuprims_scan.cuh", iterator_text,
                      acc.decl + functor, selector, policy_overrides)
        + "constexpr auto cuprims_policy = cuprims::scan::lookback_policy<cuprims_selector_t>("
        + f"::cuda::compute_capability{{{arch // 10}, {arch % 10}}});\n"
        + "static_assert(cuprims_selector_t{}(::cuda::compute_capability{"
        + f"{arch // 10}, {arch % 10}" + "}).algorithm == CUB_NS_QUALIFIER::ScanAlgorithm::lookback);\n"
        + meta_export((
            ("threads", "cuprims_policy.threads_per_block"),
            ("items", "cuprims_policy.items_per_thread"),
            ("init_threads", "cuprims::scan::init_threads"),
            ("tile_bytes_per_tile", f"{layout}::bytes_per_tile"),
            ("tile_fixed_bytes", f"{layout}::fixed_bytes"),
            ("max_tiles", f"{layout}::max_tiles"),
            ("accum_size", f"sizeof({t})"),
            ("accum_align", f"alignof({t})"),
        ))
    )
    init_kernel = f"cuprims::scan::scan_init_kernel<{a}>"
    direction = "true" if inclusive else "false"
    if iterator_text:
        in_param = d_in.cpp() if d_in is not None else f"const {in_type.cpp}*"
        out_param = d_out.cpp() if d_out is not None else f"{t}*"
        scan_kernel = (f"cuprims::scan::scan_iterator_kernel<cuprims_selector_t, {in_param}, {out_param}, {a}, "
                       f"cuprims_op_t, {init_t}, {direction}>")
    else:
        scan_kernel = (f"cuprims::scan::scan_kernel<cuprims_selector_t, {in_type.cpp}, {t}, {a}, cuprims_op_t, "
                       f"{init_t}, {direction}>")
    return Source(text=text, name_expressions=(init_kernel, scan_kernel), extern_symbols=externs,
                  meta_fields=SCAN_META_FIELDS)
