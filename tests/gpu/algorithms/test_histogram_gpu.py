"""histogram_even on a GPU against numpy: uint8 into 256 bins (np.bincount, np.histogram),
integer samples counted exactly, floating-point samples (out of range, NaN, infinities,
both edges) against the bin arithmetic CUB does, replayed in numpy in the same type;
empty input, sizes off the tile, more bins than shared memory holds, iterator samples,
64-bit offsets, streams, counter types, the object API with its temp_storage query, and
levels of two dtypes or of a type too narrow for the bins (binned in a wider level type).

numpy's ``np.histogram`` counts a sample equal to the upper edge in the last bin; CUB
(and cuprims) does not: bins cover ``[lower, upper)``. The references below count that
way, and compute bins as CUB does: exactly for integer samples and levels, and for
floating point as ``int((s - lower) * (bins / (upper - lower)))`` step by step in the
common floating type (a bin that rounds up to ``bins`` is counted in the last bin)."""

from __future__ import annotations

import numpy as np
import pytest

import cuprims
from cuprims import CountingIterator, TransformIterator

cp = pytest.importorskip("cupy")


def reference(samples: np.ndarray, bins: int, lower, upper, float_type=None) -> np.ndarray:
    """Counts of ``bins`` even bins over ``[lower, upper)``: integer arithmetic when
    ``float_type`` is None, else CUB's floating-point steps in ``float_type``."""
    if float_type is None:
        x, lo, hi = samples.astype(np.int64), int(lower), int(upper)
        keep = (x >= lo) & (x < hi)
        b = (x[keep] - lo) * bins // (hi - lo)
    else:
        f = np.dtype(float_type).type
        with np.errstate(invalid="ignore"):
            x, lo, hi = samples.astype(float_type), f(lower), f(upper)
            keep = (x >= lo) & (x < hi)  # NaN compares false
            reciprocal = f(bins) / (hi - lo)
            b = np.minimum(((x[keep] - lo) * reciprocal).astype(np.int64), bins - 1)
    return np.bincount(b, minlength=bins)


def one_shot(x, bins, lower, upper, n=None, counter=np.int32, stream=None, fill=7):
    """histogram_even into a fresh counter array (pre-filled with ``fill``: it must be zeroed)."""
    hist = cp.full(bins, fill, counter)
    cuprims.histogram_even(d_samples=x, d_histogram=hist, num_output_levels=bins + 1, lower_level=lower,
                           upper_level=upper, num_samples=x.size if n is None else n, stream=stream)
    return cp.asnumpy(hist)


# ------------------------------------------------------------------ uint8 into 256 bins

@pytest.mark.parametrize("n", [1, 1000, 6143, 6144, 6145, 9215, 9216, 9217, (1 << 20) + 7, 1 << 28])
def test_uint8_256_bins(n):
    if n < (1 << 22):
        h = np.random.default_rng(n).integers(0, 256, n).astype(np.uint8)
        x = cp.asarray(h)
    else:
        x = cp.random.randint(0, 256, n, dtype=cp.uint8)
        h = None
    got = one_shot(x, 256, np.int32(0), np.int32(256))
    want = cp.asnumpy(cp.bincount(x, minlength=256)) if h is None else np.bincount(h, minlength=256)
    np.testing.assert_array_equal(got, want)
    if h is not None:
        np.testing.assert_array_equal(got, np.histogram(h, bins=256, range=(0, 256))[0])  # no sample at 256
        # float64 levels, as cuda.compute's tests pass them
        np.testing.assert_array_equal(one_shot(x, 256, np.float64(0), np.float64(256)), want)


@pytest.mark.parametrize("bins,lower,upper", [(10, np.int32(0), np.int32(200)), (1000, np.int32(0), np.int32(256)),
                                              (7, np.int32(13), np.int32(250)), (3, np.uint8(10), np.uint8(250)),
                                              (5, np.float32(0.5), np.float32(100.25))])
def test_uint8_other_bins(bins, lower, upper):
    h = np.random.default_rng(bins).integers(0, 256, 100_003).astype(np.uint8)
    float_type = np.float32 if np.dtype(lower.dtype).kind == "f" else None
    np.testing.assert_array_equal(one_shot(cp.asarray(h), bins, lower, upper),
                                  reference(h, bins, lower, upper, float_type))


# ------------------------------------------------------------------ integer samples

@pytest.mark.parametrize("levels", [65, 257, 999, 4097])  # up to 256 bins in shared memory, then global
@pytest.mark.parametrize("n", [0, 5, 6145, 1_000_003])
def test_int32_exact(levels, n):
    h = np.random.default_rng(levels + n).integers(-2000, 2000, n).astype(np.int32)
    h[:min(n, 3)] = [-1024, 1024, 1023][:min(n, 3)]  # both edges and the last value in range
    got = one_shot(cp.asarray(h), levels - 1, np.int32(-1024), np.int32(1024))
    want = reference(h, levels - 1, -1024, 1024)
    np.testing.assert_array_equal(got, want)
    if 2048 % (levels - 1) == 0:  # integer bin edges: numpy agrees (no sample at 1024 is kept)
        np.testing.assert_array_equal(got, np.histogram(h[h < 1024], bins=levels - 1, range=(-1024, 1024))[0])


@pytest.mark.parametrize("dtype, bins, lower, upper", [
    (np.int8, 256, np.int16(-128), np.int16(128)),       # bins past 127: CUB's pass-through made them negative
    (np.int8, 200, np.int32(0), np.int32(128)),
    (np.int8, 300, np.int16(-128), np.int16(128)),       # more bins than int8 values: samples read as int
    (np.int8, 1000, np.int32(-500), np.int32(500)),
    (np.int16, 40000, np.int32(-20000), np.int32(20000)),
    (np.uint16, 65536, np.int32(0), np.int32(65536)),
    (np.int16, 70000, np.int32(-35000), np.int32(35000)),  # beyond 65536 bins: read as int
])
def test_narrow_samples_in_many_bins(dtype, bins, lower, upper):
    info = np.iinfo(dtype)
    h = np.random.default_rng(bins).integers(info.min, int(info.max) + 1, 300_000).astype(dtype)
    h[:2] = [info.min, info.max]
    np.testing.assert_array_equal(one_shot(cp.asarray(h), bins, lower, upper), reference(h, bins, lower, upper))


@pytest.mark.parametrize("dtype, bins", [(np.float16, 2048), (np.float32, 5000)])
def test_float_bin_indices_stay_exact(dtype, bins):
    # a bin index passes through a sample-typed value: float16 holds every one up to 2048
    h = (np.random.default_rng(bins).random(200_000) * 1.2 - 0.1).astype(dtype)
    got = one_shot(cp.asarray(h), bins, dtype(0), dtype(1))
    np.testing.assert_array_equal(got, reference(h, bins, 0, 1, float_type=dtype))


def test_int8_negative_samples_are_counted():
    # CUB's byte path never counts a negative int8 (NVIDIA/cccl#10977): cuprims bins int8 by the scale
    h = np.arange(-128, 128, dtype=np.int8).repeat(37)
    got = one_shot(cp.asarray(h), 256, np.int16(-128), np.int16(128))
    np.testing.assert_array_equal(got, np.full(256, 37))
    np.testing.assert_array_equal(one_shot(cp.asarray(h), 300, np.int16(-128), np.int16(128)),
                                  reference(h, 300, -128, 128))


@pytest.mark.parametrize("dtype,lower,upper", [(np.int16, np.int16(-300), np.int16(300)),
                                               (np.uint16, np.uint16(5), np.uint16(60000)),
                                               (np.uint32, np.uint32(0), np.uint32(4_000_000_000)),
                                               (np.int64, np.int64(-(1 << 40)), np.int64(1 << 40)),
                                               (np.uint64, np.uint64(3), np.uint64(1 << 50))])
def test_other_integer_samples(dtype, lower, upper):
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), int(lower) - 1000), min(int(info.max), int(upper) + 1000)
    h = np.random.default_rng(7).integers(lo, hi, 200_000, dtype=np.int64 if hi < 1 << 62 else np.uint64)
    h = h.astype(dtype)
    for bins in (17, 256, 700):
        np.testing.assert_array_equal(one_shot(cp.asarray(h), bins, lower, upper),
                                      reference(h.astype(object) if dtype == np.uint64 else h, bins, lower, upper))


# ------------------------------------------------------------------ floating-point samples

def _floats(n, dtype, seed=3):
    x = (np.random.default_rng(seed).standard_normal(n) * 3).astype(dtype)
    x[::97] = np.nan
    x[1:7] = [np.inf, -np.inf, -4, 4, np.nextafter(dtype(4), dtype(0)), -0.0]
    return x


@pytest.mark.parametrize("n", [7, 6145, 1_000_003])
def test_float32_out_of_range_and_nan(n):
    x = _floats(n, np.float32)
    got = one_shot(cp.asarray(x), 64, np.float32(-4), np.float32(4))
    np.testing.assert_array_equal(got, reference(x, 64, -4, 4, np.float32))
    in_range = x[(x >= -4) & (x < 4)]
    assert got.sum() == in_range.size  # NaN, infinities and the upper edge are not counted
    # the largest float below 4 rounds onto the upper edge: counted in the last bin
    assert got[-1] >= 1
    assert np.abs(got - np.histogram(in_range, bins=64, range=(-4, 4))[0]).sum() <= max(8, n // 10000)


@pytest.mark.parametrize("dtype,bins,lower,upper,float_type", [
    (np.float32, 7, np.float32(-1.5), np.float32(2.25), np.float32),
    (np.float32, 300, np.float32(-3), np.float32(3), np.float32),     # privatized in global memory
    (np.float32, 8, np.int32(-3), np.int32(5), np.float32),          # integer levels: float arithmetic
    (np.float64, 3, np.float64(0.1), np.float64(0.7), np.float64),
    (np.float64, 1000, np.float64(-5), np.float64(5), np.float64),
    (np.float32, 10, np.float64(-2), np.float64(2), np.float64),     # float64 levels: double arithmetic
    (np.float16, 16, np.float16(-2), np.float16(2), np.float16),     # power-of-two width: exact reciprocal
])
def test_float_bins_as_cub_computes_them(dtype, bins, lower, upper, float_type):
    x = _floats(500_001, dtype, seed=bins)
    np.testing.assert_array_equal(one_shot(cp.asarray(x), bins, lower, upper),
                                  reference(x, bins, lower, upper, float_type))


# ------------------------------------------------------------------ edge cases

def test_empty_input_zeroes_the_histogram():
    for x, lo, hi in ((cp.empty(0, cp.float32), np.float32(0), np.float32(1)),
                      (cp.empty(0, cp.uint8), np.int32(0), np.int32(256)), (cp.ones(10, cp.int32), np.int32(0), np.int32(9))):
        np.testing.assert_array_equal(one_shot(x, 10, lo, hi, n=0), np.zeros(10))


def test_num_samples_counts_a_prefix():
    h = np.random.default_rng(1).integers(0, 256, 50_000).astype(np.uint8)
    np.testing.assert_array_equal(one_shot(cp.asarray(h), 256, np.int32(0), np.int32(256), n=12_345),
                                  np.bincount(h[:12_345], minlength=256))


@pytest.mark.parametrize("counter", [np.int32, np.uint32, np.int64, np.uint64])
def test_counter_types(counter):
    h = _floats(300_007, np.float32)
    got = one_shot(cp.asarray(h), 50, np.float32(-4), np.float32(4), counter=counter)
    assert got.dtype == counter
    np.testing.assert_array_equal(got, reference(h, 50, -4, 4, np.float32))
    u = np.random.default_rng(2).integers(0, 256, 300_007).astype(np.uint8)
    np.testing.assert_array_equal(one_shot(cp.asarray(u), 256, np.int32(0), np.int32(256), counter=counter),
                                  np.bincount(u, minlength=256))


# ------------------------------------------------------------------ iterators

def test_counting_iterator_samples():
    got = one_shot(CountingIterator(np.int32(0)), 1024, np.float64(0), np.float64(10240), n=10240)
    np.testing.assert_array_equal(got, np.full(1024, 10))


def test_transform_iterator_samples():
    h = _floats(200_003, np.float32)
    it = TransformIterator(cp.asarray(h), lambda v: v + v, np.float32)
    np.testing.assert_array_equal(one_shot(it, 64, np.float32(-8), np.float32(8), n=h.size),
                                  reference(h + h, 64, -8, 8, np.float32))
    idx = TransformIterator(CountingIterator(np.int32(0)), lambda i: (i * 7) % 1000, np.int32)
    np.testing.assert_array_equal(one_shot(idx, 10, np.int32(0), np.int32(1000), n=100_000),
                                  reference((np.arange(100_000) * 7) % 1000, 10, 0, 1000))


def test_wide_offsets():
    # 2^29 int64 samples are 2^32 bytes: CUB's 64-bit-offset instantiation
    n = 1 << 29
    got = one_shot(CountingIterator(np.int64(0)), 256, np.int64(0), np.int64(n), n=n)
    np.testing.assert_array_equal(got, np.full(256, n // 256))


# ------------------------------------------------------------------ streams and the object API

def test_stream_orders_the_work():
    n = 1 << 22
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.zeros(n, cp.uint8)
        hist = cp.empty(256, cp.int32)
    for _ in range(3):
        cuprims.histogram_even(d_samples=x, d_histogram=hist, num_output_levels=257, lower_level=np.int32(0),
                               upper_level=np.int32(256), num_samples=n, stream=s)
        with s:
            x += 1  # ordered after the histogram on the same stream
    s.synchronize()
    want = np.zeros(256, np.int64)
    want[2] = n
    np.testing.assert_array_equal(cp.asnumpy(hist), want)
    other = cp.cuda.Stream(non_blocking=True)
    with other:
        hist2 = cp.full(256, 7, cp.int32)
    cuprims.histogram_even(d_samples=x, d_histogram=hist2, num_output_levels=257, lower_level=np.int32(0),
                           upper_level=np.int32(256), num_samples=n, stream=other.ptr)  # a raw handle works too
    other.synchronize()
    want[2], want[3] = 0, n  # x is 3 everywhere now
    np.testing.assert_array_equal(cp.asnumpy(hist2), want)


def test_object_api_with_temp_storage_query():
    h = _floats(1_000_003, np.float32)
    x = cp.asarray(h)
    hist = cp.full(400, 7, cp.int32)  # longer than needed: the tail is left alone
    args = dict(d_samples=x, d_histogram=hist, h_num_output_levels=np.array([65], np.int32),
                h_lower_level=np.array([-4], np.float32), h_upper_level=np.array([4], np.float32),
                num_samples=x.size)
    obj = cuprims.make_histogram_even(**args)
    assert cuprims.make_histogram_even(**args) is obj  # cached
    nbytes = obj(temp_storage=None, **args)
    assert isinstance(nbytes, int) and nbytes >= 1
    tmp = cp.empty(nbytes, cp.uint8)
    assert obj(temp_storage=tmp, **args) is None
    got = cp.asnumpy(hist)
    np.testing.assert_array_equal(got[:64], reference(h, 64, -4, 4, np.float32))
    assert (got[64:] == 7).all()
    # the same object with other levels of the same dtype, fewer samples, more bins (global privatization)
    for levels, lo, hi, n in ((9, -1, 1, 1000), (301, -3, 3, x.size), (2, 0, 1, 0)):
        call = {**args, "h_num_output_levels": np.array([levels], np.int32),
                "h_lower_level": np.array([lo], np.float32), "h_upper_level": np.array([hi], np.float32),
                "num_samples": n}
        tmp = cp.empty(obj(temp_storage=None, **call), cp.uint8)
        obj(temp_storage=tmp, **call)
        np.testing.assert_array_equal(cp.asnumpy(hist[:levels - 1]), reference(h[:n], levels - 1, lo, hi, np.float32))
    with pytest.raises(cuprims.errors.ArgumentError) as info:  # too little storage
        obj(temp_storage=cp.empty(1, cp.uint8), **args)
    assert info.value.argument == "temp_storage"


def test_object_api_builds_the_wide_variant_when_a_call_needs_it():
    it = CountingIterator(np.int64(0))
    hist = cp.empty(256, cp.int64)
    args = dict(d_samples=it, d_histogram=hist, h_num_output_levels=np.array([257], np.int32),
                h_lower_level=np.array([0], np.int64), h_upper_level=np.array([1 << 29], np.int64))
    obj = cuprims.make_histogram_even(**args, num_samples=1000)
    for n in (1000, 1 << 29):
        tmp = cp.empty(obj(temp_storage=None, **args, num_samples=n), cp.uint8)
        obj(temp_storage=tmp, **args, num_samples=n)
        want = reference(np.arange(min(n, 1000)), 256, 0, 1 << 29) if n == 1000 else np.full(256, n // 256)
        np.testing.assert_array_equal(cp.asnumpy(hist), want)


def test_matches_cuda_compute():
    cc = pytest.importorskip("cuda.compute")
    u = cp.asarray(np.random.default_rng(5).integers(0, 256, 1 << 20).astype(np.uint8))
    f = cp.asarray(_floats(1 << 20, np.float32))
    for x, levels, lo, hi in ((u, 257, np.float64(0), np.float64(256)), (f, 65, np.float64(-4), np.float64(4)),
                              (f, 1001, np.float64(-3), np.float64(3))):
        theirs = cp.zeros(levels - 1, cp.int32)
        cc.histogram_even(d_samples=x, d_histogram=theirs, num_output_levels=levels, lower_level=lo,
                          upper_level=hi, num_samples=x.size)
        np.testing.assert_array_equal(one_shot(x, levels - 1, lo, hi), cp.asnumpy(theirs))


# ------------------------------------------------------------------ level types

def _value(level) -> int | float:
    return np.asarray(level).reshape(-1)[0].item()


@pytest.mark.parametrize("lower, upper, bins", [
    (np.uint8(0), np.uint8(255), 256),                          # more bins than uint8 counts: a wider level type
    (np.array([0], np.uint8), np.array([256], np.int32), 256),  # a uint8 and an int32 level
    (np.int32(0), np.float64(256), 256),                        # an int and a float level: double
    (np.array([0], np.int32), np.array([256], np.int64), 128),
    (0, 255, 100),                                              # Python ints
])
def test_uint8_samples_with_levels_of_any_types(lower, upper, bins):
    h = np.random.default_rng(bins).integers(0, 256, 1_000_003).astype(np.uint8)
    x = cp.asarray(h)
    hist = cp.zeros(bins, np.int32)
    cuprims.histogram_even(d_samples=x, d_histogram=hist, num_output_levels=bins + 1, lower_level=lower,
                           upper_level=upper, num_samples=x.size)
    lo, hi = _value(lower), _value(upper)
    kept = h[h < hi]  # CUB's bins exclude the upper edge; numpy's last bin has it
    np.testing.assert_array_equal(cp.asnumpy(hist), np.histogram(kept, bins=bins, range=(lo, hi))[0])
    np.testing.assert_array_equal(cp.asnumpy(hist), reference(h, bins, lo, hi))


@pytest.mark.parametrize("dtype, bins, lower, upper", [
    (np.int8, 255, np.int8(-128), np.int8(127)),           # int8 levels, 255 bins
    (np.int8, 200, np.int8(-100), np.int8(100)),           # a range of 200 in int8 levels
    (np.int16, 65535, np.int16(-32768), np.int16(32767)),
    (np.int32, 256, np.int32(-(1 << 31)), np.int32((1 << 31) - 1)),  # a range past int32
    (np.uint32, 256, np.int32(-1), np.int32(1 << 20)),     # a negative level beside unsigned samples
])
def test_levels_binned_in_a_wider_type(dtype, bins, lower, upper):
    info = np.iinfo(dtype)
    h = np.random.default_rng(bins).integers(int(info.min), int(info.max), 500_000, endpoint=True,
                                             dtype=np.int64).astype(dtype)
    h[:3] = [info.min, info.max, max(int(info.min), int(upper) - 1)]
    got = one_shot(cp.asarray(h), bins, lower, upper)
    np.testing.assert_array_equal(got, reference(h, bins, int(lower), int(upper)))


def test_float_levels_widened_past_float32():
    h = _floats(300_001, np.float32) * np.float32(1e37)
    lower, upper = np.float32(-3e38), np.float32(3e38)  # their width overflows float32: binned in double
    got = one_shot(cp.asarray(h), 64, lower, upper)
    np.testing.assert_array_equal(got, reference(h, 64, lower, upper, np.float64))


def test_object_api_with_levels_of_two_dtypes():
    h = np.random.default_rng(9).integers(0, 256, 200_001).astype(np.uint8)
    x = cp.asarray(h)
    hist = cp.zeros(256, np.int64)
    args = dict(d_samples=x, d_histogram=hist, h_num_output_levels=np.array([257], np.int32),
                h_lower_level=np.array([0], np.uint8), h_upper_level=np.array([255], np.uint8), num_samples=x.size)
    obj = cuprims.make_histogram_even(**args)
    tmp = cp.empty(obj(temp_storage=None, **args), cp.uint8)
    obj(temp_storage=tmp, **args)
    np.testing.assert_array_equal(cp.asnumpy(hist), np.histogram(h[h < 255], bins=256, range=(0, 255))[0])
    call = {**args, "h_num_output_levels": np.array([11], np.int32), "h_lower_level": np.array([10], np.uint8),
            "h_upper_level": np.array([200], np.int16)}
    tmp = cp.empty(obj(temp_storage=None, **call), cp.uint8)
    obj(temp_storage=tmp, **call)
    np.testing.assert_array_equal(cp.asnumpy(hist[:10]), reference(h, 10, 10, 200))


# ------------------------------------------------------------------ every level dtype a user passes
#
# Integer samples between levels of integral values bin exactly whatever the levels' dtypes, in one build
# per sample type (the levels travel as int64): numpy's histogram is the reference, with the upper edge
# excluded as CUB excludes it.

def _numpy_counts(h: np.ndarray, bins: int, lo: int, hi: int) -> np.ndarray:
    kept = h[(h >= lo) & (h < hi)].astype(np.int64)
    return np.histogram(kept, bins=bins, range=(lo, hi))[0]


def _level_forms(lo: int, hi: int, own) -> dict:
    """The ways a user writes the same two integral levels."""
    return {"int32": (np.int32(lo), np.int32(hi)), "int64": (np.int64(lo), np.int64(hi)),
            "float32": (np.float32(lo), np.float32(hi)), "float64": (np.float64(lo), np.float64(hi)),
            "own": (own(lo), own(hi)), "python": (lo, hi),
            "arrays": (np.array([lo], np.int32), np.array([hi], np.float64)),
            "mixed": (np.int16(lo) if -32768 <= lo < 32768 else np.int64(lo), np.float32(hi))}


@pytest.mark.parametrize("form", ["int32", "int64", "float32", "float64", "own", "python", "arrays", "mixed"])
def test_uint8_256_bins_every_level_dtype(form):
    h = np.random.default_rng(11).integers(0, 256, 1_000_003).astype(np.uint8)
    x = cp.asarray(h)
    if form == "own":    # uint8 cannot hold 256: its own levels are 0 and 255
        bins, (lower, upper), want = 255, (np.uint8(0), np.uint8(255)), _numpy_counts(h, 255, 0, 255)
    else:
        bins, (lower, upper), want = 256, _level_forms(0, 256, np.int64)[form], np.bincount(h, minlength=256)
    np.testing.assert_array_equal(one_shot(x, bins, lower, upper), want)
    hist = cp.full(bins, 7, cp.int32)
    args = dict(d_samples=x, d_histogram=hist, h_num_output_levels=np.array([bins + 1]), h_lower_level=lower,
                h_upper_level=upper, num_samples=x.size)
    obj = cuprims.make_histogram_even(**args)
    assert obj.desc.level.dtype == np.dtype(np.int64)   # one build for every form
    tmp = cp.empty(obj(temp_storage=None, **args), cp.uint8)
    obj(temp_storage=tmp, **args)
    np.testing.assert_array_equal(cp.asnumpy(hist), want)


def test_integral_levels_of_every_dtype_share_one_object():
    x = cp.asarray(np.random.default_rng(12).integers(0, 256, 10_000).astype(np.uint8))
    hist = cp.zeros(256, cp.int32)
    objs = {id(cuprims.make_histogram_even(d_samples=x, d_histogram=hist, h_num_output_levels=257, h_lower_level=lo,
                                           h_upper_level=hi, num_samples=x.size))
            for lo, hi in _level_forms(0, 256, np.int16).values()}
    assert len(objs) == 1


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int16, np.int32, np.uint32, np.int64])
@pytest.mark.parametrize("form", ["int32", "int64", "float32", "float64", "own", "python", "arrays"])
def test_integer_samples_every_level_dtype(dtype, form):
    info = np.iinfo(dtype)
    lo, hi = (-100, 100) if info.min < 0 else (5, 205)
    h = np.random.default_rng(13).integers(max(int(info.min), lo - 300), min(int(info.max), hi + 300) + 1,
                                          400_001).astype(dtype)
    h[:4] = [lo, hi - 1, hi, lo - 1]
    x = cp.asarray(h)
    lower, upper = _level_forms(lo, hi, np.dtype(dtype).type)[form]
    for bins in (1, 7, 200, 256, 300):
        want = _numpy_counts(h, bins, lo, hi)
        np.testing.assert_array_equal(reference(h, bins, lo, hi), want)
        np.testing.assert_array_equal(one_shot(x, bins, lower, upper), want)
        hist = cp.full(bins, 7, cp.int64)   # int64 counters, as CuPy makes them
        args = dict(d_samples=x, d_histogram=hist, h_num_output_levels=np.array([bins + 1], np.int64),
                    h_lower_level=lower, h_upper_level=upper, num_samples=x.size)
        obj = cuprims.make_histogram_even(**args)
        tmp = cp.empty(obj(temp_storage=None, **args), cp.uint8)
        obj(temp_storage=tmp, **args)
        np.testing.assert_array_equal(cp.asnumpy(hist), want)


def test_a_sample_on_an_edge_between_float_levels_of_integral_value():
    # float32 levels 0 and 14 in 62 bins: edge 31 is exactly 7. CUB's float32 scale (1 / 62 * 14 rounded)
    # put a uint8 7 in bin 30; integral levels bin exactly, as numpy does
    h = np.arange(256, dtype=np.uint8).repeat(3)
    x = cp.asarray(h)
    want = _numpy_counts(h, 62, 0, 14)
    assert want[31] == 3
    for lower, upper in ((np.float32(0), np.float32(14)), (np.float64(0), np.float64(14)), (0, 14.0)):
        np.testing.assert_array_equal(one_shot(x, 62, lower, upper), want)
    i = cp.asarray(h.astype(np.int16))
    np.testing.assert_array_equal(one_shot(i, 62, np.float32(0), np.float32(14)), want)


@pytest.mark.parametrize("dtype, lo, hi, bins", [
    (np.int32, -(1 << 23), 1 << 23, 256),      # (range - 1) * bins below 2^32: 32-bit arithmetic
    (np.int32, -(1 << 23), 1 << 23, 257),      # just past it: 64-bit
    (np.uint16, 0, 65536, 65536),              # 65535 * 65536 fits 32 bits
    (np.int16, -32768, 32768, 65537),          # read as int, 64-bit arithmetic
    (np.int64, -(1 << 40), 1 << 40, 1000),
    (np.uint32, 0, 1 << 32, 3),                # a range of 2^32: 64-bit arithmetic
])
def test_exact_bins_on_both_sides_of_32_bit_arithmetic(dtype, lo, hi, bins):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(bins)
    h = rng.integers(max(int(info.min), lo - 1000), min(int(info.max), hi + 1000) + 1, 300_000,
                     dtype=np.int64).astype(dtype)
    edges = [v for v in (lo, hi - 1, hi, lo - 1, int(info.min), int(info.max)) if info.min <= v <= info.max]
    h[:len(edges)] = edges
    for lower, upper in ((np.int64(lo), np.int64(hi)), (float(lo), float(hi))):
        np.testing.assert_array_equal(one_shot(cp.asarray(h), bins, lower, upper), reference(h, bins, lo, hi))


def test_uint64_samples_between_levels_past_int64():
    lo, hi = (1 << 63) + 5, (1 << 63) + (1 << 40)
    h = (np.random.default_rng(14).integers(0, 1 << 41, 200_000, dtype=np.uint64) + np.uint64(1 << 63)
         - np.uint64(1 << 39))
    h[:3] = [lo, hi - 1, hi]
    got = one_shot(cp.asarray(h), 256, np.uint64(lo), np.uint64(hi))
    x, bins = h.astype(object), 256
    keep = (x >= lo) & (x < hi)
    want = np.bincount(((x[keep] - lo) * bins // (hi - lo)).astype(np.int64), minlength=bins)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bins, lower, upper", [(256, np.int32(-128), np.int32(128)), (1000, -500, 500),
                                                (10, np.float32(-3.5), np.float32(100.25)), (3, -1, 2)])
def test_int8_samples_take_the_byte_path(bins, lower, upper):
    h = np.random.default_rng(bins).integers(-128, 128, 500_003).astype(np.int8)
    h[:2] = [-128, 127]
    x = cp.asarray(h)
    obj = cuprims.make_histogram_even(d_samples=x, d_histogram=cp.zeros(bins, cp.int32),
                                      h_num_output_levels=bins + 1, h_lower_level=lower, h_upper_level=upper,
                                      num_samples=x.size)
    assert obj.desc.byte_path
    float_type = np.float32 if isinstance(lower, np.floating) else None
    np.testing.assert_array_equal(one_shot(x, bins, lower, upper), reference(h, bins, lower, upper, float_type))


def test_one_shot_allocates_nothing_unless_counters_live_in_global_memory(monkeypatch):
    from cuprims._runtime import driver
    from cuprims.algorithms import scratch

    sizes = []
    real = driver.alloc_async
    monkeypatch.setattr(driver, "alloc_async", lambda n, s, d=-1: sizes.append(n) or real(n, s, d))
    monkeypatch.setattr(scratch, "_buffers", {})   # no shared one-shot buffer yet
    u = cp.asarray(np.random.default_rng(15).integers(0, 256, 100_000).astype(np.uint8))
    i = cp.asarray(np.random.default_rng(16).integers(-2000, 2000, 100_000).astype(np.int32))
    for _ in range(3):
        np.testing.assert_array_equal(one_shot(u, 256, 0, 256), np.bincount(cp.asnumpy(u), minlength=256))
        np.testing.assert_array_equal(one_shot(i, 64, np.int32(-1024), np.int32(1024)),
                                      reference(cp.asnumpy(i), 64, -1024, 1024))
    assert sizes == []
    np.testing.assert_array_equal(one_shot(i, 1000, -1024, 1024), reference(cp.asnumpy(i), 1000, -1024, 1024))
    assert len(sizes) == 1          # privatized counters in global memory: temporary storage
    np.testing.assert_array_equal(one_shot(i, 1000, -1024, 1024), reference(cp.asnumpy(i), 1000, -1024, 1024))
    assert len(sizes) == 1          # the buffer one-shot calls on the legacy stream share: taken again
    scratch.release()


def test_one_shots_on_two_streams_share_the_queue_word():
    n = 1 << 22
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    xs, hists = [], []
    for k, s in enumerate(streams):
        with s:
            xs.append(cp.full(n, k + 1, cp.uint8))
            hists.append(cp.full(256, 7, cp.int32))
    for _ in range(20):
        for s, x, hist in zip(streams, xs, hists):
            cuprims.histogram_even(d_samples=x, d_histogram=hist, num_output_levels=257, lower_level=0,
                                   upper_level=256, num_samples=n, stream=s)
    for k, (s, hist) in enumerate(zip(streams, hists)):
        s.synchronize()
        want = np.zeros(256, np.int64)
        want[k + 1] = n
        np.testing.assert_array_equal(cp.asnumpy(hist), want)


def test_a_built_object_takes_integral_levels_of_any_dtype():
    h = np.random.default_rng(17).integers(-3000, 3000, 300_001).astype(np.int16)
    x = cp.asarray(h)
    hist = cp.zeros(1000, cp.int32)
    base = dict(d_samples=x, d_histogram=hist, num_samples=x.size)
    obj = cuprims.make_histogram_even(**base, h_num_output_levels=np.array([257], np.int32),
                                      h_lower_level=np.int32(-1024), h_upper_level=np.int32(1024))
    for bins, lower, upper in ((256, np.int32(-1024), np.int32(1024)), (100, np.float64(-2000), np.float32(2500)),
                               (999, -3000, 3000), (7, np.uint8(0), np.int64(1 << 40)),
                               (256, np.array([-1024], np.int64), np.array([1024.0]))):
        args = dict(**base, h_num_output_levels=np.array([bins + 1]), h_lower_level=lower, h_upper_level=upper)
        tmp = cp.empty(obj(temp_storage=None, **args), cp.uint8)
        obj(temp_storage=tmp, **args)
        lo, hi = _value(lower), _value(upper)
        np.testing.assert_array_equal(cp.asnumpy(hist[:bins]), reference(h, bins, int(lo), int(hi)))
    with pytest.raises(cuprims.errors.ArgumentError) as info:   # not a whole number: another build bins it
        obj(temp_storage=tmp, **base, h_num_output_levels=257, h_lower_level=np.float32(0.5),
            h_upper_level=np.float32(1000))
    assert info.value.argument == "h_lower_level"


# ------------------------------------------------------------------ one block for few samples

@pytest.mark.parametrize("dtype, bins, lower, upper", [
    (np.uint8, 256, 0, 256), (np.int8, 10, -100, 100), (np.int16, 64, -3000, 3000), (np.int32, 256, -1, 255),
    (np.uint64, 7, 5, 1 << 40), (np.float32, 100, -1.0, 1.0), (np.float64, 3, 0.25, 0.75), (np.float16, 16, -2, 2)])
@pytest.mark.parametrize("n", [0, 1, 255, 4095, 4096, 4097])
def test_few_samples_one_block_and_the_sweep_past_it(dtype, bins, lower, upper, n):
    """At most 4096 samples in at most 256 bins: one block, which stores every bin (the output
    was filled with 7s); one more sample: the init kernel and the sweep. Both as numpy counts."""
    rng = np.random.default_rng(n + bins)
    if np.dtype(dtype).kind == "f":
        host = (rng.random(n) * 3 - 1.5).astype(dtype)
        host[::17] = np.nan
        float_type = np.float64            # float64 levels: the common type bins in float64
        lo, hi = np.float64(lower), np.float64(upper)
    else:
        info = np.iinfo(dtype)
        host = rng.integers(max(info.min, -10_000), min(info.max, 10_000), n, endpoint=True).astype(dtype)
        float_type = None
        lo, hi = lower, upper
    got = one_shot(cp.asarray(host), bins, lo, hi)
    np.testing.assert_array_equal(got, reference(host, bins, lower, upper, float_type))
