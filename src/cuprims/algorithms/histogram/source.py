"""Generated source for an even-bin histogram (pure strings, no CUDA; golden-tested).

The unit instantiates CUB's two histogram kernels by name (``kernel_histogram.cuh``, which
NVRTC compiles; the dispatch around them is host code and is redone in
:mod:`cuprims.algorithms.histogram.api`):

* ``DeviceHistogramInitKernel``: zeroes the output histogram (and the tile queue);
* ``DeviceHistogramSweepDeviceInitKernel``: each block counts its tiles into a privatized
  histogram, then adds it to the output with atomics. The decode operators are set up
  inside the kernel from the level values, so the host passes the levels as they are;
* cuprims' ``one_block_kernel``, for a call of few samples in at most 256 bins: one block
  counts them all and stores every bin, so the call is one launch.

Two paths, as CUB's ``dispatch_even`` has them:

* 8-bit integer samples (``byte_path``, uint8 and int8): every bit pattern is its own
  privatized bin (256 of them, ``cuprims::histogram::byte_bits``: CUB's pass-through gives
  a negative int8 a negative bin, which is never counted, NVIDIA/cccl#10977), and the
  even-bin scale maps the 256 counters to the output bins when a block stores them;
* every other sample type: the scale maps each sample to its bin; the privatized
  histograms live in shared memory for up to 256 bins, else (``global_bins``) in global
  memory (temporary storage). The output transform here is ours, ``bin_index_pass_thru``:
  CUB's hands on each privatized bin cast to the sample type, so an int16 bin past 32767
  was lost. With ``widened`` (int16 or uint16 samples in more bins than their width counts)
  the samples are read as int.

The scale (``algorithms/histogram/cuprims_histogram.cuh``) is, for integer samples and an
integer level type, ``cuprims::histogram::exact_scale``: exact integer bins, in 32-bit
arithmetic wherever the levels allow, whatever the levels' integer type; otherwise
``cuprims::histogram::clamped_scale``, CUB's ScaleTransform over the common type of levels
and samples, with a floating-point bin that rounds up to ``num_bins`` counted in the last
bin. Offsets are ``int`` unless
``wide_offsets`` (CUB's choice by the samples' byte count). The exported metadata
(``cuprims_meta``) gives the host the policy's tile shape, the privatized-bin count of
the byte path, the init kernel's block size, whether privatized counters are in global
memory and whether the sweep takes its tiles from the tile queue (work stealing).
"""

from __future__ import annotations

from typing import Any

from cuprims._codegen.common import iterator_parts, meta_export, unit_head
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.algorithms.histogram.bins import exact_bins

META_FIELDS = ("threads", "pixels", "byte_bins", "init_threads", "global_privatized", "counter_size",
               "offset_size", "work_stealing", "one_block_threads")

_NS = "CUB_NS_QUALIFIER::detail::histogram"


def histogram_source(*, d_samples: Any, counter: ValueType, level: ValueType, byte_path: bool,
                     global_bins: bool, wide_offsets: bool, arch: int, widened: bool = False) -> Source:
    """Source for an even-bin histogram of the items of ``d_samples`` (an argument kind:
    an array or an input iterator) counted in ``counter`` values, with bounds of type
    ``level``, on ``sm_<arch>``; ``widened``: the samples are read as int."""
    sample = d_samples.value
    if byte_path and (global_bins or widened or sample.code not in ("u1", "i1")):
        raise ValueError("the byte-sample path privatizes 256 bins of 8-bit integer samples in shared memory")
    iterator_text, iterator_types, externs = iterator_parts((d_samples,))
    samples_t, s = d_samples.cpp(), sample.cpp
    if widened:
        samples_t, s = f"cuprims::histogram::widened_samples<{samples_t}, int>", "int"
    c, lv = counter.cpp, level.cpp
    smem_bins = "0" if global_bins else "cuprims::histogram::privatized_smem_bins"
    privatized, output = (("cuprims::histogram::byte_bits", "cuprims_scale_t") if byte_path
                          else ("cuprims_scale_t", "cuprims::histogram::bin_index_pass_thru"))
    scale = (f"cuprims::histogram::exact_scale<{lv}, {s}>" if exact_bins(sample.dtype, level.dtype)
             else f"cuprims::histogram::clamped_scale<{lv}, cuprims_offset_t, {s}>")
    text = (
        unit_head((sample, counter, level) + iterator_types, arch, ("histogram/cuprims_histogram.cuh",), iterator_text)
        + f"using cuprims_selector_t = {_NS}::policy_selector_from_types<{s}, {c}, 1, 1, true>;\n"
        + "constexpr auto cuprims_policy = cuprims_selector_t{}(::cuda::compute_capability{"
        + f"{arch // 10}, {arch % 10}" + "});\n"
        + f"using cuprims_offset_t = {'long long' if wide_offsets else 'int'};\n"
        + f"using cuprims_scale_t = {scale};\n"
        + f"using cuprims_levels_t = ::cuda::std::array<{lv}, 1>;\n"
        + "static_assert(sizeof(CUB_NS_QUALIFIER::GridQueue<int>) == sizeof(void*) && sizeof(cuprims_levels_t) == "
        + f"sizeof({lv}), \"cuprims: histogram kernel parameter layout\");\n"
        + meta_export((
            ("threads", "cuprims_policy.threads_per_block"),
            ("pixels", "cuprims_policy.pixels_per_thread"),
            ("byte_bins", "cuprims::histogram::privatized_smem_bins"),
            ("init_threads", "cuprims::histogram::init_threads"),
            ("global_privatized", f"{smem_bins} == 0 || cuprims_policy.mem_preference != CUB_NS_QUALIFIER::SMEM"),
            ("counter_size", f"sizeof({c})"),
            ("offset_size", "sizeof(cuprims_offset_t)"),
            ("work_stealing", "cuprims_policy.use_work_stealing"),
            ("one_block_threads", "cuprims::histogram::one_block_threads"),
        ))
    )
    init = f"{_NS}::DeviceHistogramInitKernel<cuprims_selector_t, 1, {c}, cuprims_offset_t>"
    sweep = (f"{_NS}::DeviceHistogramSweepDeviceInitKernel<cuprims_selector_t, {smem_bins}, 1, 1, {samples_t}, {c}, "
             f"cuprims_levels_t, cuprims_levels_t, {privatized}, {output}, cuprims_offset_t, true>")
    # few samples in at most 256 bins: one block counts them and stores every bin (one launch)
    one_block = (f"cuprims::histogram::one_block_kernel<cuprims::histogram::one_block_threads, "
                 f"{'true' if byte_path else 'false'}, {s}, {samples_t}, {c}, cuprims_scale_t, {lv}, cuprims_offset_t>")
    return Source(text=text, name_expressions=(init, sweep, one_block), extern_symbols=externs,
                  meta_fields=META_FIELDS)
