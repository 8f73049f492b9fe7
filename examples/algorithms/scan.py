"""Prefix scans: inclusive and exclusive sums, an initial value read from device memory, a
running maximum in place, and a scan whose output type is wider than its input."""

import cupy as cp
import numpy as np

import cuprims
from cuprims import OpKind


def main():
    a = np.arange(1, 1001, dtype=np.int32)
    x, y = cp.asarray(a), cp.empty(1000, cp.int32)

    cuprims.inclusive_scan(d_in=x, d_out=y, op=OpKind.PLUS, num_items=x.size)
    assert (y.get() == np.cumsum(a)).all()

    # an exclusive scan needs an initial value: y[0] == init
    cuprims.exclusive_scan(d_in=x, d_out=y, op=OpKind.PLUS, init_value=np.int32(0), num_items=x.size)
    assert (y.get() == np.concatenate([[0], np.cumsum(a)[:-1]])).all()

    # the initial value may be a one-element device array, read when the kernel runs
    start = cp.asarray([100], dtype=cp.int32)
    cuprims.exclusive_scan(d_in=x, d_out=y, op=lambda p, q: p + q, init_value=start, num_items=x.size)
    assert (y.get() == 100 + np.concatenate([[0], np.cumsum(a)[:-1]])).all()

    # a running maximum, in place (d_in and d_out may be the same array)
    b = np.random.default_rng(1).integers(0, 1 << 20, 5000).astype(np.int32)
    z = cp.asarray(b)
    cuprims.inclusive_scan(d_in=z, d_out=z, op=OpKind.MAXIMUM, num_items=z.size)
    assert (z.get() == np.maximum.accumulate(b)).all()

    # the scan computes in d_out's type: int8 items into int64 sums
    c = np.full(1000, 127, np.int8)
    wide = cp.empty(1000, cp.int64)
    cuprims.inclusive_scan(d_in=cp.asarray(c), d_out=wide, op=OpKind.PLUS, num_items=c.size)
    assert (wide.get() == np.cumsum(c, dtype=np.int64)).all()

    # segmented scans: each segment scanned on its own (offsets as CuPy's int64 arrays)
    lengths = np.random.default_rng(2).integers(0, 300, 200)
    offsets = np.r_[0, np.cumsum(lengths)]
    v = np.random.default_rng(3).random(offsets[-1]).astype(np.float32)
    d_v, d_offsets = cp.asarray(v), cp.asarray(offsets)
    running = cp.empty_like(d_v)
    cuprims.segmented_inclusive_scan(d_in=d_v, d_out=running, start_offsets_in=d_offsets[:-1],
                                     end_offsets_in=d_offsets[1:], op=OpKind.PLUS, num_segments=lengths.size)
    want = np.concatenate([np.cumsum(v[b:e]) for b, e in zip(offsets[:-1], offsets[1:])])
    assert np.allclose(running.get(), want, rtol=1e-4)
    print("scan: ok")


if __name__ == "__main__":
    main()
