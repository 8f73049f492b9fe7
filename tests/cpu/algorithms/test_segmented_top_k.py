"""Segmented top-k on the CPU: ahead-of-time sm_90 builds for every key kind, pairs, both
orders, offset arrays and iterators; a golden, kernel parameters against the cubin, the
exported tiles; the dispatch on a fake device whose kernel is a numpy model of the
header's radix select (ranks, 8-bit passes with the early stop, the kept items in row
order), checked against numpy's sort; and bad arguments named before anything is compiled."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import cuprims
from cpu_helpers import FakeArray, FakeMemory, FakePack, check_golden, check_kernel_params, render_source
from cuprims import CountingIterator, ProxyArray as P, SortOrder, TransformIterator
from cuprims._runtime import driver
from cuprims.algorithms.segmented_top_k import api as st
from cuprims.algorithms.segmented_top_k.source import MAX_K, TIERS, tier_shapes
from cuprims.errors import ArgumentError

i4, i8, f4, f8 = np.int32, np.int64, np.float32, np.float64


def _make(**over):
    kw = dict(d_in_keys=P(f4), d_out_keys=P(f4), d_in_values=P(i4), d_out_values=P(i4), compute_capability=90)
    kw.update(over)
    return cuprims.make_segmented_top_k(**kw)


def test_golden_parameters_and_tiles(shared_cache):
    obj = _make()
    check_golden("segmented_top_k_f4_i4_fixed_descending_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    assert meta["max_k"] == MAX_K
    assert [meta[f"tile_{i}"] for i in range(len(TIERS))] == [(32 if w else t) * n for t, n, w in TIERS]
    assert [meta[f"rows_{i}"] for i in range(len(TIERS))] == [t // 32 if w else 1 for t, n, w in TIERS]
    assert TIERS[0][2] and not TIERS[-1][2]     # short rows a warp each, the longest a block


@pytest.mark.parametrize("key", [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.float16, i4, np.uint32, f4,
                                 i8, np.uint64, f8])
def test_builds_for_every_key_kind(shared_cache, key):
    obj = _make(d_in_keys=P(key), d_out_keys=P(key), d_in_values=None, d_out_values=None,
                order=SortOrder.ASCENDING)
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    shapes = tier_shapes(obj.desc.d_in_keys.value)
    assert [meta[f"tile_{i}"] for i in range(len(TIERS))] == [(32 if w else t) * n for t, n, w in shapes]
    assert obj.desc.fixed and obj.desc.order is SortOrder.ASCENDING


@pytest.mark.parametrize("offsets", ["int64 arrays", "int32 arrays", "iterators"])
def test_builds_for_offsets(shared_cache, offsets):
    if offsets == "iterators":
        begin = TransformIterator(CountingIterator(i8(0)), lambda i: i * 300)
        end = TransformIterator(CountingIterator(i8(1)), lambda i: i * 300)
    else:
        t = i8 if offsets == "int64 arrays" else i4
        begin, end = P(t), P(t)
    obj = _make(d_in_keys=P(f8), d_out_keys=P(f8), d_in_values=P(np.complex64), d_out_values=P(np.complex64),
                start_offsets_in=begin, end_offsets_in=end)
    check_kernel_params(obj, 90)
    assert not obj.desc.fixed


@pytest.mark.parametrize("kw, argument", [
    (dict(order="sideways"), "order"),
    (dict(d_in_keys=P(np.complex64), d_out_keys=P(np.complex64)), "d_in_keys"),
    (dict(d_in_keys=P(cuprims.gpu_struct({"a": i4})), d_out_keys=P(cuprims.gpu_struct({"a": i4}))), "d_in_keys"),
    (dict(d_out_keys=P(f8)), "d_out_keys"),
    (dict(d_out_values=None), "d_out_values"),
    (dict(d_in_values=None), "d_out_values"),
    (dict(start_offsets_in=P(i8)), "end_offsets_in"),
    (dict(end_offsets_in=P(i8)), "start_offsets_in"),
    (dict(start_offsets_in=P(f4), end_offsets_in=P(f4)), "start_offsets_in"),
    (dict(start_offsets_in=P(i8), end_offsets_in=P(i4)), "end_offsets_in"),
])
def test_bad_build_arguments_are_named(shared_cache, kw, argument):
    with pytest.raises(ArgumentError) as info:
        _make(**kw)
    assert info.value.argument == argument


# -- the kernel's algorithm in numpy ---------------------------------------------------

_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def ranks(keys: np.ndarray, descending: bool) -> np.ndarray:
    """The header's rank_of: unsigned words whose order is the wanted one."""
    bits_t = _UNSIGNED[keys.dtype.itemsize]
    b = keys.view(bits_t)
    nbits = 8 * keys.dtype.itemsize
    high = bits_t(1 << (nbits - 1))
    if keys.dtype.kind == "i":
        r = b ^ high
    elif keys.dtype.kind == "f":
        inf = np.array([np.inf], keys.dtype).view(bits_t)[0]
        mag = b & bits_t(~high)
        r = np.where(b & high, ~b, b | high).astype(bits_t)
        r = np.where(mag == 0, high, r)
        r = np.where(mag > inf, bits_t(~bits_t(0)), r).astype(bits_t)
    else:
        r = b.copy()
    return r if descending else ~r


def model_row(r: np.ndarray, k: int, nbits: int) -> np.ndarray:
    """Row positions of the kept keys in output order, as the kernel finds them."""
    n, take = r.size, min(r.size, k)
    if take == 0:
        return np.zeros(0, np.int64)
    r = r.astype(np.uint64)
    prefix = mask = 0
    need = take
    if n > k:
        for shift in range(nbits - 8, -1, -8):
            cand = (r & np.uint64(mask)) == np.uint64(prefix)
            hist = np.bincount(((r[cand] >> np.uint64(shift)) & np.uint64(255)).astype(np.int64), minlength=256)
            before = 0
            for digit in range(255, -1, -1):
                c = int(hist[digit])
                if c and before < need <= before + c:
                    break
                before += c
            prefix |= digit << shift
            mask |= 255 << shift
            exact, need = before + c == need, need - before
            if exact:
                break
    m = r & np.uint64(mask)
    above, on = m > np.uint64(prefix), m == np.uint64(prefix)
    keep = above | (on & ((np.cumsum(on) - on) < need))
    kept = np.nonzero(keep)[0]
    assert kept.size == take
    return kept[np.lexsort((kept, ~r[kept]))]   # larger ranks first, then row order


class FakeTopKDevice:
    """The tiers' kernel in numpy: the groups' strides over the rows as the header walks
    them (group i of G takes rows i, i + G, ... in batches of its threads), ``model_row``
    for each row of the tier's range of lengths; each row taken by one group only."""

    def __init__(self, mem: FakeMemory, desc, plan):
        self.mem, self.desc, self.plan, self.launches = mem, desc, plan, []

    def launch(self, kernel, grid, block, stream, params, shared=0):
        tier = self.plan.kernels.index(kernel)
        assert block == self.plan.threads[tier]
        k_in, k_out, v_in, v_out, begin, end, k, segments, lo, hi = params
        per_block = self.plan.rows[tier]
        assert grid == min(-(-segments // per_block), self.plan.caps[tier])
        self.launches.append((tier, segments))
        groups, group = grid * per_block, block // per_block
        visits = [row for first in range(groups) for batch in range(first, segments, groups * group)
                  for row in range(batch, batch + group * groups, groups) if row < segments]
        assert sorted(visits) == list(range(segments))     # the strides meet every row once
        grid = segments
        d = self.desc
        kt, vt = d.d_in_keys.value.dtype, None if d.d_in_values is None else d.d_in_values.value.dtype
        if d.fixed:
            starts = np.arange(grid, dtype=np.int64) * begin
            ends = starts + end
        else:
            starts = self.mem.view(begin, d.begin.value.dtype, grid).astype(np.int64)
            ends = self.mem.view(end, d.end.value.dtype, grid).astype(np.int64)
        total = int(max(ends.max(initial=0), starts.max(initial=0)))
        keys = self.mem.view(k_in, kt, total)
        out = self.mem.view(k_out, kt, grid * k)
        for row in range(grid):
            n = max(0, ends[row] - starts[row])
            if not lo < n <= hi:
                continue
            assert d.fixed or tier == len(TIERS) - 1 or n <= self.plan.tiles[tier]
            row_keys = keys[starts[row]:starts[row] + n]
            picked = model_row(ranks(row_keys, d.order is SortOrder.DESCENDING), k, 8 * kt.itemsize)
            out[row * k:row * k + picked.size] = row_keys[picked]
            if vt is not None:
                vals = self.mem.view(v_in, vt, total)
                self.mem.view(v_out, vt, grid * k)[row * k:row * k + picked.size] = vals[starts[row] + picked]


@pytest.fixture
def fake(monkeypatch, shared_cache):
    mem = FakeMemory()
    monkeypatch.setattr(driver, "ParamPack", FakePack)
    monkeypatch.setattr(driver, "sm_count", lambda device: 2)

    def make(**over):
        obj = _make(**over)
        meta = obj._builds.result(90).meta
        names = tuple(f"tier{i}" for i in range(len(TIERS)))
        module = SimpleNamespace(max_active_blocks=lambda name, threads: 1)
        plan = st._Plan(SimpleNamespace(meta=meta, handles=names, names=names, module=module, device=0), obj.desc)
        assert plan.caps == (2 * st.WAVES,) * len(TIERS)     # two SMs, a block each: many rows a group
        plan.device = 0
        obj._plans[0] = plan
        dev = FakeTopKDevice(mem, obj.desc, plan)
        monkeypatch.setattr(driver, "launch", dev.launch)
        return obj, dev

    make.mem = mem
    return make


def _reference(x: np.ndarray, k: int, descending: bool) -> np.ndarray:
    """Row positions of the first k of numpy's stable sort of the row in ``order`` (NaNs
    last ascending; descending: the reversed stable sort of the reversed row, so NaNs first
    and equal keys still in row order)."""
    if descending:
        return (x.size - 1 - np.argsort(x[::-1], kind="stable"))[::-1][:k]
    return np.argsort(x, kind="stable")[:k]


@pytest.mark.parametrize("key", [np.int8, np.uint16, i4, f4, f8, np.float16])
@pytest.mark.parametrize("order", [SortOrder.DESCENDING, SortOrder.ASCENDING])
def test_fake_device_fixed_rows_against_numpy(fake, key, order):
    obj, dev = fake(d_in_keys=P(key), d_out_keys=P(key), order=order)
    rng = np.random.default_rng(1)
    for size, k in ((5, 5), (300, 8), (300, 1), (2049, 64), (256, 0), (40, 40)):
        rows = 100 if size <= 300 else 3     # 100 rows: more than the fake caps, so groups stride
        if np.dtype(key).kind == "f":
            host = rng.integers(-20, 20, rows * size).astype(key)   # many ties, -0.0 among zeros
            host[rng.random(host.size) < 0.05] = np.nan
            host[rng.random(host.size) < 0.05] = -0.0
        else:
            info = np.iinfo(key)
            host = rng.integers(max(info.min, -50), min(info.max, 50), rows * size).astype(key)
        x = FakeArray(fake.mem, host)
        cols = FakeArray(fake.mem, np.tile(np.arange(size, dtype=i4), rows))
        out_k = FakeArray(fake.mem, np.zeros(max(rows * k, 1), key))
        out_v = FakeArray(fake.mem, np.full(max(rows * k, 1), -1, i4))
        kw = dict(d_in_keys=x, d_out_keys=out_k, d_in_values=cols, d_out_values=out_v, k=k, num_segments=rows,
                  segment_size=size)
        assert obj(temp_storage=None, **kw) == 1
        dev.launches.clear()
        obj(temp_storage=FakeArray(fake.mem, np.zeros(1, np.uint8)), **kw)
        tier = st.tier_of(dev.plan.tiles, size)
        assert dev.launches == ([] if k == 0 else [(tier, rows)])
        got_k, got_v = out_k.get()[:rows * k].reshape(rows, k), out_v.get()[:rows * k].reshape(rows, k)
        for row in range(rows):
            xr = host[row * size:(row + 1) * size]
            want = _reference(xr, k, order is SortOrder.DESCENDING)
            np.testing.assert_array_equal(got_k[row], xr[want])
            assert got_v[row].tolist() == want.tolist()  # ties: the earlier keys, in row order


@pytest.mark.parametrize("begin_t", [i4, i8])
def test_fake_device_offset_rows_launch_every_tier(fake, begin_t):
    obj, dev = fake(d_in_values=None, d_out_values=None, start_offsets_in=P(begin_t), end_offsets_in=P(begin_t))
    tiles = dev.plan.tiles
    lengths = [0, 1, 7, 8, tiles[0], tiles[0] + 1, tiles[1], tiles[1] + 1, tiles[2] + 3]
    offsets = np.r_[0, np.cumsum(lengths)].astype(begin_t)
    rng = np.random.default_rng(2)
    host = rng.standard_normal(int(offsets[-1])).astype(f4)
    k = 8
    x = FakeArray(fake.mem, host)
    out = FakeArray(fake.mem, np.full(len(lengths) * k, 99, f4))
    off = FakeArray(fake.mem, offsets)
    starts = SimpleNamespace(__cuda_array_interface__={**off.__cuda_array_interface__, "shape": (len(lengths),)})
    ends = SimpleNamespace(__cuda_array_interface__={**off.__cuda_array_interface__,
                                                      "data": (off.ptr + offsets.itemsize, False),
                                                      "shape": (len(lengths),)})
    obj(temp_storage=FakeArray(fake.mem, np.zeros(1, np.uint8)), d_in_keys=x, d_out_keys=out, k=k,
        num_segments=len(lengths), start_offsets_in=starts, end_offsets_in=ends)
    assert dev.launches == [(i, len(lengths)) for i in range(len(TIERS))]
    got = out.get().reshape(len(lengths), k)
    for row, n in enumerate(lengths):
        xr = host[offsets[row]:offsets[row + 1]]
        take = min(n, k)
        np.testing.assert_array_equal(got[row, :take], -np.sort(-xr)[:take])
        assert (got[row, take:] == 99).all()     # a short row leaves its other slots alone


def test_nothing_is_launched_for_no_rows_or_k_0(fake):
    obj, dev = fake(d_in_values=None, d_out_values=None)
    x = FakeArray(fake.mem, np.ones(16, f4))
    out = FakeArray(fake.mem, np.zeros(16, f4))
    obj(temp_storage=FakeArray(fake.mem, np.zeros(1, np.uint8)), d_in_keys=x, d_out_keys=out, k=0, num_segments=4,
        segment_size=4)
    obj(temp_storage=FakeArray(fake.mem, np.zeros(1, np.uint8)), d_in_keys=x, d_out_keys=out, k=2, num_segments=0,
        segment_size=4)
    assert dev.launches == []


@pytest.mark.parametrize("kw, argument", [
    (dict(k=5), "k"),                                  # more than segment_size
    (dict(k=MAX_K + 1, segment_size=MAX_K + 1), "k"),
    (dict(k=-1), "k"),
    (dict(k=2.0), "k"),
    (dict(num_segments=-1), "num_segments"),
    (dict(num_segments=1 << 31), "num_segments"),
    (dict(segment_size=None), "segment_size"),
    (dict(segment_size=(1 << 30) + 1, num_segments=1), "segment_size"),   # rows of at most 2^30 keys
    (dict(start_offsets_in=np.zeros(2, i8)), "start_offsets_in"),
    (dict(d_in_values=None), "d_in_values"),
    (dict(num_segments=8), "d_in_keys"),               # 8 rows of 4 keys do not fit 16 keys
])
def test_bad_call_arguments_are_named(fake, kw, argument):
    obj, dev = fake()
    x, v = FakeArray(fake.mem, np.ones(16, f4)), FakeArray(fake.mem, np.ones(16, i4))
    args = dict(d_in_keys=x, d_out_keys=FakeArray(fake.mem, np.zeros(8, f4)), d_in_values=v,
                d_out_values=FakeArray(fake.mem, np.zeros(8, i4)), k=2, num_segments=4, segment_size=4)
    args.update(kw)
    with pytest.raises(ArgumentError) as info:
        obj(temp_storage=None, **args)
    assert info.value.argument == argument and not dev.launches


def test_one_shot_needs_exactly_one_way_of_rows(shared_cache):
    kw = dict(d_in_keys=P(f4), d_out_keys=P(f4), k=1, num_segments=1)
    with pytest.raises(ArgumentError) as info:
        cuprims.segmented_top_k(**kw)
    assert info.value.argument == "segment_size"
    with pytest.raises(ArgumentError) as info:
        cuprims.segmented_top_k(segment_size=4, start_offsets_in=P(i8), end_offsets_in=P(i8), **kw)
    assert info.value.argument == "segment_size"


def test_an_offset_object_refuses_a_segment_size(fake):
    obj, dev = fake(d_in_values=None, d_out_values=None, start_offsets_in=P(i8), end_offsets_in=P(i8))
    x = FakeArray(fake.mem, np.ones(16, f4))
    with pytest.raises(ArgumentError) as info:
        obj(temp_storage=None, d_in_keys=x, d_out_keys=x, k=1, num_segments=1, segment_size=4)
    assert info.value.argument == "segment_size"
