"""Even-bin histograms: ``make_histogram_even``, the histogram object, and ``histogram_even``.

``num_output_levels`` levels make ``num_output_levels - 1`` bins of equal width over
``[lower_level, upper_level)``, as CUB's ``DeviceHistogram::HistogramEven`` (one channel)
computes them: ``d_histogram[b]`` counts the samples ``s`` with
``floor((s - lower) * bins / (upper - lower)) == b``; a sample outside ``[lower, upper)``,
or a NaN, is not counted. ``d_histogram`` is zeroed first. Samples are int8..int64,
uint8..uint64 or float16/32/64 items of a device array or an input iterator; counters
int32, uint32, int64 or uint64 (int64 counts are added with the uint64 atomics: the same
bits); the two levels are integer or floating-point numbers, of one dtype or two. The
kernel is built for one level type (part of the description, so of the build), chosen
from the levels' values by :mod:`.bins`: integer samples between levels of integral
values, whatever their dtypes, bin exactly in integer arithmetic with the levels as int64
(one build for int32, int64, float32 or float64 levels 0 and 256, or Python ints); other
levels bin in CUB's arithmetic in their common type, widened where that could not bin
them right.

Host dispatch (ours, mirroring CUB's ``dispatch_even``; the kernels are CUB's, see
:mod:`cuprims.algorithms.histogram.source`): the init kernel zeroes the histogram, then
``min(tiles, occupancy x SMs)`` blocks sweep the samples (tile = threads x pixels per
thread of the exported policy), each into a privatized histogram (in shared memory, or
for more than 256 bins of samples other than 8-bit integers in global memory: temporary
storage, sized as CUB sizes it) that it adds to the output with atomics. Both launches use
programmatic dependent launch on sm_90+ (``settings.pdl``). A call of at most
:data:`.plan.ONE_BLOCK_SAMPLES` samples in at most 256 bins is one launch instead: cuprims' one
block counts them in shared memory and stores every bin. Offsets are 32-bit while the
samples' bytes stay below 2^31 - 1, as CUB chooses. Another offset width, privatization or
sample width than the first call's is a build variant, made when a call first needs it.
A one-shot call needs temporary storage only for privatized counters in global memory:
CUB's tile queue, which the sweep never reads without work stealing, is then one scratch
word per device.

The host work of a call is checked once per level arguments: an object remembers what
each (dtype, value) of its level arguments gives the kernel, and ``histogram_even`` the
description of each combination of argument types and levels.

Departures from CUB, each avoiding a wrong count: int8 samples take the byte path with
their bit patterns privatized (CUB's never counts a negative int8 sample, NVIDIA/cccl#10977);
integer samples between integral levels are binned by cuprims' exact integer scale; each
privatized bin reaches the output whole (CUB casts it to the sample type: an int16 bin past
32767 was lost), see :mod:`.bins`; a floating-point bin that rounds up to ``bins`` is
counted in the last bin.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims._value_types import ValueType, value_type
from cuprims.algorithms.arguments import ArgKind, describe, keyword_checked, signature
from cuprims.algorithms.common import MAX_ITEMS, Loaded, check_num_items
from cuprims.algorithms.histogram.bins import (as_level, bin_count, build_levels, level_dtype, level_key,
                                              level_scalar, widened_samples)
from cuprims.algorithms.histogram.plan import QUEUE_BYTES, SMEM_BINS, HistogramPlan, one_block
from cuprims.algorithms.histogram.source import histogram_source
from cuprims.algorithms.skeleton import Algorithm, Description, description
from cuprims.algorithms.sort_common import align_base, temp_layout
from cuprims.errors import ArgumentError
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ArrayOrProxy, ComputeCapabilityLike, DeviceArrayLike,
                            StreamLike)

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["HistogramEven", "make_histogram_even", "histogram_even"]

_NARROW_BYTES = (1 << 31) - 1  # CUB's 32-bit offsets: samples' bytes below INT_MAX
_COUNTERS = ("i4", "u4", "i8", "u8")
_BYTE_SAMPLES = ("u1", "i1")  # privatized per bit pattern (the byte path)
_MAX_CALLS = 64  # level arguments remembered per object (their checked kernel values)
_VARIANT_FLAGS = ("wide_offsets", "global_bins", "widened")  # bit i of a variant index flips flag i
_NAMES = ("h_num_output_levels", "h_lower_level", "h_upper_level")
_ONE_SHOT_NAMES = ("num_output_levels", "lower_level", "upper_level")


@description
class HistogramDescription(Description):
    """An even-bin histogram: its samples (array or iterator), counters and the level type
    the kernel bins in (chosen from the levels, :func:`.bins.level_dtype`);
    ``wide_offsets`` (64-bit offsets), ``global_bins`` (privatized counters in global
    memory) and ``widened`` (samples read as int) are what its first call needs."""

    d_samples: ArgKind
    d_histogram: ArgKind
    level: ValueType
    global_bins: bool = False
    wide_offsets: bool = False
    widened: bool = False

    @property
    def byte_path(self) -> bool:
        return self.d_samples.value.code in _BYTE_SAMPLES

    @property
    def counter(self) -> ValueType:
        """The kernels' counter type: int64 counts are added as uint64 (CUDA has no signed
        64-bit atomicAdd; the bits are the same)."""
        vt = self.d_histogram.value
        return value_type(np.uint64) if vt.code == "i8" else vt

    def source(self, arch: int) -> Source:
        return histogram_source(d_samples=self.d_samples, counter=self.counter, level=self.level,
                                byte_path=self.byte_path, global_bins=self.global_bins,
                                wide_offsets=self.wide_offsets, arch=arch, widened=self.widened)

    def _link(self) -> tuple:
        return self.d_samples.linked_ops()

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        off, lv = ("i64" if self.wide_offsets else "i32"), self.level.size
        return (
            # init(num_output_bins, d_histogram, tile_queue)
            ("i32", "ptr", "ptr"),
            # sweep(d_samples, num_output_bins, num_privatized_bins, d_histogram, d_privatized, upper, lower,
            #       num_row_pixels, num_rows, row_stride_samples, tiles_per_row, tile_queue)
            (self.d_samples.param, "i32", "i32", "ptr", "ptr", lv, lv, off, off, off, "i32", "ptr"),
            # one block(d_samples, num_output_bins, d_histogram, upper, lower, num_samples)
            (self.d_samples.param, "i32", "ptr", lv, lv, off),
        )

    def variant(self, index: int) -> Self:
        flips: dict[str, Any] = {name: not getattr(self, name) for bit, name in enumerate(_VARIANT_FLAGS)
                                 if index >> bit & 1}
        return dataclasses.replace(self, **flips) if flips else self


def _describe(d_samples: Any, d_histogram: Any, lower: np.generic, *flags: bool) -> HistogramDescription:
    """Check the build arguments' kinds and dtypes and describe the histogram."""
    samples = _sample_kind(d_samples)
    counters = describe(d_histogram, "d_histogram", output=True)
    if counters.value.code not in _COUNTERS:
        raise ArgumentError("d_histogram", "int32, uint32, int64 or uint64 counters", counters.value.dtype)
    return HistogramDescription(samples, counters, value_type(lower.dtype), **dict(zip(_VARIANT_FLAGS, flags)))


def _sample_kind(d_samples: Any) -> ArgKind:
    kind = describe(d_samples, "d_samples", iterators=True)
    if kind.value.kind not in "iuf":
        raise ArgumentError("d_samples", "integer or floating-point samples (int8..int64, uint8..uint64, "
                            "float16/32/64)", kind.value.dtype)
    return kind


def _variant_flags(samples: ValueType, n: int, bins: int) -> dict[str, bool]:
    """The description flags (``_VARIANT_FLAGS``) that ``n`` samples in ``bins`` bins need."""
    byte_path = samples.code in _BYTE_SAMPLES
    return {"wide_offsets": n * samples.size >= _NARROW_BYTES, "global_bins": not byte_path and bins > SMEM_BINS,
            "widened": not byte_path and widened_samples(samples.dtype, bins)}


# one-shot calls: (signatures of the arrays, keys of the level arguments) -> description
_one_shots: dict[tuple, HistogramDescription] = {}
_MAX_ONE_SHOTS = 256


class HistogramEven(Algorithm):
    """An even-bin histogram built for fixed sample, counter and level types (what
    :func:`make_histogram_even` returns); call it to run.

    ``histogram(temp_storage=None, ...)`` returns the temporary bytes needed and launches
    nothing; ``histogram(temp_storage=buf, ...)`` zeroes ``d_histogram`` and counts into it
    on ``stream``.
    """

    desc: HistogramDescription

    def _setup(self) -> None:
        desc = self.desc
        self._samples, self._level = desc.d_samples.value, desc.level.dtype
        self._sample_size = self._samples.size
        self._privatized_bins = SMEM_BINS if desc.byte_path else 0  # 0: one per output bin
        # level arguments (by level_key) -> (bins, lower bytes, upper bytes, variant bits
        # the bins flip): what a call's levels give the kernel, checked once
        self._calls: dict[tuple, tuple[int, bytes, bytes, int]] = {}

    @classmethod
    def _forget_descriptions(cls) -> None:
        _one_shots.clear()
        super()._forget_descriptions()

    def _make_plan(self, loaded: Loaded, variant: int) -> HistogramPlan:
        # byte samples: two waves of blocks keep SMs busy while blocks add up (H200: 1.6% faster)
        return HistogramPlan(loaded, self.desc.variant(variant).kernel_params(), 2 if self.desc.byte_path else 1)

    def _layout(self, plan: HistogramPlan, n: int, bins: int) -> tuple[int, int, int, list[int], int]:
        """(tiles, grid, privatized bins per block, offsets of the privatized counters and
        the tile queue from the 256-aligned base, bytes to allocate): CUB's layout."""
        last = plan.last_layout
        if last and last[0] == n and last[1] == bins:
            return last[2]
        tiles = -(-n // plan.tile)
        if tiles > _NARROW_BYTES:
            raise ArgumentError("num_samples", f"at most {_NARROW_BYTES * plan.tile} samples (the tile count is "
                                "a 32-bit int)", n)
        grid = min(tiles, plan.max_grid)
        per_block = self._privatized_bins or bins
        if plan.global_privatized:
            layout = (tiles, grid, per_block, *temp_layout((grid * per_block * plan.counter_size, QUEUE_BYTES)))
        else:
            layout = (tiles, grid, per_block, *plan.queue_layout)
        plan.last_layout = (n, bins, layout)
        return layout

    # args: (p_samples, p_histogram, n, bins, lower bytes, upper bytes, one-shot)
    def _temp_bytes(self, plan: HistogramPlan, args: tuple) -> int:
        if one_block(args[2], args[3]):
            return 0  # one block, no temporary storage (_dispatch)
        if args[6] and plan.queue and not plan.global_privatized:
            return 0  # the tile queue is the scratch word (see HistogramPlan)
        return self._layout(plan, args[2], args[3])[4]

    def _dispatch(self, plan: HistogramPlan, args: tuple, temp: int, stream: int) -> None:
        p_samples, p_histogram, n, bins, lower, upper, _ = args
        if one_block(n, bins):
            # few samples: one launch, which stores every bin (no init kernel zeroes them first)
            driver.launch(plan.one_block, 1, plan.one_block_threads, stream,
                          plan.packs[2].pack(p_samples, bins, p_histogram, upper, lower, n))
            return
        tiles, grid, per_block, offsets, _ = self._layout(plan, n, bins)
        base = align_base(temp)
        # no temporary storage: a one-shot call's queue is the scratch word (_temp_bytes)
        privatized, queue = base + offsets[0], base + offsets[1] if temp else plan.queue
        launch = self._launcher(plan)
        launch(plan.init, -(-bins // plan.init_threads), plan.init_threads, stream,
               plan.packs[0].pack(bins, p_histogram, queue))
        if grid:
            launch(plan.sweep, grid, plan.threads, stream, plan.packs[1].pack(
                p_samples, bins, per_block, p_histogram, privatized, upper, lower, n, 1, n, tiles, queue))

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_samples: ArrayOrIterator,
                 d_histogram: DeviceArrayLike, h_num_output_levels: int | np.integer | np.ndarray,
                 h_lower_level: float | np.number | np.ndarray, h_upper_level: float | np.number | np.ndarray,
                 num_samples: int, stream: StreamLike | None = None) -> int | None:
        """Count ``num_samples`` samples into ``d_histogram`` (or, with ``temp_storage=None``,
        return the temporary bytes needed). The levels may differ from the build's where
        the build's level type bins them: for integer samples between integral levels, any
        such levels that int64 (uint64 for a uint64 build) holds, of any dtype; else levels
        of types the build's level type holds (numpy's safe casting) that CUB's arithmetic
        in it bins right."""
        n = num_samples if type(num_samples) is int and 0 <= num_samples <= MAX_ITEMS else \
            check_num_items(num_samples, "num_samples")
        keys = (level_key(h_num_output_levels), level_key(h_lower_level), level_key(h_upper_level))
        return self._run(temp_storage, stream, False, d_samples, d_histogram, n, keys,
                         (h_num_output_levels, h_lower_level, h_upper_level), _NAMES)

    def _run(self, temp_storage: Any, stream: Any, one_shot: bool, d_samples: Any, d_histogram: Any, n: int,
             keys: tuple, levels: tuple, names: tuple[str, str, str]) -> int | None:
        """A call (object API or one-shot) of ``n`` samples: the kernel values of its level
        arguments (``levels``: levels, lower, upper) come from ``_calls`` by their ``keys``
        (:func:`.bins.level_key`) after the first call with the same ones."""
        call = self._calls.get(keys)
        if call is None:
            call = self._checked_call(keys, levels, names)
        bins, lower_bytes, upper_bytes, variant = call
        desc = self.desc
        if (n * self._sample_size >= _NARROW_BYTES) != desc.wide_offsets:
            variant ^= 1  # bit 0: wide_offsets
        arrays, counts = (d_samples, d_histogram), (n, bins)
        bound = self._recall(arrays, counts)
        memo = None
        if bound is None:
            bound = (desc.d_samples.bind(d_samples, n, "num_samples"),
                     desc.d_histogram.bind(d_histogram, bins, f"{names[0]} - 1"))
            memo = (arrays, counts, bound)
        args = (*bound, n, bins, lower_bytes, upper_bytes, one_shot)
        return self._execute(temp_storage, stream, one_shot, args, (None, d_samples), variant, memo)

    def _checked_call(self, keys: tuple, levels: tuple, names: tuple[str, str, str]) -> tuple:
        """The ``_calls`` entry of these level arguments (levels, lower, upper), checked against
        the build's level type (remembered when every argument has a key)."""
        num_levels, lower, upper = levels
        bins = bin_count(num_levels, names[0])
        lo, hi = build_levels(self._samples.dtype, bins, self._level, level_scalar(lower, names[1]),
                              level_scalar(upper, names[2]), names)
        flags = _variant_flags(self._samples, 0, bins)
        desc = self.desc
        variant = sum(1 << bit for bit, name in enumerate(_VARIANT_FLAGS)
                      if name != "wide_offsets" and flags[name] != getattr(desc, name))
        call = (bins, lo.tobytes(), hi.tobytes(), variant)
        if None not in keys:
            if len(self._calls) >= _MAX_CALLS:
                self._calls.clear()
            self._calls[keys] = call
        return call


def _levels(sample: np.dtype, levels: Any, lower: Any, upper: Any, names: tuple[str, str, str]) -> tuple:
    """(bins, lower, upper) checked against CUB's bin arithmetic for ``sample`` values, the
    levels as values of the level type chosen for them (:func:`.bins.level_dtype`)."""
    bins = bin_count(levels, names[0])
    lo, hi = level_scalar(lower, names[1]), level_scalar(upper, names[2])
    level = level_dtype(sample, bins, lo, hi, names)
    return bins, as_level(lo, level), as_level(hi, level)


def _prepare(d_samples: Any, d_histogram: Any, levels: Any, lower: Any, upper: Any, num_samples: Any,
             names: tuple[str, str, str]) -> tuple[HistogramDescription, int, int, Any, Any]:
    """The description for these build arguments (checked; nothing built) and the call's
    sample count, bins and levels."""
    n = check_num_items(num_samples, "num_samples")
    sample = _sample_kind(d_samples).value
    bins, lo, hi = _levels(sample.dtype, levels, lower, upper, names)
    desc = HistogramEven._described(_describe, d_samples, d_histogram, lo, *_variant_flags(sample, n, bins).values())
    return desc, n, bins, lo, hi


# ------------------------------------------------------------------- public functions

@keyword_checked
def make_histogram_even(*, d_samples: ArrayIteratorOrProxy, d_histogram: ArrayOrProxy,
                        h_num_output_levels: int | np.integer | np.ndarray,
                        h_lower_level: float | np.number | np.ndarray, h_upper_level: float | np.number | np.ndarray,
                        num_samples: int, compute_capability: ComputeCapabilityLike | None = None) -> HistogramEven:
    """Build (or fetch from cache) an even-bin histogram of ``d_samples`` into ``d_histogram``.

    Args:
        d_samples: device array (or ``ProxyArray`` to build ahead of time) or input iterator
            of int8..int64, uint8..uint64 or float16/32/64 samples.
        d_histogram: device array of int32, uint32, int64 or uint64 counters, at least
            ``num_output_levels - 1`` of them.
        h_num_output_levels: host array whose first item is the number of levels (bins + 1).
        h_lower_level, h_upper_level: host arrays of one item (or numpy scalars, Python
            numbers) of integer or floating-point dtypes, not necessarily the same: the bins
            cover ``[lower, upper)``. Integer samples between levels of integral values
            (of any dtypes) bin exactly, in one build whatever the dtypes; other levels bin
            in CUB's arithmetic in their common type, or a wider one where that type cannot
            count the bins or the range.
        num_samples: the number of samples (picks the offset width, as CUB does).
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray(np.random.randint(0, 256, 1 << 20).astype(np.uint8))
        args = dict(d_samples=x, d_histogram=cp.empty(256, np.int32), h_num_output_levels=np.array([257]),
                    h_lower_level=np.int32(0), h_upper_level=np.int32(256), num_samples=x.size)
        h = cuprims.make_histogram_even(**args)
        tmp = cp.empty(h(temp_storage=None, **args), np.uint8)
        h(temp_storage=tmp, **args)
        assert int(args["d_histogram"].sum()) == x.size
    """
    desc, n, bins, _, _ = _prepare(d_samples, d_histogram, h_num_output_levels, h_lower_level, h_upper_level,
                                   num_samples, _NAMES)
    for kind, x, count, count_name in ((desc.d_samples, d_samples, n, "num_samples"),
                                       (desc.d_histogram, d_histogram, bins, "h_num_output_levels - 1")):
        if kind.is_pointer and getattr(x, "_cuprims_proxy_dtype", None) is None:
            kind.bind(x, count, count_name)  # a real array: long enough, in device memory
    return HistogramEven._make(desc, compute_capability, (None, d_samples))


@keyword_checked
def histogram_even(*, d_samples: ArrayOrIterator, d_histogram: DeviceArrayLike, num_output_levels: int,
                   lower_level: float | np.number | np.ndarray, upper_level: float | np.number | np.ndarray,
                   num_samples: int, stream: StreamLike | None = None) -> None:
    """Count ``num_samples`` samples into ``num_output_levels - 1`` even bins over
    ``[lower_level, upper_level)`` in ``d_histogram``, in one call.

    The call never synchronises: temporary storage, needed only for privatized counters in
    global memory (more than 256 bins of samples wider than a byte), is allocated and freed
    on ``stream`` (stream-ordered). ``d_histogram`` holds int32, uint32, int64 or uint64
    counters; the levels are numpy scalars or one-item host arrays (a Python int or float
    counts as int64 or float64), as for :func:`make_histogram_even`; samples too. The
    checks of a call's arguments are made once per argument types and level values.

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray(np.array([0.5, 1.5, 1.7, 9.0, -1.0, np.nan], np.float32))
        hist = cp.empty(2, np.int32)
        cuprims.histogram_even(d_samples=x, d_histogram=hist, num_output_levels=3,
                               lower_level=np.float32(0), upper_level=np.float32(2), num_samples=6)
        assert hist.tolist() == [1, 2]
    """
    n = num_samples if type(num_samples) is int and 0 <= num_samples <= MAX_ITEMS else \
        check_num_items(num_samples, "num_samples")
    levels = (num_output_levels, lower_level, upper_level)
    keys = (level_key(num_output_levels), level_key(lower_level), level_key(upper_level))
    key = (signature(d_samples), signature(d_histogram), keys)
    desc = _one_shots.get(key)
    obj = None if desc is None else HistogramEven._object_cache.get((desc, None))
    if obj is None:  # checked afresh, arrays too, before anything is built
        # the description of narrow offsets: a call past them runs its variant
        desc, _, bins, _, _ = _prepare(d_samples, d_histogram, *levels, 0, _ONE_SHOT_NAMES)
        desc.d_samples.bind(d_samples, n, "num_samples")
        desc.d_histogram.bind(d_histogram, bins, f"{_ONE_SHOT_NAMES[0]} - 1")
        if None not in key and None not in keys:
            if len(_one_shots) >= _MAX_ONE_SHOTS:
                _one_shots.clear()
            _one_shots[key] = desc
        obj = HistogramEven._make(desc, None, (None, d_samples))
    obj._run(None, stream, True, d_samples, d_histogram, n, keys, levels, _ONE_SHOT_NAMES)
