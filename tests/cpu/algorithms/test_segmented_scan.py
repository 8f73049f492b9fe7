"""Segmented scans on the CPU: ahead-of-time sm_90 builds for several types, both
directions and every init kind, iterator offsets, Python operators and struct values; a
golden, kernel parameters against the cubin, the temporary storage's layout, the dispatch on
a fake device (the kernels emulated in numpy: the order check on the device, the extent from
the arrays), and bad arguments named before anything is compiled."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import cuprims
from cpu_helpers import FakeArray, FakeMemory, check_golden, check_kernel_params, fake_driver_memory, render_source
from cuprims import CountingIterator, OpKind, ProxyArray as P, TransformIterator
from cuprims._runtime import driver
from cuprims.algorithms.segmented_scan import api as ss
from cuprims.errors import ArgumentError

i4, i8, f4, f8 = np.int32, np.int64, np.float32, np.float64
PAIR = cuprims.gpu_struct({"lo": np.float32, "hi": np.float32})


def _make(inclusive=True, **over):
    kw = dict(d_in=P(f4), d_out=P(f4), start_offsets_in=P(i8), end_offsets_in=P(i8), op=OpKind.PLUS,
              compute_capability=90)
    kw.update(over)
    if inclusive:
        return cuprims.make_segmented_inclusive_scan(**kw)
    kw.setdefault("init_value", f4(0))
    return cuprims.make_segmented_exclusive_scan(**kw)


def test_golden_and_parameters(shared_cache):
    obj = _make()
    check_golden("segmented_scan_f4_i8_plus_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    assert meta["threads"] == 128 and meta["items"] == 24 and meta["tile_bytes_per_tile"] == 16


@pytest.mark.ci_sample(every=2)
@pytest.mark.parametrize("inclusive, value, out, offsets, init", [
    (True, np.int8, np.int64, i4, None), (False, np.float64, np.float64, i8, np.float64(1)),
    (False, np.int32, np.int32, np.uint32, "device"), (True, np.uint16, np.uint32, np.uint64, np.uint32(7))])
def test_builds_of_several_types(shared_cache, inclusive, value, out, offsets, init):
    over = dict(d_in=P(value), d_out=P(out), start_offsets_in=P(offsets), end_offsets_in=P(offsets))
    over["init_value"] = P(out) if init == "device" else init
    obj = _make(inclusive, **over)
    check_kernel_params(obj, 90)
    assert obj.desc.init_kind == ("device" if init == "device" else "none" if init is None else "value")


def test_iterator_offsets_python_operators_and_struct_values(shared_cache):
    def wider(a, b):
        return PAIR(min(a.lo, b.lo), max(a.hi, b.hi))

    starts = TransformIterator(CountingIterator(i8(0)), lambda i: i * 64)
    ends = TransformIterator(CountingIterator(i8(1)), lambda i: i * 64)
    obj = _make(d_in=P(PAIR.dtype), d_out=P(PAIR.dtype), start_offsets_in=starts, end_offsets_in=ends, op=wider)
    check_kernel_params(obj, 90)
    assert obj.desc.op.kind == "python"


def test_bad_arguments_are_named_before_anything_is_built():
    for over, argument in [(dict(op=None), "op"), (dict(start_offsets_in=P(f4)), "start_offsets_in"),
                           (dict(end_offsets_in=P(i4)), "end_offsets_in"), (dict(init_value=np.complex64(1)),
                                                                             "init_value")]:
        with pytest.raises(ArgumentError) as info:
            _make(**over)
        assert info.value.argument == argument
    with pytest.raises(ArgumentError) as info:
        _make(False, init_value=None)
    assert info.value.argument == "init_value"


def test_storage_layout():
    plan = SimpleNamespace(tile_items=3072, bytes_per_tile=16, fixed_bytes=768)
    assert ss.storage_layout(plan, 0) == (0, 512)             # the order flag alone
    assert ss.storage_layout(plan, 3072) == (1, 512)          # one tile: no tile states
    assert ss.storage_layout(plan, 3073) == (2, 512 + 2 * 16 + 768)


# ------------------------------------------------------------------ host dispatch on a fake device

def _reference(x, starts, ends, inclusive, init, dtype, out):
    for b, e in zip(starts.tolist(), ends.tolist()):
        if e > b:
            run = x[b:e].astype(dtype)
            if inclusive:
                out[b:e] = np.cumsum(run) if init is None else init + np.cumsum(run)
            else:
                out[b:e] = init + np.r_[0, np.cumsum(run)[:-1]]


class FakeSegmentedScanDevice:
    """The init kernel's order check and the scan emulated in numpy; records which way the
    scan kernel takes (by the flag and the epoch, as the device decides)."""

    def __init__(self, mem: FakeMemory, desc, plan):
        self.mem, self.desc, self.plan = mem, desc, plan
        self.launches: list[tuple] = []
        self.ways: list[str] = []

    def launch(self, kernel, grid, block, stream, params, shared=0):
        self.launches.append((kernel, grid, block))
        od, bd = self.desc.d_out.value.dtype, self.desc.begin.value.dtype
        if kernel == "init":
            states, tiles, p_begin, p_end, segments, extent, flag, epoch = params
            assert flag % 256 == 0 and states == flag + 256 and block == self.plan.init_threads
            assert grid * block >= tiles
            b = self.mem.view(p_begin, bd, segments).astype(np.int64)
            e = self.mem.view(p_end, bd, segments).astype(np.int64)
            bad = (b < 0) | ((e > b) & (e > extent))
            bad[1:] |= (b[1:] < b[:-1]) | (b[1:] < e[:-1])
            if bad.any():
                self.mem.view(flag, np.uint32, 1)[:] = epoch
            return
        p_in, p_out, p_begin, p_end, segments, extent, states, tiles, flag, epoch, _, init = params
        assert grid >= tiles == -(-extent // self.plan.tile_items) and block == self.plan.threads
        ordered = extent > 0 and int(self.mem.view(flag, np.uint32, 1)[0]) != epoch
        self.ways.append("ordered" if ordered else "whole segments")
        b = self.mem.view(p_begin, bd, segments)
        e = self.mem.view(p_end, bd, segments)
        size = int(max(e.max(), 0))
        x = self.mem.view(p_in, self.desc.d_in.value.dtype, size)
        first = None if self.desc.init_kind == "none" else np.frombuffer(init, od)[0]
        _reference(x, b, e, self.desc.inclusive, first, od, self.mem.view(p_out, od, size))


@pytest.fixture
def fake(monkeypatch, shared_cache):
    mem = fake_driver_memory(monkeypatch, skew=64)

    def make(inclusive=True, **over):
        obj = _make(inclusive, **over)
        meta = obj._builds.result(90).meta
        loaded = SimpleNamespace(meta=meta, handles=("init", "scan"), names=("i", "s"), device=0,
                                 module=SimpleNamespace(max_active_blocks=lambda name, threads: 2))
        monkeypatch.setattr(driver, "sm_count", lambda device: 4)
        plan = ss._Plan(loaded)
        plan.device = 0
        obj._plans[0] = plan
        dev = FakeSegmentedScanDevice(mem, obj.desc, plan)
        monkeypatch.setattr(driver, "launch", dev.launch)
        return obj, dev

    make.mem = mem
    return make


@pytest.mark.parametrize("inclusive", [True, False])
@pytest.mark.parametrize("shuffled", [False, True])
def test_fake_device_against_numpy(fake, inclusive, shuffled):
    obj, dev = fake(inclusive)
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 5000, 40)
    offsets = np.r_[0, np.cumsum(lengths)].astype(i8)
    starts, ends = offsets[:-1], offsets[1:]
    if shuffled:
        order = rng.permutation(40)
        starts, ends = starts[order], ends[order]
    n = int(offsets[-1])
    x = rng.random(n).astype(f4)
    mem = fake.mem
    out = FakeArray(mem, np.full(n, -1, f4))
    kw = dict(d_in=FakeArray(mem, x), d_out=out, start_offsets_in=FakeArray(mem, starts),
              end_offsets_in=FakeArray(mem, ends), num_segments=40)
    if not inclusive:
        kw["init_value"] = np.array([2.0], f4)
    nbytes = obj(temp_storage=None, **kw)
    obj(temp_storage=FakeArray(mem, np.zeros(nbytes, np.uint8), skew=24), **kw)
    want = np.full(n, -1, f4)
    _reference(x, starts, ends, inclusive, None if inclusive else 2.0, f4, want)
    np.testing.assert_allclose(out.get(), want, rtol=1e-4)
    assert dev.ways == ["whole segments" if shuffled else "ordered"]
    assert [k for k, *_ in dev.launches] == ["init", "scan"]


def test_offsets_shorter_than_num_segments_are_refused(fake):
    starts = TransformIterator(CountingIterator(i8(0)), lambda i: i * 10)
    obj, dev = fake(d_in=CountingIterator(f4(0)), d_out=P(f4), start_offsets_in=starts, end_offsets_in=P(i8))
    assert obj.desc.begin.unit is not None
    with pytest.raises(ArgumentError) as info:
        obj(temp_storage=None, d_in=CountingIterator(f4(0)), d_out=FakeArray(fake.mem, np.zeros(4, f4)),
            start_offsets_in=starts, end_offsets_in=FakeArray(fake.mem, np.zeros(1, i8)), num_segments=2)
    assert info.value.argument == "end_offsets_in"
