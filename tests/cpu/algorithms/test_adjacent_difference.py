"""Adjacent difference on the CPU: ahead-of-time sm_90 builds for several types, both
directions, Python and built-in operators, iterators; a golden, kernel parameters against
the cubin, the dispatch on a fake device (the kernels emulated in numpy, tiles run in the
order that overwrites an in-place neighbour first), and bad arguments named before anything
is compiled or launched."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import cuprims
from cpu_helpers import FakeArray, FakeMemory, check_golden, check_kernel_params, fake_driver_memory, render_source
from cuprims import CountingIterator, DiscardIterator, OpKind, ProxyArray as P
from cuprims._runtime import driver
from cuprims.algorithms.adjacent_difference import api as ad
from cuprims.errors import ArgumentError

i4, i8, f4, f8 = np.int32, np.int64, np.float32, np.float64


def _make(**over):
    kw = dict(d_in=P(f4), d_out=P(f4), op=OpKind.MINUS, compute_capability=90)
    kw.update(over)
    return cuprims.make_adjacent_difference(**kw)


def test_golden_and_parameters(shared_cache):
    obj = _make()
    check_golden("adjacent_difference_f4_minus_left_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    assert meta["threads"] == 256 and meta["items"] == 8     # 32 bytes of float32 a thread


@pytest.mark.parametrize("direction", ["left", "right"])
@pytest.mark.parametrize("in_t, out_t, op", [(np.int8, np.int8, OpKind.MINUS), (np.uint16, np.int32, OpKind.MINUS),
                                             (i8, i8, OpKind.MAXIMUM), (f8, f8, OpKind.MINUS),
                                             (f4, f8, lambda a, b: a * b + 1.0)])
def test_builds_for_types_directions_and_operators(shared_cache, direction, in_t, out_t, op):
    obj = _make(d_in=P(in_t), d_out=P(out_t), op=op, direction=direction)
    check_kernel_params(obj, 90)
    assert obj.desc.left == (direction == "left")
    assert obj._builds.result(90).meta["items"] == max(1, min(16, 32 // np.dtype(in_t).itemsize))


def test_iterators_in_and_out(shared_cache):
    obj = _make(d_in=CountingIterator(np.int64(5)), d_out=DiscardIterator(P(i8)), op=OpKind.MINUS)
    check_kernel_params(obj, 90)
    assert not obj.desc.d_in.is_pointer and not obj.desc.d_out.is_pointer


@pytest.mark.parametrize("kw, argument", [
    (dict(direction="up"), "direction"),
    (dict(direction=1), "direction"),
    (dict(op=None), "op"),
    (dict(op=OpKind.MINUS, d_out=P(np.bool_), d_in=P(np.bool_)), "op"),
])
def test_bad_build_arguments_are_named(shared_cache, kw, argument):
    with pytest.raises(ArgumentError) as info:
        _make(**kw)
    assert info.value.argument == argument


class FakeDifferenceDevice:
    """The two kernels in numpy. The difference kernel runs its tiles in the order that
    harms an in-place call most: a tile's neighbour is overwritten before the tile reads it
    (left: from the last tile back; right: from the first on), so only the saved copies
    give the right answer."""

    def __init__(self, mem: FakeMemory, desc, plan):
        self.mem, self.desc, self.plan, self.launches = mem, desc, plan, []

    def launch(self, kernel, grid, block, stream, params, shared=0):
        self.launches.append((kernel, grid, block))
        dt, ot = self.desc.d_in.value.dtype, self.desc.d_out.value.dtype
        tile = self.plan.tile_items
        left = self.desc.left
        if kernel == "save":
            p_in, saved, n, tiles = params
            assert grid * block >= tiles
            x, s = self.mem.view(p_in, dt, n), self.mem.view(saved, dt, tiles)
            for t in range(tiles):
                if left and t > 0:
                    s[t] = x[t * tile - 1]
                elif not left and t < tiles - 1:
                    s[t] = x[(t + 1) * tile]
            return
        p_in, p_out, saved, _, n, tiles = params
        assert kernel == "difference" and grid == tiles == -(-n // tile) and block == self.plan.threads
        x, y = self.mem.view(p_in, dt, n), self.mem.view(p_out, ot, n)
        for t in (reversed(range(tiles)) if left else range(tiles)):
            a, b = t * tile, min(n, (t + 1) * tile)
            items = x[a:b].copy()
            if left:
                before = None if t == 0 else (self.mem.view(saved, dt, tiles)[t] if saved else x[a - 1])
                prev = np.r_[[before] if before is not None else [], items[:-1]].astype(dt)
                out = items - prev if before is not None else np.r_[items[:1], items[1:] - items[:-1]]
            else:
                after = None if t == tiles - 1 else (self.mem.view(saved, dt, tiles)[t] if saved else x[b])
                nxt = np.r_[items[1:], [after] if after is not None else []].astype(dt)
                out = items[: nxt.size] - nxt
                out = np.r_[out, items[nxt.size:]]
            y[a:b] = out.astype(ot)


@pytest.fixture
def fake(monkeypatch, shared_cache):
    mem = fake_driver_memory(monkeypatch, skew=64)

    def make(**over):
        obj = _make(d_in=P(i8), d_out=P(i8), **over)
        plan = ad._Plan(SimpleNamespace(meta=obj._builds.result(90).meta, handles=("save", "difference")))
        plan.device = 0
        obj._plans[0] = plan
        dev = FakeDifferenceDevice(mem, obj.desc, plan)
        monkeypatch.setattr(driver, "launch", dev.launch)
        return obj, dev

    make.mem = mem
    return make


@pytest.mark.parametrize("direction", ["left", "right"])
@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("extra_tiles, extra", [(0, 0), (0, 1), (1, 0), (3, 5)])
def test_fake_device_against_numpy(fake, direction, in_place, extra_tiles, extra):
    obj, dev = fake(direction=direction)
    n = extra_tiles * dev.plan.tile_items + extra
    host = (np.arange(n, dtype=i8) ** 2) % 1009
    x = FakeArray(fake.mem, host)
    y = x if in_place else FakeArray(fake.mem, np.zeros(max(n, 1), i8))
    need = obj(temp_storage=None, d_in=x, d_out=y, num_items=n)
    tiles = -(-n // dev.plan.tile_items)
    assert need == (tiles * 8 if in_place and n else 1)     # the query reports at least a byte
    obj(temp_storage=FakeArray(fake.mem, np.zeros(max(need, 1), np.uint8)), d_in=x, d_out=y, num_items=n)
    want = host.copy()
    if n > 1:
        want[1:] = np.diff(host) if direction == "left" else want[1:]
        if direction == "right":
            want[:-1] = host[:-1] - host[1:]
    assert y.get()[:n].tolist() == want.tolist()
    kernels = [k for k, *_ in dev.launches]
    assert kernels == ([] if n == 0 else ["save", "difference"] if in_place and tiles > 1 else ["difference"])


def test_an_output_overlapping_the_input_elsewhere_is_refused(fake):
    obj, dev = fake()
    host = np.arange(100, dtype=i8)
    x = FakeArray(fake.mem, host)
    shifted = SimpleNamespace(__cuda_array_interface__={**x.__cuda_array_interface__,
                                                         "data": (x.ptr + 8, False), "shape": (99,)})
    with pytest.raises(ArgumentError) as info:
        obj(temp_storage=None, d_in=x, d_out=shifted, num_items=99)
    assert info.value.argument == "d_out" and not dev.launches
