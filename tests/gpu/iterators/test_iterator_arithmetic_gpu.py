"""``it + n`` on the GPU, as cuda.compute users write it: end offsets from start offsets
(a segmented reduction whose ``end = start + 1`` over a TransformIterator of a
CountingIterator), advanced Zip, Permutation, Transform and nested iterators read by an
algorithm, and an advanced output (a reversed array + 2 written by a transform), each
against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import cuprims
from cuprims import (CountingIterator, OpKind, PermutationIterator, ReverseIterator, TransformIterator,
                     ZipIterator)

cp = pytest.importorskip("cupy")


def test_segment_ends_are_the_starts_plus_one():
    values = np.random.default_rng(0).standard_normal(100 * 256).astype(np.float32)
    start = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * 256)
    out = cp.empty(100, np.float32)
    cuprims.segmented_reduce(d_in=cp.asarray(values), d_out=out, num_segments=100, start_offsets_in=start,
                             end_offsets_in=start + 1, op=OpKind.PLUS, h_init=np.float32(0))
    np.testing.assert_allclose(out.get(), values.reshape(100, 256).sum(axis=1), rtol=1e-4, atol=1e-4)


def _copy(it, n, dtype):
    out = cp.empty(n, dtype)
    cuprims.unary_transform(d_in=it, d_out=out, op=lambda v: v, num_items=n)
    return out.get()


def test_advanced_inputs_read_from_their_item_n():
    n = 1000
    a = np.arange(2 * n, dtype=np.int32)
    b = (np.arange(2 * n) * 0.5).astype(np.float32)
    idx = np.random.default_rng(1).permutation(2 * n).astype(np.int64)
    d_a, d_b, d_idx = cp.asarray(a), cp.asarray(b), cp.asarray(idx)
    np.testing.assert_array_equal(_copy(CountingIterator(np.int64(5)) + 3, n, np.int64), np.arange(8, 8 + n))
    np.testing.assert_array_equal(_copy(PermutationIterator(d_a, d_idx) + 1, n, np.int32), a[idx][1:n + 1])
    np.testing.assert_array_equal(_copy(TransformIterator(d_a, lambda v: v * 3) + 7, n, np.int32), a[7:n + 7] * 3)
    np.testing.assert_array_equal(_copy(ReverseIterator(d_a) + 2, n, np.int32), a[::-1][2:n + 2])
    zipped = ZipIterator(d_a, d_b) + 4
    out = cp.empty(n, np.float32)
    cuprims.unary_transform(d_in=zipped, d_out=out, op=lambda p: p[0] + p[1], num_items=n)
    np.testing.assert_allclose(out.get(), a[4:n + 4] + b[4:n + 4])
    nested = TransformIterator(PermutationIterator(d_a, d_idx) + 2, lambda v: v + 1) + 3
    np.testing.assert_array_equal(_copy(nested, n, np.int32), a[idx][5:n + 5] + 1)


def test_an_advanced_output_is_written_from_its_item_n():
    n = 500
    dest = cp.zeros(n + 2, np.int32)
    cuprims.unary_transform(d_in=CountingIterator(np.int32(1)), d_out=ReverseIterator(dest) + 2, op=lambda v: v,
                            num_items=n)
    want = np.zeros(n + 2, np.int32)
    want[:n] = np.arange(1, n + 1)[::-1]
    np.testing.assert_array_equal(dest.get(), want)
