"""Device-wide radix sort: ``make_radix_sort``, the sorter object, and ``radix_sort``.

Keys of any bool, integer or floating-point dtype (float16 included) are ordered by
their bits exactly as CUB orders them: floating-point keys have their bits "twiddled"
(sign bit flipped for positives, all bits for negatives), so -inf < ... < +inf, NaNs
with the sign bit set come before -inf and the others after +inf (among themselves by
bit pattern), and -0.0 and +0.0 compare equal (they keep their input order). The sort
is stable in both orders. Values of any dtype (structs too) travel with their keys as
opaque bytes. ``begin_bit``/``end_bit`` restrict the comparison to those key bits.

Host dispatch (ours, mirroring CUB's ``dispatch_radix_sort.cuh``):
* no items, or an empty bit range with a DoubleBuffer: nothing to do;
* an empty bit range into a separate output: a copy;
* one tile of CUB's single-tile policy: one block sorts it (no temporary storage);
* otherwise CUB's onesweep pipeline: zero the per-pass digit counters, one histogram
  kernel counts the digits of every pass at once, one block per pass scans them, then
  one onesweep kernel per pass and portion (portions of < 2^28 items, as CUB's
  decoupled look-back needs) scatters keys and values to their place. With separate
  input and output arrays the input is never written: the passes ping-pong between the
  output and a scratch copy in temporary storage so that the last pass lands in the
  output. With a DoubleBuffer the passes ping-pong between its two buffers and its
  ``selector`` tells where the result is.

Every block size, tile size and digit width comes from the compiled code's exported
policy; problems of more than 2^31 - 1 items use a second build with 64-bit offsets.
"""

from __future__ import annotations

from typing import Any

from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims._runtime.streams import stream_handle
from cuprims.algorithms.arguments import keyword_checked
from cuprims._compile.targets import parse_compute_capability
from cuprims.algorithms.common import Loaded
from cuprims.algorithms.radix_sort.source import radix_sort_source
from cuprims.algorithms.skeleton import description
from cuprims.algorithms.sort_base import NARROW_MAX_ITEMS, SortAlgorithm, SortCall, SortDescription, SortPlan, bit_range
from cuprims.algorithms.sort_common import (DoubleBuffer, align_base, memcpy_async, parse_order, temp_layout,
                                            zero_words_async)
from cuprims.algorithms.sort_source import check_radix_key
from cuprims.config import settings
from cuprims.enums import SortOrder
from cuprims.typing import ArrayOrProxy, ComputeCapabilityLike, DeviceArrayLike, SortOrderLike, StreamLike

# CUB's onesweep dispatch: portions of at most this many items (rounded down to whole
# tiles), since the look-back flags use the top two bits of a 32-bit word.
_PORTION_LIMIT = (1 << 28) - 1
# CUB launches its zero-fill kernels with this many threads per block.
_INIT_THREADS = 256
_LOOKBACK_WORD = 4  # bytes of CUB's AtomicOffsetT (int); pinned by static_assert in the generated code
_DECOMPOSER = b"\0"  # CUB's identity decomposer: an empty struct passed by value
_DESCENDING = SortOrder.DESCENDING

__all__ = ["RadixSort", "make_radix_sort", "radix_sort", "DoubleBuffer", "SortOrder"]


@description
class RadixSortDescription(SortDescription):
    """A radix sort: keys (and values, or None) and the order. Whether the arrays come in
    DoubleBuffers does not change the code, so it is no part of the description."""

    order: SortOrder
    wide_offsets: bool = False

    def source(self, arch: int) -> Source:
        return radix_sort_source(key=self.key, value=self.value, descending=self.order is _DESCENDING,
                                 wide_offsets=self.wide_offsets, arch=arch)

    def __post_init__(self) -> None:
        check_radix_key(self.key)

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        off = self.offset_kind
        return (("ptr", "ptr", "ptr", "ptr", off, "i32", "i32", 1),  # single tile: keys, values in/out, n, bits
                ("ptr", "ptr", off, "i32", "i32", 1),  # histogram: bins, keys, n, begin/end bit, decomposer
                ("ptr",),  # exclusive sum: bins
                ("ptr", "i64", "ptr", "i64"),  # zero-fill: int* items0, size_t count0, OffsetT* items1, count1
                # onesweep: look-back, counter, bins out/in, keys out/in, values out/in, portion items,
                # current bit, bits, decomposer
                ("ptr",) * 8 + ("i32", "i32", "i32", 1))


class _Plan(SortPlan):
    """The five kernels, their block and tile sizes, and the digit width."""

    __slots__ = ("single", "histogram", "scan", "init", "onesweep", "single_threads", "single_tile_items",
                 "hist_threads", "hist_grid", "scan_threads", "os_threads", "tile", "radix_bits", "portion",
                 "settings_version", "memset")

    def __init__(self, loaded: Loaded, kernel_params: tuple[tuple[Any, ...], ...]):
        super().__init__(loaded, kernel_params)
        meta = loaded.meta
        self.single, self.histogram, self.scan, self.init, self.onesweep = loaded.handles
        self.single_threads = meta["single_tile_threads"]
        self.single_tile_items = meta["single_tile_threads"] * meta["single_tile_items"]
        self.hist_threads = meta["histogram_threads"]
        occupancy = loaded.module.max_active_blocks(loaded.names[1], self.hist_threads)
        self.hist_grid = max(1, occupancy) * driver.sm_count(loaded.device)
        self.scan_threads = meta["exclusive_sum_threads"]
        self.os_threads = meta["onesweep_threads"]
        self.tile = meta["onesweep_threads"] * meta["onesweep_items"]
        self.radix_bits = meta["radix_bits"]
        self.portion = _PORTION_LIMIT // self.tile * self.tile
        # who clears the look-back flags (settings.radix_memset), re-read when settings change in code
        self.settings_version = -1
        self.memset = True


class RadixSort(SortAlgorithm):
    """A radix sort for one key dtype, value dtype and order, from :func:`make_radix_sort`.

    Call it once with ``temp_storage=None`` for the temporary bytes, then with a buffer
    of that size to sort on ``stream`` (keys in ``[begin_bit, end_bit)`` only, when given).
    """

    desc: RadixSortDescription
    _plan_class = _Plan
    _double_buffers = True

    # -- the sort ----------------------------------------------------------------
    def _temp_bytes(self, plan: _Plan, call: SortCall) -> int:
        n = call.n
        if n <= plan.single_tile_items:  # one block sorts it all: no temporary storage
            return 0
        digits = 1 << plan.radix_bits
        num_passes = -(-(call.end - call.begin) // plan.radix_bits)
        num_portions = -(-n // plan.portion)
        extra = not call.overwrite and num_passes > 1
        offsets, needed = temp_layout((
            num_portions * num_passes * digits * plan.offset_size,            # bins
            -(-min(n, plan.portion) // plan.tile) * digits * _LOOKBACK_WORD,  # look-back
            n * self._key_size if extra else 0,                                # scratch keys
            n * self._value_size if extra else 0,                              # scratch values
            num_portions * num_passes * _LOOKBACK_WORD,                        # counters
        ))
        call.layout = (offsets, num_passes, num_portions)
        return needed

    def _dispatch(self, plan: _Plan, call: SortCall, temp: int, s: int) -> None:
        if call.n <= plan.single_tile_items:
            driver.launch(plan.single, 1, plan.single_threads, s,
                          plan.packs[0].pack(call.k_in, call.k_out, call.v_in, call.v_out, call.n, call.begin,
                                             call.end, _DECOMPOSER))
            call.flips = 1
        else:
            self._onesweep(plan, call, s, align_base(temp))

    def _onesweep(self, plan: _Plan, call: SortCall, s: int, base: int) -> None:
        """CUB's onesweep pipeline (see the module docstring); each pass reads where the last
        one wrote, and ``call.flips`` says how often the result changed sides."""
        launch, p_init, p_os = driver.launch, plan.packs[3], plan.packs[4]
        offsets, num_passes, num_portions = call.layout
        bins, lookback, keys_tmp, values_tmp, counters = [base + o for o in offsets]
        n, b, e, digits, osize = call.n, call.begin, call.end, 1 << plan.radix_bits, plan.offset_size
        n_counters, n_bins = num_portions * num_passes, num_passes * digits
        launch(plan.init, -(-max(n_counters, n_bins) // _INIT_THREADS), _INIT_THREADS, s,
               p_init.pack(counters, n_counters, bins, n_bins))
        launch(plan.histogram, plan.hist_grid, plan.hist_threads, s,
               plan.packs[1].pack(bins, call.k_in, n, b, e, _DECOMPOSER))
        launch(plan.scan, num_passes, plan.scan_threads, s, plan.packs[2].pack(bins))

        if plan.settings_version != settings.version:
            plan.memset, plan.settings_version = settings.radix_memset, settings.version
        memset = plan.memset  # the driver's memset, as CUB does for problems too large for its PDL path
        ks, vs, portion = self._key_size, self._value_size, plan.portion
        k_src, v_src = call.k_in, call.v_in
        k_alt, v_alt = (call.k_in, call.v_in) if call.overwrite else (keys_tmp, values_tmp if vs else 0)
        for pass_ in range(num_passes):
            bit = b + pass_ * plan.radix_bits
            num_bits = min(e - bit, plan.radix_bits)
            to_alt = (pass_ if call.overwrite else num_passes - 1 - pass_) % 2
            k_dst, v_dst = (k_alt, v_alt) if to_alt else (call.k_out, call.v_out)
            for p in range(num_portions):
                portion_items = min(n - p * portion, portion)
                blocks = -(-portion_items // plan.tile)
                n_lookback = blocks * digits
                if memset:
                    zero_words_async(lookback, n_lookback, s)
                else:
                    launch(plan.init, -(-n_lookback // _INIT_THREADS), _INIT_THREADS, s,
                           p_init.pack(lookback, n_lookback, 0, 0))
                bins_out = bins + ((p + 1) * num_passes + pass_) * digits * osize if p < num_portions - 1 else 0
                bins_in = bins + (p * num_passes + pass_) * digits * osize
                launch(plan.onesweep, blocks, plan.os_threads, s,
                       p_os.pack(lookback, counters + (p * num_passes + pass_) * _LOOKBACK_WORD, bins_out, bins_in,
                                 k_dst, k_src + p * portion * ks, v_dst, v_src + p * portion * vs if vs else 0,
                                 portion_items, bit, num_bits, _DECOMPOSER))
            k_src, v_src = k_dst, v_dst
        call.flips = num_passes

    def _run(self, temp_storage: Any, d_in_keys: Any, d_out_keys: Any, d_in_values: Any, d_out_values: Any,
             num_items: Any, begin_bit: Any, end_bit: Any, stream: Any, one_shot: bool) -> int | None:
        call, memo = self._bound_call(d_in_keys, d_out_keys, d_in_values, d_out_values, num_items,
                                      (begin_bit, end_bit))
        n = call.n
        call.begin, call.end = b, e = bit_range(begin_bit, end_bit, self._key)
        if n == 0 or b == e:  # nothing to sort; with an empty bit range the output is the input
            if temp_storage is None and not one_shot:
                return 1
            if n and not call.overwrite:
                s = stream_handle(stream) if stream is not None else 0
                memcpy_async(call.k_out, call.k_in, n * self._key_size, s)
                if self._value_size:
                    memcpy_async(call.v_out, call.v_in, n * self._value_size, s)
            return None
        # (a DoubleBuffer, whose selector follows the flips below, is never remembered)
        needed = self._execute(temp_storage, stream, one_shot, call, (), 1 if n > NARROW_MAX_ITEMS else 0, memo)
        self._follow_flips(call, d_in_keys, d_in_values)
        return needed

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in_keys: DeviceArrayLike | DoubleBuffer,
                 d_out_keys: DeviceArrayLike | None, d_in_values: DeviceArrayLike | DoubleBuffer | None,
                 d_out_values: DeviceArrayLike | None, num_items: int, begin_bit: int | None = None,
                 end_bit: int | None = None, stream: StreamLike | None = None) -> int | None:
        """Sort (or, with ``temp_storage=None``, return the temporary bytes needed).

        With a DoubleBuffer as ``d_in_keys`` the sorted keys are in ``d_in_keys.current()``
        afterwards (and the values in ``d_in_values.current()``)."""
        return self._run(temp_storage, d_in_keys, d_out_keys, d_in_values, d_out_values, num_items, begin_bit,
                         end_bit, stream, False)

    def cubin(self, compute_capability: ComputeCapabilityLike | None = None, *, wide_offsets: bool = False) -> bytes:
        """The compiled code for one architecture (the first built if not given); with
        ``wide_offsets`` the 64-bit-offset variant used past 2^31 - 1 items (built on demand)."""
        if not wide_offsets:
            return super().cubin(compute_capability)
        builds = self._builds_of(1)
        archs = parse_compute_capability(compute_capability) or self.compute_capabilities[:1]
        builds.build_for(archs[:1], ())
        return builds.cubin(archs[0])


# ------------------------------------------------------------------- public functions

def _describe(d_in_keys: Any, d_out_keys: Any, d_in_values: Any, d_out_values: Any,
              order: Any) -> RadixSortDescription:
    """Check the build arguments and describe the sort."""
    order = parse_order(order)
    value_dt = RadixSort._dtypes(d_in_keys, d_out_keys, d_in_values, d_out_values)[1]
    kinds = RadixSort._kinds(d_in_keys, d_out_keys, d_in_values, d_out_values, value_dt)
    return RadixSortDescription(*kinds, order)


@keyword_checked
def make_radix_sort(*, d_in_keys: ArrayOrProxy | DoubleBuffer, d_out_keys: ArrayOrProxy | None,
                    d_in_values: ArrayOrProxy | DoubleBuffer | None, d_out_values: ArrayOrProxy | None,
                    order: SortOrderLike, compute_capability: ComputeCapabilityLike | None = None) -> RadixSort:
    """Build (or fetch from cache) a radix sort of keys (and values) in ``order``.

    Args:
        d_in_keys: device array of keys (bool, integer or floating point), a
            ``DoubleBuffer`` of two such arrays, or a ``ProxyArray`` to build ahead of time.
        d_out_keys: device array for the sorted keys, or None with a DoubleBuffer.
        d_in_values: device array (or DoubleBuffer) of values of any dtype, or None.
        d_out_values: device array for the sorted values, or None.
        order: ``SortOrder.ASCENDING`` or ``SortOrder.DESCENDING``.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray(np.random.randint(0, 1 << 20, 10000).astype(np.uint32))
        out = cp.empty_like(keys)
        sorter = cuprims.make_radix_sort(d_in_keys=keys, d_out_keys=out, d_in_values=None,
                                         d_out_values=None, order=cuprims.SortOrder.ASCENDING)
        nbytes = sorter(temp_storage=None, d_in_keys=keys, d_out_keys=out, d_in_values=None,
                        d_out_values=None, num_items=keys.size)
        tmp = cp.empty(nbytes, np.uint8)
        sorter(temp_storage=tmp, d_in_keys=keys, d_out_keys=out, d_in_values=None,
               d_out_values=None, num_items=keys.size)
    """
    desc = RadixSort._described(_describe, d_in_keys, d_out_keys, d_in_values, d_out_values, order)
    return RadixSort._make(desc, compute_capability, ())


@keyword_checked
def radix_sort(*, d_in_keys: DeviceArrayLike | DoubleBuffer, d_out_keys: DeviceArrayLike | None,
               d_in_values: DeviceArrayLike | DoubleBuffer | None = None, d_out_values: DeviceArrayLike | None = None,
               num_items: int, order: SortOrderLike, begin_bit: int | None = None, end_bit: int | None = None,
               stream: StreamLike | None = None) -> None:
    """Sort ``num_items`` keys (and their values) by radix sort, in one call.

    Temporary storage is allocated and freed on ``stream`` (stream-ordered), so the call
    never synchronises. With a ``DoubleBuffer`` as ``d_in_keys`` (``d_out_keys=None``)
    the sort needs less temporary storage and leaves the result in ``d_in_keys.current()``.

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray(np.array([3, 1, 2], dtype=np.float32))
        vals = cp.asarray(np.array([30, 10, 20], dtype=np.int64))
        out_k, out_v = cp.empty_like(keys), cp.empty_like(vals)
        cuprims.radix_sort(d_in_keys=keys, d_out_keys=out_k, d_in_values=vals, d_out_values=out_v,
                           num_items=3, order=cuprims.SortOrder.ASCENDING)
        assert out_v.tolist() == [10, 20, 30]
    """
    desc = RadixSort._described(_describe, d_in_keys, d_out_keys, d_in_values, d_out_values, order)
    obj = RadixSort._make(desc, None, ())
    obj._run(None, d_in_keys, d_out_keys, d_in_values, d_out_values, num_items, begin_bit, end_bit, stream, True)
