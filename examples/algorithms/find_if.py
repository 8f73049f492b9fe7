"""find_if: the index of the first item for which a predicate holds (or num_items), with a
Python predicate, a captured array, an iterator and the built-in truth value."""

import cupy as cp
import numpy as np

import cuprims
from cuprims import CountingIterator, OpKind, TransformIterator


def main():
    rng = np.random.default_rng(0)
    a = rng.random(1_000_000).astype(np.float32)
    a[[123_456, 654_321]] = np.nan
    x, where = cp.asarray(a), cp.empty(1, np.int64)

    # the first NaN (NaN is the one value not equal to itself)
    cuprims.find_if(d_in=x, d_out_index=where, cond=lambda v: v != v, num_items=a.size)
    assert int(where[0]) == 123_456

    # none matches: the answer is num_items
    cuprims.find_if(d_in=x, d_out_index=where, cond=lambda v: v > 2.0, num_items=a.size)
    assert int(where[0]) == a.size

    # a threshold read from a device array at each call, through the object API
    threshold = cp.asarray([0.9999], np.float32)

    def above(v):
        return v > threshold[0]

    find = cuprims.make_find_if(d_in=x, d_out_index=where, cond=above)
    tmp = cp.empty(find(temp_storage=None, d_in=x, d_out_index=where, num_items=a.size, cond=above), cp.uint8)
    find(temp_storage=tmp, d_in=x, d_out_index=where, num_items=a.size, cond=above)
    assert int(where[0]) == int(np.argmax(a > 0.9999))

    # the first square past a bound, from an iterator (nothing in memory); a 32-bit index
    squares = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * i)
    where32 = cp.empty(1, np.int32)
    cuprims.find_if(d_in=squares, d_out_index=where32, cond=lambda v: v > 10**10, num_items=10**6)
    assert int(where32[0]) == 100_001

    # an item's own truth value
    flags = cp.zeros(1000, cp.bool_)
    flags[777] = True
    cuprims.find_if(d_in=flags, d_out_index=where, cond=OpKind.IDENTITY, num_items=1000)
    assert int(where[0]) == 777
    print("find_if: ok")


if __name__ == "__main__":
    main()
