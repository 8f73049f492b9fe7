"""Element-wise transforms: one input or two, built-in and Python operators, inputs and
output of different types."""

import cupy as cp
import numpy as np

import cuprims
from cuprims import OpKind


def main():
    a = np.arange(-50, 50, dtype=np.int8)
    x, y = cp.asarray(a), cp.empty(100, cp.float32)

    # the operator's result is converted to d_out's type
    cuprims.unary_transform(d_in=x, d_out=y, op=lambda v: v * 0.5 + 1, num_items=100)
    assert (y.get() == a * np.float32(0.5) + 1).all()

    cuprims.unary_transform(d_in=x, d_out=x, op=OpKind.NEGATE, num_items=100)    # in place
    assert (x.get() == -a).all()

    p = np.arange(100, dtype=np.float32)
    q = np.full(100, 3, np.int32)
    s = cp.empty(100, cp.float64)
    cuprims.binary_transform(d_in1=cp.asarray(p), d_in2=cp.asarray(q), d_out=s, op=OpKind.MULTIPLIES,
                             num_items=100)
    assert (s.get() == p * q).all()

    less = cp.empty(100, cp.bool_)
    cuprims.binary_transform(d_in1=cp.asarray(p), d_in2=cp.asarray(q), d_out=less, op=OpKind.LESS, num_items=100)
    assert (less.get() == (p < q)).all()

    # the object API: transforms need no temporary storage
    hyp = cp.empty(100, cp.float32)
    norm = cuprims.make_binary_transform(d_in1=cp.asarray(p), d_in2=cp.asarray(p), d_out=hyp,
                                         op=lambda u, v: (u * u + v * v) ** 0.5)
    norm(d_in1=cp.asarray(p), d_in2=cp.asarray(p), d_out=hyp, op=lambda u, v: (u * u + v * v) ** 0.5,
         num_items=100)
    assert np.allclose(hyp.get(), np.hypot(p, p), rtol=1e-6)
    print("transform: ok")


if __name__ == "__main__":
    main()
