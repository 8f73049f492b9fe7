"""Unique-by-key on the CPU: ahead-of-time sm_90 builds of both variants (cuprims' kernel up to
2^31 - 1 items, CUB's beyond) for several types, iterators, Python/raw equalities, DiscardIterator
outputs; goldens, kernel parameters against the cubin, the temporary-storage layout, the dispatch
on a fake device (kernels emulated in numpy), the variant at 2^31 - 1 and 2^31, struct keys'
need of a Python equality (the other bad arguments: tests/cpu/reliability/test_bad_arguments.py)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

import cuprims
from cpu_helpers import (FakeArray, FakeMemory, FakePack, check_golden, check_kernel_params, check_variant_params,
                         render_source)
from cuprims import CountingIterator, DiscardIterator, OpKind, ProxyArray as P, TransformIterator
from cuprims import TransformOutputIterator
from cuprims._runtime import driver
from cuprims.algorithms import scratch
from cuprims.algorithms.unique_by_key import api as ubk
from cuprims.algorithms.unique_by_key.api import storage_layout
from cuprims.algorithms.skeleton import functor_size
from cuprims.errors import ArgumentError
from cuprims.op import OpSpec

i4, i8, f4 = np.int32, np.int64, np.float32
PAIR = cuprims.gpu_struct({"a": np.int32, "b": np.int32})


def _make(**over):
    kw = dict(d_in_keys=P(i4), d_in_items=P(f4), d_out_keys=P(i4), d_out_items=P(f4), d_out_num_selected=P(i8),
              op=OpKind.EQUAL_TO, compute_capability=90)
    kw.update(over)
    return cuprims.make_unique_by_key(**kw)


def _variant_build(obj, variant: int, raw=(None,)):
    return check_variant_params(obj, variant, raw)


def test_golden_and_parameters(shared_cache):
    obj = _make()
    check_golden("unique_by_key_i4_f4_equal_to_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    # cuprims' kernel: 32-bit counts in the tile states, no virtual shared memory
    assert meta["threads"] * meta["items"] >= 128 and meta["tile_word_bytes"] == 8 and meta["tile_padding"] > 0
    assert meta["vsmem_per_block"] == 0
    assert "cuprims::unique::unique_kernel" in obj._builds.source(90).name_expressions[1]
    # CUB's kernel past 2^31 - 1 items: 64-bit counts
    source, result = _variant_build(obj, 1)
    check_golden("unique_by_key_i4_f4_equal_to_wide_sm90", render_source(source))
    meta = result.meta
    assert meta["threads"] * meta["items"] >= 128 and meta["tile_word_bytes"] == 16 and meta["tile_padding"] > 0
    assert "DeviceUniqueByKeySweepKernel" in source.name_expressions[1]


def test_variants_and_their_parameters():
    desc = ubk.UniqueByKey._described(ubk._describe, P(i4), P(f4), P(i4), P(f4), P(i8), OpKind.EQUAL_TO)
    assert not desc.wide_offsets and desc.variant(0) is desc and desc.variant(1).wide_offsets
    narrow, wide = desc.kernel_params()[1], desc.variant(1).kernel_params()[1]
    assert narrow[7:] == ("i32", "i32") and wide[7:] == ("i64", "i32", "ptr") and narrow[:7] == wide[:7]


@pytest.mark.ci_sample(every=2)
@pytest.mark.parametrize("key, item, count", [
    (np.int8, np.float64, np.int32), (np.uint16, np.int16, np.uint32), (np.int64, np.uint8, np.uint64),
    (np.float64, PAIR.dtype, np.int64), (np.float16, np.float32, np.int64)])
def test_array_builds_of_several_types(shared_cache, key, item, count):
    obj = _make(d_in_keys=P(key), d_out_keys=P(key), d_in_items=P(item), d_out_items=P(item),
                d_out_num_selected=P(count))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    assert meta["threads"] * meta["items"] <= 65536  # the kernel's 16-bit positions within a tile


def test_struct_keys_python_equality_iterator_items_and_discard(shared_cache):
    obj = _make(d_in_keys=P(PAIR.dtype), d_out_keys=P(PAIR.dtype), d_in_items=CountingIterator(i8(0)),
                d_out_items=DiscardIterator(P(i8)), d_out_num_selected=P(np.uint32),
                op=lambda x, y: x.a == y.a and x.b == y.b)
    check_kernel_params(obj, 90)


def test_iterator_keys_discarded_keys_and_an_output_iterator(shared_cache):
    keys, items = TransformIterator(CountingIterator(i8(0)), lambda i: i // 3), CountingIterator(i4(0))
    out_keys, out_items = DiscardIterator(P(i8)), TransformOutputIterator(P(np.float64), lambda v: v * 2.0)
    obj = _make(d_in_keys=keys, d_out_keys=out_keys, d_in_items=items, d_out_items=out_items)
    check_kernel_params(obj, 90)
    _variant_build(obj, 1, (None, keys, items, out_keys, out_items))


def test_python_equality_on_scalar_keys_both_variants(shared_cache):
    def same_tens(a, b):
        return a // 10 == b // 10

    obj = _make(op=same_tens)
    check_kernel_params(obj, 90)
    _variant_build(obj, 1, (same_tens,))


def test_an_equality_capturing_a_device_array(shared_cache):
    width = P(i4)

    def same_bucket(a, b):
        return a // width[0] == b // width[0]

    obj = _make(op=same_bucket)
    check_kernel_params(obj, 90)  # the functor's state (the array's pointer and extent) is a parameter
    assert obj.desc.op.state_size > 0


def test_a_raw_equality_with_state_in_both_variants():
    raw = OpSpec("raw", "3" * 64, state_size=12, state_alignment=4, name="my_raw_eq")
    desc = dataclasses.replace(ubk._describe(P(i4), P(f4), P(i4), P(f4), P(i8), OpKind.EQUAL_TO), op=raw)
    for d in (desc, desc.variant(1)):  # sources only (a RawOp needs real LTO-IR to link)
        src = d.source(90)
        assert src.extern_symbols == ("my_raw_eq",) and "unsigned char bytes[12]" in src.text
        assert d.kernel_params()[1][6] == functor_size(raw) > 1


def test_struct_keys_need_a_python_equality():
    s = cuprims.gpu_struct({"q": i4})
    with pytest.raises(ArgumentError) as info:
        _make(d_in_keys=P(s.dtype), d_out_keys=P(s.dtype))
    assert info.value.argument == "op"


def test_storage_layout():
    plan = SimpleNamespace(tile_items=7168, padding=32, word_bytes=16, vsmem_per_block=0)
    tiles, vsmem_at, total = storage_layout(plan, 7168 * 10 + 1)
    assert tiles == 11 and vsmem_at >= 256 + (11 + 32) * 16 and total == vsmem_at
    assert storage_layout(plan, 0)[0] == 0 and storage_layout(plan, 0)[2] >= 256 + 33 * 16   # the init still runs
    plan.vsmem_per_block = 1024
    tiles, vsmem_at, total = storage_layout(plan, 7168 * 3)
    assert total == vsmem_at + 3 * 1024 and vsmem_at % 256 == 0


# ------------------------------------------------------------------ host dispatch on a fake device

# CUB's kernel past 2^31 - 1 items, with small tiles and virtual shared memory (a tuning
# where the agent's shared memory does not fit) so that a small input takes that path too
WIDE_META = dict(threads=32, items=3, vsmem_per_block=1024, tile_padding=32, tile_word_bytes=16)


def _wide_kernel(name: str) -> bool:
    """Whether a kernel (name expression) is one of CUB's 64-bit-offset build."""
    return "ScanTileState<long long>" in name or "DeviceUniqueByKeySweepKernel" in name


class FakeUniqueDevice:
    """Runs one object's launches on fake memory: the init readies the tile states and zeroes
    the count; the sweep is emulated tile by tile (heads from the keys, a tile's first against
    its predecessor, NaN never equal; a running count; each head's item read at its position)."""

    def __init__(self, mem: FakeMemory, desc, plans: dict):
        self.mem, self.desc, self.plans = mem, desc, plans
        self.launches: list[tuple] = []
        self.ready: dict[int, int] = {}

    def launch(self, kernel, grid, block, stream, params, shared=0):
        self.launches.append((kernel, grid, block, params))
        variant = int(_wide_kernel(kernel))
        plan = self.plans[variant]
        if "DeviceCompactInitKernel" in kernel:
            tile_state, ready, p_count = params
            assert tile_state % 256 == 0 and grid == -(-ready // block)
            self.mem.view(tile_state, np.uint8, (ready + plan.padding) * plan.word_bytes)[:] = 0
            self.ready[tile_state] = ready
            self.mem.view(p_count, self.desc.num_selected.value.dtype, 1)[:] = 0
            return
        kin, vin, kout, vout, p_count, tile_state, _, n, tiles, *vsmem = params
        assert len(vsmem) == variant and self.ready[tile_state] == tiles
        assert tiles == grid == -(-n // plan.tile_items) and block == plan.threads
        if variant and not plan.vsmem_per_block:
            assert vsmem == [0]
        elif variant:  # CUB's virtual shared memory: one region per block, after the tile states
            assert vsmem[0] % 256 == 0 and vsmem[0] >= tile_state + (tiles + plan.padding) * plan.word_bytes
            self.mem.view(vsmem[0], np.uint8, tiles * plan.vsmem_per_block)[:] = 1
        if not isinstance(kin, int):
            return  # an iterator's packed state: the launch is what is checked
        kd, vd = self.desc.keys_in.value.dtype, self.desc.items_in.value.dtype
        keys, items = self.mem.view(kin, kd, n), self.mem.view(vin, vd, n)
        total = 0
        for t in range(tiles):
            lo, hi = t * plan.tile_items, min(n, (t + 1) * plan.tile_items)
            tile = keys[lo:hi]
            heads = np.r_[t == 0 or bool(tile[0] != keys[lo - 1]), tile[1:] != tile[:-1]]
            at = lo + np.flatnonzero(heads)
            self.mem.view(kout + total * kd.itemsize, kd, at.size)[:] = keys[at]
            self.mem.view(vout + total * vd.itemsize, vd, at.size)[:] = items[at]
            total += at.size
        self.mem.view(p_count, self.desc.num_selected.value.dtype, 1)[:] = total


@pytest.fixture
def fake(monkeypatch, shared_cache):
    """make(wide_meta, **overrides) -> (object, device): an AOT-built object whose plans
    (cuprims' kernel: the build's metadata; CUB's: ``wide_meta``) launch on a FakeUniqueDevice."""
    mem = FakeMemory()
    allocations: list[int] = []

    monkeypatch.setattr(driver, "ParamPack", FakePack)
    monkeypatch.setattr(driver, "alloc_async", lambda nbytes, stream, device=-1: allocations.append(nbytes) or
                        mem.alloc(nbytes))
    monkeypatch.setattr(driver, "free_async", lambda ptr, stream: mem.free(ptr))

    def make(wide_meta=WIDE_META, **over):
        obj = _make(**over)
        metas = (obj._builds.result(90).meta, wide_meta)
        plans = {}
        for variant, meta in enumerate(metas):
            names = obj._builds_of(variant).source(90).name_expressions
            plans[variant] = ubk._Plan(SimpleNamespace(meta=meta, handles=names))
            plans[variant].device = 0
        obj._plans.update(plans)
        dev = FakeUniqueDevice(mem, obj.desc, plans)
        monkeypatch.setattr(driver, "launch", dev.launch)
        return obj, dev

    make.mem, make.allocations = mem, allocations
    return make


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("n_tiles, extra", [(0, 0), (0, 1), (1, -1), (1, 0), (1, 1), (3, 17)])
def test_fake_device_against_numpy(fake, monkeypatch, wide, n_tiles, extra):
    obj, dev = fake(d_in_keys=P(f4), d_out_keys=P(f4), d_in_items=P(i8), d_out_items=P(i8),
                    d_out_num_selected=P(np.uint32))
    tile = obj._plans[int(wide)].tile_items
    n = max(n_tiles * tile + extra, 0)
    if wide:  # CUB's kernel for a small input: lower the boundary for this test
        monkeypatch.setattr(ubk, "NARROW_MAX_ITEMS", -1)
    rng = np.random.default_rng(n)
    keys = np.sort(rng.integers(0, max(1, n // 5), n)).astype(f4)
    keys[rng.integers(0, max(n, 1), min(n, 3))] = np.nan  # NaN keys: each starts a run
    items = np.arange(n, dtype=i8) * 7
    mem = fake.mem
    k_in, v_in = FakeArray(mem, keys), FakeArray(mem, items)
    k_out, v_out, count = FakeArray(mem, np.zeros(n, f4)), FakeArray(mem, np.zeros(n, i8)), FakeArray(
        mem, np.full(1, 99, np.uint32))
    kw = dict(d_in_keys=k_in, d_in_items=v_in, d_out_keys=k_out, d_out_items=v_out, d_out_num_selected=count)
    nbytes = obj(temp_storage=None, num_items=n, **kw)
    temp = FakeArray(mem, np.zeros(nbytes, np.uint8))
    obj(temp_storage=temp, num_items=n, **kw)
    first = np.r_[np.ones(min(n, 1), bool), keys[1:] != keys[:-1]]  # NaN != NaN
    m = int(count.get()[0])
    assert m == first.sum()
    np.testing.assert_array_equal(k_out.get()[:m], keys[first])
    np.testing.assert_array_equal(v_out.get()[:m], items[first])
    kernels = [k for k, *_ in dev.launches]
    assert len(kernels) == (2 if n else 1) and all(_wide_kernel(k) == wide for k in kernels)
    tile_state = dev.launches[0][3][0]
    assert temp.ptr <= tile_state < temp.ptr + nbytes  # the tile states lie in the caller's storage
    # one shot on the legacy default stream: the buffer such calls share, allocated once and kept
    count.mem.view(count.ptr, np.uint32, 1)[:] = 99
    obj._run(None, k_in, v_in, k_out, v_out, count, None, n, None, True)
    assert fake.allocations == [max(nbytes, scratch._FIRST_BYTES)] and int(count.get()[0]) == m
    assert scratch._buffers[0][0] in fake.mem.blocks


def test_fake_device_variant_at_2_31(fake):
    keys, items = CountingIterator(i8(0)), CountingIterator(i8(0))
    # CUB's tile shape for these types, without virtual shared memory (2^31 items: 300k tiles)
    obj, dev = fake(dict(WIDE_META, threads=512, items=14, vsmem_per_block=0), d_in_keys=keys,
                    d_out_keys=DiscardIterator(P(i8)), d_in_items=items, d_out_items=DiscardIterator(P(i8)))
    count = FakeArray(fake.mem, np.zeros(1, i8))
    for n in ((1 << 31) - 1, 1 << 31):
        obj._run(None, keys, items, DiscardIterator(P(i8)), DiscardIterator(P(i8)), count, None, n, None, True)
    sweeps = [(k, p[7], len(p)) for k, _, _, p in dev.launches if "Compact" not in k]
    assert [("cuprims::unique" in k, n, size) for k, n, size in sweeps] == [
        (True, (1 << 31) - 1, 9), (False, 1 << 31, 10)]
    assert sorted(obj._plans) == [0, 1] and obj.desc.variant(1).wide_offsets
