"""for_each: an operator called on every item for its side effects (a scatter through a
permutation, a histogram with atomics), with arrays captured by the operator."""

import cupy as cp
import numpy as np
from numba import cuda

import cuprims
from cuprims import CountingIterator


def main():
    rng = np.random.default_rng(0)
    n = 1_000_000
    a = rng.random(n).astype(np.float32)
    p = rng.permutation(n).astype(np.int32)
    x, perm, out = cp.asarray(a), cp.asarray(p), cp.zeros(n, cp.float32)

    # a scatter: each index i writes x[i] to out[perm[i]]
    def scatter(i):
        out[perm[i]] = x[i]

    cuprims.for_each(d_in=CountingIterator(np.int32(0)), op=scatter, num_items=n)
    want = np.zeros(n, np.float32)
    want[p] = a
    assert (out.get() == want).all()

    # a histogram of one's own: ten bins of [0, 1), counted with atomics
    counts = cp.zeros(10, cp.int32)

    def count(v):
        cuda.atomic.add(counts, int(v * 10), 1)

    each = cuprims.make_for_each(d_in=x, op=count)
    tmp = cp.empty(each(temp_storage=None, d_in=x, num_items=n, op=count), cp.uint8)
    each(temp_storage=tmp, d_in=x, num_items=n, op=count)
    assert (counts.get() == np.histogram(a, bins=10, range=(0, 1))[0]).all()
    print("for_each: ok")


if __name__ == "__main__":
    main()
