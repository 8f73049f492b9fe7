"""Iterators: sequences computed, gathered or transformed on the fly where an algorithm
reads an array, and outputs that reverse, transform or drop what it writes."""

import cupy as cp
import numpy as np

import cuprims
from cuprims import (CacheModifiedInputIterator, ConstantIterator, CountingIterator, DiscardIterator, OpKind,
                     PermutationIterator, ReverseIterator, ShuffleIterator, TransformIterator,
                     TransformOutputIterator, ZipIterator)


def main():
    rng = np.random.default_rng(7)
    n = 10_000
    a = rng.random(n, dtype=np.float32)
    x = cp.asarray(a)
    out = cp.empty(1, cp.float32)

    # CountingIterator: 0, 1, 2, ... (nothing stored)
    total = cp.empty(1, cp.int64)
    cuprims.reduce_into(d_in=CountingIterator(np.int64(0)), d_out=total, num_items=n, op=OpKind.PLUS,
                        h_init=np.int64(0))
    assert int(total[0]) == n * (n - 1) // 2

    # TransformIterator: the sum of squares, without an array of squares
    cuprims.reduce_into(d_in=TransformIterator(x, lambda v: v * v), d_out=out, num_items=n, op=OpKind.PLUS,
                        h_init=np.float32(0))
    assert np.isclose(float(out[0]), float((a * a).sum()), rtol=1e-4)

    # ZipIterator: argmax, the first index on ties, as numpy's
    Pair = cuprims.gpu_struct({"value": np.float32, "index": np.int64})

    def better(p, q):
        return p if p[0] > q[0] or (p[0] == q[0] and p[1] < q[1]) else q

    best = cp.empty(1, Pair.dtype)
    cuprims.reduce_into(d_in=ZipIterator(x, CountingIterator(np.int64(0))), d_out=best, num_items=n, op=better,
                        h_init=Pair(-np.inf, np.iinfo(np.int64).max))
    assert int(best.get()["index"][0]) == int(np.argmax(a))

    # PermutationIterator: x[idx] gathered as it is read
    idx = rng.integers(0, n, 100)
    cuprims.reduce_into(d_in=PermutationIterator(x, cp.asarray(idx)), d_out=out, num_items=100, op=OpKind.PLUS,
                        h_init=np.float32(0))
    assert np.isclose(float(out[0]), float(a[idx].sum()), rtol=1e-5)

    # ReverseIterator as an output: the scan is written from the end of y
    y = cp.empty_like(x)
    cuprims.inclusive_scan(d_in=x, d_out=ReverseIterator(y), op=OpKind.PLUS, num_items=n)
    assert np.allclose(y.get()[::-1], np.cumsum(a, dtype=np.float64), rtol=1e-4)

    # TransformOutputIterator: the mean, divided as the result is written
    cuprims.reduce_into(d_in=x, d_out=TransformOutputIterator(out, lambda s: s / 10_000), num_items=n,
                        op=OpKind.PLUS, h_init=np.float32(0))
    assert np.isclose(float(out[0]), float(a.mean()), rtol=1e-4)

    # DiscardIterator: an output you do not need (here only the count is wanted)
    count = cp.empty(1, cp.int64)
    cuprims.select(d_in=x, d_out=DiscardIterator(x), d_num_selected_out=count, cond=lambda v: v > 0.5,
                   num_items=n)
    assert int(count[0]) == int((a > 0.5).sum())

    # ConstantIterator: the same value for every item
    twice = cp.empty_like(x)
    cuprims.binary_transform(d_in1=x, d_in2=ConstantIterator(np.float32(2)), d_out=twice, op=OpKind.MULTIPLIES,
                             num_items=n)
    assert (twice.get() == 2 * a).all()

    # ShuffleIterator: a pseudo-random permutation of 0..n-1, the same for the same seed
    perm = cp.empty(n, cp.int64)
    cuprims.unary_transform(d_in=ShuffleIterator(n, seed=7), d_out=perm, op=OpKind.IDENTITY, num_items=n)
    assert (np.sort(perm.get()) == np.arange(n)).all()

    # CacheModifiedInputIterator: x read with evict-first (streaming) loads
    cuprims.reduce_into(d_in=CacheModifiedInputIterator(x, modifier="stream"), d_out=out, num_items=n,
                        op=OpKind.PLUS, h_init=np.float32(0))
    assert np.isclose(float(out[0]), float(a.sum()), rtol=1e-4)
    print("iterators: ok")


if __name__ == "__main__":
    main()
