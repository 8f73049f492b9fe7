"""Segmented sort's host dispatch against a fake device (no GPU).

Device memory is numpy bytes at made-up addresses (every access bounds- and
alignment-checked, see cpu_helpers.FakeMemory); each kernel is emulated by what it
computes, reading its parameters as the host packed them: CUB's fallback kernel, the
clear and classify kernels (which write the group sizes and the index lists to device
memory, the lists in a shuffled order: the real kernel's blocks reserve their places with
atomics, so no order is promised), and the large/middle/small kernels, which read the
group sizes back from device memory and stride over them as the real kernels do. Radix passes through global memory
are emulated pass by pass (a stable sort on one digit each), through the buffers the host
gave, so a wrong buffer order, temporary layout, grid or DoubleBuffer selector shows up
as a wrong result. Results are checked against numpy.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

import cuprims
from cpu_helpers import FakeArray, FakeMemory, FakePack
from cuprims import DoubleBuffer, SortOrder
from cuprims._runtime import driver
from cuprims.algorithms.segmented_sort import dispatch as dispatch_mod
from cuprims.algorithms.segmented_sort import api as ss
from cuprims.errors import ArgumentError
from test_radix_sort import FakeBuilds, _Placeholder
from twins import STRUCT, ordered_bits, random_keys, sorted_keys

ASC, DESC = SortOrder.ASCENDING, SortOrder.DESCENDING
ROLES = ("fallback", "clear", "classify", "big", "small", "mid")
SMS, OCCUPANCY = 4, 3  # the fake device's SMs and blocks per SM of every kernel

# small tiles, so that short arrays reach every path: medium tile 6, small tile 2, CUB's
# large tile 32, middle tier 16, three radix bits (int8: 3 passes, int16: 6, int32: 11); the
# classify kernel's block is the header's (256 threads of 8 segments, pinned by the goldens' test)
META = dict(radix_bits=3, large_threads=4, large_items=8, mid_items=4, medium_threads=8, medium_warp=2,
            medium_items=3, small_threads=8, small_warp=1, small_items=2, partitioning_threshold=5,
            classify_threads=256, classify_items=8)
CLASSIFY_BLOCK = 256 * 8  # segments a classify block takes


def _meta(key_dt, value_dt, offset_dt, wide=False, **over):
    """A build's exported facts; ``wide``: variant 1, whose offsets take CUB's signed width
    (variant 0 computes them in 32 bits whatever their type)."""
    kd = np.dtype(key_dt)
    od = np.dtype(offset_dt)
    meta = dict(META, key_size=kd.itemsize, value_size=0 if value_dt is None else np.dtype(value_dt).itemsize,
                offset_size=4 if od == np.int32 or not wide else 8, key_bits=8 * kd.itemsize)
    meta.update(over)
    return meta


class FakeSegmentedDevice:
    """Emulates the six kernels; ``handles`` are (role, offset size) tuples: the kernels of a
    4-byte build read the offsets as int32 (other types through narrow_offsets' clamp)."""

    def __init__(self, mem, key_dt, value_dt, offset_dt, descending, meta):
        self.mem, self.kdt, self.odt, self.desc, self.m = mem, np.dtype(key_dt), np.dtype(offset_dt), descending, meta
        self.vdt = None if value_dt is None else np.dtype((np.void, np.dtype(value_dt).itemsize))
        self.launches, self.sorted, self.offset_sizes = [], [], []
        self.rng = np.random.default_rng(31)  # the classify kernel's list order
        self.tile = meta["large_threads"] * meta["large_items"]
        self.mid_tile = meta["large_threads"] * meta["mid_items"]
        self.medium_tile = meta["medium_warp"] * meta["medium_items"]
        self.small_tile = meta["small_warp"] * meta["small_items"]

    def launch(self, kernel, grid, block, stream, params, shared=0):
        role, self.offset_size = kernel
        assert grid >= 1, (role, grid)
        self.launches.append((role, grid, block, stream))
        self.offset_sizes.append(self.offset_size)
        getattr(self, "_" + role)(grid, block, *params)

    # -- reading what the host packed ----------------------------------------------
    def offsets(self, begin, end, count):
        """The offsets as the kernels read them: in a wide build as CUB's signed type, in a
        narrow one as int32, those of other types clamped to [0, INT_MAX] (narrow_offsets)."""
        return self._read(begin, count), self._read(end, count)

    def _read(self, ptr, count):
        raw = self.mem.view(ptr, self.odt, count)
        if self.odt == np.int32:
            return raw.astype(np.int64)
        if self.offset_size == 8:
            return raw.astype(np.int64)    # uint32 -> int64 exactly; uint64 wraps, as C++ converts it
        top = (1 << 31) - 1
        if self.odt.kind == "u":
            return np.minimum(raw, self.odt.type(top)).astype(np.int64)
        return np.clip(raw.astype(np.int64), 0, top)

    def segment(self, s):
        b, e = self.bounds
        return int(b[s]), int(e[s]) - int(b[s])

    # -- what the sorts compute ------------------------------------------------------
    def _move(self, order, k_src, v_src, k_dst, v_dst, b, n, radix):
        keys = self.mem.view(k_src + b * self.kdt.itemsize, self.kdt, n).copy()
        self.mem.view(k_dst + b * self.kdt.itemsize, self.kdt, n)[:] = sorted_keys(keys[order]) if radix else \
            keys[order]
        if self.vdt is not None:
            vals = self.mem.view(v_src + b * self.vdt.itemsize, self.vdt, n).copy()
            self.mem.view(v_dst + b * self.vdt.itemsize, self.vdt, n)[:] = vals[order]

    def _whole(self, k_in, k_out, v_in, v_out, b, n, radix):
        keys = self.mem.view(k_in + b * self.kdt.itemsize, self.kdt, n)
        order = np.argsort(ordered_bits(keys, self.desc), kind="stable")
        self._move(order, k_in, v_in, k_out, v_out, b, n, radix)

    def _passes(self, k_in, v_in, db_k, db_v, b, n):
        """CUB's passes through global memory: the first from the input into the double
        buffer's current half, then back and forth."""
        cur_k, alt_k = struct.unpack("<QQ", db_k)
        cur_v, alt_v = struct.unpack("<QQ", db_v)
        bits, r = 8 * self.kdt.itemsize, self.m["radix_bits"]
        src_k, src_v, dst_k, dst_v = k_in, v_in, cur_k, cur_v
        for bit in range(0, bits, r):
            keys = self.mem.view(src_k + b * self.kdt.itemsize, self.kdt, n)
            digit = (ordered_bits(keys, self.desc) >> np.uint64(bit)) & np.uint64((1 << min(r, bits - bit)) - 1)
            self._move(np.argsort(digit, kind="stable"), src_k, src_v, dst_k, dst_v, b, n, True)
            if bit == 0:
                src_k, src_v, dst_k, dst_v = cur_k, cur_v, alt_k, alt_v
            else:
                src_k, src_v, dst_k, dst_v = dst_k, dst_v, src_k, src_v

    def _large(self, k_in, k_out, db_k, v_in, v_out, db_v, b, n, single):
        if n <= single:
            self._whole(k_in, k_out, v_in, v_out, b, n, True)
        else:
            self._passes(k_in, v_in, db_k, db_v, b, n)

    # -- the kernels -------------------------------------------------------------------
    def _fallback(self, grid, block, k_in, k_out, db_k, v_in, v_out, db_v, begin, end):
        assert block == self.m["large_threads"]
        self.bounds = self.offsets(begin, end, grid)
        for s in range(grid):
            b, n = self.segment(s)
            if n <= 0:
                continue
            self.sorted.append(s)
            if n <= self.medium_tile:
                self._whole(k_in, k_out, v_in, v_out, b, n, False)   # one sub-warp's merge sort
            else:
                self._large(k_in, k_out, db_k, v_in, v_out, db_v, b, n, self.tile - 1)  # CUB: n < tile

    def _clear(self, grid, block, group_sizes):
        assert (grid, block) == (1, 32)
        self.mem.view(group_sizes, np.uint32, 3)[:] = 0
        self.cleared = group_sizes

    def _classify(self, grid, block, group_sizes, n, large, small, medium_end, begin, end):
        assert self.cleared == group_sizes and not self.mem.view(group_sizes, np.uint32, 3).any()
        assert block == 256 and grid == -(-n // CLASSIFY_BLOCK), (grid, n)  # every segment, no idle block
        self.bounds = self.offsets(begin, end, n)
        lengths = self.bounds[1] - self.bounds[0]
        is_large, is_small = lengths > self.medium_tile, lengths <= self.small_tile
        ids = np.arange(n, dtype=np.uint32)
        # each list in an order of its own: the blocks' atomics promise none
        large_ids, small_ids = self.rng.permutation(ids[is_large]), self.rng.permutation(ids[is_small])
        medium = self.rng.permutation(ids[~is_large & ~is_small])
        nl, ns_ = large_ids.size, small_ids.size
        self.mem.view(large, np.uint32, nl)[:] = large_ids
        self.mem.view(small, np.uint32, ns_)[:] = small_ids
        # one list of `n` entries: large from the front, medium backwards from its end
        assert large + 4 * nl <= medium_end - 4 * medium.size and medium_end <= large + 4 * n
        if medium.size:  # written backwards from medium_end
            self.mem.view(medium_end - 4 * medium.size, np.uint32, medium.size)[:] = medium[::-1]
        self.mem.view(group_sizes, np.uint32, 3)[:] = (nl, ns_, medium.size)
        self.segments, self.group_sizes, self.medium_end = n, group_sizes, medium_end

    def _stride(self, grid, count):
        for b in range(grid):
            yield from range(b, count, grid)

    def _big(self, grid, block, group_sizes, large, k_in, k_out, db_k, v_in, v_out, db_v, begin, end, mid=False):
        assert block == self.m["large_threads"] and group_sizes == self.group_sizes
        assert grid == min(self.segments, OCCUPANCY * SMS * dispatch_mod.WAVES)
        count = int(self.mem.view(group_sizes, np.uint32, 1)[0])
        for entry in self._stride(grid, count):
            s = int(self.mem.view(large + 4 * entry, np.uint32, 1)[0])
            b, n = self.segment(s)
            if mid != (n <= self.mid_tile):
                continue  # the other large kernel's segment
            self.sorted.append(s)
            self._large(k_in, k_out, db_k, v_in, v_out, db_v, b, n, self.mid_tile if mid else self.tile)

    def _mid(self, *args):
        assert self.m["mid_items"], "the middle tier was launched without one"
        self._big(*args, mid=True)

    def _small(self, grid, block, group_sizes, segments, small, medium_end, k_in, k_out, v_in, v_out, begin, end):
        assert block == self.m["small_threads"] and segments == self.segments and medium_end == self.medium_end
        nl, nsm, counted = (int(x) for x in self.mem.view(group_sizes, np.uint32, 3))
        nm = segments - nl - nsm  # as the kernel computes it: the classify kernel's medium count
        assert nm == counted
        mpb = self.m["medium_threads"] // self.m["medium_warp"]
        spb = self.m["small_threads"] // self.m["small_warp"]
        medium_blocks = -(-nm // mpb)
        for v in self._stride(grid, medium_blocks + -(-nsm // spb)):
            if v < medium_blocks:
                ids = range(v * mpb, min((v + 1) * mpb, nm))
                segs = self.mem.view(medium_end - 4 * nm, np.uint32, nm)
            else:
                ids = range((v - medium_blocks) * spb, min((v - medium_blocks + 1) * spb, nsm))
                segs = self.mem.view(small, np.uint32, nsm)
            for i in ids:
                s = int(segs[i])
                b, n = self.segment(s)
                if n > 0:
                    self.sorted.append(s)
                    self._whole(k_in, k_out, v_in, v_out, b, n, False)


@pytest.fixture
def fake(monkeypatch):
    """make(key, value, order, offset dtype, double_buffer, **meta) -> (sorter, device)."""
    mem = FakeMemory()
    state = {}

    def make(key, value=None, order=ASC, offsets=np.int32, double_buffer=False, **meta_over):
        metas = [_meta(key, value, offsets, wide, **meta_over) for wide in (False, True)]
        dev = state["dev"] = FakeSegmentedDevice(mem, key, value, offsets, order is DESC, metas[0])
        monkeypatch.setattr(ss.SegmentedSort, "_builds_of", lambda self, variant: FakeBuilds(metas[variant], ROLES))
        ph = _Placeholder
        if double_buffer:
            kw = dict(d_in_keys=DoubleBuffer(ph(key), ph(key)),
                      d_in_values=None if value is None else DoubleBuffer(ph(value), ph(value)))
        else:
            kw = dict(d_in_keys=ph(key), d_out_keys=ph(key), d_in_values=None if value is None else ph(value),
                      d_out_values=None if value is None else ph(value))
        obj = cuprims.make_segmented_sort(**kw, start_offsets_in=ph(offsets), end_offsets_in=ph(offsets),
                                          order=order, compute_capability=90)
        return obj, dev

    monkeypatch.setattr(driver, "ParamPack", FakePack)
    monkeypatch.setattr(driver, "current_device", lambda: 0)
    monkeypatch.setattr(driver, "sm_count", lambda device: SMS)
    monkeypatch.setattr(driver, "compute_capability", lambda device: (9, 0))
    monkeypatch.setattr(driver, "launch", lambda *a, **k: state["dev"].launch(*a, **k))
    allocations = []

    def alloc_async(nbytes, stream, device=-1):
        allocations.append((nbytes, stream))
        return mem.alloc(nbytes, skew=64)

    monkeypatch.setattr(driver, "alloc_async", alloc_async)
    monkeypatch.setattr(driver, "free_async", lambda ptr, stream: mem.free(ptr))
    make.mem, make.allocations = mem, allocations
    return make


LENGTHS = [0, 1, 2, 3, 6, 7, 15, 16, 17, 31, 32, 33, 100, 5, 2, 1, 40, 12]  # every path (see META)


def segments(lengths, rng, offset_dt=np.int32, gap=3, negative=0):
    """Segments of these lengths with gaps between them, listed in shuffled order; plus
    ``negative`` segments whose end lies below their start (empty)."""
    starts, pos = [], 0
    for n in lengths:
        pos += int(rng.integers(0, gap + 1))
        starts.append(pos)
        pos += n
    starts, ends = np.array(starts), np.array(starts) + np.array(lengths, dtype=np.int64)
    order = rng.permutation(len(lengths))
    starts, ends = starts[order], ends[order]
    if negative:
        starts = np.concatenate([starts, np.full(negative, pos)])
        ends = np.concatenate([ends, np.full(negative, max(pos - 4, 0))])
    return starts.astype(offset_dt), ends.astype(offset_dt), pos + gap


def reference(keys, values, starts, ends, descending):
    out_k, out_v = keys.copy(), None if values is None else values.copy()
    for b, e in zip(starts.tolist(), ends.tolist()):   # Python ints: exact for every offset type
        if e > b:
            order = np.argsort(ordered_bits(keys[b:e], descending), kind="stable")
            out_k[b:e] = keys[b:e][order]
            if values is not None:
                out_v[b:e] = values[b:e][order]
    return out_k, out_v


def same_keys(got, want):
    """Bit for bit, but any NaN for a NaN (radix passes write the quiet NaN)."""
    if got.dtype.kind == "f":
        nan = np.isnan(want)
        return np.array_equal(np.isnan(got), nan) and np.array_equal(got[~nan].view(np.uint8),
                                                                     want[~nan].view(np.uint8))
    return np.array_equal(got.view(np.uint8), want.view(np.uint8))


def run(make_fake, obj, keys, values, starts, ends, double_buffer, stream=None, one_shot=False, selector=0):
    """Sort through the object (or the one-shot path); returns keys, values, and the DoubleBuffer."""
    mem = make_fake.mem
    n, ns = keys.size, starts.size
    sentinel_k = random_keys(keys.dtype, n, np.random.default_rng(99))
    kin, vin = FakeArray(mem, keys), None if values is None else FakeArray(mem, values)
    so, eo = FakeArray(mem, starts), FakeArray(mem, ends)
    if double_buffer:
        k2 = FakeArray(mem, sentinel_k)
        kdb = DoubleBuffer(*((k2, kin) if selector else (kin, k2)))
        kdb.selector = selector
        vdb = None
        if values is not None:
            v2 = FakeArray(mem, np.zeros_like(values))
            vdb = DoubleBuffer(*((v2, vin) if selector else (vin, v2)))
            vdb.selector = selector
        args = dict(d_in_keys=kdb, d_out_keys=None, d_in_values=vdb, d_out_values=None)
    else:
        kout = FakeArray(mem, sentinel_k)
        vout = None if values is None else FakeArray(mem, np.zeros_like(values))
        args = dict(d_in_keys=kin, d_out_keys=kout, d_in_values=vin, d_out_values=vout)
    common = dict(num_items=n, num_segments=ns, start_offsets_in=so, end_offsets_in=eo)
    if one_shot:
        cuprims.segmented_sort(**args, **common, order=obj.desc.order, stream=stream)
    else:
        nbytes = obj(temp_storage=None, **args, **common)
        assert isinstance(nbytes, int) and nbytes >= 1
        temp = FakeArray(mem, np.full(nbytes, 0xEE, np.uint8), skew=8)  # base not 256-aligned on purpose
        assert obj(temp_storage=temp, **args, **common, stream=stream) is None
    if double_buffer:
        got_k = args["d_in_keys"].current().get()
        got_v = None if values is None else args["d_in_values"].current().get()
    else:
        got_k, got_v = args["d_out_keys"].get(), None if values is None else args["d_out_values"].get()
        assert np.array_equal(kin.get().view(np.uint8), keys.view(np.uint8)), "the input keys were written"
    return got_k, got_v, args, sentinel_k


def check(make_fake, obj, dev, keys, values, starts, ends, double_buffer, **kw):
    got_k, got_v, args, sentinel = run(make_fake, obj, keys, values, starts, ends, double_buffer, **kw)
    want_k, want_v = reference(keys, values, starts, ends, dev.desc)
    inside = np.zeros(keys.size, bool)
    for b, e in zip(starts.tolist(), ends.tolist()):
        if e > b:
            inside[b:e] = True
    assert same_keys(got_k[inside], want_k[inside])
    if not double_buffer:  # items outside every segment are left as the output had them
        assert same_keys(got_k[~inside], sentinel[~inside])
    if values is not None:  # (a struct field by field: numpy's copies leave padding bytes undefined)
        assert np.array_equal(got_v[inside], want_v[inside]) if values.dtype.names else \
            np.array_equal(got_v[inside].view(np.uint8), want_v[inside].view(np.uint8))
    # every non-empty segment was sorted exactly once, by one kernel
    nonempty = sorted(int(s) for s in np.flatnonzero(ends > starts))
    assert sorted(dev.sorted) == nonempty
    dev.sorted.clear()
    return args


KEYS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64",
        "bool"]


@pytest.mark.parametrize("double_buffer", [False, True], ids=["arrays", "double-buffer"])
@pytest.mark.parametrize("order", [ASC, DESC], ids=["asc", "desc"])
@pytest.mark.parametrize("key", KEYS)
def test_every_key_type_both_orders_both_forms(fake, key, order, double_buffer):
    rng = np.random.default_rng(abs(hash((key, order.value, double_buffer))) % 1000)
    obj, dev = fake(key, np.int32, order, double_buffer=double_buffer)
    # classified; no small segments (the large and medium lists fill theirs); the fallback
    # (at most 5 segments), at its threshold too
    for lengths in (LENGTHS * 3, [n for n in LENGTHS if n > 2] * 2, LENGTHS[:4], LENGTHS[3:8]):
        starts, ends, n = segments(lengths, rng, negative=0 if min(lengths) > 2 else 1)
        keys = random_keys(key, n, rng)
        check(fake, obj, dev, keys, np.arange(n, dtype=np.int32), starts, ends, double_buffer)
        roles = [entry[0] for entry in dev.launches]
        assert ("classify" in roles) == (starts.size > META["partitioning_threshold"])
        assert roles[:2] == (["clear", "classify"] if "classify" in roles else ["fallback"])
        dev.launches.clear()


@pytest.mark.parametrize("offsets", [np.int32, np.int64, np.uint32, np.uint64])
def test_offset_types_keys_only_and_struct_values(fake, offsets):
    rng = np.random.default_rng(4)
    for value in (None, STRUCT):
        obj, dev = fake(np.float32, value, DESC, offsets)
        starts, ends, n = segments(LENGTHS * 4, rng, offsets)
        keys = random_keys(np.float32, n, rng)
        values = None if value is None else np.zeros(n, STRUCT)
        if values is not None:
            values["a"], values["b"] = np.arange(n), rng.random(n)
        check(fake, obj, dev, keys, values, starts, ends, False)


def test_double_buffer_selector_follows_pass_parity(fake):
    """int8 keys take 3 radix passes here (odd: the result changes buffers), int16 keys 6."""
    rng = np.random.default_rng(8)
    for key, flips in (("int8", 1), ("int16", 0)):
        obj, dev = fake(key, np.float64, ASC, double_buffer=True)
        for selector in (0, 1):
            starts, ends, n = segments(LENGTHS * 2, rng)
            keys = random_keys(key, n, rng)
            args = check(fake, obj, dev, keys, rng.random(n), starts, ends, True, selector=selector)
            assert args["d_in_keys"].selector == selector ^ flips
            assert args["d_in_values"].selector == selector ^ flips


def test_middle_tier_off_and_grids_capped(fake):
    rng = np.random.default_rng(2)
    obj, dev = fake(np.uint32, None, ASC, mid_items=0)
    cap = OCCUPANCY * SMS * dispatch_mod.WAVES
    small_cap = OCCUPANCY * SMS * dispatch_mod.SMALL_WAVES
    # 360 segments: more than the grid caps; 2160: the medium-and-small cap too, and two
    # classify blocks, the second one partial
    for copies, classify_blocks in ((20, 1), (120, 2)):
        starts, ends, n = segments(LENGTHS * copies, rng)
        ns = starts.size
        check(fake, obj, dev, random_keys(np.uint32, n, rng), None, starts, ends, False)
        launched = {role: grid for role, grid, _, _ in dev.launches}
        assert "mid" not in launched and launched["big"] == cap
        assert launched["small"] == min(small_cap, -(-ns // 4) + 1)
        assert launched["classify"] == classify_blocks == -(-ns // CLASSIFY_BLOCK) and launched["clear"] == 1
        dev.launches.clear()


def test_grids_cover_every_split():
    plan = type("P", (), dict(big_slots=10, mid_slots=20, small_slots=30, mid_items=4, medium_per_block=16))
    w, sw = dispatch_mod.WAVES, dispatch_mod.SMALL_WAVES
    assert dispatch_mod.grids(plan, 65536) == (10 * w, 20 * w, 30 * sw)
    assert dispatch_mod.grids(plan, 30) == (30, 30, 3)
    plan.mid_items = 0
    assert dispatch_mod.grids(plan, 65536)[1] == 0
    # without a cap, the medium-and-small grid covers any split of the segments (small
    # sub-warps are at most as wide as medium ones: more segments per block)
    for n in range(1, 300):
        for m in range(n + 1):
            assert -(-m // 16) + -(-(n - m) // 128) <= -(-n // 16) + 1


def test_temp_storage_layout_and_sizes(fake):
    obj, dev = fake(np.int32, np.int64, ASC)
    mem = fake.mem
    n, ns = 1000, 100
    starts = np.arange(ns, dtype=np.int32) * 10
    args = dict(d_in_keys=FakeArray(mem, np.zeros(n, np.int32)), d_out_keys=FakeArray.empty(mem, n, np.int32),
                d_in_values=FakeArray(mem, np.zeros(n, np.int64)), d_out_values=FakeArray.empty(mem, n, np.int64),
                num_items=n, num_segments=ns, start_offsets_in=FakeArray(mem, starts),
                end_offsets_in=FakeArray(mem, starts + 10))
    up = lambda x: -(-x // 256) * 256  # noqa: E731
    # keys scratch, values scratch, two index lists, three group sizes, + 255
    assert obj(temp_storage=None, **args) == up(4 * n) + up(8 * n) + 2 * up(4 * ns) + up(3 * 4) + 255
    with pytest.raises(ArgumentError) as info:
        obj(temp_storage=FakeArray(mem, np.zeros(100, np.uint8)), **args)
    assert info.value.argument == "temp_storage"
    # a DoubleBuffer needs no scratch: the index lists and group sizes alone
    db = dict(args, d_in_keys=DoubleBuffer(args["d_in_keys"], args["d_out_keys"]), d_out_keys=None,
              d_in_values=DoubleBuffer(args["d_in_values"], args["d_out_values"]), d_out_values=None)
    assert obj(temp_storage=None, **db) == 2 * up(4 * ns) + up(3 * 4) + 255
    # few segments on a DoubleBuffer: CUB's fallback, no storage at all (the query still answers 1)
    few = dict(db, num_segments=3)
    assert obj(temp_storage=None, **few) == 1
    obj(temp_storage=FakeArray(mem, np.zeros(1, np.uint8)), **few)
    assert dev.launches[-1][0] == "fallback" and dev.launches[-1][1] == 3


def test_nothing_to_do_launches_nothing(fake):
    obj, dev = fake(np.float32, None, ASC, double_buffer=True)
    mem = fake.mem
    keys = FakeArray(mem, np.arange(8, dtype=np.float32))
    for n, ns in ((0, 3), (8, 0), (0, 0)):
        db = DoubleBuffer(keys, FakeArray.empty(mem, 8, np.float32))
        offsets = FakeArray(mem, np.zeros(3, np.int32))
        kw = dict(d_in_keys=db, d_out_keys=None, d_in_values=None, d_out_values=None, num_items=n, num_segments=ns,
                  start_offsets_in=offsets, end_offsets_in=offsets)
        assert obj(temp_storage=None, **kw) == 1
        assert obj(temp_storage=FakeArray(mem, np.zeros(1, np.uint8)), **kw) is None
        cuprims.segmented_sort(**kw, order=ASC)
        assert db.selector == 0 and not dev.launches
    assert not fake.allocations


def test_one_shot_allocates_on_the_stream_and_stream_reaches_every_launch(fake):
    rng = np.random.default_rng(6)
    obj, dev = fake(np.int64, None, DESC)
    starts, ends, n = segments(LENGTHS * 2, rng)
    check(fake, obj, dev, random_keys(np.int64, n, rng), None, starts, ends, False, stream=77, one_shot=True)
    assert fake.allocations and all(stream == 77 for _, stream in fake.allocations)
    assert dev.launches and all(entry[3] == 77 for entry in dev.launches)


def test_call_time_argument_errors(fake):
    obj, dev = fake(np.int32, None, ASC)
    mem = fake.mem
    keys, out = FakeArray(mem, np.zeros(10, np.int32)), FakeArray.empty(mem, 10, np.int32)
    offs = FakeArray(mem, np.zeros(4, np.int32))
    base = dict(temp_storage=None, d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None,
                num_items=10, num_segments=4, start_offsets_in=offs, end_offsets_in=offs)
    for over, argument in (
            (dict(num_segments=1 << 31), "num_segments"),
            (dict(num_segments=-1), "num_segments"),
            (dict(num_items=-5), "num_items"),
            (dict(num_items=11), "d_in_keys"),                      # arrays shorter than num_items
            (dict(num_segments=5), "start_offsets_in"),             # offsets shorter than num_segments
            (dict(d_in_values=FakeArray(mem, np.zeros(10, np.int32)), d_out_values=out), "d_in_values"),
            (dict(d_out_keys=keys), "d_out_keys"),                  # the input itself (no in-place sort)
            (dict(end_offsets_in=FakeArray(mem, np.zeros(4, np.int64))), "end_offsets_in")):
        with pytest.raises(ArgumentError) as info:
            obj(**dict(base, **over))
        assert info.value.argument == argument, (over, str(info.value))
    assert not dev.launches


@pytest.mark.parametrize("offsets", [np.int32, np.int64, np.uint32, np.uint64])
def test_offset_width_follows_num_items(fake, offsets, monkeypatch):
    """32-bit kernels up to NARROW_MAX_ITEMS items whatever the offsets' type; past it, the
    offsets' own width (int32 offsets keep the narrow build, which addresses all they can)."""
    monkeypatch.setattr(ss, "NARROW_MAX_ITEMS", 2000)
    rng = np.random.default_rng(21)
    obj, dev = fake(np.int16, np.int32, ASC, offsets)
    for lengths, wide in ((LENGTHS * 3, False), (LENGTHS * 12, True)):
        starts, ends, n = segments(lengths, rng, offsets)
        assert (n > 2000) == wide
        check(fake, obj, dev, random_keys(np.int16, n, rng), np.arange(n, dtype=np.int32), starts, ends, False)
        assert set(dev.offset_sizes) == {8 if wide and offsets is not np.int32 else 4}
        assert sorted(obj._plans) == ([0, 1] if wide and offsets is not np.int32 else [0])
        dev.offset_sizes.clear()


@pytest.mark.parametrize("offsets", [np.int64, np.uint32, np.uint64])
def test_narrow_build_keeps_far_empty_segments_empty(fake, offsets):
    """Segments whose end lies at or below their start stay empty in the 32-bit build
    whatever their values (past 2^31, or negative): narrow_offsets clamps monotonically."""
    rng = np.random.default_rng(23)
    obj, dev = fake(np.float32, None, DESC, offsets)
    starts, ends, n = segments(LENGTHS * 2, rng, np.int64)
    far = [((1 << 32) - 100, 0), ((1 << 32) + 5, (1 << 32)), ((1 << 31), 7), ((1 << 31) + 9, (1 << 31) + 9)]
    if offsets is np.int64:
        far += [(1 << 40, 1 << 40), (5, -(1 << 40)), (-3, -3), ((1 << 62), -(1 << 62))]
    elif offsets is np.uint64:
        far += [((1 << 64) - 1, 0), ((1 << 64) - 1, (1 << 63))]
    if offsets is np.uint32:
        far = [(b, e) for b, e in far if b < (1 << 32) and e < (1 << 32)]
    starts = np.array(starts.tolist() + [b for b, _ in far], dtype=offsets)
    ends = np.array(ends.tolist() + [e for _, e in far], dtype=offsets)
    check(fake, obj, dev, random_keys(np.float32, n, rng), None, starts, ends, False)
    assert set(dev.offset_sizes) == {4}
