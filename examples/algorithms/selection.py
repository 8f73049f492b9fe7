"""Selection: select (stream compaction), three-way partition and unique-by-key. Counts are
written on the device: nothing synchronises until you read them."""

import cupy as cp
import numpy as np

import cuprims
from cuprims import OpKind


def main():
    rng = np.random.default_rng(5)
    a = rng.integers(0, 1000, 10_000).astype(np.int32)
    x = cp.asarray(a)

    # select: the items for which cond holds, in input order
    evens, count = cp.empty_like(x), cp.empty(1, cp.int64)
    cuprims.select(d_in=x, d_out=evens, d_num_selected_out=count, cond=lambda v: v % 2 == 0, num_items=x.size)
    m = int(count[0])
    assert (evens[:m].get() == a[a % 2 == 0]).all()

    # three-way partition: first part, second part, the rest; two counts
    small, large, rest = cp.empty_like(x), cp.empty_like(x), cp.empty_like(x)
    counts = cp.empty(2, cp.int64)
    cuprims.three_way_partition(d_in=x, d_first_part_out=small, d_second_part_out=large, d_unselected_out=rest,
                                d_num_selected_out=counts, select_first_part_op=lambda v: v < 100,
                                select_second_part_op=lambda v: v >= 900, num_items=x.size)
    n1, n2 = (int(c) for c in counts.get())
    assert (small[:n1].get() == a[a < 100]).all() and (large[:n2].get() == a[a >= 900]).all()
    assert (rest[:a.size - n1 - n2].get() == a[(a >= 100) & (a < 900)]).all()

    # unique-by-key: the first key and item of each run of equal keys
    keys = np.sort(rng.integers(0, 50, 1000)).astype(np.int32)
    items = np.arange(1000, dtype=np.float32)
    ko, io, runs = cp.empty(1000, cp.int32), cp.empty(1000, cp.float32), cp.empty(1, cp.int32)
    cuprims.unique_by_key(d_in_keys=cp.asarray(keys), d_in_items=cp.asarray(items), d_out_keys=ko, d_out_items=io,
                          d_out_num_selected=runs, op=OpKind.EQUAL_TO, num_items=1000)
    unique, first = np.unique(keys, return_index=True)
    r = int(runs[0])
    assert r == unique.size and (ko[:r].get() == unique).all() and (io[:r].get() == items[first]).all()
    print("selection: ok")


if __name__ == "__main__":
    main()
