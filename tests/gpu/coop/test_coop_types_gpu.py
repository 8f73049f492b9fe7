"""coop primitives on the element types beyond ints and floats, on the GPU against numpy:
float16, complex64, complex128 and bool for block sum/reduce/scan/load/store/exchange
and warp sum/reduce; structs (aligned numpy structured dtypes) for block load/store and
exchange and warp reduce.

Style 1 kernels keep the items in numba's own local arrays, which are less aligned than
the C++ types for complex (numba's complex64 is 4-aligned, ``cuda::std::complex<float>``
8) and structs (numba's records are byte arrays); the providers copy such values into
aligned locals (docs/design/coop.md), and some kernels here index their items at run time so
that they stay in local memory.

Values are exact in every type (small integers, in float16 and complex too), so the sums
and scans compare equal to numpy's whatever the order of the additions. A bool's sum is
CUB's ``+`` on bool: a logical or (numpy's ``np.add`` on bool, too).
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

from cuprims import coop  # noqa: E402
from twins import PAIR, WIDE, bigger, dims_of, threads_of  # noqa: E402

SCALARS = [np.float16, np.complex64, np.complex128, np.bool_]
STRUCTS = [PAIR, WIDE]
RNG = np.random.default_rng(23)


def _ids(dtypes):
    return [np.dtype(d).name if np.dtype(d).names is None else f"struct{np.dtype(d).itemsize}" for d in dtypes]


def _values(n, dtype, p_true=0.002):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        x = RNG.random(n) < p_true         # tiles of only False, and tiles with a few True
        if n >= 1400:
            x[:700] = False                # a tile or more of only False for sure
        return x
    if dtype.kind == "f":
        return RNG.integers(0, 4, n).astype(dtype)              # sums of up to 682 stay exact in float16
    if dtype.kind == "c":
        return (RNG.integers(-3, 4, n) + 1j * RNG.integers(-3, 4, n)).astype(dtype)
    x = np.zeros(n, dtype=dtype)
    for name in dtype.names:
        field = x[name]
        x[name] = (RNG.integers(-100, 100, n) * (1 + 1j if field.dtype.kind == "c" else 1)).astype(field.dtype)
    return x


def _fill(dtype):
    """A padding value that is not among _values (to see where loads pad)."""
    dtype = np.dtype(dtype)
    if dtype.names is not None:
        f = np.zeros(1, dtype=dtype)
        for name in dtype.names:
            f[name] = 77
        return f
    return np.array([True if dtype.kind == "b" else 77], dtype=dtype)


def _add(a, b):
    return a + b


def _differ(a, b):
    return a != b


# per scalar type: a Python reduction operator and its numpy counterpart (reduce, accumulate)
PY_OPS = {
    "float16": (bigger, np.maximum.reduce, np.maximum.accumulate),
    "complex64": (_add, np.add.reduce, np.cumsum),
    "complex128": (_add, np.add.reduce, np.cumsum),
    "bool": (_differ, np.logical_xor.reduce, np.logical_xor.accumulate),   # parity: order-independent
}


def _sum_np(t):
    return np.logical_or.reduce(t) if t.dtype.kind == "b" else t.sum(dtype=t.dtype)


def _cumsum_np(t):
    return np.logical_or.accumulate(t) if t.dtype.kind == "b" else np.cumsum(t, dtype=t.dtype)


# ---------------------------------------------------------------- block sum and reduce

@pytest.mark.parametrize("items", [1, 4])
@pytest.mark.parametrize("shape", [(128,), (32, 4)])
@pytest.mark.parametrize("dtype", SCALARS, ids=_ids(SCALARS))
def test_block_sum_and_reduce(dtype, shape, items):
    name = np.dtype(dtype).name
    op, reduce_np, _ = PY_OPS[name]
    nb = numba.from_dtype(np.dtype(dtype))
    dx, dy, _ = dims_of(shape)
    tile = threads_of(shape) * items
    load = coop.block.make_load(dtype, shape, items)
    block_sum = coop.block.make_sum(dtype, shape, items)
    block_red = coop.block.make_reduce(dtype, shape, op, items)
    files = load.files + block_sum.files + block_red.files
    # the last tile is filled with 0 / False: the identity of every reduction here (values >= 0 for max)
    if items == 1:
        @cuda.jit(link=files)
        def kernel(x, out, n, identity):
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            base = cuda.blockIdx.x * tile
            buf = cuda.local.array(1, nb)
            load(x[base:], buf, min(tile, n - base), identity[0])
            s = block_sum(buf[0])
            r = block_red(buf[0])
            if t == 0:
                out[cuda.blockIdx.x, 0] = s
                out[cuda.blockIdx.x, 1] = r
    else:
        @cuda.jit(link=files)
        def kernel(x, out, n, identity):
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            base = cuda.blockIdx.x * tile
            buf = cuda.local.array(items, nb)
            load(x[base:], buf, min(tile, n - base), identity[0])
            s = block_sum(buf)
            r = block_red(buf)
            if t == 0:
                out[cuda.blockIdx.x, 0] = s
                out[cuda.blockIdx.x, 1] = r

    n = 5 * tile - 7
    x = _values(n, dtype)
    tiles = -(-n // tile)
    out = cuda.device_array((tiles, 2), dtype=dtype)
    kernel[tiles, shape](cuda.to_device(x), out, n, cuda.to_device(np.zeros(1, dtype=dtype)))
    got = out.copy_to_host()
    parts = np.split(x, range(tile, n, tile))
    np.testing.assert_array_equal(got[:, 0], [_sum_np(p) for p in parts])
    np.testing.assert_array_equal(got[:, 1], [reduce_np(p) for p in parts])


def test_bool_reduce_by_or_and_and():
    shape = (32, 4)
    red_or = coop.block.make_reduce(np.bool_, shape, "|")
    red_and = coop.block.make_reduce(np.bool_, shape, "&")

    @cuda.jit(link=red_or.files + red_and.files)
    def kernel(x, out):
        t = cuda.threadIdx.x + 32 * cuda.threadIdx.y
        v = x[cuda.blockIdx.x * 128 + t]
        a = red_or(v)
        b = red_and(v)
        c = red_or(v, 64)           # the first 64 threads only
        if t == 0:
            out[cuda.blockIdx.x, 0] = a
            out[cuda.blockIdx.x, 1] = b
            out[cuda.blockIdx.x, 2] = c

    x = np.zeros((4, 128), dtype=np.bool_)
    x[1, 100] = True                 # or: True only past the first 64
    x[2] = True                      # and: True
    x[3, 5] = True
    out = cuda.device_array((4, 3), dtype=np.bool_)
    kernel[4, shape](cuda.to_device(x.ravel()), out)
    expected = np.stack([x.any(1), x.all(1), x[:, :64].any(1)], axis=1)
    np.testing.assert_array_equal(out.copy_to_host(), expected)


# ---------------------------------------------------------------- block scans

@pytest.mark.parametrize("items", [1, 3])
@pytest.mark.parametrize("dtype", SCALARS, ids=_ids(SCALARS))
def test_block_scans(dtype, items):
    shape = (32, 4)
    name = np.dtype(dtype).name
    op, _, accumulate_np = PY_OPS[name]
    nb = numba.from_dtype(np.dtype(dtype))
    tile = 128 * items
    isum = coop.block.make_inclusive_sum(dtype, shape, items)
    xsum = coop.block.make_exclusive_sum(dtype, shape, items)
    iscan = coop.block.make_inclusive_scan(dtype, shape, op, items)
    files = isum.files + xsum.files + iscan.files
    if items == 1:
        @cuda.jit(link=files)
        def kernel(x, y):
            i = cuda.blockIdx.x * tile + cuda.threadIdx.x + 32 * cuda.threadIdx.y
            y[0, i] = isum(x[i])
            y[1, i] = xsum(x[i])
            y[2, i] = iscan(x[i])
    else:
        @cuda.jit(link=files)
        def kernel(x, y):
            base = cuda.blockIdx.x * tile + items * (cuda.threadIdx.x + 32 * cuda.threadIdx.y)
            a = cuda.local.array(items, nb)
            b = cuda.local.array(items, nb)
            for i in range(items):
                a[i] = x[base + i]
            isum(a, b)
            for i in range(items):
                y[0, base + i] = b[i]
            xsum(a, b)
            for i in range(items):
                y[1, base + i] = b[i]
            iscan(a, a)                 # in place
            for i in range(items):
                y[2, base + i] = a[i]

    blocks = 3
    x = _values(blocks * tile, dtype)
    if name == "bool":
        x[tile + 40] = True               # each tile's scan starts from False again
        x[2 * tile + 7] = x[2 * tile + tile // 2] = True
    y = cuda.device_array((3, blocks * tile), dtype=dtype)
    kernel[blocks, shape](cuda.to_device(x), y)
    got = y.copy_to_host()
    zero = np.zeros(1, dtype=dtype)
    for k, part in enumerate(np.split(x, blocks)):
        inclusive = _cumsum_np(part)
        span = slice(k * tile, (k + 1) * tile)
        np.testing.assert_array_equal(got[0, span], inclusive)
        np.testing.assert_array_equal(got[1, span], np.concatenate([zero, inclusive[:-1]]))
        np.testing.assert_array_equal(got[2, span], accumulate_np(part))


# ---------------------------------------------------------------- block load and store

@pytest.mark.parametrize("algorithm", ["direct", "striped", "vectorize", "transpose", "warp_transpose"])
@pytest.mark.parametrize("dtype", SCALARS + STRUCTS, ids=_ids(SCALARS + STRUCTS))
def test_block_load_store_round_trip(dtype, algorithm):
    shape, items = (32, 4), 3
    nb = numba.from_dtype(np.dtype(dtype))
    tile = 128 * items
    load = coop.block.make_load(dtype, shape, items, algorithm=algorithm)
    store = coop.block.make_store(dtype, shape, items, algorithm=algorithm)

    @cuda.jit(link=load.files + store.files)
    def kernel(x, y, z, pick, n, fill):
        t = cuda.threadIdx.x + 32 * cuda.threadIdx.y
        base = cuda.blockIdx.x * tile
        valid = min(tile, n - base)
        buf = cuda.local.array(items, nb)
        if valid == tile:
            load(x[base:], buf)
            store(y[base:], buf)
        else:
            load(x[base:], buf, valid, fill[0])
            store(y[base:], buf, valid)
        store(z[base:], buf)                                  # the whole tile: fills included
        k = (cuda.blockIdx.x + t) % items
        pick[cuda.blockIdx.x * 128 + t] = buf[k]             # indexed at run time: local memory

    blocks = 4
    n = blocks * tile - 5
    x = _values(n, dtype)
    fill = _fill(dtype)
    y = cuda.to_device(np.concatenate([np.zeros(n, dtype=dtype), np.repeat(fill, 8)]))  # past n: untouched
    z = cuda.device_array(blocks * tile, dtype=dtype)
    pick = cuda.device_array(blocks * 128, dtype=dtype)
    kernel[blocks, shape](cuda.to_device(x), y, z, pick, n, cuda.to_device(fill))
    got = y.copy_to_host()
    np.testing.assert_array_equal(got[:n], x)
    np.testing.assert_array_equal(got[n:], np.repeat(fill, 8))
    padded = np.concatenate([x, np.repeat(fill, blocks * tile - n)])
    np.testing.assert_array_equal(z.copy_to_host(), padded)
    # after a load thread t of block b holds tile positions 3t .. 3t+2 (blocked), or t, t+128,
    # t+256 (the striped algorithm); it picked its item (b + t) % 3
    b, t = np.divmod(np.arange(blocks * 128), 128)
    k = (b + t) % items
    where = t + 128 * k if algorithm == "striped" else items * t + k
    np.testing.assert_array_equal(pick.copy_to_host(), padded[b * tile + where])


def test_struct_load_without_oob_default_pads_with_zero_bytes():
    load = coop.block.make_load(PAIR, 128, 2)
    rec = numba.from_dtype(PAIR)

    @cuda.jit(link=load.files)
    def kernel(x, y, n):
        buf = cuda.local.array(2, rec)
        load(x, buf, n)
        for i in range(2):
            y[2 * cuda.threadIdx.x + i] = buf[i]

    x = _values(200, PAIR)
    y = cuda.device_array(256, dtype=PAIR)
    kernel[1, 128](cuda.to_device(x), y, 200)
    got = y.copy_to_host()
    np.testing.assert_array_equal(got[:200], x)
    np.testing.assert_array_equal(got[200:], np.zeros(56, dtype=PAIR))


# ---------------------------------------------------------------- block exchange

EXCHANGE_TYPES = [np.complex64, np.bool_, np.float16] + STRUCTS


@pytest.mark.parametrize("sliced", [False, True])
@pytest.mark.parametrize("dtype", EXCHANGE_TYPES, ids=_ids(EXCHANGE_TYPES))
def test_block_exchange_round_trips(dtype, sliced):
    shape, items = (32, 4), 3
    nb = numba.from_dtype(np.dtype(dtype))
    kinds = coop.block.BlockExchangeType
    to_striped = coop.block.make_exchange(kinds.BlockedToStriped, dtype, shape, items, warp_time_slicing=sliced)
    to_blocked = coop.block.make_exchange(kinds.StripedToBlocked, dtype, shape, items, warp_time_slicing=sliced)
    to_warp = coop.block.make_exchange(kinds.BlockedToWarpStriped, dtype, shape, items, warp_time_slicing=sliced)
    from_warp = coop.block.make_exchange(kinds.WarpStripedToBlocked, dtype, shape, items,
                                         warp_time_slicing=sliced)

    @cuda.jit(link=to_striped.files + to_blocked.files + to_warp.files + from_warp.files)
    def kernel(x, s, w, b):
        t = cuda.threadIdx.x + 32 * cuda.threadIdx.y
        a = cuda.local.array(items, nb)
        o = cuda.local.array(items, nb)
        for i in range(items):
            a[i] = x[items * t + i]              # blocked
        to_striped(a, o)
        for i in range(items):
            s[t + 128 * i] = o[i]                # striped: the tile in order again
        to_blocked(o, o)
        to_warp(o, a)
        warp, lane = t // 32, t % 32
        for i in range(items):
            w[warp * 32 * items + lane + 32 * i] = a[i]     # warp-striped
        from_warp(a, a)
        for i in range(items):
            b[items * t + i] = a[i]

    x = _values(128 * items, dtype, p_true=0.5)
    s = cuda.device_array(x.size, dtype=dtype)
    w = cuda.device_array(x.size, dtype=dtype)
    b = cuda.device_array(x.size, dtype=dtype)
    kernel[1, shape](cuda.to_device(x), s, w, b)
    for out in (s, w, b):
        np.testing.assert_array_equal(out.copy_to_host(), x)


# ---------------------------------------------------------------- warp sum and reduce

def _warp_run(prim_a, prim_b, lanes, dtype, valid):
    shape = (64, 2)
    threads = 128

    @cuda.jit(link=prim_a.files + prim_b.files)
    def kernel(x, out):
        t = cuda.threadIdx.x + 64 * cuda.threadIdx.y
        a = prim_a(x[t])
        b = prim_b(x[t])
        c = prim_b(x[t], valid)
        if t % lanes == 0:
            out[t // lanes, 0] = a
            out[t // lanes, 1] = b
            out[t // lanes, 2] = c

    x = _values(threads, dtype, p_true=0.05)
    out = cuda.device_array((threads // lanes, 3), dtype=dtype)
    kernel[1, shape](cuda.to_device(x), out)
    return x.reshape(-1, lanes), out.copy_to_host()


@pytest.mark.parametrize("lanes", [32, 8])
@pytest.mark.parametrize("dtype", SCALARS, ids=_ids(SCALARS))
def test_warp_sum_and_reduce(dtype, lanes):
    name = np.dtype(dtype).name
    op, reduce_np, _ = PY_OPS[name]
    warp_sum = coop.warp.make_sum(dtype, threads_in_warp=lanes)
    warp_red = coop.warp.make_reduce(dtype, op, threads_in_warp=lanes)
    valid = lanes - 3
    groups, got = _warp_run(warp_sum, warp_red, lanes, dtype, valid)
    np.testing.assert_array_equal(got[:, 0], [_sum_np(g) for g in groups])
    np.testing.assert_array_equal(got[:, 1], [reduce_np(g) for g in groups])
    np.testing.assert_array_equal(got[:, 2], [reduce_np(g[:valid]) for g in groups])


def _argmax(a, b):
    return a if a.v >= b.v else b


def _wide_sum(a, b):
    return (a.a + b.a, a.b + b.b, a.c + b.c)   # a tuple of the fields, stored as the struct


@pytest.mark.parametrize("lanes", [32, 16, 4])
def test_warp_reduce_structs(lanes):
    argmax = coop.warp.make_reduce(PAIR, _argmax, threads_in_warp=lanes)
    wide = coop.warp.make_reduce(WIDE, _wide_sum, threads_in_warp=lanes)
    valid = lanes - 1

    @cuda.jit(link=argmax.files + wide.files)
    def kernel(x, xw, out, outw):
        t = cuda.threadIdx.x + 64 * cuda.threadIdx.y
        a = argmax(x[t])
        b = argmax(x[t], valid)
        c = wide(xw[t])
        if t % lanes == 0:
            out[t // lanes, 0] = a
            out[t // lanes, 1] = b
            outw[t // lanes] = c

    x = np.zeros(128, dtype=PAIR)
    x["v"] = RNG.permutation(128).astype(np.float32)
    x["i"] = np.arange(128)
    xw = _values(128, WIDE)
    out = cuda.device_array((128 // lanes, 2), dtype=PAIR)
    outw = cuda.device_array(128 // lanes, dtype=WIDE)
    kernel[1, (64, 2)](cuda.to_device(x), cuda.to_device(xw), out, outw)
    got, gotw = out.copy_to_host(), outw.copy_to_host()
    groups = x.reshape(-1, lanes)
    np.testing.assert_array_equal(got[:, 0]["i"], [g["i"][np.argmax(g["v"])] for g in groups])
    np.testing.assert_array_equal(got[:, 1]["i"], [g["i"][np.argmax(g["v"][:valid])] for g in groups])
    wg = xw.reshape(-1, lanes)
    np.testing.assert_array_equal(gotw["a"], wg["a"].sum(1))
    np.testing.assert_array_equal(gotw["b"], wg["b"].sum(1, dtype=np.int16))
    np.testing.assert_array_equal(gotw["c"], wg["c"].sum(1))


def test_style2_struct_results_of_two_calls_stay_apart():
    """Two Style 2 reductions returning records, both read after the second call: each
    result keeps its own bytes (a record is a pointer to them)."""

    @cuda.jit
    def kernel(x, out):
        t = cuda.threadIdx.x + 64 * cuda.threadIdx.y
        block = coop.this_block()
        full = coop.reduce(block, x[t], binary_op=_argmax)
        part = coop.reduce(block, x[t], binary_op=_argmax, valid_items=100)
        if t == 0:
            out[0] = full
            out[1] = part

    x = np.zeros(128, dtype=PAIR)
    x["v"] = RNG.permutation(128).astype(np.float32)
    x["i"] = np.arange(128)
    x["v"][np.argmax(x["v"])], x["v"][127] = x["v"][127], x["v"].max()   # the maximum past the 100 valid
    out = cuda.device_array(2, dtype=PAIR)
    kernel[1, (64, 2)](cuda.to_device(x), out)
    got = out.copy_to_host()
    assert got[0]["i"] == 127
    assert got[1]["i"] == int(np.argmax(x["v"][:100]))
