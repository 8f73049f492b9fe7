"""Sorts: radix sort of keys and of key-value pairs, a DoubleBuffer that spares the scratch
copy, merge sort by a Python comparator and as a stable argsort, and a segmented sort."""

import cupy as cp
import numpy as np

import cuprims
from cuprims import CountingIterator, SortOrder


def main():
    rng = np.random.default_rng(2)
    n = 100_000

    # radix sort: keys of any bool, integer or floating-point dtype, values of any dtype
    keys = rng.random(n, dtype=np.float32)
    vals = np.arange(n, dtype=np.int64)
    d_keys, d_vals = cp.asarray(keys), cp.asarray(vals)
    out_k, out_v = cp.empty_like(d_keys), cp.empty_like(d_vals)
    cuprims.radix_sort(d_in_keys=d_keys, d_out_keys=out_k, d_in_values=d_vals, d_out_values=out_v,
                       num_items=n, order=SortOrder.ASCENDING)
    order = np.argsort(keys, kind="stable")
    assert (out_k.get() == keys[order]).all() and (out_v.get() == order).all()

    # a DoubleBuffer: the sort uses both buffers and says in which one the result is
    buf = cuprims.DoubleBuffer(cp.asarray(keys), cp.empty_like(d_keys))
    cuprims.radix_sort(d_in_keys=buf, d_out_keys=None, num_items=n, order=SortOrder.DESCENDING)
    assert (buf.current().get() == np.sort(keys)[::-1]).all()

    # merge sort: any key type and a comparator "a goes before b"; stable
    ints = rng.integers(-1000, 1000, n).astype(np.int32)
    d_ints = cp.asarray(ints)
    by_abs = cp.empty_like(d_ints)
    cuprims.merge_sort(d_in_keys=d_ints, d_out_keys=by_abs, num_items=n, op=lambda a, b: abs(a) < abs(b))
    assert (by_abs.get() == ints[np.argsort(np.abs(ints), kind="stable")]).all()

    # a stable argsort: the values come from a CountingIterator, no index array is made
    sorted_ints, perm = cp.empty_like(d_ints), cp.empty(n, cp.int64)
    cuprims.merge_sort(d_in_keys=d_ints, d_in_values=CountingIterator(np.int64(0)), d_out_keys=sorted_ints,
                       d_out_values=perm, num_items=n, op=cuprims.OpKind.LESS)
    assert (perm.get() == np.argsort(ints, kind="stable")).all()

    # segmented sort: each segment [start, end) sorted on its own
    seg = rng.integers(0, 100, 12).astype(np.int32)
    offsets = cp.asarray(np.array([0, 5, 5, 12], dtype=np.int32))     # segments of 5, 0 and 7 keys
    seg_out = cp.empty(12, cp.int32)
    cuprims.segmented_sort(d_in_keys=cp.asarray(seg), d_out_keys=seg_out, num_items=12, num_segments=3,
                           start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:], order=SortOrder.ASCENDING)
    assert (seg_out.get() == np.concatenate([np.sort(seg[:5]), np.sort(seg[5:])])).all()
    print("sort: ok")


if __name__ == "__main__":
    main()
