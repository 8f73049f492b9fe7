"""Segmented reduction: per-segment sums from offset arrays, fixed-size segments whose
offsets come from iterators, and the max_segment_size hint."""

import cupy as cp
import numpy as np

import cuprims
from cuprims import CountingIterator, OpKind, TransformIterator


def main():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 100, 1000).astype(np.int32)
    d_x = cp.asarray(x)

    # segments [offsets[i], offsets[i + 1]): an empty one gets h_init
    offsets = np.array([0, 10, 10, 600, 1000], dtype=np.int64)
    d_off = cp.asarray(offsets)
    sums = cp.empty(4, cp.int32)
    cuprims.segmented_reduce(d_in=d_x, d_out=sums, num_segments=4, start_offsets_in=d_off[:-1],
                             end_offsets_in=d_off[1:], op=OpKind.PLUS, h_init=np.int32(0))
    assert sums.get().tolist() == [x[s:e].sum() for s, e in zip(offsets[:-1], offsets[1:])]

    # rows of 100: offsets computed on the fly, and a promise that no segment is longer
    starts = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * 100)
    ends = TransformIterator(CountingIterator(np.int64(1)), lambda i: i * 100)
    row_max = cp.empty(10, cp.int32)
    cuprims.segmented_reduce(d_in=d_x, d_out=row_max, num_segments=10, start_offsets_in=starts, end_offsets_in=ends,
                             op=OpKind.MAXIMUM, h_init=np.int32(np.iinfo(np.int32).min), max_segment_size=100)
    assert (row_max.get() == x.reshape(10, 100).max(axis=1)).all()
    print("segmented_reduce: ok")


if __name__ == "__main__":
    main()
