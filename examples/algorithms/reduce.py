"""Reductions: a sum with a built-in operator, a maximum with a Python operator, the object
API (build once, size the temporary storage, run many times) and a reduction of gpu_struct
values."""

import cupy as cp
import numpy as np

import cuprims
from cuprims import OpKind


def main():
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.random(1 << 20, dtype=np.float32))
    out = cp.empty(1, np.float32)

    # one call: temporary storage is allocated and freed on the stream, nothing synchronises
    cuprims.reduce_into(d_in=x, d_out=out, num_items=x.size, op=OpKind.PLUS, h_init=np.float32(0))
    assert np.isclose(float(out[0]), float(x.sum()), rtol=1e-4)

    # a Python operator: small expressions are written into the kernel as C++,
    # anything else is compiled by numba-cuda and inlined at link time
    cuprims.reduce_into(d_in=x, d_out=out, num_items=x.size, op=lambda a, b: a if a > b else b,
                        h_init=np.float32(-np.inf))
    assert float(out[0]) == float(x.max())

    # the object API: build once, ask for the temporary storage, run many times
    reducer = cuprims.make_reduce_into(d_in=x, d_out=out, op=OpKind.PLUS, h_init=np.float32(0))
    nbytes = reducer(temp_storage=None, d_in=x, d_out=out, num_items=x.size, h_init=np.float32(0))
    tmp = cp.empty(nbytes, cp.uint8)
    for n in (1000, x.size):       # storage sized for the largest call serves smaller ones
        reducer(temp_storage=tmp, d_in=x, d_out=out, num_items=n, h_init=np.float32(0))
        assert np.isclose(float(out[0]), float(x[:n].sum()), rtol=1e-4)

    # the result has d_out's type: int8 items summed in int64 do not overflow
    small = cp.full(1000, 100, cp.int8)
    total = cp.empty(1, cp.int64)
    cuprims.reduce_into(d_in=small, d_out=total, num_items=small.size, op=OpKind.PLUS, h_init=np.int64(0))
    assert int(total[0]) == 100_000

    # user structs: the brightest pixel
    Pixel = cuprims.gpu_struct({"r": np.int32, "g": np.float32})

    def brighter(a, b):
        return a if a.g > b.g else b

    pixels = np.zeros(1000, Pixel.dtype)
    pixels["r"] = np.arange(1000)
    pixels["g"] = rng.permutation(1000)
    best = cp.empty(1, Pixel.dtype)
    cuprims.reduce_into(d_in=cp.asarray(pixels), d_out=best, num_items=1000, op=brighter, h_init=Pixel(0, -1.0))
    assert int(best.get()["r"][0]) == int(np.argmax(pixels["g"]))
    print("reduce: ok")


if __name__ == "__main__":
    main()
