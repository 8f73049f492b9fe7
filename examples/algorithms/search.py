"""Vectorised binary search: lower and upper bounds (numpy.searchsorted's left and right
sides), data sorted in descending order, and values read from an iterator."""

import cupy as cp
import numpy as np

import cuprims
from cuprims import CountingIterator, OpKind, TransformIterator


def main():
    rng = np.random.default_rng(3)
    data = np.sort(rng.integers(0, 1000, 10_000).astype(np.int32))
    values = rng.integers(-10, 1010, 500).astype(np.int32)
    d_data, d_values = cp.asarray(data), cp.asarray(values)
    out = cp.empty(500, cp.int64)          # indices: int32, int64, uint32 or uint64

    cuprims.lower_bound(d_data=d_data, num_items=data.size, d_values=d_values, num_values=500, d_out=out)
    assert (out.get() == np.searchsorted(data, values, side="left")).all()
    cuprims.upper_bound(d_data=d_data, num_items=data.size, d_values=d_values, num_values=500, d_out=out)
    assert (out.get() == np.searchsorted(data, values, side="right")).all()

    # data sorted by another order: the comparator it was sorted with
    desc = data[::-1].copy()
    cuprims.lower_bound(d_data=cp.asarray(desc), num_items=desc.size, d_values=d_values, num_values=500, d_out=out,
                        comp=OpKind.GREATER)
    assert (out.get() == desc.size - np.searchsorted(data, values, side="right")).all()

    # values computed on the fly: 0, 10, 20, ... 990 (i * 10 is an int64 in numba's typing:
    # value_type says the values are d_data's int32)
    every_tenth = TransformIterator(CountingIterator(np.int32(0)), lambda i: i * 10, np.int32)
    cuprims.lower_bound(d_data=d_data, num_items=data.size, d_values=every_tenth, num_values=100, d_out=out)
    assert (out.get()[:100] == np.searchsorted(data, np.arange(0, 1000, 10))).all()
    print("search: ok")


if __name__ == "__main__":
    main()
