"""A program written for cuda.compute, run by cuprims with only its import changed: iterator
arithmetic for segment ends, a nested struct declared as a dict, a zip scanned into a named
struct of its layout, a struct built by an iterator's operator, a C++ operator, a type
object for a RawOp's result, and a histogram whose levels have two dtypes."""

import cupy as cp
import numpy as np

import cuprims as cc          # was: import cuda.compute as cc
from cuprims import types


def segment_sums_with_iterator_arithmetic(rng):
    # fixed-size segments: their starts as an iterator, their ends one step further on
    size, count = 256, 40
    x = rng.integers(-9, 10, size * count).astype(np.int32)
    starts = cc.TransformIterator(cc.CountingIterator(np.int64(0)), lambda i: i * size)
    ends = starts + 1
    out = cp.empty(count, np.int32)
    cc.segmented_reduce(d_in=cp.asarray(x), d_out=out, num_segments=count, start_offsets_in=starts,
                        end_offsets_in=ends, op=cc.OpKind.PLUS, h_init=np.int32(0))
    assert (out.get() == x.reshape(count, size).sum(1)).all()


Particle = cc.gpu_struct({"id": np.int32, "pos": {"x": np.float32, "y": np.float32}}, name="Particle")


def add_particles(a, b):
    return Particle(a.id + b.id, (a.pos.x + b.pos.x, a.pos.y + b.pos.y))


def nested_struct_sum(rng):
    h = np.empty(1000, Particle.dtype)
    h["id"] = rng.integers(0, 5, h.size)
    h["pos"]["x"], h["pos"]["y"] = rng.integers(-8, 8, h.size), rng.integers(-8, 8, h.size) / 2
    out = cp.empty(1, Particle.dtype)
    cc.reduce_into(d_in=cp.asarray(h), d_out=out, op=add_particles, num_items=h.size,
                   h_init={"id": 0, "pos": {"x": 0.0, "y": 0.0}})
    got = out.get()[0]
    assert got["id"] == h["id"].sum() and got["pos"]["x"] == h["pos"]["x"].sum()


ValueFlag = cc.gpu_struct({"value": np.int64, "flag": np.int32}, name="ValueFlag")


def segmented_sum(a, b):
    # a set flag in b starts a new segment at b
    return ValueFlag(b.value if b.flag else a.value + b.value, 1 if a.flag or b.flag else 0)


def zip_scanned_into_a_named_struct():
    data = cp.asarray([1, 1, 1, 1, 1, 1, 1, 1], dtype=cp.int64)
    heads = cp.asarray([0, 0, 1, 0, 0, 1, 1, 0], dtype=cp.int32)
    out = cp.empty(data.size, ValueFlag.dtype)
    cc.inclusive_scan(d_in=cc.ZipIterator(data, heads), d_out=out, op=segmented_sum,
                      init_value=ValueFlag(0, 0), num_items=data.size)
    assert out.get()["value"].tolist() == [1, 2, 1, 2, 3, 1, 1, 2]


MinMax = cc.gpu_struct({"lo": np.float64, "hi": np.float64}, name="MinMax")


def widen(a, b):
    return MinMax(min(a.lo, b.lo), max(a.hi, b.hi))


def struct_built_by_an_iterator(rng):
    x = rng.standard_normal(10_000)
    it = cc.TransformIterator(cp.asarray(x), lambda v: MinMax(abs(v), abs(v)))
    out = cp.empty(1, MinMax.dtype)
    cc.reduce_into(d_in=it, d_out=out, op=widen, num_items=x.size, h_init=MinMax(np.inf, -np.inf))
    got = out.get()[0]
    assert got["lo"] == np.abs(x).min() and got["hi"] == np.abs(x).max()


SQUARE = """
extern "C" __device__ void square(void* x, void* result) {
    const int v = *static_cast<const int*>(x);
    *static_cast<int*>(result) = v * v;
}
"""


def cpp_operator_with_a_type_object(rng):
    x = rng.integers(-100, 100, 5000).astype(np.int32)
    squares = cc.TransformIterator(cp.asarray(x), cc.RawOp.from_cpp(SQUARE, "square"), value_type=types.int32)
    out = cp.empty(1, np.int32)
    cc.reduce_into(d_in=squares, d_out=out, op=cc.OpKind.PLUS, num_items=x.size, h_init=np.int32(0))
    assert out.get()[0] == (x * x).sum()


def histogram_with_levels_of_two_dtypes(rng):
    b = rng.integers(0, 256, 1 << 16).astype(np.uint8)
    hist = cp.empty(256, cp.int32)
    # an int lower level and a float upper one: they bin in their common type
    cc.histogram_even(d_samples=cp.asarray(b), d_histogram=hist, num_output_levels=257,
                      lower_level=np.int32(0), upper_level=np.float64(256), num_samples=b.size)
    assert (hist.get() == np.bincount(b, minlength=256)).all()


def main():
    rng = np.random.default_rng(28)
    segment_sums_with_iterator_arithmetic(rng)
    nested_struct_sum(rng)
    zip_scanned_into_a_named_struct()
    struct_built_by_an_iterator(rng)
    cpp_operator_with_a_type_object(rng)
    histogram_with_levels_of_two_dtypes(rng)
    print("ported_from_cuda_compute: ok")


if __name__ == "__main__":
    main()
