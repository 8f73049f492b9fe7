"""find_if on the CPU: ahead-of-time sm_90 builds for several item and index types, Python,
raw-free built-in and captured-array predicates, iterators; a golden, kernel parameters
against the cubin, the dispatch on a fake device (the kernels emulated in numpy, the
search's blocks run last tile first), and bad arguments named before anything is compiled
or launched."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import cuprims
from cpu_helpers import FakeArray, FakeMemory, FakePack, check_golden, check_kernel_params, render_source
from cuprims import CountingIterator, OpKind, ProxyArray as P
from cuprims._runtime import driver
from cuprims.algorithms.find_if import api as fi
from cuprims.errors import ArgumentError

i4, i8, f4 = np.int32, np.int64, np.float32


def _make(**over):
    kw = dict(d_in=P(f4), d_out_index=P(i8), cond=lambda v: v > 0.5, compute_capability=90)
    kw.update(over)
    return cuprims.make_find_if(**kw)


def test_golden_and_parameters(shared_cache):
    obj = _make()
    check_golden("find_if_f4_gt_i8_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    assert meta["threads"] == 256 and meta["items"] == 16     # 64 bytes of float32 a thread


@pytest.mark.parametrize("item, index", [(np.int8, np.uint32), (np.uint16, i4), (np.float64, np.uint64),
                                         (np.complex64, i8)])
def test_builds_for_item_and_index_types(shared_cache, numba_ops, item, index):
    obj = _make(d_in=P(item), d_out_index=P(index), cond=lambda v: v != 0)
    check_kernel_params(obj, 90)
    assert obj._builds.result(90).meta["items"] == max(1, min(16, 64 // np.dtype(item).itemsize))


def test_identity_is_computed_in_the_unit(shared_cache):
    obj = _make(d_in=P(np.float16), cond=OpKind.IDENTITY)
    assert not obj._builds.source(90).extern_symbols and obj.cubin(90)[:4] == b"\x7fELF"


def test_iterator_input_and_a_captured_array(shared_cache):
    limit = P(i8)

    def beyond(v):
        return v >= limit[0]

    obj = _make(d_in=CountingIterator(i8(0)), cond=beyond)
    check_kernel_params(obj, 90)
    assert obj.desc.op.state_size > 0 and not obj.desc.d_in.is_pointer


@pytest.mark.parametrize("kw, argument", [
    (dict(cond=None), "cond"),
    (dict(cond=OpKind.PLUS), "cond"),
    (dict(d_out_index=P(np.int16)), "d_out_index"),
    (dict(d_out_index=P(f4)), "d_out_index"),
    (dict(d_out_index=CountingIterator(i8(0))), "d_out_index"),
])
def test_bad_build_arguments_are_named(shared_cache, kw, argument):
    with pytest.raises(ArgumentError) as info:
        _make(**kw)
    assert info.value.argument == argument


class FakeSearchDevice:
    """The two kernels in numpy. The search grid's blocks run one after another from the
    last block back, each taking its tiles in order and stopping as the kernel does: so a
    later match is found first and must be lowered by an earlier one."""

    def __init__(self, mem: FakeMemory, desc, plan, cond):
        self.mem, self.desc, self.plan, self.cond, self.launches, self.tiles_read = mem, desc, plan, cond, [], 0

    def launch(self, kernel, grid, block, stream, params, shared=0):
        self.launches.append((kernel, grid, block))
        index_t = self.desc.d_out_index.value.dtype
        if kernel == "init":
            p_index, n = params
            self.mem.view(p_index, index_t, 1)[0] = n
            return
        p_in, p_index, _, n, tiles = params
        tile = self.plan.tile_items
        assert kernel == "search" and block == self.plan.threads and tiles == -(-n // tile)
        assert grid == min(self.plan.grid, tiles)
        x, best = self.mem.view(p_in, self.desc.d_in.value.dtype, n), self.mem.view(p_index, index_t, 1)
        for b in reversed(range(grid)):
            for t in range(b, tiles, grid):
                if int(best[0]) <= t * tile:
                    break
                self.tiles_read += 1
                hits = np.flatnonzero(self.cond(x[t * tile:(t + 1) * tile]))
                if hits.size:
                    best[0] = min(int(best[0]), t * tile + int(hits[0]))
                    break


@pytest.fixture
def fake(monkeypatch, shared_cache):
    mem = FakeMemory()
    monkeypatch.setattr(driver, "ParamPack", FakePack)

    def make(grid):
        obj = _make(d_in=P(i4), d_out_index=P(i8), cond=lambda v: v > 0)
        meta = obj._builds.result(90).meta
        plan = fi._Plan.__new__(fi._Plan)
        plan.init, plan.search, plan.threads = "init", "search", meta["threads"]
        plan.tile_items, plan.grid, plan.device = meta["threads"] * meta["items"], grid, 0
        obj._plans[0] = plan
        dev = FakeSearchDevice(mem, obj.desc, plan, lambda v: v > 0)
        monkeypatch.setattr(driver, "launch", dev.launch)
        return obj, dev

    make.mem = mem
    return make


@pytest.mark.parametrize("tiles, grid, where", [(0, 4, []), (1, 4, []), (1, 4, [7]), (9, 4, [3]),
                                                (9, 4, [5000, 20000, 36000]), (9, 2, [36863]), (40, 3, [1, 150000])])
def test_fake_device_against_numpy(fake, tiles, grid, where):
    obj, dev = fake(grid)
    n = max(0, tiles * dev.plan.tile_items - 5)
    host = np.zeros(n, i4)
    host[[w for w in where if w < n]] = 1
    x, out = FakeArray(fake.mem, host), FakeArray(fake.mem, np.full(1, -1, i8))
    assert obj(temp_storage=None, d_in=x, d_out_index=out, num_items=n) == 1    # none needed: the least a query reports
    obj(temp_storage=FakeArray(fake.mem, np.zeros(1, np.uint8)), d_in=x, d_out_index=out, num_items=n)
    hits = np.flatnonzero(host)
    assert int(out.get()[0]) == (int(hits[0]) if hits.size else n)
    assert [k for k, *_ in dev.launches] == (["init", "search"] if n else ["init"])


def test_an_index_type_too_small_for_num_items_is_refused(fake):
    obj = _make(d_in=CountingIterator(i8(0)), d_out_index=P(i4), cond=lambda v: v < 0)
    launches = []
    with pytest.raises(ArgumentError) as info:
        obj(temp_storage=None, d_in=CountingIterator(i8(0)), d_out_index=FakeArray(fake.mem, np.zeros(1, i4)),
            num_items=1 << 31)
    assert info.value.argument == "d_out_index" and not launches
