"""Operators: built-in OpKinds, Python callables (closures, structs), device arrays an
operator captures, and a RawOp made from LTO-IR you compiled yourself."""

import cupy as cp
import numpy as np
from numba import cuda, types

import cuprims
from cuprims import CountingIterator, OpKind, TransformIterator


def main():
    rng = np.random.default_rng(8)
    a = rng.integers(-100, 100, 1000).astype(np.int32)
    x = cp.asarray(a)
    out = cp.empty(1, cp.int32)

    # built-ins, by OpKind or by name
    cuprims.reduce_into(d_in=x, d_out=out, num_items=x.size, op=OpKind.MAXIMUM, h_init=np.int32(-1000))
    assert int(out[0]) == a.max()
    cuprims.reduce_into(d_in=x, d_out=out, num_items=x.size, op="bit_xor", h_init=np.int32(0))
    assert int(out[0]) == np.bitwise_xor.reduce(a)

    # a Python function, closing over a scalar
    bound = 50

    def clamped_add(p, q):
        return min(p + q, bound)

    running = cp.empty(100, cp.int32)
    cuprims.inclusive_scan(d_in=cp.ones(100, cp.int32), d_out=running, op=clamped_add, num_items=100)
    assert (running.get() == np.minimum(np.arange(1, 101), bound)).all()

    # a predicate returns a truth value: a bool or a number (nonzero is true)
    odd, count = cp.empty_like(x), cp.empty(1, cp.int64)
    cuprims.select(d_in=x, d_out=odd, d_num_selected_out=count, cond=lambda v: v % 2, num_items=x.size)
    assert int(count[0]) == int((a % 2 != 0).sum())

    # structs: fields by name; the result may be a struct or a tuple of field values
    @cuprims.gpu_struct
    class Interval:
        lo: np.int32
        hi: np.int32

    def hull(p, q):
        return (min(p.lo, q.lo), max(p.hi, q.hi))

    spans = np.zeros(100, Interval.dtype)
    spans["lo"] = rng.integers(0, 50, 100)
    spans["hi"] = spans["lo"] + rng.integers(0, 50, 100)
    whole = cp.empty(1, Interval.dtype)
    cuprims.reduce_into(d_in=cp.asarray(spans), d_out=whole, num_items=100, op=hull,
                        h_init=Interval(np.iinfo(np.int32).max, np.iinfo(np.int32).min))
    got = whole.get()[0]
    assert (got["lo"], got["hi"]) == (spans["lo"].min(), spans["hi"].max())

    # a captured device array is bound at each call: rebinding it compiles nothing new
    table = cp.asarray(rng.random(1000, dtype=np.float32))
    gather = TransformIterator(CountingIterator(np.int32(0)), lambda i: table[i])
    total = cp.empty(1, cp.float32)
    cuprims.reduce_into(d_in=gather, d_out=total, num_items=1000, op=OpKind.PLUS, h_init=np.float32(0))
    assert np.isclose(float(total[0]), float(table.sum()), rtol=1e-4)
    table = cp.ones(1000, cp.float32)      # the next call reads this array
    cuprims.reduce_into(d_in=gather, d_out=total, num_items=1000, op=OpKind.PLUS, h_init=np.float32(0))
    assert float(total[0]) == 1000.0

    # a RawOp: LTO-IR of `void name(void* lhs, void* rhs, void* result)`, here made by numba
    def add(pa, pb, pr):
        pr[0] = pa[0] + pb[0]

    ptr = types.CPointer(types.float64)
    ltoir, _ = cuda.compile(add, types.void(ptr, ptr, ptr), device=True, abi="c",
                            abi_info={"abi_name": "my_add"}, output="ltoir",
                            cc=cuda.get_current_device().compute_capability)
    f = rng.random(1000)
    f_out = cp.empty(1, cp.float64)
    cuprims.reduce_into(d_in=cp.asarray(f), d_out=f_out, num_items=f.size, op=cuprims.RawOp(ltoir=ltoir, name="my_add"),
                        h_init=np.float64(0))
    assert np.isclose(float(f_out[0]), f.sum())
    print("operators: ok")


if __name__ == "__main__":
    main()
