"""histogram_even's level type without a GPU: integer samples between levels of integral
values bin exactly in one build whatever the levels' dtypes (int32, int64, float32,
float64, the samples' own, Python ints: int64 levels, uint64 past int64); other levels of
two dtypes bin in their common type, and levels whose type cannot count the bins or the
range bin in a wider one; the chosen type is the description's (so the build's) and the
generated source's, ahead-of-time sm_90 builds of it succeed, and the counts (on the fake
device of test_histogram) are numpy's, upper edge excluded. What no level type makes right
is still refused, naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

import cuprims
from cuprims import ProxyArray as P
from cuprims.algorithms.histogram import api as hist_api
from cuprims.algorithms.histogram.bins import given_level_dtype, level_dtype
from cuprims.errors import ArgumentError, CuprimsError
from test_histogram import FakeDeviceArray, _make, _run, cub_bins, fake  # noqa: F401  (fake: a fixture)

NAMES = ("levels", "lower", "upper")
i1, u1, i2, i4, u4, i8, u8, f2, f4, f8 = (np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64,
                                          np.float16, np.float32, np.float64)

# (samples, bins, lower, upper, the level type the kernel bins in): integer samples between integral
# levels in int64 (uint64 past it), whatever the levels' dtypes; the rest as CUB bins
CHOSEN = {
    "uint8 levels 0..255 in 256 bins": (u1, 256, u1(0), u1(255), i8),
    "uint8 and int16 levels 0..256": (u1, 256, u1(0), i2(256), i8),
    "int32 levels as before": (u1, 256, i4(0), i4(256), i8),
    "int64 levels": (u1, 256, i8(0), i8(256), i8),
    "float32 levels of integral value": (u1, 256, f4(0), f4(256), i8),
    "float64 levels of integral value": (u1, 256, f8(0), f8(256), i8),
    "float levels of fractional value": (u1, 256, f4(0.5), f4(256), f4),
    "uint8 levels that fit stay": (u1, 10, u1(0), u1(200), i8),
    "Python ints over int16": (i2, 256, -1024, 1024, i8),
    "int lower, float upper": (f4, 8, i4(-3), f4(5), f8),
    "int32 and int64": (i4, 16, i4(-8), i8(8), i8),
    "Python int and float": (f4, 4, 0, 1.5, f8),
    "int64 and uint64 stay integers": (u8, 1, i8(0), u8(1 << 63), u8),
    "int64 and uint64, 2^65 past uint64": (u8, 4, i8(0), u8(1 << 63), f8),
    "negative level, unsigned samples": (u4, 256, i4(-1), i4(256), i8),
    "int8 range over int8": (i1, 256, i1(-100), i1(100), i8),
    "int8 bins over int8": (i1, 200, i1(0), i1(100), i8),
    "int8 full range": (i1, 255, i1(-128), i1(127), i8),
    "int32 full range": (i4, 256, i4(-(1 << 31)), i4((1 << 31) - 1), i8),
    "int64 product overflow": (i8, 8, i8(0), i8(1 << 62), f8),
    "width overflows float32": (f4, 256, f4(-3e38), f4(3e38), f8),
    "bins overflow float16": (f2, 2000, f2(0), f2(0.01), f4),
    "float16 levels as before": (f2, 16, f2(-2), f2(2), f2),
}


@pytest.mark.parametrize("case", sorted(CHOSEN))
def test_the_level_type_chosen(case):
    sample, bins, lower, upper, want = CHOSEN[case]
    lo = np.int64(lower) if type(lower) is int else np.float64(lower) if type(lower) is float else lower
    hi = np.int64(upper) if type(upper) is int else np.float64(upper) if type(upper) is float else upper
    assert level_dtype(np.dtype(sample), bins, lo, hi, NAMES) == np.dtype(want), case


def test_the_levels_common_type_is_numpys():
    for a, b in ((i4(0), f4(1)), (i4(0), i8(1)), (u1(0), i2(1)), (f2(0), f8(1)), (u1(0), np.array([1], i8)[0])):
        assert given_level_dtype(a, b) == np.result_type(a.dtype, b.dtype)
    assert given_level_dtype(i8(-1), u8(5)) == np.dtype(i8)            # numpy: float64; both fit int64
    assert given_level_dtype(i8(-1), u8(1 << 63)) == np.dtype(f8)      # no integer type holds both


@pytest.mark.parametrize("over, argument", [
    (dict(h_lower_level=np.array([5], i4), h_upper_level=np.array([5.0])), "h_lower_level"),
    (dict(h_lower_level=np.array([0], i4), h_upper_level=np.array([np.nan], f4)), "h_upper_level"),
    (dict(h_lower_level=np.array([-np.inf]), h_upper_level=np.array([1], u1)), "h_lower_level"),
    (dict(h_lower_level=np.array([300], u4), h_upper_level=np.array([1], i8)), "h_lower_level"),
])
def test_what_no_level_type_makes_right_is_refused(over, argument):
    with pytest.raises(ArgumentError) as info:
        cuprims.make_histogram_even(d_samples=P(u1), d_histogram=P(i4), h_num_output_levels=np.array([257], i4),
                                    num_samples=1000, compute_capability=90, **over)
    assert info.value.argument == argument
    assert isinstance(info.value, ValueError) and isinstance(info.value, CuprimsError)


# ------------------------------------------------------------------ builds

def test_the_chosen_type_is_built_and_keyed(shared_cache):
    # integral levels of any dtypes over uint8 samples: one description, one build, the levels as int64
    objs = [_make(P(u1), num_levels=257, lower=lo, upper=hi)
            for lo, hi in ((i4(0), i4(256)), (i8(0), i8(256)), (f4(0), f4(256)), (f8(0), f8(256)), (u1(0), i2(256)))]
    objs.append(cuprims.make_histogram_even(d_samples=P(u1), d_histogram=P(i4), h_num_output_levels=257,
                                            h_lower_level=0, h_upper_level=256, num_samples=1 << 20,
                                            compute_capability=90))
    narrow = _make(P(u1), num_levels=11, lower=u1(0), upper=u1(200))
    assert all(o is objs[0] for o in objs[1:] + [narrow])   # the bins and level values are call arguments
    wide = objs[0]
    assert wide.desc.level.dtype == np.dtype(i8) and wide.cubin()[:4] == b"\x7fELF"
    assert "exact_scale<long long, unsigned char>" in wide._builds.source(90).text
    assert wide.desc.kernel_params()[1][5:7] == (8, 8)   # the levels travel as int64 values
    fractional = _make(P(u1), num_levels=11, lower=f4(0.5), upper=f4(200))   # CUB's float scale
    assert fractional.desc.level.dtype == np.dtype(f4) and fractional is not wide
    assert "clamped_scale<float, cuprims_offset_t, unsigned char>" in fractional._builds.source(90).text
    mixed = cuprims.make_histogram_even(d_samples=P(f4), d_histogram=P(i4), h_num_output_levels=9,
                                        h_lower_level=np.int32(-3), h_upper_level=np.array([5], f4),
                                        num_samples=100, compute_capability=90)
    assert mixed.desc.level.dtype == np.dtype(f8) and "clamped_scale<double," in mixed._builds.source(90).text
    assert mixed.cubin()[:4] == b"\x7fELF"


@pytest.mark.parametrize("sample", [u1, i1, i2, np.uint16, i4, u4, i8, u8])
def test_integral_levels_of_every_dtype_make_one_build_per_sample_type(sample):
    """The level dtypes a user may pass (int32, int64, float32, float64, the samples' own, numpy
    scalars, one-item arrays, Python ints) give one description, so one source and build."""
    lo, hi = 0, 100
    own = np.dtype(sample).type
    given = [(i4(lo), i4(hi)), (i8(lo), i8(hi)), (f4(lo), f4(hi)), (f8(lo), f8(hi)), (own(lo), own(hi)), (lo, hi),
             (np.array([lo], i4), np.array([hi], i8)), (np.array([float(lo)]), np.array([hi], own))]
    # the description make_histogram_even and histogram_even build for (checked, nothing built)
    descs = {hist_api._prepare(P(sample), P(i4), 65, a, b, 1000, NAMES)[0] for a, b in given}
    assert len(descs) == 1
    desc = descs.pop()
    assert desc.level.dtype == np.dtype(i8)
    assert desc.byte_path == (np.dtype(sample).itemsize == 1)
    assert f"exact_scale<long long, {desc.d_samples.value.cpp}>" in desc.source(90).text


# ------------------------------------------------------------------ counts on the fake device

def exact_bins(samples: np.ndarray, bins: int, lower, upper) -> np.ndarray:
    """Even bins over [lower, upper) in exact arithmetic (numpy's histogram with the upper
    edge excluded, as CUB's HistogramEven counts)."""
    x, lo, hi = samples.astype(object), int(lower), int(upper)
    keep = (x >= lo) & (x < hi)
    return np.bincount(((x[keep] - lo) * bins // (hi - lo)).astype(np.int64), minlength=bins)


@pytest.mark.parametrize("case", [c for c in sorted(CHOSEN) if np.dtype(CHOSEN[c][0]).kind in "iu"
                                  and type(CHOSEN[c][2]) is not float and np.asarray(CHOSEN[c][2]).dtype.kind in "iu"
                                  and np.asarray(CHOSEN[c][3]).dtype.kind in "iu"])
def test_integer_levels_count_as_numpy(fake, case):
    sample, bins, lower, upper, want = CHOSEN[case]
    info = np.iinfo(sample)
    rng = np.random.default_rng(bins)
    samples = rng.integers(int(info.min), int(info.max), 3000, dtype=np.int64 if sample != u8 else np.uint64,
                           endpoint=True).astype(sample)
    edges = [v for v in (int(lower), int(upper), int(upper) - 1, int(info.min), int(info.max))
             if info.min <= v <= info.max]
    samples[:len(edges)] = edges
    obj = fake(sample, np.int64, bins + 1, lower, upper)
    assert obj.desc.level.dtype == np.dtype(want)
    got = _run(obj, fake.mem, samples, np.int64, bins + 1, lower, upper)
    if np.dtype(want).kind == "f":   # binned in double, as numpy bins: 2^62 - 1 rounds onto the upper edge
        np.testing.assert_array_equal(got, cub_bins(samples, bins, f8(lower), f8(upper)))
        assert np.abs(got - exact_bins(samples, bins, lower, upper)).sum() <= len(edges)
    else:
        np.testing.assert_array_equal(got, exact_bins(samples, bins, lower, upper))
    if case == "uint8 levels 0..255 in 256 bins":
        kept = samples[samples < 255]
        np.testing.assert_array_equal(got, np.histogram(kept, bins=256, range=(0, 255))[0])


@pytest.mark.parametrize("lower, upper", [(i4(-3), f4(5)), (i4(-3), np.array([5.0])), (-3, 5.0),
                                          (np.float64(-3), np.array([5], i8))])
def test_mixed_level_dtypes_count_in_their_common_type(fake, lower, upper):
    samples = np.linspace(-4, 6, 4001).astype(f4)
    obj = fake(f4, np.int32, 9, lower, upper)
    assert obj.desc.level.dtype == np.dtype(f8)
    got = _run(obj, fake.mem, samples, np.int32, 9, lower, upper)
    kept = samples[(samples >= -3) & (samples < 5)].astype(f8)
    np.testing.assert_array_equal(got, np.histogram(kept, bins=8, range=(-3, 5))[0])


def test_integral_float_levels_count_as_numpy_not_as_float_arithmetic(fake):
    # float32 levels 0 and 14 in 62 bins: CUB's float32 scale puts sample 7 (exactly on edge 31) in bin 30,
    # numpy in bin 31; integral levels of any dtype now bin exactly, as numpy does
    samples = np.arange(256, dtype=u1).repeat(2)
    for lower, upper in ((f4(0), f4(14)), (f8(0), f8(14)), (i4(0), i4(14)), (0, 14.0)):
        obj = fake(u1, np.int32, 63, lower, upper)
        got = _run(obj, fake.mem, samples, np.int32, 63, lower, upper)
        np.testing.assert_array_equal(got, np.histogram(samples[samples < 14], bins=62, range=(0, 14))[0])
        assert got[31] == 2


# ------------------------------------------------------------------ a built object's calls

def test_a_built_object_takes_levels_its_level_type_holds(fake):
    obj = fake(u1, np.int32, 257, u1(0), u1(255))         # integral levels: exact bins, levels as int64
    samples = np.arange(256, dtype=u1).repeat(3)
    for lower, upper, bins in ((u1(0), u1(255), 256), (u1(10), u1(20), 5), (i2(-5), i2(300), 1000),
                               (np.int32(0), np.int32(255), 256), (np.float32(3), np.float64(250), 7),
                               (-(1 << 40), 1 << 40, 3)):      # any dtype of integral value that int64 holds
        got = _run(obj, fake.mem, samples, np.int32, bins + 1, lower, upper, caller_temp=True)
        np.testing.assert_array_equal(got, exact_bins(samples, bins, lower, upper))
    base = dict(temp_storage=None, d_samples=FakeDeviceArray(100, "|u1"), d_histogram=FakeDeviceArray(2000),
                h_num_output_levels=np.array([257], i4), h_lower_level=u1(0), h_upper_level=u1(255), num_samples=100)
    for over, argument in ((dict(h_upper_level=np.float32(254.5)), "h_upper_level"),  # not a whole number
                           (dict(h_lower_level=np.float64(np.nan)), "h_lower_level"),
                           (dict(h_upper_level=u8(1 << 63)), "h_upper_level"),       # past int64
                           (dict(h_lower_level=u1(9), h_upper_level=u1(9)), "h_lower_level"),
                           (dict(h_lower_level=i8(-(1 << 62)), h_upper_level=i8(1 << 62)), "h_upper_level")):
        with pytest.raises(ArgumentError) as info:
            obj(**{**base, **over})
        assert info.value.argument == argument, over
        assert over.get("h_lower_level") == u1(9) or "make_histogram_even" in str(info.value)
    floats = fake(f4, np.int32, 11, f4(0), f4(200))        # float samples: CUB's scale in float32
    with pytest.raises(ArgumentError) as info:
        floats(**{**base, "d_samples": FakeDeviceArray(100, "<f4"), "h_lower_level": f8(0),
                  "h_upper_level": f8(200)})
    assert info.value.argument == "h_lower_level" and "float32 holds" in str(info.value)


def test_a_calls_level_arguments_are_checked_once(fake):
    """The host work a call's levels need (their checks, their kernel values, the variant their
    bins ask for) is done at the first call with those level arguments, then looked up."""
    obj = fake(u1, np.int32, 257, i4(0), i4(256))
    samples = np.random.default_rng(3).integers(0, 256, 5000).astype(u1)
    hist_api._one_shots.clear()   # the one-shots' remembered descriptions, a cache
    calls = []
    real = type(obj)._checked_call

    def counted(self, *args):
        calls.append(args[0])
        return real(self, *args)

    type(obj)._checked_call = counted
    try:
        for _ in range(3):
            for lower, upper in ((i4(0), i4(256)), (0, 256), (np.array([0], i4), np.array([256.0])),
                                 (f4(0), f4(256))):
                got = _run(obj, fake.mem, samples, np.int32, 257, lower, upper, caller_temp=True)
                np.testing.assert_array_equal(got, np.bincount(samples, minlength=256))
                got = _run(obj, fake.mem, samples, np.int32, 257, lower, upper)   # one-shot: the same object
                np.testing.assert_array_equal(got, np.bincount(samples, minlength=256))
    finally:
        type(obj)._checked_call = real
    # one check per distinct level arguments: the object calls pass one-item arrays, the one-shots scalars
    assert len(calls) == len(set(calls)) == 8
    entry = obj._calls[calls[0]]
    assert entry[:3] == (256, i8(0).tobytes(), i8(256).tobytes())   # the levels as the kernel takes them
    one_shot_descs = set(hist_api._one_shots.values())
    assert one_shot_descs == {obj.desc}            # the one-shots found the build's description


# the level cases of tests/gpu/algorithms/test_histogram_gpu.py, built ahead of time: (samples, bins, lower,
# upper, the scale the kernel bins with)
GPU_CASES = {
    "uint8 levels, 256 bins": (u1, 256, u1(0), u1(255), "exact_scale<long long, unsigned char>"),
    "int8 levels, 255 bins": (i1, 255, i1(-128), i1(127), "exact_scale<long long, signed char>"),
    "int16 levels, 65535 bins": (i2, 65535, i2(-32768), i2(32767), "exact_scale<long long, short>"),
    "int32 full range": (i4, 256, i4(-(1 << 31)), i4((1 << 31) - 1), "exact_scale<long long, int>"),
    "negative level, uint32 samples": (u4, 256, i4(-1), i4(1 << 20), "exact_scale<long long, unsigned int>"),
    "uint64 levels past int64": (u8, 256, u8(1 << 63), u8((1 << 63) + (1 << 40)),
                                 "exact_scale<unsigned long long, unsigned long long>"),
    "float32 width overflows": (f4, 64, f4(-3e38), f4(3e38), "clamped_scale<double, cuprims_offset_t, "),
}


@pytest.mark.parametrize("case", sorted(GPU_CASES))
def test_the_gpu_tests_level_cases_build(shared_cache, case):
    sample, bins, lower, upper, scale = GPU_CASES[case]
    obj = cuprims.make_histogram_even(d_samples=P(sample), d_histogram=P(i4), h_num_output_levels=bins + 1,
                                      h_lower_level=lower, h_upper_level=upper, num_samples=500_000,
                                      compute_capability=90)
    assert obj.cubin()[:4] == b"\x7fELF"
    assert f"using cuprims_scale_t = cuprims::histogram::{scale}" in obj._builds.source(90).text


def test_a_widened_level_type_serializes(shared_cache):
    for obj, level in ((_make(P(f4), num_levels=65, lower=f4(-3e38), upper=f4(3e38)), f8),   # CUB's scale, widened
                       (_make(P(u1), num_levels=257, lower=u1(0), upper=u1(255)), i8)):     # exact bins
        again = cuprims.deserialize(obj.serialize())
        assert again.desc.level.dtype == np.dtype(level) and again.cubin(90) == obj.cubin(90)
