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

import numpy as np

from .. import _arrays
from .._enums import SortOrder
from .._jit import driver
from .._jit.codegen_sort import carrier_alignment, check_radix_key, radix_sort_source
from .._streams import stream_handle
from ..errors import ArgumentError
from ..types import ValueType, value_type
from ._common import (Builds, CompiledAlgorithm, PerThreadCache, check_num_items, parse_compute_capability, targets,
                     temp_storage_info)
from .sort_common import (NARROW_MAX_ITEMS, DoubleBuffer, OffsetVariants, align_base, memcpy_async,
                          opaque_value_type, overlaps, parse_order, temp_layout, zero_words_async)

# CUB's onesweep dispatch: portions of at most this many items (rounded down to whole
# tiles), since the look-back flags use the top two bits of a 32-bit word.
_PORTION_LIMIT = (1 << 28) - 1
# CUB launches its zero-fill kernels with this many threads per block.
_INIT_THREADS = 256
_LOOKBACK_WORD = 4  # bytes of CUB's AtomicOffsetT (int); pinned by static_assert in the generated code
# As CUB does for problems too large for its PDL path (and bench/tune_probe.py measures).
ZERO_LOOKBACK_WITH_MEMSET = True
_DECOMPOSER = b"\0"  # CUB's identity decomposer: an empty struct passed by value

__all__ = ["make_radix_sort", "radix_sort", "DoubleBuffer", "SortOrder"]


class _Plan:
    """Kernel handles and launch facts for one device and one offset width."""

    __slots__ = ("single", "histogram", "scan", "init", "onesweep", "single_threads", "single_tile_items",
                 "hist_threads", "hist_grid", "scan_threads", "os_threads", "tile", "radix_bits", "portion",
                 "offset_size", "key_bits", "packs")

    def __init__(self, loaded: Any, device: int):
        meta = loaded.meta
        self.single, self.histogram, self.scan, self.init, self.onesweep = loaded.handles
        self.single_threads = meta["single_tile_threads"]
        self.single_tile_items = meta["single_tile_threads"] * meta["single_tile_items"]
        self.hist_threads = meta["histogram_threads"]
        occupancy = loaded.module.max_active_blocks(loaded.names[1], self.hist_threads)
        self.hist_grid = max(1, occupancy) * driver.sm_count(device)
        self.scan_threads = meta["exclusive_sum_threads"]
        self.os_threads = meta["onesweep_threads"]
        self.tile = meta["onesweep_threads"] * meta["onesweep_items"]
        self.radix_bits = meta["radix_bits"]
        self.portion = _PORTION_LIMIT // self.tile * self.tile
        self.offset_size = meta["offset_size"]
        self.key_bits = meta["key_bits"]
        self.packs = tuple(driver.ParamPack(kinds) for kinds in param_kinds(self.offset_size))


def param_kinds(offset_size: int) -> tuple[tuple, ...]:
    """Launch parameter kinds of the five kernels, in codegen order (the CPU tests check
    them against the parameter sizes recorded in the compiled cubin)."""
    off = "i64" if offset_size == 8 else "i32"
    return (
        # single tile: keys in/out, values in/out, num_items, begin_bit, end_bit, decomposer
        ("ptr", "ptr", "ptr", "ptr", off, "i32", "i32", 1),
        # histogram: bins, keys, num_items, begin_bit, end_bit, decomposer
        ("ptr", "ptr", off, "i32", "i32", 1),
        # exclusive sum: bins
        ("ptr",),
        # zero-fill: int* items0, size_t count0, OffsetT* items1, size_t count1
        ("ptr", "i64", "ptr", "i64"),
        # onesweep: lookback, counter, bins out, bins in, keys out, keys in, values out,
        # values in, portion items, current bit, bits, decomposer
        ("ptr",) * 8 + ("i32", "i32", "i32", 1),
    )


class _Buffers:
    """Pointers of one call, resolved and checked."""

    __slots__ = ("k_in", "k_out", "v_in", "v_out", "overwrite")

    def __init__(self, k_in: int, k_out: int, v_in: int, v_out: int, overwrite: bool):
        self.k_in, self.k_out, self.v_in, self.v_out, self.overwrite = k_in, k_out, v_in, v_out, overwrite


def _key_array(x: Any) -> Any:
    return x.current() if isinstance(x, DoubleBuffer) else x


def _is_double_buffer(x: Any) -> bool:
    return isinstance(x, DoubleBuffer)


class _RadixSort(CompiledAlgorithm):
    """A radix sort built for fixed key and value dtypes and order; call it to run.

    ``sorter(temp_storage=None, ...)`` returns the temporary bytes needed and launches
    nothing; ``sorter(temp_storage=buf, ...)`` sorts on ``stream``.
    """

    def __init__(self, d_in_keys: Any, d_out_keys: Any, d_in_values: Any, d_out_values: Any, order: Any,
                 compute_capability: Any):
        self._order = parse_order(order)
        key_dt, value_dt = _check_build_arguments(d_in_keys, d_out_keys, d_in_values, d_out_values)
        self._key_dtype = key_dt
        self._value_dtype = value_dt
        self._key = key = value_type(key_dt, argument="d_in_keys")
        check_radix_key(key)
        self._value: ValueType | None = (None if value_dt is None
                                         else opaque_value_type(value_dt, argument="d_in_values"))
        value = self._value
        descending = self._order is SortOrder.DESCENDING

        def make_source(arch: int, wide: bool):
            return radix_sort_source(key=key, value=value, descending=descending, wide_offsets=wide, arch=arch)

        self._variants = OffsetVariants(make_source, ())
        self._variants.builds(False).build_for(targets(compute_capability), [])
        self._plans: dict[tuple[int, bool], _Plan] = {}
        self._key_size = key.size
        self._value_size = 0 if value is None else value.size
        self._key_bits = 8 * key.size
        self._key_align = key.alignment
        self._value_align = 1 if value is None else carrier_alignment(value)

    # -- per device facts ----------------------------------------------------------
    def _plan(self, device: int, wide: bool) -> _Plan:
        plan = self._plans.get((device, wide))
        if plan is None:
            loaded = self._variants.builds(wide).loaded(device, [])
            plan = loaded.extra.get("radix_plan")
            if plan is None:
                plan = loaded.extra["radix_plan"] = _Plan(loaded, device)
            self._plans[(device, wide)] = plan
        return plan

    # -- argument handling -----------------------------------------------------------
    def _read(self, x: Any, name: str, dtype: np.dtype, n: int, align: int) -> int:
        return _arrays.checked_pointer(x, name, dtype, n, align - 1)

    def _buffers(self, d_in_keys: Any, d_out_keys: Any, d_in_values: Any, d_out_values: Any, n: int) -> _Buffers:
        kdt, vdt = self._key_dtype, self._value_dtype
        has_values = d_in_values is not None
        if has_values != (vdt is not None):
            if has_values:
                raise ArgumentError("d_in_values", "None (this sorter was built for keys only)", d_in_values)
            raise ArgumentError("d_in_values", f"values of {vdt} (this sorter was built for key-value pairs)", None)
        if _is_double_buffer(d_in_keys):
            if d_out_keys is not None:
                raise ArgumentError("d_out_keys", "None when d_in_keys is a DoubleBuffer (the result lands in "
                                    "d_in_keys.current())", d_out_keys)
            k_in = self._read(d_in_keys.current(), "d_in_keys", kdt, n, self._key_align)
            k_out = self._read(d_in_keys.alternate(), "d_in_keys", kdt, n, self._key_align)
            v_in = v_out = 0
            if has_values:
                if not _is_double_buffer(d_in_values):
                    raise ArgumentError("d_in_values", "a DoubleBuffer (as d_in_keys is one)", d_in_values)
                if d_out_values is not None:
                    raise ArgumentError("d_out_values", "None when d_in_values is a DoubleBuffer", d_out_values)
                v_in = self._read(d_in_values.current(), "d_in_values", vdt, n, self._value_align)
                v_out = self._read(d_in_values.alternate(), "d_in_values", vdt, n, self._value_align)
            elif d_out_values is not None:
                raise ArgumentError("d_out_values", "None (no d_in_values were given)", d_out_values)
            buffers = _Buffers(k_in, k_out, v_in, v_out, True)
        else:
            if d_out_keys is None:
                raise ArgumentError("d_out_keys", "a device array for the sorted keys (or pass a DoubleBuffer as "
                                    "d_in_keys)", None)
            if _is_double_buffer(d_out_keys):
                raise ArgumentError("d_out_keys", "a device array (DoubleBuffers go in d_in_keys)", d_out_keys)
            k_in = self._read(d_in_keys, "d_in_keys", kdt, n, self._key_align)
            k_out = self._read(d_out_keys, "d_out_keys", kdt, n, self._key_align)
            v_in = v_out = 0
            if has_values:
                if _is_double_buffer(d_in_values):
                    raise ArgumentError("d_in_values", "a device array (a DoubleBuffer only together with a "
                                        "DoubleBuffer for d_in_keys)", d_in_values)
                if d_out_values is None:
                    raise ArgumentError("d_out_values", "a device array for the sorted values", None)
                v_in = self._read(d_in_values, "d_in_values", vdt, n, self._value_align)
                v_out = self._read(d_out_values, "d_out_values", vdt, n, self._value_align)
            elif d_out_values is not None:
                raise ArgumentError("d_out_values", "None (no d_in_values were given)", d_out_values)
            buffers = _Buffers(k_in, k_out, v_in, v_out, False)
        ks, vs = self._key_size, self._value_size
        if overlaps(buffers.k_in, n * ks, buffers.k_out, n * ks):
            raise ArgumentError("d_out_keys", "memory apart from d_in_keys (to sort in place, pass "
                                "DoubleBuffer(keys, scratch) as d_in_keys)", "an overlapping array")
        if has_values:
            if overlaps(buffers.v_in, n * vs, buffers.v_out, n * vs):
                raise ArgumentError("d_out_values", "memory apart from d_in_values", "an overlapping array")
            for a, b in ((buffers.k_in, buffers.v_out), (buffers.k_out, buffers.v_in), (buffers.k_out, buffers.v_out)):
                if overlaps(a, n * ks, b, n * vs):
                    raise ArgumentError("d_out_values", "memory apart from the keys", "an array overlapping them")
        return buffers

    def _bits(self, begin_bit: Any, end_bit: Any) -> tuple[int, int]:
        nbits = self._key_bits
        b = 0 if begin_bit is None else begin_bit
        e = nbits if end_bit is None else end_bit
        for name, v in (("begin_bit", b), ("end_bit", e)):
            if type(v) is not int:
                try:
                    import operator

                    v = operator.index(v)
                except TypeError:
                    raise ArgumentError(name, f"an integer bit index in [0, {nbits}]", v) from None
            if not 0 <= v <= nbits:
                raise ArgumentError(name, f"a bit index in [0, {nbits}] for {self._key_dtype} keys", v)
        b, e = int(b), int(e)
        if b > e:
            raise ArgumentError("end_bit", f"a bit index >= begin_bit={b}", e)
        return b, e

    # -- the sort ----------------------------------------------------------------
    def _run(self, temp_storage: Any, d_in_keys: Any, d_out_keys: Any, d_in_values: Any, d_out_values: Any,
             num_items: Any, begin_bit: Any, end_bit: Any, stream: Any, one_shot: bool) -> int | None:
        n = num_items if type(num_items) is int and num_items >= 0 else check_num_items(num_items)
        buf = self._buffers(d_in_keys, d_out_keys, d_in_values, d_out_values, n)
        b, e = self._bits(begin_bit, end_bit)
        query = temp_storage is None and not one_shot

        if n == 0 or (b == e and buf.overwrite):
            return 1 if query else None
        if b == e:  # nothing to compare: the output is the input
            if query:
                return 1
            s = stream_handle(stream) if stream is not None else 0
            memcpy_async(buf.k_out, buf.k_in, n * self._key_size, s)
            if self._value is not None:
                memcpy_async(buf.v_out, buf.v_in, n * self._value_size, s)
            return None

        wide = n > NARROW_MAX_ITEMS
        plan = self._plan(driver.current_device(), wide)
        if n <= plan.single_tile_items:
            if query:
                return 1
            s = stream_handle(stream) if stream is not None else 0
            driver.launch(plan.single, 1, plan.single_threads, s,
                          plan.packs[0].pack(buf.k_in, buf.k_out, buf.v_in, buf.v_out, n, b, e, _DECOMPOSER))
            self._flip(d_in_keys, d_in_values, 1)
            return None

        digits = 1 << plan.radix_bits
        num_passes = -(-(e - b) // plan.radix_bits)
        num_portions = -(-n // plan.portion)
        max_blocks = -(-min(n, plan.portion) // plan.tile)
        extra = not buf.overwrite and num_passes > 1
        sizes = (
            num_portions * num_passes * digits * plan.offset_size,   # bins
            max_blocks * digits * _LOOKBACK_WORD,                     # look-back
            n * self._key_size if extra else 0,                       # scratch keys
            n * self._value_size if extra else 0,                     # scratch values
            num_portions * num_passes * _LOOKBACK_WORD,               # counters
        )
        offsets, needed = temp_layout(sizes)
        if query:
            return needed
        s = stream_handle(stream) if stream is not None else 0
        owned = 0
        if one_shot and temp_storage is None:
            owned = temp_ptr = driver.alloc_async(needed, s)
        else:
            temp_ptr, _ = temp_storage_info(temp_storage, needed)
        try:
            base = align_base(temp_ptr)
            bins, lookback, keys_tmp, values_tmp, counters = (base + o for o in offsets)
            flips = self._onesweep(plan, buf, n, b, e, s, digits, num_passes, num_portions, bins, lookback,
                                   keys_tmp, values_tmp, counters)
        finally:
            if owned:
                driver.free_async(owned, s)
        self._flip(d_in_keys, d_in_values, flips)
        return None

    def _onesweep(self, plan: _Plan, buf: _Buffers, n: int, b: int, e: int, s: int, digits: int,
                  num_passes: int, num_portions: int, bins: int, lookback: int, keys_tmp: int, values_tmp: int,
                  counters: int) -> int:
        """CUB's onesweep pipeline; returns the number of times the result's buffer
        alternated (what a DoubleBuffer's selector must flip by)."""
        launch = driver.launch
        p_init, p_os = plan.packs[3], plan.packs[4]
        osize = plan.offset_size
        n_counters = num_portions * num_passes
        n_bins = num_passes * digits
        launch(plan.init, -(-max(n_counters, n_bins) // _INIT_THREADS), _INIT_THREADS, s,
               p_init.pack(counters, n_counters, bins, n_bins))
        launch(plan.histogram, plan.hist_grid, plan.hist_threads, s,
               plan.packs[1].pack(bins, buf.k_in, n, b, e, _DECOMPOSER))
        launch(plan.scan, num_passes, plan.scan_threads, s, plan.packs[2].pack(bins))

        ks, vs = self._key_size, self._value_size
        keys = [buf.k_in, buf.k_out]
        values = [buf.v_in, buf.v_out]
        sel = 0
        keys_alt, values_alt = buf.k_out, buf.v_out
        if not buf.overwrite and num_passes % 2 == 0:
            keys[1], values[1] = keys_tmp, values_tmp
        portion = plan.portion
        bit, pass_ = b, 0
        while bit < e:
            num_bits = min(e - bit, plan.radix_bits)
            for p in range(num_portions):
                portion_items = min(n - p * portion, portion)
                blocks = -(-portion_items // plan.tile)
                n_lookback = blocks * digits
                if ZERO_LOOKBACK_WITH_MEMSET:
                    zero_words_async(lookback, n_lookback, s)
                else:
                    launch(plan.init, -(-n_lookback // _INIT_THREADS), _INIT_THREADS, s,
                           p_init.pack(lookback, n_lookback, 0, 0))
                bins_out = bins + ((p + 1) * num_passes + pass_) * digits * osize if p < num_portions - 1 else 0
                bins_in = bins + (p * num_passes + pass_) * digits * osize
                v_in = values[sel] + p * portion * vs if vs else 0
                launch(plan.onesweep, blocks, plan.os_threads, s,
                       p_os.pack(lookback, counters + (p * num_passes + pass_) * _LOOKBACK_WORD, bins_out, bins_in,
                                 keys[sel ^ 1], keys[sel] + p * portion * ks, values[sel ^ 1] if vs else 0, v_in,
                                 portion_items, bit, num_bits, _DECOMPOSER))
            if not buf.overwrite and pass_ == 0:
                if num_passes % 2 == 0:
                    keys, values = [keys_alt, keys_tmp], [values_alt, values_tmp]
                else:
                    keys, values = [keys_tmp, keys_alt], [values_tmp, values_alt]
                sel = 0
            sel ^= 1
            bit += plan.radix_bits
            pass_ += 1
        return num_passes

    @staticmethod
    def _flip(d_in_keys: Any, d_in_values: Any, flips: int) -> None:
        if flips & 1:
            if isinstance(d_in_keys, DoubleBuffer):
                d_in_keys.selector ^= 1
                if isinstance(d_in_values, DoubleBuffer):
                    d_in_values.selector ^= 1

    def __call__(self, *, temp_storage: Any, d_in_keys: Any, d_out_keys: Any, d_in_values: Any,
                 d_out_values: Any, num_items: int, begin_bit: int | None = None, end_bit: int | None = None,
                 stream: Any = None) -> int | None:
        """Sort (or, with ``temp_storage=None``, return the temporary bytes needed).

        With a DoubleBuffer as ``d_in_keys`` the sorted keys are in ``d_in_keys.current()``
        afterwards (and the values in ``d_in_values.current()``)."""
        return self._run(temp_storage, d_in_keys, d_out_keys, d_in_values, d_out_values, num_items, begin_bit,
                         end_bit, stream, False)

    def _inspected_builds(self) -> Builds:
        return self._variants.builds(False)

    def cubin(self, compute_capability: Any = None, *, wide_offsets: bool = False) -> bytes:
        """The compiled code for one architecture (the first built if not given); with
        ``wide_offsets`` the 64-bit-offset variant used past 2^31 - 1 items (built on demand)."""
        if not wide_offsets:
            return super().cubin(compute_capability)
        builds = self._variants.builds(True)
        archs = parse_compute_capability(compute_capability) or self.compute_capabilities[:1]
        if archs[0] not in builds.archs:
            builds.build_for(archs[:1], [])
        return builds.cubin(archs[0])


# ------------------------------------------------------------------- public functions

def _dtype_of(x: Any, name: str) -> np.dtype:
    return _arrays.array_dtype(_key_array(x), name)


def _check_build_arguments(d_in_keys: Any, d_out_keys: Any, d_in_values: Any,
                           d_out_values: Any) -> tuple[np.dtype, np.dtype | None]:
    if d_in_keys is None:
        raise ArgumentError("d_in_keys", "a device array or a DoubleBuffer", None)
    key_dt = _dtype_of(d_in_keys, "d_in_keys")
    if isinstance(d_in_keys, DoubleBuffer):
        alt = _arrays.array_dtype(d_in_keys.alternate(), "d_in_keys")
        if alt != key_dt:
            raise ArgumentError("d_in_keys", f"a DoubleBuffer of two {key_dt} arrays", f"one of {alt}")
        if d_out_keys is not None:
            raise ArgumentError("d_out_keys", "None when d_in_keys is a DoubleBuffer", d_out_keys)
    else:
        if d_out_keys is None:
            raise ArgumentError("d_out_keys", "a device array for the sorted keys (or pass a DoubleBuffer as "
                                "d_in_keys)", None)
        out_dt = _dtype_of(d_out_keys, "d_out_keys")
        if out_dt != key_dt:
            raise ArgumentError("d_out_keys", f"an array of the keys' dtype {key_dt}", f"an array of {out_dt}")
    if d_in_values is None:
        if d_out_values is not None:
            raise ArgumentError("d_out_values", "None (no d_in_values were given)", d_out_values)
        return key_dt, None
    value_dt = _dtype_of(d_in_values, "d_in_values")
    if isinstance(d_in_keys, DoubleBuffer):
        if not isinstance(d_in_values, DoubleBuffer):
            raise ArgumentError("d_in_values", "a DoubleBuffer (as d_in_keys is one)", d_in_values)
        alt = _arrays.array_dtype(d_in_values.alternate(), "d_in_values")
        if alt != value_dt:
            raise ArgumentError("d_in_values", f"a DoubleBuffer of two {value_dt} arrays", f"one of {alt}")
        if d_out_values is not None:
            raise ArgumentError("d_out_values", "None when d_in_values is a DoubleBuffer", d_out_values)
    else:
        if isinstance(d_in_values, DoubleBuffer):
            raise ArgumentError("d_in_values", "a device array (a DoubleBuffer only together with a DoubleBuffer "
                                "for d_in_keys)", d_in_values)
        if d_out_values is None:
            raise ArgumentError("d_out_values", "a device array for the sorted values", None)
        out_dt = _dtype_of(d_out_values, "d_out_values")
        if out_dt != value_dt:
            raise ArgumentError("d_out_values", f"an array of the values' dtype {value_dt}", f"an array of {out_dt}")
    return key_dt, value_dt


wrapper_caches = PerThreadCache()


def make_radix_sort(*, d_in_keys: Any, d_out_keys: Any, d_in_values: Any, d_out_values: Any, order: SortOrder,
                    compute_capability: Any = None) -> _RadixSort:
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
    order = parse_order(order)
    archs = parse_compute_capability(compute_capability)
    key_dt, value_dt = _check_build_arguments(d_in_keys, d_out_keys, d_in_values, d_out_values)
    key = (key_dt, value_dt, order, None if archs is None else tuple(archs))
    obj = wrapper_caches.get(key)
    if obj is None:
        obj = _RadixSort(d_in_keys, d_out_keys, d_in_values, d_out_values, order, archs)
        wrapper_caches.put(key, obj)
    return obj


def radix_sort(*, d_in_keys: Any, d_out_keys: Any, d_in_values: Any = None, d_out_values: Any = None,
               num_items: int, order: SortOrder, begin_bit: int | None = None, end_bit: int | None = None,
               stream: Any = None) -> None:
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
    obj = make_radix_sort(d_in_keys=d_in_keys, d_out_keys=d_out_keys, d_in_values=d_in_values,
                          d_out_values=d_out_values, order=order)
    obj._run(None, d_in_keys, d_out_keys, d_in_values, d_out_values, num_items, begin_bit, end_bit, stream, True)
