"""Merging two sorted sequences: keys alone, key-value pairs (stable: equal keys of the first
sequence come first), NaNs in numpy's order, and a descending Python comparator through the
object API."""

import cupy as cp
import numpy as np

import cuprims
from cuprims import OpKind


def main():
    rng = np.random.default_rng(0)
    a = np.sort(rng.integers(0, 100, 3000)).astype(np.int32)
    b = np.sort(rng.integers(0, 100, 5000)).astype(np.int32)
    d_a, d_b, out = cp.asarray(a), cp.asarray(b), cp.empty(8000, cp.int32)

    # keys alone: the result is np.sort(np.concatenate([a, b]))
    cuprims.merge(d_in_keys1=d_a, d_in_values1=None, d_in_keys2=d_b, d_in_values2=None, d_out_keys=out,
                  d_out_values=None, num_items1=a.size, num_items2=b.size, op=OpKind.LESS)
    assert (out.get() == np.sort(np.concatenate([a, b]))).all()

    # pairs: the values say where each key came from; equal keys keep the first sequence first
    va, vb = cp.arange(3000, dtype=cp.int32), cp.arange(3000, 8000, dtype=cp.int32)
    origin = cp.empty(8000, cp.int32)
    cuprims.merge(d_in_keys1=d_a, d_in_values1=va, d_in_keys2=d_b, d_in_values2=vb, d_out_keys=out,
                  d_out_values=origin, num_items1=a.size, num_items2=b.size, op=OpKind.LESS)
    assert (origin.get() == np.argsort(np.concatenate([a, b]), kind="stable")).all()

    # floats: OpKind.LESS is numpy's order, NaN last (the inputs sorted so, as np.sort sorts)
    x = cp.asarray([-1.0, 0.5, np.nan], cp.float32)
    y = cp.asarray([0.0, 2.0, np.inf], cp.float32)
    z = cp.empty(6, cp.float32)
    cuprims.merge(d_in_keys1=x, d_in_values1=None, d_in_keys2=y, d_in_values2=None, d_out_keys=z,
                  d_out_values=None, num_items1=3, num_items2=3, op=OpKind.LESS)
    assert np.array_equal(z.get(), [-1.0, 0.0, 0.5, 2.0, np.inf, np.nan], equal_nan=True)

    # a descending Python comparator, through the object API (temporary storage queried once)
    ra, rb = cp.asarray(a[::-1].copy()), cp.asarray(b[::-1].copy())
    kw = dict(d_in_keys1=ra, d_in_values1=None, d_in_keys2=rb, d_in_values2=None, d_out_keys=out,
              d_out_values=None)
    m = cuprims.make_merge(op=lambda p, q: p > q, **kw)
    tmp = cp.empty(m(temp_storage=None, num_items1=3000, num_items2=5000, **kw), cp.uint8)
    m(temp_storage=tmp, num_items1=3000, num_items2=5000, **kw)
    assert (out.get() == np.sort(np.concatenate([a, b]))[::-1]).all()
    print("merge: ok")


if __name__ == "__main__":
    main()
