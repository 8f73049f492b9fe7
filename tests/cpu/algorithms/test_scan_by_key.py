"""Scan-by-key on the CPU: ahead-of-time sm_90 builds for several key, value and output
types, both directions and every init kind, iterators, Python and built-in operators,
struct values; a golden, kernel parameters against the cubin, the temporary storage's
layout, the dispatch on a fake device (the kernels emulated in numpy), and bad arguments
named before anything is compiled."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import cuprims
from cpu_helpers import (FakeArray, FakeMemory, check_golden, check_kernel_params, check_variant_params,
                         fake_driver_memory, render_source)
from cuprims import ConstantIterator, CountingIterator, DiscardIterator, OpKind, ProxyArray as P, TransformIterator
from cuprims._runtime import driver
from cuprims.algorithms.scan_by_key import api as sbk
from cuprims.errors import ArgumentError

i4, i8, f4, f8 = np.int32, np.int64, np.float32, np.float64
PAIR = cuprims.gpu_struct({"lo": np.float32, "hi": np.float32})


def _make(inclusive=True, **over):
    kw = dict(d_in_keys=P(i4), d_in_values=P(f4), d_out=P(f4), scan_op=OpKind.PLUS, compute_capability=90)
    kw.update(over)
    if inclusive:
        return cuprims.make_inclusive_scan_by_key(**kw)
    kw.setdefault("init_value", f4(0))
    return cuprims.make_exclusive_scan_by_key(**kw)


def test_golden_and_parameters(shared_cache):
    obj = _make()
    check_golden("scan_by_key_i4_f4_plus_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    # an (int flag, float) pair fits one 16-byte atomic word with its status; the tile states
    # are the reduce-by-key's
    assert meta["tile_bytes_per_tile"] == 16 and meta["threads"] * meta["items"] >= 128
    rbk = cuprims.make_reduce_by_key(d_in_keys=P(i4), d_in_values=P(f4), d_out_unique_keys=P(i4),
                                     d_out_aggregates=P(f4), d_out_num_runs=P(i8), reduction_op=OpKind.PLUS,
                                     compute_capability=90)
    other = rbk._builds.result(90).meta
    assert (meta["tile_bytes_per_tile"], meta["tile_fixed_bytes"]) == (other["tile_bytes_per_tile"],
                                                                        other["tile_fixed_bytes"])


@pytest.mark.ci_sample(every=2)
@pytest.mark.parametrize("inclusive, key, value, out, init", [
    (True, np.int64, np.float64, np.float64, None), (False, np.uint8, np.int32, np.int64, np.int64(5)),
    (False, np.float32, np.int16, np.int32, "device"), (True, np.int16, np.float16, np.float32, None)])
def test_array_builds_of_several_types(shared_cache, inclusive, key, value, out, init):
    over = dict(d_in_keys=P(key), d_in_values=P(value), d_out=P(out))
    if not inclusive:
        over["init_value"] = P(out) if init == "device" else init
    obj = _make(inclusive, **over)
    check_kernel_params(obj, 90)
    assert obj.desc.init_kind == ("none" if inclusive else "device" if init == "device" else "value")


def test_iterators_python_operators_and_struct_values(shared_cache):
    def wider(a, b):
        return PAIR(min(a.lo, b.lo), max(a.hi, b.hi))

    keys = TransformIterator(CountingIterator(i8(0)), lambda i: i // 4)
    obj = _make(d_in_keys=keys, d_in_values=P(PAIR.dtype), d_out=P(PAIR.dtype), scan_op=wider,
                equality_op=lambda a, b: a == b)
    check_kernel_params(obj, 90)
    assert obj.desc.equality.kind == "python" and obj.desc.op.kind == "python"
    counted = _make(False, d_in_values=ConstantIterator(i4(1)), d_out=DiscardIterator(P(i4)),
                    init_value=np.zeros(1, i4))
    check_kernel_params(counted, 90)


def test_bad_arguments_are_named_before_anything_is_built():
    with pytest.raises(ArgumentError) as info:
        _make(scan_op=None)
    assert info.value.argument == "scan_op"
    with pytest.raises(ArgumentError) as info:   # an exclusive scan needs its first output
        _make(False, init_value=None)
    assert info.value.argument == "init_value"
    with pytest.raises(ArgumentError) as info:   # a float64 init into float32 outputs is a narrowing
        _make(False, init_value=np.complex64(1))
    assert info.value.argument == "init_value"
    s = cuprims.gpu_struct({"q": i4})
    with pytest.raises(ArgumentError) as info:   # struct keys: == is no equality for them
        _make(d_in_keys=P(s.dtype))
    assert info.value.argument == "equality_op"
    with pytest.raises(ArgumentError) as info:   # scalar values into a struct scan
        _make(d_out=P(PAIR.dtype), scan_op=lambda a, b: a)
    assert info.value.argument == "d_in_values"


def test_storage_layout():
    plan = SimpleNamespace(tile_items=1000, bytes_per_tile=16, fixed_bytes=32 * 16 + 256, key_bytes=8)
    assert sbk.storage_layout(plan, 0) == (0, 0, 0)
    assert sbk.storage_layout(plan, 1000) == (1, 0, 0)     # one tile: no storage, no init
    tiles, keys_at, nbytes = sbk.storage_layout(plan, 1001)
    assert tiles == 2 and keys_at == 1024 and keys_at >= 2 * 16 + 768 and nbytes == 256 + 1024 + 2 * 8


# ------------------------------------------------------------------ host dispatch on a fake device

def _scan_by_key(keys, values, inclusive, init, dtype):
    """numpy's model: each run's own cumulative sum (exclusive: shifted, starting at init)."""
    out = np.empty(keys.size, dtype)
    heads = np.flatnonzero(np.r_[np.ones(min(keys.size, 1), bool), keys[1:] != keys[:-1]])
    for start, stop in zip(heads, np.r_[heads[1:], keys.size]):
        run = values[start:stop].astype(dtype)
        out[start:stop] = np.cumsum(run) if inclusive else init + np.r_[0, np.cumsum(run)[:-1]].astype(dtype)
    return out


class FakeScanByKeyDevice:
    """The init readies the tile states and copies each tile's preceding key; the sweep is
    emulated in numpy, and checks that every tile after the first has its preceding key."""

    def __init__(self, mem: FakeMemory, desc, plan):
        self.mem, self.desc, self.plan = mem, desc, plan
        self.launches: list[tuple] = []
        self.ready: dict[int, int] = {}

    def launch(self, kernel, grid, block, stream, params, shared=0):
        self.launches.append((kernel, grid, block, stream))
        plan, kd = self.plan, self.desc.keys_in.value.dtype
        if kernel == "init":
            storage, kin, before, tile_items, tiles = params
            assert storage % 256 == 0 and before % 256 == 0 and grid == -(-tiles // block)
            assert before >= storage + tiles * plan.bytes_per_tile + plan.fixed_bytes
            self.mem.view(storage, np.uint8, tiles * plan.bytes_per_tile + plan.fixed_bytes)[:] = 0
            keys = self.mem.view(kin, kd, (tiles - 1) * tile_items)
            self.mem.view(before, kd, tiles)[1:] = keys[tile_items - 1::tile_items]
            self.ready[storage] = tiles
            return
        kin, before, vin, out, storage, _, _, init, n, tiles = params
        assert grid == tiles == -(-n // plan.tile_items) and block == plan.threads
        if tiles > 1:
            assert self.ready[storage] == tiles
            keys = self.mem.view(kin, kd, n)
            np.testing.assert_array_equal(self.mem.view(before, kd, tiles)[1:],
                                          keys[plan.tile_items - 1:(tiles - 1) * plan.tile_items:plan.tile_items])
        else:
            assert storage == before == 0
        desc = self.desc
        od = desc.out.value.dtype
        first = None if desc.inclusive else np.frombuffer(init, od)[0]
        self.mem.view(out, od, n)[:] = _scan_by_key(self.mem.view(kin, kd, n),
                                                    self.mem.view(vin, desc.values_in.value.dtype, n),
                                                    desc.inclusive, first, od)


@pytest.fixture
def fake(monkeypatch, shared_cache):
    mem = fake_driver_memory(monkeypatch, skew=64)

    def make(inclusive=True, **over):
        obj = _make(inclusive, **over)
        meta = obj._builds.result(90).meta
        plan = sbk._Plan(SimpleNamespace(meta=meta, handles=("init", "sweep")), obj.desc.keys_in.value.size)
        plan.device = 0
        obj._plans[0] = plan
        dev = FakeScanByKeyDevice(mem, obj.desc, plan)
        monkeypatch.setattr(driver, "launch", dev.launch)
        return obj, dev

    make.mem = mem
    return make


@pytest.mark.parametrize("inclusive", [True, False])
@pytest.mark.parametrize("n_tiles, extra", [(0, 0), (0, 1), (1, 0), (1, 1), (3, 17)])
def test_fake_device_against_numpy(fake, inclusive, n_tiles, extra):
    obj, dev = fake(inclusive, d_in_keys=P(i8), d_out=P(f8))
    n = n_tiles * obj._plans[0].tile_items + extra
    rng = np.random.default_rng(n)
    keys = np.sort(rng.integers(0, max(1, n // 7), n)).astype(i8)
    values = rng.random(n).astype(f4)
    mem = fake.mem
    out = FakeArray(mem, np.zeros(n, f8))
    kw = dict(d_in_keys=FakeArray(mem, keys), d_in_values=FakeArray(mem, values), d_out=out, num_items=n)
    if not inclusive:
        kw["init_value"] = np.array([2.5])   # cuda.compute's way: a one-element numpy array
    nbytes = obj(temp_storage=None, **kw)
    obj(temp_storage=FakeArray(mem, np.zeros(nbytes, np.uint8), skew=24), **kw)
    np.testing.assert_allclose(out.get(), _scan_by_key(keys, values, inclusive, 2.5, f8), rtol=1e-12)
    tiles = -(-n // obj._plans[0].tile_items)
    assert [k for k, *_ in dev.launches] == (["init", "sweep"] if tiles > 1 else ["sweep"] if n else [])
    assert (nbytes > 1) == (tiles > 1)   # (a query answers at least 1 byte)


def test_calls_refuse_a_wrong_init_value(fake):
    kw = dict(d_in_keys=CountingIterator(i4(0)), d_in_values=ConstantIterator(f4(1)), d_out=DiscardIterator(P(f4)))
    obj, _ = fake(False, **kw)
    with pytest.raises(ArgumentError) as info:
        obj(temp_storage=None, num_items=10, **kw)   # built with a host value: the call must give one
    assert info.value.argument == "init_value"


def test_more_items_than_32_bit_offsets_count_take_the_wide_variant(fake, monkeypatch):
    iterators = dict(d_in_keys=CountingIterator(i4(0)), d_in_values=ConstantIterator(f4(1)),
                     d_out=DiscardIterator(P(f4)))
    obj = _make(**iterators)
    raw = (None, OpKind.PLUS, iterators["d_in_keys"], iterators["d_in_values"], iterators["d_out"])
    assert obj.desc.variant(1).kernel_params()[1][-2] == "i64" and obj.desc.kernel_params()[1][-2] == "i32"
    for variant, names in ((0, ("init", "sweep")), (1, ("init-wide", "sweep-wide"))):
        source, result = check_variant_params(obj, variant, raw)
        assert ("long long>" in source.name_expressions[1]) == bool(variant)
        obj._plans[variant] = sbk._Plan(SimpleNamespace(meta=result.meta, handles=names), 4)
        obj._plans[variant].device = 0
    launches = []
    monkeypatch.setattr(driver, "launch", lambda kernel, grid, block, stream, params, shared=0:
                        launches.append((kernel, grid, params)))
    for n in ((1 << 31) - 1, 1 << 31):
        launches.clear()
        kw = dict(iterators, num_items=n)
        obj(temp_storage=FakeArray(fake.mem, np.zeros(obj(temp_storage=None, **kw), np.uint8)), **kw)
        wide = n > (1 << 31) - 1
        assert [k for k, *_ in launches] == (["init-wide", "sweep-wide"] if wide else ["init", "sweep"])
        assert launches[1][1] == -(-n // obj._plans[int(wide)].tile_items) and launches[1][2][-2] == n
