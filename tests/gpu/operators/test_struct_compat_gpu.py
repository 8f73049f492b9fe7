"""Programs written for cuda.compute with structs, run on a GPU against numpy: nested
structs declared and given as dicts or tuples, a ZipIterator's items scanned or reduced
into a named gpu_struct of their layout (segmented sums, an exponential moving average,
sums with counts), and a struct built by a TransformIterator's operator (min and max of
absolute values). tests/cpu/operators/test_struct_compat.py builds these for sm_90; the
struct types and operators both use are in tests/twins.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import cuprims
from cuprims import ConstantIterator, CountingIterator, TransformIterator, ZipIterator
from twins import (EMA_ALPHA, MinMax, Particle, SumCount, ValueFlag, ValueScale, by_pos_x, ema_combine, ema_term,
                   minmax_op, negate, particle_sum, rightmost, segmented_sum, sum_count)

cp = pytest.importorskip("cupy")

SIZES = [1, 8, 1000, (1 << 20) + 7]


# ----------------------------------------------------------------------------- a struct built in an iterator

@pytest.mark.parametrize("n", SIZES)
def test_minmax_of_absolute_values(n):
    d_in = cp.asarray(np.random.default_rng(n).standard_normal(n))
    tr_it = TransformIterator(d_in, lambda v: MinMax(abs(v), abs(v)))
    d_out = cp.empty(1, dtype=MinMax.dtype)
    cuprims.reduce_into(d_in=tr_it, d_out=d_out, op=minmax_op, num_items=n, h_init=MinMax(np.inf, -np.inf))
    h = np.abs(d_in.get())
    got = d_out.get()[0]
    assert got["lo"] == h.min() and got["hi"] == h.max()


def test_transform_of_a_zip_into_a_named_struct():
    rng = np.random.default_rng(5)
    x, w = rng.random(5000).astype(np.float32), rng.integers(1, 4, 5000).astype(np.int32)
    it = TransformIterator(ZipIterator(cp.asarray(x), cp.asarray(w)), lambda p: SumCount(p.v0, 1))
    d_out = cp.empty(1, dtype=SumCount.dtype)
    cuprims.reduce_into(d_in=it, d_out=d_out, op=sum_count, num_items=x.size, h_init=(0.0, 0))
    got = d_out.get()[0]
    np.testing.assert_allclose(got["total"], x.astype(np.float64).sum(), rtol=1e-4)
    assert got["count"] == x.size


# ----------------------------------------------------------------------------- structs one by layout

def _segmented_sums(data, flags):
    """Each item's sum from its segment's head (a set flag starts a segment) to itself."""
    csum = np.cumsum(data)
    head = np.maximum.accumulate(np.where(flags != 0, np.arange(data.size), 0))
    before = np.where(head > 0, csum[np.maximum(head - 1, 0)], 0)
    return csum - before


def test_segmented_sum_example():
    data = cp.asarray([1, 1, 1, 1, 1, 1, 1, 1], dtype=cp.int64)
    hflg = cp.asarray([0, 0, 1, 0, 0, 1, 1, 0], dtype=cp.int32)
    d_output = cp.empty(data.shape, dtype=ValueFlag.dtype)
    cuprims.inclusive_scan(d_in=ZipIterator(data, hflg), d_out=d_output, op=segmented_sum,
                           init_value=ValueFlag(0, 0), num_items=data.size)
    assert d_output.get()["value"].tolist() == [1, 2, 1, 2, 3, 1, 1, 2]


@pytest.mark.parametrize("n", SIZES)
def test_segmented_sums_as_scans_of_value_flag_pairs(n):
    rng = np.random.default_rng(n)
    data = rng.integers(-100, 100, n).astype(np.int64)
    flags = (rng.random(n) < 0.01).astype(np.int32)
    d_out = cp.empty(n, dtype=ValueFlag.dtype)
    cuprims.inclusive_scan(d_in=ZipIterator(cp.asarray(data), cp.asarray(flags)), d_out=d_out, op=segmented_sum,
                           init_value=ValueFlag(0, 0), num_items=n)
    got = d_out.get()
    np.testing.assert_array_equal(got["value"], _segmented_sums(data, flags))
    np.testing.assert_array_equal(got["flag"], np.maximum.accumulate(flags))
    # the same pairs stored in an array of the zip's own item type, scanned without init
    pairs = np.empty(n, np.dtype([("v0", np.int64), ("v1", np.int32)], align=True))
    pairs["v0"], pairs["v1"] = data, flags
    d_out2 = cp.empty(n, dtype=ValueFlag.dtype)
    cuprims.inclusive_scan(d_in=cp.asarray(pairs), d_out=d_out2, op=segmented_sum, num_items=n)
    np.testing.assert_array_equal(d_out2.get()["value"], got["value"])


def _ema_reference(u, alpha):
    a = np.empty_like(u)
    a[0] = u[0]
    for t in range(1, u.size):
        a[t] = (1 - alpha) * u[t] + alpha * a[t - 1]
    return a


def test_exponential_moving_average():
    u = 3.0 + cp.sin(cp.linspace(-3.0, 3.0, num=1024, dtype=cp.double))
    u += cp.asarray(np.random.default_rng(3).normal(0.0, 0.1, size=u.size))
    d_inp = ZipIterator(u, TransformIterator(CountingIterator(np.int64(0)), negate))
    d_cumsum = cp.empty(u.shape, dtype=ValueScale.dtype)
    cuprims.inclusive_scan(d_in=d_inp, d_out=d_cumsum, op=ema_combine, init_value=ValueScale(0.0, 0),
                           num_items=u.size)
    d_ema = cp.empty_like(u)
    cuprims.binary_transform(d_in1=d_cumsum, d_in2=CountingIterator(np.int64(0)), d_out=d_ema, op=ema_term,
                             num_items=u.size)
    d_ema += (EMA_ALPHA ** cp.arange(1, u.size + 1)) * u[0]
    np.testing.assert_allclose(d_ema.get(), _ema_reference(u.get(), EMA_ALPHA), rtol=1e-8)


@pytest.mark.parametrize("n", SIZES)
def test_sums_with_counts_of_a_zip_and_per_segment(n):
    x = np.random.default_rng(n).random(n).astype(np.float32)
    d_x = cp.asarray(x)
    zipped = ZipIterator(d_x, ConstantIterator(np.int32(1)))
    d_out = cp.empty(1, dtype=SumCount.dtype)
    cuprims.reduce_into(d_in=zipped, d_out=d_out, op=sum_count, num_items=n, h_init=SumCount(0.0, 0))
    got = d_out.get()[0]
    np.testing.assert_allclose(got["total"], x.astype(np.float64).sum(), rtol=1e-4)
    assert got["count"] == n
    offsets = np.unique(np.r_[0, np.sort(np.random.default_rng(1).integers(0, n, 7)), n]).astype(np.int64)
    d_seg = cp.empty(offsets.size - 1, dtype=SumCount.dtype)
    d_off = cp.asarray(offsets)
    cuprims.segmented_reduce(d_in=zipped, d_out=d_seg, num_segments=offsets.size - 1, start_offsets_in=d_off[:-1],
                             end_offsets_in=d_off[1:], op=sum_count, h_init={"total": 0.0, "count": 0})
    seg = d_seg.get()
    np.testing.assert_array_equal(seg["count"], np.diff(offsets))
    np.testing.assert_allclose(seg["total"], np.add.reduceat(x.astype(np.float64), offsets[:-1]), rtol=1e-4)


# ----------------------------------------------------------------------------- nested structs as dicts

def _particles(n):
    rng = np.random.default_rng(n)
    h = np.empty(n, Particle.dtype)
    h["id"] = rng.integers(0, 10, n)
    h["pos"]["x"] = rng.integers(-50, 50, n)            # whole numbers: float sums are exact
    h["pos"]["y"] = rng.integers(-50, 50, n) / 4
    return h


@pytest.mark.parametrize("h_init", [
    {"id": 3, "pos": {"x": 1.0, "y": 2.0}},
    (3, (1.0, 2.0)),
    np.array([(3, (1.0, 2.0))], Particle.dtype),
    np.array([(3, (1.0, 2.0))], Particle.dtype)[0],
    Particle(3, {"x": 1.0, "y": 2.0}),
], ids=["dict", "tuple", "array", "record", "instance"])
def test_nested_reduce_with_every_form_of_h_init(h_init):
    h = _particles(10000)
    d_out = cp.empty(1, dtype=Particle.dtype)
    cuprims.reduce_into(d_in=cp.asarray(h), d_out=d_out, op=particle_sum, num_items=h.size, h_init=h_init)
    got = d_out.get()[0]
    assert got["id"] == h["id"].sum() + 3
    assert got["pos"]["x"] == h["pos"]["x"].sum() + 1.0 and got["pos"]["y"] == h["pos"]["y"].sum() + 2.0


@pytest.mark.parametrize("n", SIZES)
def test_nested_scans_and_sort(n):
    h = _particles(n)
    d_in = cp.asarray(h)
    d_out = cp.empty(n, dtype=Particle.dtype)
    cuprims.exclusive_scan(d_in=d_in, d_out=d_out, op=particle_sum, init_value={"id": 0, "pos": {"x": 0.0, "y": 0.0}},
                           num_items=n)
    got = d_out.get()
    np.testing.assert_array_equal(got["id"], np.r_[0, np.cumsum(h["id"])[:-1]])
    np.testing.assert_array_equal(got["pos"]["x"], np.r_[0, np.cumsum(h["pos"]["x"])[:-1]])
    cuprims.inclusive_scan(d_in=d_in, d_out=d_out, op=rightmost, init_value=(0, (-np.inf, 0.0)), num_items=n)
    np.testing.assert_array_equal(d_out.get()["pos"]["x"], np.maximum.accumulate(h["pos"]["x"]))
    d_sorted = cp.empty(n, dtype=Particle.dtype)
    cuprims.merge_sort(d_in_keys=d_in, d_out_keys=d_sorted, num_items=n, op=by_pos_x)
    order = np.argsort(h["pos"]["x"], kind="stable")
    assert d_sorted.get().tobytes() == h[order].tobytes()


def test_nested_segmented_reduce_and_constant_iterator():
    h = _particles(3000)
    offsets = cp.asarray([0, 10, 10, 1500, 3000], dtype=np.int32)
    d_out = cp.empty(4, dtype=Particle.dtype)
    cuprims.segmented_reduce(d_in=cp.asarray(h), d_out=d_out, num_segments=4, start_offsets_in=offsets[:-1],
                             end_offsets_in=offsets[1:], op=rightmost,
                             h_init={"id": -1, "pos": {"x": -np.inf, "y": 0.0}})
    got = d_out.get()
    for s, (b, e) in enumerate([(0, 10), (10, 10), (10, 1500), (1500, 3000)]):
        if b == e:
            assert got[s]["id"] == -1 and got[s]["pos"]["x"] == -np.inf
        else:
            # CUB's reductions combine items out of order (they take the operator to be
            # commutative), so of the particles tied furthest right, any one may come back
            seg = h[b:e]
            furthest = seg[seg["pos"]["x"] == seg["pos"]["x"].max()]
            assert got[s].tobytes() in {p.tobytes() for p in furthest}
    const = ConstantIterator(Particle(1, {"x": 0.5, "y": 0.25}))
    out = cp.empty(1, dtype=Particle.dtype)
    cuprims.reduce_into(d_in=const, d_out=out, op=particle_sum, num_items=1000, h_init=(0, (0.0, 0.0)))
    assert out.get()[0].tolist() == (1000, (500.0, 250.0))
