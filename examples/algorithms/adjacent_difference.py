"""Adjacent differences: numpy's diff in either direction, in place or not, with a Python
operator."""

import cupy as cp
import numpy as np

import cuprims
from cuprims import OpKind


def main():
    a = np.arange(1000, dtype=np.int64) ** 2
    x, y = cp.asarray(a), cp.empty(1000, cp.int64)

    # left: each item minus the one before it (the first copied): y[1:] is np.diff(a)
    cuprims.adjacent_difference(d_in=x, d_out=y, op=OpKind.MINUS, num_items=1000)
    assert (y.get()[1:] == np.diff(a)).all() and y.get()[0] == a[0]

    # right: each item with the one after it (the last copied), with a Python operator
    ratio = cp.empty(1000, cp.float64)
    cuprims.adjacent_difference(d_in=x, d_out=ratio, op=lambda v, after: after / (v + 1), num_items=1000,
                                direction="right")
    assert np.allclose(ratio.get()[:-1], a[1:] / (a[:-1] + 1))

    # in place, through the object API: the temporary storage holds a neighbour per tile
    diff = cuprims.make_adjacent_difference(d_in=x, d_out=x, op=OpKind.MINUS)
    tmp = cp.empty(diff(temp_storage=None, d_in=x, d_out=x, num_items=1000), cp.uint8)
    diff(temp_storage=tmp, d_in=x, d_out=x, num_items=1000)
    assert (x.get()[1:] == np.diff(a)).all()
    print("adjacent_difference: ok")


if __name__ == "__main__":
    main()
