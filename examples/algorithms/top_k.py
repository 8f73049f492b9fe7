"""Top-k: the k largest keys with their indices, the k smallest sorted, NaNs as numpy orders
them, and the object API with its temporary-storage query."""

import cupy as cp
import numpy as np

import cuprims
from cuprims import CountingIterator, SortOrder


def main():
    a = np.random.default_rng(0).standard_normal(1_000_000).astype(np.float32)
    x = cp.asarray(a)

    # the 1000 largest and where they were (indices from a CountingIterator), in no order
    keys, where = cp.empty(1000, cp.float32), cp.empty(1000, cp.int32)
    cuprims.top_k(d_in_keys=x, d_in_values=CountingIterator(np.int32(0)), d_out_keys=keys, d_out_values=where,
                  k=1000, num_items=x.size)
    assert (np.sort(keys.get()) == np.sort(a)[-1000:]).all() and (a[where.get()] == keys.get()).all()

    # the 5 smallest, smallest first; a NaN counts as larger than +inf
    a[:3] = np.nan
    x = cp.asarray(a)
    smallest = cp.empty(5, cp.float32)
    cuprims.top_k(d_in_keys=x, d_out_keys=smallest, k=5, num_items=x.size, order=SortOrder.ASCENDING, sorted=True)
    assert (smallest.get() == np.sort(a)[:5]).all()

    # the object API: built once, k given at each call
    t = cuprims.make_top_k(d_in_keys=x, d_out_keys=keys)
    tmp = cp.empty(t(temp_storage=None, d_in_keys=x, d_out_keys=keys, k=10, num_items=x.size), cp.uint8)
    t(temp_storage=tmp, d_in_keys=x, d_out_keys=keys, k=10, num_items=x.size)
    assert np.isnan(keys.get()[:10]).sum() == 3     # the three NaNs are among the 10 largest
    print("top_k: ok")


if __name__ == "__main__":
    main()
