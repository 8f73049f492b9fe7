"""Reduce-by-key on the CPU: ahead-of-time sm_90 builds for several key, value and
aggregate types, iterators, Python and built-in operators, struct values; a golden, kernel
parameters against the cubin, the tile states' layout, the dispatch on a fake device (the
kernels emulated in numpy), and bad arguments named before anything is compiled."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import cuprims
from cpu_helpers import (FakeArray, FakeMemory, check_golden, check_kernel_params, check_variant_params,
                         fake_driver_memory, render_source)
from cuprims import ConstantIterator, CountingIterator, DiscardIterator, OpKind, ProxyArray as P, TransformIterator
from cuprims._runtime import driver
from cuprims.algorithms.reduce_by_key import api as rbk
from cuprims.algorithms.reduce_by_key.api import storage_layout
from cuprims.errors import ArgumentError

i4, i8, f4, f8 = np.int32, np.int64, np.float32, np.float64
PAIR = cuprims.gpu_struct({"lo": np.float32, "hi": np.float32})


def _make(**over):
    kw = dict(d_in_keys=P(i4), d_in_values=P(f4), d_out_unique_keys=P(i4), d_out_aggregates=P(f4),
              d_out_num_runs=P(i8), reduction_op=OpKind.PLUS, compute_capability=90)
    kw.update(over)
    return cuprims.make_reduce_by_key(**kw)


def test_golden_and_parameters(shared_cache):
    obj = _make()
    check_golden("reduce_by_key_i4_f4_plus_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    # an (int offset, float) pair fits one 16-byte atomic word with its status
    assert meta["tile_bytes_per_tile"] == 16 and meta["tile_padding"] > 0 and meta["threads"] * meta["items"] >= 128
    assert meta["tile_fixed_bytes"] == meta["tile_padding"] * 16 + 256


@pytest.mark.ci_sample(every=2)
@pytest.mark.parametrize("key, value, aggregate, count", [
    (np.int64, np.float64, np.float64, np.int32), (np.uint8, np.int32, np.int64, np.uint64),
    (np.float32, np.int16, np.int32, np.int64), (np.int16, np.float16, np.float32, np.uint32)])
def test_array_builds_of_several_types(shared_cache, key, value, aggregate, count):
    obj = _make(d_in_keys=P(key), d_out_unique_keys=P(key), d_in_values=P(value), d_out_aggregates=P(aggregate),
                d_out_num_runs=P(count))
    check_kernel_params(obj, 90)


def test_run_lengths_from_a_constant_iterator_with_python_operators(shared_cache):
    obj = _make(d_in_values=ConstantIterator(i4(1)), d_out_aggregates=P(i4), reduction_op=lambda a, b: a + b,
                equality_op=lambda a, b: a == b)
    check_kernel_params(obj, 90)
    assert obj.desc.equality.kind == "python" and obj.desc.reduction.kind == "python"


def test_struct_values_iterator_keys_and_discarded_keys(shared_cache):
    def wider(a, b):
        return PAIR(min(a.lo, b.lo), max(a.hi, b.hi))

    keys = TransformIterator(CountingIterator(i8(0)), lambda i: i // 4)
    obj = _make(d_in_keys=keys, d_out_unique_keys=DiscardIterator(P(i8)), d_in_values=P(PAIR.dtype),
                d_out_aggregates=P(PAIR.dtype), reduction_op=wider)
    check_kernel_params(obj, 90)
    check_kernel_params(obj, 90)


def test_tile_states_of_a_wide_struct_fit_the_storage_the_host_sizes(shared_cache):
    triple = cuprims.gpu_struct({"a": f4, "b": f4, "c": f4})

    def first(a, b):
        return a

    obj = _make(d_in_values=P(triple.dtype), d_out_aggregates=P(triple.dtype), reduction_op=first)
    meta = obj._builds.result(90).meta
    per_tile, padding, fixed = meta["tile_bytes_per_tile"], meta["tile_padding"], meta["tile_fixed_bytes"]
    # a (int offset, 12-byte struct) pair is no atomic word: CUB's status words (4 bytes) and two
    # arrays of pairs, each starting at a 256-byte boundary of the 256-aligned storage
    check_kernel_params(obj, 90)
    status = 4
    pair = (per_tile - status) // 2
    assert pair >= 16
    for tiles in (1, 7, 1000, 12345):
        entries = tiles + padding
        needed = sum(-(-entries * size // 256) * 256 for size in (status, pair, pair))
        assert tiles * per_tile + fixed >= needed


def test_bad_arguments_are_named_before_anything_is_built():
    with pytest.raises(ArgumentError) as info:
        _make(reduction_op=None)
    assert info.value.argument == "reduction_op"
    s = cuprims.gpu_struct({"q": i4})
    with pytest.raises(ArgumentError) as info:   # struct keys: == is no equality for them
        _make(d_in_keys=P(s.dtype), d_out_unique_keys=P(s.dtype))
    assert info.value.argument == "equality_op"
    with pytest.raises(ArgumentError) as info:   # scalar values into struct aggregates
        _make(d_out_aggregates=P(PAIR.dtype), reduction_op=lambda a, b: a)
    assert info.value.argument == "d_in_values"
    with pytest.raises(ArgumentError) as info:
        _make(d_out_num_runs=P(f4))
    assert info.value.argument == "d_out_num_runs"
    with pytest.raises(ArgumentError) as info:   # a float key cannot be written as an int8 key
        _make(d_out_unique_keys=P(np.int8), d_in_keys=P(f4))
    assert info.value.argument == "d_out_unique_keys"


def test_storage_layout():
    plan = SimpleNamespace(tile_items=768, bytes_per_tile=16, fixed_bytes=32 * 16 + 256)
    assert storage_layout(plan, 768 * 10 + 1) == (11, 11 * 16 + 768)
    assert storage_layout(plan, 0) == (0, 16 + 768)    # the init still readies one (the run count is zeroed)


# ------------------------------------------------------------------ host dispatch on a fake device

class FakeReduceByKeyDevice:
    """The init readies the tile states and zeroes the run count; the sweep is emulated in
    numpy (runs of equal keys, NaN never equal, each reduced by addition)."""

    def __init__(self, mem: FakeMemory, desc, plan):
        self.mem, self.desc, self.plan = mem, desc, plan
        self.launches: list[tuple] = []
        self.ready: dict[int, tuple[int, int]] = {}

    def launch(self, kernel, grid, block, stream, params, shared=0):
        self.launches.append((kernel, grid, block, stream))
        plan = self.plan
        if kernel == "init":
            storage, ready, p_count = params
            assert storage % 256 == 0 and grid == -(-ready // block) and block == plan.init_threads
            nbytes = ready * plan.bytes_per_tile + plan.fixed_bytes
            self.mem.view(storage, np.uint8, nbytes)[:] = 0   # the tile states fit the storage
            self.ready[storage] = ready
            self.mem.view(p_count, self.desc.num_runs.value.dtype, 1)[:] = 0
            return
        kin, kout, vin, aout, p_count, storage, _, _, n, tiles = params
        assert self.ready[storage] == tiles and grid == tiles == -(-n // plan.tile_items)
        assert block == plan.threads
        kd, vd, ad = (a.value.dtype for a in (self.desc.keys_in, self.desc.values_in, self.desc.aggregates_out))
        keys, values = self.mem.view(kin, kd, n), self.mem.view(vin, vd, n)
        heads = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        self.mem.view(kout, kd, heads.size)[:] = keys[heads]
        self.mem.view(aout, ad, heads.size)[:] = np.add.reduceat(values.astype(ad), heads)
        self.mem.view(p_count, self.desc.num_runs.value.dtype, 1)[:] = heads.size


@pytest.fixture
def fake(monkeypatch, shared_cache):
    mem = fake_driver_memory(monkeypatch, skew=64)

    def make(**over):
        obj = _make(**over)
        meta = obj._builds.result(90).meta
        plan = rbk._Plan(SimpleNamespace(meta=meta, handles=("init", "sweep")))
        plan.device = 0
        obj._plans[0] = plan
        dev = FakeReduceByKeyDevice(mem, obj.desc, plan)
        monkeypatch.setattr(driver, "launch", dev.launch)
        return obj, dev

    make.mem = mem
    return make


@pytest.mark.parametrize("n_tiles, extra", [(0, 0), (0, 1), (1, 0), (3, 17)])
def test_fake_device_against_numpy(fake, n_tiles, extra):
    obj, dev = fake()
    n = max(n_tiles * obj._plans[0].tile_items + extra, 0)
    rng = np.random.default_rng(n)
    keys = np.sort(rng.integers(0, max(1, n // 5), n)).astype(i4)
    values = rng.random(n).astype(f4)
    mem = fake.mem
    kin, vin = FakeArray(mem, keys), FakeArray(mem, values)
    kout, aout, runs = FakeArray(mem, np.zeros(n, i4)), FakeArray(mem, np.zeros(n, f4)), FakeArray(mem, np.full(1, 9, i8))
    kw = dict(d_in_keys=kin, d_in_values=vin, d_out_unique_keys=kout, d_out_aggregates=aout, d_out_num_runs=runs,
              reduction_op=OpKind.PLUS, num_items=n)
    nbytes = obj(temp_storage=None, **kw)
    obj(temp_storage=FakeArray(mem, np.zeros(nbytes, np.uint8), skew=24), **kw)
    heads = np.flatnonzero(np.r_[np.ones(min(n, 1), bool), keys[1:] != keys[:-1]])
    m = int(runs.get()[0])
    assert m == heads.size
    np.testing.assert_array_equal(kout.get()[:m], keys[heads])
    np.testing.assert_allclose(aout.get()[:m], np.add.reduceat(values, heads) if n else [], rtol=1e-6)
    assert [k for k, *_ in dev.launches] == (["init", "sweep"] if n else ["init"])


def test_the_64_bit_offset_variants_build_with_their_parameters(shared_cache):
    obj = _make()
    desc = obj.desc
    assert not desc.wide_offsets and desc.variant(1).wide_offsets and desc.variant(0) is desc
    assert desc.kernel_params()[1][-2] == "i32" and desc.variant(1).kernel_params()[1][-2] == "i64"
    source, result = check_variant_params(obj, 1, (None, OpKind.PLUS))
    assert "long long" in source.name_expressions[1] and result.meta["threads"] * result.meta["items"] >= 128
    ntr = _make_non_trivial()
    source, _ = check_variant_params(ntr, 1, ())
    assert "long long" in source.name_expressions[1]
    rle = cuprims.make_run_length_encode(d_in=P(i4), d_out_unique=P(i4), d_out_counts=P(i8), d_out_num_runs=P(i8),
                                         compute_capability=90)
    source, _ = check_variant_params(rle, 1, ())
    assert source.name_expressions[1].endswith(", long long>")


def test_more_items_than_32_bit_offsets_count_take_the_wide_variant(fake, monkeypatch):
    iterators = dict(d_in_keys=CountingIterator(i4(0)), d_in_values=ConstantIterator(f4(1)),
                     d_out_unique_keys=DiscardIterator(P(i4)), d_out_aggregates=DiscardIterator(P(f4)))
    obj = _make(**iterators)
    raw = (None, OpKind.PLUS, iterators["d_in_keys"], iterators["d_in_values"], iterators["d_out_unique_keys"],
           iterators["d_out_aggregates"])
    for variant, names in ((0, ("init", "sweep")), (1, ("init-wide", "sweep-wide"))):
        meta = check_variant_params(obj, variant, raw)[1].meta
        obj._plans[variant] = rbk._Plan(SimpleNamespace(meta=meta, handles=names))
        obj._plans[variant].device = 0
    launches = []
    monkeypatch.setattr(driver, "launch", lambda kernel, grid, block, stream, params, shared=0:
                        launches.append((kernel, grid, params)))
    runs = FakeArray(fake.mem, np.zeros(1, i8))
    for n in ((1 << 31) - 1, 1 << 31):
        launches.clear()
        kw = dict(iterators, d_out_num_runs=runs, num_items=n)
        obj(temp_storage=FakeArray(fake.mem, np.zeros(obj(temp_storage=None, **kw), np.uint8)), **kw)
        wide = n > (1 << 31) - 1
        assert [k for k, *_ in launches] == (["init-wide", "sweep-wide"] if wide else ["init", "sweep"])
        plan = obj._plans[int(wide)]
        assert launches[1][1] == -(-n // plan.tile_items) and launches[1][2][-2] == n


# ------------------------------------------------------------------ run-length encoding

def test_run_length_encoding_has_its_own_one_pass_kernel(shared_cache):
    obj = cuprims.make_run_length_encode(d_in=P(f4), d_out_unique=P(f4), d_out_counts=P(np.uint32),
                                         d_out_num_runs=P(i8), compute_capability=90)
    check_kernel_params(obj, 90)
    assert isinstance(obj, rbk.RunLengthEncode) and obj.desc.counts_out.value.dtype == np.uint32
    sweep = obj.desc.source(90).name_expressions[1]
    assert sweep.startswith("cuprims::run_length::encode_kernel<") and ", unsigned int, long long, " in sweep
    # never the reduce-by-key object of the same types
    same = _make(d_in_keys=P(f4), d_out_unique_keys=P(f4), d_in_values=ConstantIterator(np.uint32(1)),
                 d_out_aggregates=P(np.uint32))
    assert type(same) is rbk.ReduceByKey and same.desc != obj.desc


def test_run_length_encoding_on_the_fake_device(fake, monkeypatch):
    obj = cuprims.make_run_length_encode(d_in=P(i4), d_out_unique=P(i4), d_out_counts=P(i8), d_out_num_runs=P(i8),
                                         compute_capability=90)
    meta = obj._builds.result(90).meta
    plan = rbk._Plan(SimpleNamespace(meta=meta, handles=("init", "sweep")))
    plan.device = 0
    obj._plans[0] = plan
    mem = fake.mem
    launches = []

    def launch(kernel, grid, block, stream, params, shared=0):
        launches.append(kernel)
        if kernel == "init":
            mem.view(params[2], i8, 1)[:] = 0
            return
        kin, kout, cout, p_count, _, _, n, _ = params
        x = mem.view(kin, i4, n)
        heads = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])
        mem.view(kout, i4, heads.size)[:] = x[heads]
        mem.view(cout, i8, heads.size)[:] = np.diff(np.r_[heads, n])
        mem.view(p_count, i8, 1)[:] = heads.size

    monkeypatch.setattr(driver, "launch", launch)
    x = np.repeat(np.arange(5, dtype=i4), [3, 1, 4, 1, 5])
    unique, counts, runs = FakeArray(mem, np.zeros(14, i4)), FakeArray(mem, np.zeros(14, i8)), FakeArray(mem, np.zeros(1, i8))
    call = dict(d_in=FakeArray(mem, x), d_out_unique=unique, d_out_counts=counts, d_out_num_runs=runs, num_items=x.size)
    obj(temp_storage=FakeArray(mem, np.zeros(obj(temp_storage=None, **call), np.uint8)), **call)
    assert launches == ["init", "sweep"] and int(runs.get()[0]) == 5
    assert unique.get()[:5].tolist() == [0, 1, 2, 3, 4] and counts.get()[:5].tolist() == [3, 1, 4, 1, 5]


# ------------------------------------------------------------------ runs of more than one item

def _make_non_trivial(**over):
    kw = dict(d_in=P(i4), d_out_offsets=P(i8), d_out_lengths=P(i4), d_out_num_runs=P(i8), compute_capability=90)
    kw.update(over)
    return cuprims.make_non_trivial_runs(**kw)


@pytest.mark.parametrize("item, offsets, lengths", [(i4, i8, i4), (f8, i4, np.uint64), (np.uint8, np.int16, i8)])
def test_non_trivial_runs_builds_of_several_types(shared_cache, item, offsets, lengths):
    obj = _make_non_trivial(d_in=P(item), d_out_offsets=P(offsets), d_out_lengths=P(lengths))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    assert meta["threads"] * meta["items"] >= 128 and meta["tile_bytes_per_tile"] >= 16


def test_non_trivial_runs_over_iterators(shared_cache):
    obj = _make_non_trivial(d_in=TransformIterator(CountingIterator(i8(0)), lambda i: i // 3),
                            d_out_offsets=DiscardIterator(P(i4)))
    check_kernel_params(obj, 90)


def test_non_trivial_runs_bad_arguments():
    for over, argument in [(dict(d_out_offsets=P(f4)), "d_out_offsets"), (dict(d_out_lengths=P(f8)), "d_out_lengths"),
                           (dict(d_out_num_runs=P(np.int16)), "d_out_num_runs"),
                           (dict(d_in=P(cuprims.gpu_struct({"q": i4}).dtype)), "d_in")]:
        with pytest.raises(ArgumentError) as info:
            _make_non_trivial(**over)
        assert info.value.argument == argument


def test_non_trivial_runs_on_the_fake_device(fake, monkeypatch):
    obj = _make_non_trivial()
    meta = obj._builds.result(90).meta
    plan = rbk._Plan(SimpleNamespace(meta=meta, handles=("init", "sweep")))
    plan.device = 0
    obj._plans[0] = plan
    mem = fake.mem
    launches = []

    def launch(kernel, grid, block, stream, params, shared=0):
        launches.append(kernel)
        if kernel == "init":
            storage, ready, p_count = params
            assert storage % 256 == 0 and ready >= 1
            mem.view(p_count, i8, 1)[:] = 0
            return
        kin, p_offsets, p_lengths, p_count, storage, _, n, tiles = params
        assert grid == tiles == -(-n // plan.tile_items) and block == plan.threads
        x = mem.view(kin, i4, n)
        heads = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])
        lengths = np.diff(np.r_[heads, n])
        long = lengths > 1
        mem.view(p_offsets, i8, int(long.sum()))[:] = heads[long]
        mem.view(p_lengths, i4, int(long.sum()))[:] = lengths[long]
        mem.view(p_count, i8, 1)[:] = long.sum()

    monkeypatch.setattr(driver, "launch", launch)
    for x in (np.repeat(np.arange(5, dtype=i4), [3, 1, 4, 1, 5]), np.zeros(0, i4)):
        n = x.size
        offsets, lengths = FakeArray(mem, np.zeros(max(n, 1), i8)), FakeArray(mem, np.zeros(max(n, 1), i4))
        runs = FakeArray(mem, np.full(1, 7, i8))
        call = dict(d_in=FakeArray(mem, x) if n else FakeArray(mem, np.zeros(1, i4)), d_out_offsets=offsets,
                    d_out_lengths=lengths, d_out_num_runs=runs, num_items=n)
        launches.clear()
        obj(temp_storage=FakeArray(mem, np.zeros(obj(temp_storage=None, **call), np.uint8)), **call)
        if n:
            assert launches == ["init", "sweep"] and int(runs.get()[0]) == 3
            assert offsets.get()[:3].tolist() == [0, 4, 9] and lengths.get()[:3].tolist() == [3, 4, 5]
        else:
            assert launches == ["init"] and int(runs.get()[0]) == 0
