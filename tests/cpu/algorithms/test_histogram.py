"""histogram_even without a GPU: ahead-of-time sm_90 builds (uint8, int32, float32, int8
and iterator samples), a golden source, kernel parameters against the cubin, the exported
policy, CUB's common type checked against the compiler, the one-shot call's arguments (the
builder's bad arguments: tests/cpu/reliability/test_bad_arguments.py), and the host dispatch
(grid, temporary storage, launches, build variants) against a fake device that emulates
CUB's two kernels."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import cuprims
from cuprims import CountingIterator, ProxyArray as P, TransformIterator
from cuprims._build.build import build
from cuprims._codegen.common import meta_export, preamble
from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims._value_types import value_type
from cuprims.algorithms.histogram import api as hist_mod
from cuprims.algorithms.histogram import plan as plan_mod
from cuprims.algorithms.histogram.bins import common_dtype, widened_samples
from cuprims.algorithms.sort_common import temp_layout
from cuprims.errors import ArgumentError, CuprimsError
from cpu_helpers import (FakeArray, FakeMemory, FakePack, check_golden, check_kernel_params, render_source)

ELF = b"\x7fELF"
NUMERIC = ("i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8")


def twice(v):
    return v + v


def _make(samples, counters_dtype=np.int32, num_levels=257, lower=np.int32(0), upper=np.int32(256), n=1 << 20,
          **kw):
    return cuprims.make_histogram_even(d_samples=samples, d_histogram=P(counters_dtype),
                                       h_num_output_levels=np.array([num_levels], np.int32),
                                       h_lower_level=np.array([lower]), h_upper_level=np.array([upper]),
                                       num_samples=n, compute_capability=90, **kw)


BUILDS = {
    "u1": lambda: _make(P(np.uint8)),
    "i4-1024-bins": lambda: _make(P(np.int32), num_levels=1025, lower=np.int32(-512), upper=np.int32(512)),
    "f4": lambda: _make(P(np.float32), num_levels=65, lower=np.float32(0), upper=np.float32(1)),
    "iterator": lambda: _make(TransformIterator(P(np.float32), twice, np.float32), np.uint64, 101,
                              np.float64(-1), np.float64(1)),
    "i1-wide": lambda: _make(P(np.int8), np.int64, 17, np.int16(-128), np.int16(128), n=1 << 32),
    "i1-300-bins": lambda: _make(P(np.int8), num_levels=301, lower=np.int16(-128), upper=np.int16(128)),
    "i2-70000-bins": lambda: _make(P(np.int16), num_levels=70001, lower=np.int32(-35000), upper=np.int32(35000)),
}


# ------------------------------------------------------------------ builds

@pytest.mark.ci_sample(every=2)
@pytest.mark.parametrize("case", sorted(BUILDS))
def test_ahead_of_time_builds_match_their_cubin(shared_cache, case):
    obj = BUILDS[case]()
    desc = obj.desc
    assert obj.cubin()[:4] == ELF and obj.compute_capabilities == [90]
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    assert 32 <= meta["threads"] <= 1024 and meta["threads"] % 32 == 0 and 1 <= meta["pixels"] <= 64
    assert meta["byte_bins"] == plan_mod.SMEM_BINS and meta["init_threads"] == 256
    assert meta["counter_size"] == desc.d_histogram.value.size == desc.counter.size
    assert meta["offset_size"] == (8 if desc.wide_offsets else 4)
    assert meta["global_privatized"] == desc.global_bins  # CUB's policies all prefer shared memory
    assert meta["work_stealing"] == 0  # the sweep never reads the tile queue: one-shot calls share a scratch word
    # 8-bit integer samples, int8 too, privatize their 256 bit patterns, whatever the bins
    assert desc.byte_path == (case in ("u1", "i1-wide", "i1-300-bins"))
    if case == "u1":  # CUB's sm_90 tuning for one-byte samples and 4-byte counters
        assert (meta["threads"], meta["pixels"]) == (768, 12)
    if case == "i1-wide":
        assert desc.counter.code == "u8" and desc.wide_offsets and not desc.global_bins
    sweep = obj._builds.source(90).name_expressions[1]
    assert desc.widened == (case == "i2-70000-bins") and ("widened_samples<" in sweep) == desc.widened
    # CUB's pass-through hands each privatized bin on cast to the sample type: ours restores it
    assert sweep.endswith(("cuprims::histogram::byte_bits, cuprims_scale_t, cuprims_offset_t, true>"
                           if desc.byte_path else
                           "cuprims_scale_t, cuprims::histogram::bin_index_pass_thru, cuprims_offset_t, true>"))
    # integer samples between integer levels bin exactly, in cuprims' scale
    scale = "exact_scale<" if desc.d_samples.value.kind in "iu" and desc.level.dtype.kind in "iu" else "clamped_scale<"
    assert f"using cuprims_scale_t = cuprims::histogram::{scale}" in obj._builds.source(90).text
    if case == "i4-1024-bins":
        assert desc.global_bins and "DeviceHistogramSweepDeviceInitKernel<cuprims_selector_t, 0," in \
            obj._builds.source(90).name_expressions[1]


def test_golden_source(shared_cache):
    obj = BUILDS["u1"]()
    check_golden("histogram_even_u1_i4_levels_i4_sm90", render_source(obj._builds.source(90)))


def test_variants_flip_the_first_calls_choices(shared_cache):
    desc = BUILDS["u1"]().desc
    assert not desc.wide_offsets and not desc.global_bins and desc.variant(0) is desc
    assert desc.variant(1).wide_offsets and not desc.variant(1).global_bins
    assert desc.variant(3).wide_offsets and desc.variant(3).global_bins
    wide = BUILDS["i1-wide"]().desc
    assert not wide.variant(1).wide_offsets
    assert [k[-3] for k in (desc.kernel_params()[1], desc.variant(1).kernel_params()[1])] == ["i32", "i64"]
    narrow = BUILDS["i4-1024-bins"]().desc
    assert narrow.variant(4).widened and not narrow.variant(4).wide_offsets and narrow.variant(4).global_bins
    assert narrow.variant(4).kernel_params() == narrow.kernel_params()  # the widening iterator wraps the pointer


@pytest.mark.parametrize("dtype, bins, widened", [(np.int8, 256, False), (np.int8, 257, True),
                                                  (np.uint16, 65536, False), (np.int16, 65537, True),
                                                  (np.int32, 1 << 30, False), (np.float32, 1 << 20, False)])
def test_samples_are_widened_when_bins_outgrow_their_type(dtype, bins, widened):
    assert widened_samples(np.dtype(dtype), bins) == widened


def test_common_type_is_the_compilers():
    """histogram.bins.common_dtype against cuda::std::common_type_t and CUB's IntArithmeticT, for
    every pair of sample and level types."""
    pairs = [(s, lv) for s in NUMERIC for lv in NUMERIC]
    body, fields = "", []
    for k, (s, lv) in enumerate(pairs):
        st, lt = value_type(np.dtype(s)).cpp, value_type(np.dtype(lv)).cpp
        body += (f"using t{k} = CUB_NS_QUALIFIER::detail::histogram::Transforms<{lt}, int, {st}>::ScaleTransform;\n"
                 f"using c{k} = t{k}::CommonT;\n")
        fields += [(f"{k}s", f"sizeof(c{k})"), (f"{k}f", f"::cuda::std::is_floating_point_v<c{k}> || "
                                                       f"::cuda::std::is_same_v<c{k}, __half>"),
                   (f"{k}u", f"::cuda::std::is_unsigned_v<c{k}>"), (f"{k}a", f"sizeof(t{k}::IntArithmeticT)")]
    text = preamble((value_type(np.float16),), 90) + "#include <histogram/cuprims_histogram.cuh>\n" + body + \
        meta_export(tuple(fields))
    meta = build(Source(text=text, name_expressions=(), extern_symbols=(), meta_fields=tuple(f for f, _ in fields)),
                 90, (), ()).meta
    for k, (s, lv) in enumerate(pairs):
        c = common_dtype(np.dtype(s), np.dtype(lv))
        got = (meta[f"{k}s"], bool(meta[f"{k}f"]), bool(meta[f"{k}u"]))
        assert got == (c.itemsize, c.kind == "f", c.kind == "u"), (s, lv, c, got)
        if c.kind != "f":
            assert meta[f"{k}a"] == (4 if np.dtype(s).itemsize + c.itemsize <= 4 else 8), (s, lv)


# ------------------------------------------------------------------ bad arguments

class FakeDeviceArray:
    def __init__(self, n, typestr="<i4", ptr=0x7F0000000000):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (n,), "typestr": typestr, "version": 3,
                                         "strides": None}


GOOD = dict(d_samples=P(np.uint8), d_histogram=P(np.int32), h_num_output_levels=np.array([257], np.int32),
            h_lower_level=np.array([0], np.int32), h_upper_level=np.array([256], np.int32), num_samples=1000,
            compute_capability=90)
i4 = np.int32


def test_missing_keyword_and_one_shot_names():
    with pytest.raises(CuprimsError) as info:
        cuprims.make_histogram_even(**{k: v for k, v in GOOD.items() if k != "num_samples"})
    assert info.value.argument == "num_samples"
    one_shot = dict(d_samples=FakeDeviceArray(10, "|u1"), d_histogram=FakeDeviceArray(4), num_output_levels=5,
                    lower_level=np.int32(0), upper_level=np.int32(256), num_samples=10)
    for over, argument in ((dict(num_output_levels=1), "num_output_levels"), (dict(lower_level="a"), "lower_level"),
                           (dict(upper_level=np.float32(np.inf)), "upper_level"),
                           (dict(d_histogram=FakeDeviceArray(3)), "d_histogram")):
        with pytest.raises(ArgumentError) as info:
            cuprims.histogram_even(**{**one_shot, **over})
        assert info.value.argument == argument, over


def test_call_checks_come_before_the_device(shared_cache):
    obj = BUILDS["u1"]()
    call = dict(temp_storage=None, d_samples=FakeDeviceArray(100, "|u1"), d_histogram=FakeDeviceArray(256),
                h_num_output_levels=np.array([257], i4), h_lower_level=np.array([0], i4),
                h_upper_level=np.array([256], i4), num_samples=100)
    for over, argument in ((dict(h_lower_level=np.array([0.5]), h_upper_level=np.array([256.0])),
                            "h_lower_level"),                      # the build bins integral levels exactly
                           (dict(h_num_output_levels=np.array([258], i4)), "d_histogram"),
                           (dict(h_upper_level=np.array([0], i4)), "h_lower_level"),
                           (dict(d_samples=FakeDeviceArray(100, "<i4")), "d_samples"),
                           (dict(num_samples=101), "d_samples")):
        with pytest.raises(ArgumentError) as info:
            obj(**{**call, **over})
        assert info.value.argument == argument, over


# ------------------------------------------------------------------ host dispatch on a fake device

def cub_bins(samples: np.ndarray, bins: int, lower: np.generic, upper: np.generic) -> np.ndarray:
    """The counts CUB's scale gives (in the common type; a float bin rounding up to ``bins``
    goes to the last bin, as cuprims' clamped scale does)."""
    common = common_dtype(samples.dtype, lower.dtype)
    if common.kind == "f":
        with np.errstate(all="ignore"):
            x, lo, hi = samples.astype(common), common.type(lower), common.type(upper)
            keep = (x >= lo) & (x < hi)
            b = ((x[keep] - lo) * (common.type(bins) / (hi - lo))).astype(np.int64)
        b = np.minimum(b, bins - 1)
    else:
        x, lo, hi = samples.astype(object), int(lower), int(upper)
        keep = (x >= lo) & (x < hi)
        b = ((x[keep] - lo) * bins // (hi - lo)).astype(np.int64)
    return np.bincount(b, minlength=bins)


class FakeHistogramDevice:
    """Emulates CUB's init and sweep kernels; a kernel handle is (role, description, meta)."""

    def __init__(self, mem: FakeMemory):
        self.mem, self.launches, self.queue = mem, [], None
        self.scratch = mem.alloc(8)  # the device's tile-queue scratch word (plan.queue_scratch)

    def launch(self, kernel, grid, block, stream, params, shared=0, pdl=False):
        role, desc, meta = kernel
        self.launches.append((role, grid, block, stream, pdl, desc))
        getattr(self, "_" + role)(desc, meta, grid, block, *params)

    def _init(self, desc, meta, grid, block, bins, p_hist, queue):
        assert block == meta["init_threads"] and grid == -(-bins // block)
        self.mem.view(p_hist, desc.d_histogram.value.dtype, bins)[:] = 0
        self.mem.view(queue, np.int32, 2)[:] = 0  # ResetDrain: the queue is 8 bytes of temporary storage
        self.queue = queue

    def _sweep(self, desc, meta, grid, block, samples, bins, per_block, p_hist, privatized, upper, lower, n, rows,
               stride, tiles, queue):
        tile = meta["threads"] * meta["pixels"]
        assert block == meta["threads"] and queue == self.queue and (rows, stride) == (1, n)
        waves = 2 if desc.byte_path else 1  # occupancy 3 x 4 SMs, two waves of byte-sample blocks
        assert tiles == -(-n // tile) and grid == min(tiles, 3 * 4 * waves) > 0
        assert per_block == (256 if desc.byte_path else bins)
        counter = desc.d_histogram.value.dtype
        if meta["global_privatized"]:  # every block's counters lie in temporary storage, before the queue
            self.mem.view(privatized, counter, grid * per_block)[:] = 7
            assert privatized + grid * per_block * counter.itemsize <= queue
        if not desc.d_samples.is_pointer:
            return
        level = desc.level.dtype
        lo, hi = np.frombuffer(lower, level)[0], np.frombuffer(upper, level)[0]
        x = self.mem.view(samples, desc.d_samples.value.dtype, n)
        self.mem.view(p_hist, counter, bins)[:] += cub_bins(x, bins, lo, hi).astype(counter)

    def _one_block(self, desc, meta, grid, block, samples, bins, p_hist, upper, lower, n):
        # one block counts every sample and stores every bin: nothing zeroes the histogram first
        assert (grid, block) == (1, meta["one_block_threads"]) and bins <= 256
        if not desc.d_samples.is_pointer:
            return
        level, counter = desc.level.dtype, desc.d_histogram.value.dtype
        lo, hi = np.frombuffer(lower, level)[0], np.frombuffer(upper, level)[0]
        x = self.mem.view(samples, desc.d_samples.value.dtype, n)
        self.mem.view(p_hist, counter, bins)[:] = cub_bins(x, bins, lo, hi).astype(counter)


def _fake_meta(desc, overrides):
    meta = dict(threads=32, pixels=3, byte_bins=256, init_threads=256, global_privatized=int(desc.global_bins),
                counter_size=desc.counter.size, offset_size=8 if desc.wide_offsets else 4, work_stealing=0,
                one_block_threads=256)
    meta.update(overrides)
    return meta


@pytest.fixture
def fake(monkeypatch):
    """make(samples dtype or iterator, counters dtype, levels, lower, upper, **meta) -> histogram object."""
    mem = FakeMemory()
    dev = FakeHistogramDevice(mem)
    allocations = []

    def builds_of(self, variant):
        desc = self.desc.variant(variant)
        meta = _fake_meta(desc, self._fake_overrides)
        loaded = SimpleNamespace(module=SimpleNamespace(max_active_blocks=lambda name, threads, smem=0: 3),
                                 handles=(("init", desc, meta), ("sweep", desc, meta), ("one_block", desc, meta)),
                                 names=("init", "sweep", "one_block"),
                                 meta=meta, device=0, arch=90, extra={})
        return SimpleNamespace(build_for=lambda archs, objs: None, loaded=lambda device, objs=None: loaded)

    def alloc_async(nbytes, stream, device=-1):
        ptr = mem.alloc(nbytes, skew=64)  # not 256-aligned: the layout aligns its base
        allocations.append((ptr, nbytes, stream))
        return ptr

    def launch_pdl(kernel, grid, block, stream, params):
        dev.launch(kernel, grid, block, stream, params, pdl=True)
        return True

    monkeypatch.setattr(hist_mod.HistogramEven, "_builds_of", builds_of)
    # the init kernel and the sweep for every size (the tests written for them); the tests of
    # the one-block path set the threshold back
    monkeypatch.setattr(plan_mod, "ONE_BLOCK_SAMPLES", -1)
    monkeypatch.setattr(plan_mod, "queue_scratch", lambda device: dev.scratch)
    monkeypatch.setattr(driver, "ParamPack", FakePack)
    monkeypatch.setattr(driver, "current_device", lambda: 0)
    monkeypatch.setattr(driver, "compute_capability", lambda device: (9, 0))
    monkeypatch.setattr(driver, "sm_count", lambda device: 4)
    monkeypatch.setattr(driver, "launch", dev.launch)
    monkeypatch.setattr(driver, "launch_pdl", launch_pdl)
    monkeypatch.setattr(driver, "alloc_async", alloc_async)
    monkeypatch.setattr(driver, "free_async", lambda ptr, stream: mem.free(ptr))

    def make(samples, counter=np.int32, num_levels=257, lower=np.int32(0), upper=np.int32(256), n=1000, **meta):
        monkeypatch.setattr(hist_mod.HistogramEven, "_fake_overrides", meta, raising=False)
        return _make(samples if not isinstance(samples, type) else P(samples), counter, num_levels, lower, upper, n)

    make.mem, make.dev, make.allocations = mem, dev, allocations
    return make


def _run(obj, mem, samples: np.ndarray, counter, num_levels, lower, upper, *, caller_temp=False, stream=None):
    x, hist = FakeArray(mem, samples), FakeArray(mem, np.full(num_levels - 1, 99, counter))
    args = dict(d_samples=x, d_histogram=hist, h_num_output_levels=np.array([num_levels], np.int32),
                h_lower_level=np.array([lower]), h_upper_level=np.array([upper]), num_samples=samples.size)
    if caller_temp:
        nbytes = obj(temp_storage=None, **args)
        obj(temp_storage=FakeArray(mem, np.zeros(nbytes, np.uint8), skew=24), stream=stream, **args)
    else:
        hist_mod.histogram_even(d_samples=x, d_histogram=hist, num_output_levels=num_levels, lower_level=lower,
                                upper_level=upper, num_samples=samples.size, stream=stream)
    return hist.get()


@pytest.mark.parametrize("n", [0, 1, 95, 96, 97, 1000, 5000])
@pytest.mark.parametrize("caller_temp", [False, True])
def test_fake_device_bytes(fake, n, caller_temp):
    obj = fake(np.uint8)
    samples = np.random.default_rng(n).integers(0, 256, n).astype(np.uint8)
    got = _run(obj, fake.mem, samples, np.int32, 257, np.int32(0), np.int32(256), caller_temp=caller_temp)
    assert got.tolist() == np.bincount(samples, minlength=256).tolist()
    roles = [(role, grid) for role, grid, *_ in fake.dev.launches]
    assert roles == ([("init", 1)] if n == 0 else [("init", 1), ("sweep", min(-(-n // 96), 2 * 12))])  # two waves
    assert all(pdl for *_, pdl, _ in fake.dev.launches)  # sm_90, settings.pdl on
    if not caller_temp:  # no allocation: the tile queue is the device's scratch word (counters in shared memory)
        assert fake.allocations == [] and fake.dev.queue == fake.dev.scratch
    else:  # the object API's queue lies in the caller's temporary storage, as CUB lays it out
        assert fake.dev.queue != fake.dev.scratch


@pytest.mark.parametrize("dtype,levels,lower,upper", [
    (np.int32, 1001, np.int32(-300), np.int32(700)),            # global privatized counters
    (np.int32, 11, np.int64(-3), np.int64(1 << 40)),            # wide level type
    (np.int8, 17, np.int16(-128), np.int16(128)),               # negative int8 samples are counted
    (np.uint16, 300, np.uint16(7), np.uint16(60000)),
    (np.uint64, 5, np.uint64(0), np.uint64(1 << 61)),
    (np.float32, 8, np.float32(-1.5), np.float32(2.25)),
    (np.float64, 3, np.float64(0.1), np.float64(0.7)),
    (np.float16, 300, np.float16(-2), np.float16(3)),
    (np.float32, 8, np.int32(-3), np.int32(5)),                 # integer levels for float samples
])
def test_fake_device_scale_path(fake, dtype, levels, lower, upper):
    rng = np.random.default_rng(levels)
    n = 4000
    if np.dtype(dtype).kind == "f":
        samples = (rng.random(n) * 6 - 3).astype(dtype)
        samples[:4] = [np.nan, np.inf, -np.inf, upper]
    else:
        info = np.iinfo(dtype)
        samples = rng.integers(max(info.min, -400), min(info.max, 1 << 62) + 1, n, dtype=np.int64).astype(dtype)
        edges = [int(v) for v in (lower, upper, info.max, int(upper) - 1) if info.min <= int(v) <= info.max]
        samples[:len(edges)] = edges
    obj = fake(dtype, np.uint32, levels, lower, upper)
    assert obj.desc.global_bins == (levels - 1 > 256)
    got = _run(obj, fake.mem, samples, np.uint32, levels, lower, upper, caller_temp=True)
    assert got.tolist() == cub_bins(samples, levels - 1, lower, upper).tolist()
    if obj.desc.global_bins:  # CUB's size: every block's counters, then the queue, each 256-aligned
        grid = 12
        assert obj(temp_storage=None, d_samples=FakeArray(fake.mem, samples), d_histogram=FakeArray(
            fake.mem, np.zeros(levels - 1, np.uint32)), h_num_output_levels=np.array([levels]),
            h_lower_level=np.array([lower]), h_upper_level=np.array([upper]),
            num_samples=n) == temp_layout((grid * (levels - 1) * 4, 8))[1]


def test_fake_device_int64_counters_and_a_small_temp(fake):
    obj = fake(np.float32, np.int64, 4, np.float32(0), np.float32(1))
    samples = np.linspace(-0.5, 1.5, 999, dtype=np.float32)
    got = _run(obj, fake.mem, samples, np.int64, 4, np.float32(0), np.float32(1))
    assert got.tolist() == cub_bins(samples, 3, np.float32(0), np.float32(1)).tolist()
    x = FakeArray(fake.mem, samples)
    call = dict(d_samples=x, d_histogram=FakeArray(fake.mem, np.zeros(3, np.int64)), h_num_output_levels=4,
                h_lower_level=np.float32(0), h_upper_level=np.float32(1), num_samples=999)
    nbytes = obj(temp_storage=None, **call)
    with pytest.raises(ArgumentError) as info:
        obj(temp_storage=FakeArray(fake.mem, np.zeros(nbytes - 1, np.uint8)), **call)
    assert info.value.argument == "temp_storage"


def test_fake_device_variants_and_plain_launches(fake):
    it = CountingIterator(np.int32(0))
    obj = fake(it, np.int32, 11, np.int32(0), np.int32(1000))
    assert not obj.desc.wide_offsets and not obj.desc.global_bins
    call = dict(temp_storage=None, d_samples=it, d_histogram=FakeArray(fake.mem, np.zeros(2000, np.int32)),
                h_num_output_levels=np.array([11]), h_lower_level=np.int32(0), h_upper_level=np.int32(1000))
    big = (1 << 29)  # 2^31 bytes of int32 samples: 64-bit offsets
    obj(**{**call, "temp_storage": FakeArray(fake.mem, np.zeros(1024, np.uint8))}, num_samples=big)
    obj(**{**call, "temp_storage": FakeArray(fake.mem, np.zeros(1 << 17, np.uint8)),
           "h_num_output_levels": np.array([2001])}, num_samples=1000)
    with cuprims.settings.override(pdl=False):
        obj(**{**call, "temp_storage": FakeArray(fake.mem, np.zeros(1024, np.uint8))}, num_samples=(1 << 29) - 1)
    sweeps = [(d.wide_offsets, d.global_bins, pdl) for role, *_, pdl, d in fake.dev.launches if role == "sweep"]
    assert sweeps == [(True, False, True), (False, True, True), (False, False, False)]
    assert sorted(obj._plans) == [0, 1, 2]
    with pytest.raises(ArgumentError) as info:  # more tiles than an int counts
        obj(**call, num_samples=(1 << 31) * 96)
    assert info.value.argument == "num_samples"


@pytest.mark.parametrize("samples, counter, num_levels, lower, upper", [
    (np.uint8, np.int32, 257, np.int32(0), np.int32(256)),          # the byte path, a bin per value
    (np.int8, np.uint64, 11, np.int64(-100), np.int64(100)),        # the byte path, negative samples
    (np.int32, np.int64, 65, np.float32(-1000), np.float32(1000)),  # the scale, float levels
    (np.float32, np.uint32, 257, np.float64(0), np.float64(1)),     # float samples
])
@pytest.mark.parametrize("caller_temp", [False, True])
def test_few_samples_are_one_launch_that_stores_every_bin(fake, monkeypatch, samples, counter, num_levels, lower,
                                                           upper, caller_temp):
    monkeypatch.setattr(plan_mod, "ONE_BLOCK_SAMPLES", 4096)
    obj = fake(samples, counter, num_levels, lower, upper)
    rng = np.random.default_rng(7)
    x = (rng.random(4096) if samples == np.float32 else rng.integers(-3000, 3000, 4096)).astype(samples)
    got = _run(obj, fake.mem, x, counter, num_levels, lower, upper, caller_temp=caller_temp)   # bins held 99
    assert got.tolist() == cub_bins(x, num_levels - 1, lower, upper).astype(counter).tolist()
    assert [(role, grid) for role, grid, *_ in fake.dev.launches] == [("one_block", 1)]
    assert fake.allocations == []                  # no temporary storage: a one-shot allocates nothing
    if caller_temp:
        assert obj(temp_storage=None, d_samples=FakeArray(fake.mem, x), d_histogram=FakeArray(fake.mem, got),
                   h_num_output_levels=np.array([num_levels]), h_lower_level=np.array([lower]),
                   h_upper_level=np.array([upper]), num_samples=x.size) == 1


def test_more_samples_or_bins_than_one_block_takes_run_the_sweep(fake, monkeypatch):
    monkeypatch.setattr(plan_mod, "ONE_BLOCK_SAMPLES", 4096)
    obj = fake(np.int32, np.int32, 257, np.int32(0), np.int32(256))
    x = np.random.default_rng(8).integers(0, 256, 4097).astype(np.int32)
    assert _run(obj, fake.mem, x, np.int32, 257, 0, 256).tolist() == np.bincount(x, minlength=256).tolist()
    assert [role for role, *_ in fake.dev.launches] == ["init", "sweep"]   # one sample past the threshold
    fake.dev.launches.clear()
    y = x[:1000] % 250
    got = _run(obj, fake.mem, y, np.int32, 1001, np.int32(0), np.int32(1000))   # 1000 bins: past 256
    assert got.tolist() == np.bincount(y, minlength=1000).tolist()
    assert [role for role, *_ in fake.dev.launches] == ["init", "sweep"]
