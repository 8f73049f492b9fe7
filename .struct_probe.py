import numpy as np, cupy as cp, cuprims
P = cuprims.gpu_struct({"r": np.int32, "g": np.float32}, name="P")
Q = cuprims.gpu_struct({"c": np.int8, "d": np.float64, "e": np.int16}, name="Q")
O = cuprims.gpu_struct({"flag": np.bool_, "p": P, "v": (np.float64, 2), "m": (np.int16, (2, 2))}, name="O")
class Dev:   # descr without padding entries (cuprims' CAI reader does not skip them yet)
    def __init__(s, buf, dt, n): s.buf, s.dt, s.n = buf, dt, n
    @property
    def __cuda_array_interface__(s):
        return {"shape": (s.n,), "typestr": s.dt.str, "descr": [d for d in s.dt.descr if d[0]],
                "data": (s.buf.data.ptr, False), "version": 3, "strides": None}
def run(T, h, op, init):
    ob = cp.zeros(T.dtype.itemsize, cp.uint8)
    cuprims.reduce_into(d_in=Dev(cp.asarray(h.view(np.uint8)), T.dtype, len(h)), d_out=Dev(ob, T.dtype, 1),
                        num_items=len(h), op=op, h_init=init)
    return ob.get().view(T.dtype)[0]
rng = np.random.default_rng(1)
LOW = Q(0, 0.0, -32768)
for n in (7, 100_003):
    h = np.zeros(n, Q.dtype); h["c"] = rng.integers(-3, 3, n); h["d"] = rng.random(n); h["e"] = rng.integers(-999, 999, n)
    r = run(Q, h, lambda a, b: Q(a.c + b.c, a.d + b.d, max(a.e, b.e, LOW.e)), Q(0, 0.0, -32768))
    print("Q", n, r["c"] == h["c"].sum(dtype=np.int8), np.isclose(r["d"], h["d"].sum()), r["e"] == h["e"].max())
    h = np.zeros(n, O.dtype); h["flag"] = rng.random(n) < 2.0 / n; h["p"]["r"] = rng.integers(-9, 9, n)
    h["p"]["g"] = rng.random(n); h["v"] = rng.random((n, 2)); h["m"] = rng.integers(-5, 5, (n, 2, 2))
    def op(a, b):
        return O(a.flag or b.flag, P(a.p.r + b.p.r, max(a.p.g, b.p.g)), (a.v[0] + b.v[0], max(a.v[1], b.v[1])),
                 ((a.m[0, 0] + b.m[0, 0], min(a.m[0, 1], b.m[0, 1])), (a.m[1, 0] | b.m[1, 0], 7)))
    r = run(O, h, op, O(False, (0, 0.0), (0.0, 0.0), ((0, 99), (0, 0))))
    m = h["m"]
    print("O", n, r["flag"] == h["flag"].any(), r["p"]["r"] == h["p"]["r"].sum(), r["p"]["g"] == h["p"]["g"].max(),
          np.isclose(r["v"][0], h["v"][:, 0].sum()), r["v"][1] == h["v"][:, 1].max(),
          r["m"].tolist() == [[m[:, 0, 0].sum(dtype=np.int16), min(99, m[:, 0, 1].min())],
                              [np.bitwise_or.reduce(m[:, 1, 0]), 7]])
    r2 = run(O, h, lambda a, b: b if b.p.g > a.p.g else a, O(False, (0, -1.0), (0.0, 0.0), ((0, 0), (0, 0))))
    i = np.argmax(h["p"]["g"]); print("O rec", n, r2.tobytes() == h[i].tobytes())
