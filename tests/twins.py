"""What a CPU test and its GPU twin share, written once.

tests/cpu/<area>/test_<name>.py builds ahead of time (generates, compiles, links) what
tests/gpu/<area>/test_<name>_gpu.py runs; where both need the same struct type, operator,
kernel or reference model, it is here and both import it by name (``from twins import
...``: tests/conftest.py keeps this folder on sys.path for both suites). A CPU test that
links one of these kernels links the very kernel its GPU twin launches.

Names are those the tests had, leading underscores included: pytest names a parameter
that is a function by its ``__name__``, so the test ids stay as they were. numba is
imported only by the kernel factories, when called: a test of generated source that
takes a struct type or a reference model from here imports no numba-cuda.
"""

from __future__ import annotations

import numpy as np

import cuprims

# ================================================================ coop: shapes and types

SHAPES = [(128,), (32, 4), (64, 2, 2)]
PAIR = np.dtype([("v", np.float32), ("i", np.int32)], align=True)            # a value and its index
VALUE = np.dtype([("i", np.int32), ("w", np.float32)], align=True)           # a sort's struct value
WIDE = np.dtype([("a", np.float64), ("b", np.int16), ("c", np.complex64)], align=True)   # padded, 8-aligned
WARP_IO_ALGORITHMS = ["direct", "striped", "vectorize", "transpose"]         # CUB's WarpLoad / WarpStore


def dims_of(shape) -> tuple:
    """A block shape as CUDA's three dimensions."""
    return tuple(shape) + (1,) * (3 - len(shape))


def threads_of(shape) -> int:
    return int(np.prod(shape))


# ================================================================ coop: operators

def _less(a, b):
    return a < b


def _greater(a, b):
    return a > b


def _by_k(a, b):
    return a.k < b.k


def bigger(a, b):
    return a if a > b else b


def argmax(a, b):
    return a if a.v >= b.v else b


# block prefix callbacks: the running state in state[0], the block's aggregate in; the prefix out

def running_total(state, aggregate):
    old = state[0]
    state[0] = old + aggregate
    return old


def running_max(state, aggregate):
    old = state[0]
    if aggregate > old:
        state[0] = aggregate
    return old


def running_argmax(state, aggregate):
    old = (state[0].v, state[0].i)     # a record read from an array is a view: copy its fields
    if aggregate.v > state[0].v:
        state[0] = aggregate
    return old


# ================================================================ coop: kernels

def block_scan_kernel(shape, items, dtype, load, scan, store):
    """Each block loads its tile of x (the first n items of the grid), scans it and stores
    it to y: ``kernel[blocks, shape](x, y, n)``. Returns (kernel, tile)."""
    import numba
    from numba import cuda

    tile = threads_of(shape) * items
    nb = numba.from_dtype(np.dtype(dtype))
    if items == 1:     # one item: scan(value) -> value
        @cuda.jit(link=load.files + scan.files + store.files)
        def kernel(x, y, n):
            base = cuda.blockIdx.x * tile
            valid = min(tile, n - base)
            buf = cuda.local.array(1, nb)
            load(x[base:], buf, valid, 0)
            buf[0] = scan(buf[0])
            store(y[base:], buf, valid)
    else:              # more: scan(in, out), here in place
        @cuda.jit(link=load.files + scan.files + store.files)
        def kernel(x, y, n):
            base = cuda.blockIdx.x * tile
            valid = min(tile, n - base)
            buf = cuda.local.array(items, nb)
            load(x[base:], buf, valid, 0)
            scan(buf, buf)
            store(y[base:], buf, valid)
    return kernel, tile


def struct_argmax_kernel():
    """A block reduce and an inclusive scan of :data:`PAIR` by :func:`argmax` (Python
    operators on structs), blocks of (32, 4), two items a thread: ``kernel[1, (32, 4)](x, y,
    out)`` writes the reduce of x's even items to out[0], the scan of x to y. Returns
    (reduce, scan, kernel)."""
    from numba import cuda
    from numba.cuda.np.numpy_support import from_dtype

    from cuprims import coop

    red = coop.block.make_reduce(PAIR, (32, 4), argmax)
    scan = coop.block.make_inclusive_scan(PAIR, (32, 4), argmax, 2)
    rec = from_dtype(PAIR)

    @cuda.jit(link=red.files + scan.files)
    def kernel(x, y, out):
        t = cuda.threadIdx.x + 32 * cuda.threadIdx.y
        r = red(x[2 * t])
        items = cuda.local.array(2, rec)
        items[0] = x[2 * t]
        items[1] = x[2 * t + 1]
        scan(items, items)
        y[2 * t] = items[0]
        y[2 * t + 1] = items[1]
        if t == 0:
            out[0] = r

    return red, scan, kernel


def block_pairs_kernel(sort, shape, items, knb, vnb, mode):
    """Each block sorts its tile of (x, v) by a Style 1 sort of pairs (a block's radix or
    merge sort, or a warp's merge sort in a block of one logical warp):
    ``kernel[blocks, shape](x, v, n, oob)``. ``mode``: 0 the whole tile, 1 bits [0, 8)
    (radix) or the first ``n[b]`` pairs with ``oob[0]`` after them (merge), 2 the caller's
    storage, 3 a count and the caller's storage (merge). Returns (kernel, tile)."""
    import numba
    from numba import cuda

    dx, dy, _ = dims_of(shape)
    tile = threads_of(shape) * items
    nbytes, align = sort.temp_storage_bytes, sort.temp_storage_alignment
    radix = sort.spec.kind == "radix_sort"

    @cuda.jit(link=sort.files)
    def kernel(x, v, n, oob):
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        base = cuda.blockIdx.x * tile + t * items           # blocked: thread t holds t * items...
        temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
        keys = cuda.local.array(items, knb)
        values = cuda.local.array(items, vnb)
        for i in range(items):
            keys[i] = x[base + i]
            values[i] = v[base + i]
        if mode == 0:
            sort(keys, values)
        elif mode == 1:
            if radix:
                sort(keys, values, 0, 8)
            else:
                sort(keys, values, n[cuda.blockIdx.x], oob[0])
        elif mode == 2:
            sort(keys, values, temp_storage=temp)
        elif not radix:
            sort(keys, values, n[cuda.blockIdx.x], oob[0], temp)
        for i in range(items):
            x[base + i] = keys[i]
            v[base + i] = values[i]

    return kernel, tile


def style2_sum_scan_kernel(items):
    """Style 2 (its block shape from the launch, or coop.target): each block loads its tile
    of x (the first n items of the grid, 0 after them), sums it into totals[block], scans it
    inclusively and stores the first n to y: ``kernel[blocks, shape](x, y, totals, n)``."""
    from numba import cuda

    from cuprims import coop

    @cuda.jit
    def kernel(x, y, totals, n):
        block = coop.this_block()
        data = coop.ThreadData(items)                     # x's element type
        t = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z)
        tile = items * cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z
        base = cuda.blockIdx.x * tile
        valid = min(tile, n - base)
        coop.load(block, x[base:], data, valid_items=valid, oob_default=0)
        total = coop.sum(block, data)
        coop.inclusive_sum(block, data)
        coop.store(block, y[base:], data, valid_items=valid)
        if t == 0:
            totals[cuda.blockIdx.x] = total

    return kernel


# ================================================================ radix sort: the model of its order

STRUCT = np.dtype([("a", np.int32), ("b", np.float64), ("c", np.int8)], align=True)   # a struct value


def ordered_bits(keys: np.ndarray, descending: bool) -> np.ndarray:
    """The words the radix kernels order keys by, as unsigned integers: CUB's twiddled bits
    (sign flipped for signed integers and positive floats, all bits for negative floats),
    but every floating-point NaN at the top and -inf at the bottom (numpy's order; through
    ``codegen_sort.nan_last_radix_traits``), -0.0 as +0.0, complemented when descending. A
    stable sort on these is the kernels' result."""
    dt = keys.dtype
    nbits = dt.itemsize * 8
    ut = np.dtype(f"u{dt.itemsize}")
    u = keys.view(ut).astype(np.uint64)
    high = np.uint64(1) << np.uint64(nbits - 1)
    full = np.uint64((1 << nbits) - 1)
    if dt.kind == "i":
        u = u ^ high
    elif dt.kind == "f":
        inf = np.uint64(np.array(np.inf, dt).view(ut))
        neg = (u & high) != 0
        twiddled = np.where(neg, u ^ full, u ^ high)
        u = np.where((u & ~high) > inf, full, np.where(u == (inf | high), np.uint64(0), twiddled))
        u = np.where(u == (high - np.uint64(1)), high, u)  # -0.0 sorts as +0.0
    if descending:
        u = u ^ full
    return u


def sorted_keys(keys: np.ndarray) -> np.ndarray:
    """Keys as a radix sort writes them: every floating-point NaN as the quiet NaN."""
    if keys.dtype.kind != "f":
        return keys
    return np.where(np.isnan(keys), np.array(np.nan, keys.dtype), keys)


def random_keys(dt, n: int, rng: np.random.Generator, *, ties: bool = False) -> np.ndarray:
    """n keys of dtype ``dt``: integers over their whole range; floats of random bit patterns
    (NaNs of both signs, infinities, subnormals, both zeros) with the special values among
    them; ``ties``: a quarter of the floats (past 100 keys) repeat another quarter."""
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.random(n) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, n, endpoint=True, dtype=dt)
    x = rng.integers(0, 1 << (8 * dt.itemsize), n, dtype=np.uint64).astype(f"u{dt.itemsize}").view(dt).copy()
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0], dtype=dt)
    k = min(n, specials.size)
    x[:k] = specials[:k]
    rng.shuffle(x)
    if ties and n > 100:
        x[: n // 4] = x[n // 2: n // 2 + n // 4]
        rng.shuffle(x)
    return x


# ================================================================ the algorithms' operators and types

KEY_STRUCT = np.dtype([("a", np.int32), ("b", np.float32)], align=True)      # merge sort's struct keys


def struct_less(x, y):  # by a, then by b descending
    return x.a < y.a or (x.a == y.a and x.b > y.b)


def _even(v):  # select's predicate
    return v % 2 == 0


Pixel = cuprims.gpu_struct({"r": np.int32, "g": np.float32}, name="Pixel")   # transform's struct

# the numeric types a Python operator written as C++ is checked over (py_expr, direct_ops)
NUMERIC = ("i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8")


# ================================================================ structs as cuda.compute programs write them

@cuprims.gpu_struct
class MinMax:             # built inside a TransformIterator's operator
    lo: np.float64
    hi: np.float64


def to_minmax(v):
    return MinMax(abs(v), abs(v))


def minmax_op(a, b):
    return MinMax(min(a.lo, b.lo), max(a.hi, b.hi))


@cuprims.gpu_struct
class ValueFlag:          # a ZipIterator of (value, head flag) scanned into it
    value: np.int64
    flag: np.int32


def segmented_sum(a, b):  # the sum restarts at each head flag (Schwartz's operator)
    value = b.value if b.flag else a.value + b.value
    return ValueFlag(value, 1 if a.flag or b.flag else 0)


@cuprims.gpu_struct
class ValueScale:         # an exponential moving average's terms, value * EMA_ALPHA ** scale
    value: np.float64
    scale: np.int64


EMA_ALPHA = 0.05


def ema_combine(a, b):
    if a.scale > b.scale:
        return ValueScale(b.value + a.value * EMA_ALPHA ** (a.scale - b.scale), b.scale)
    return ValueScale(a.value + b.value * EMA_ALPHA ** (b.scale - a.scale), a.scale)


def ema_term(v, t):       # the average at t from the scan's term at t
    return (1 - EMA_ALPHA) * v.value * EMA_ALPHA ** (t + v.scale)


def negate(i):
    return -i


@cuprims.gpu_struct
class SumCount:           # a ZipIterator of (value, count) reduced into it
    total: np.float32
    count: np.int32


def sum_count(a, b):
    return SumCount(a.total + b.total, a.count + b.count)


# a nested struct written as dicts; its field ``pos`` is a class of its own, Particle_pos
Particle = cuprims.gpu_struct({"id": np.int32, "pos": {"x": np.float32, "y": np.float32}}, name="Particle")


def particle_sum(a, b):
    return Particle(a.id + b.id, (a.pos.x + b.pos.x, a.pos.y + b.pos.y))


def rightmost(a, b):      # the particle further right, the first on ties
    return b if b.pos.x > a.pos.x else a


def by_pos_x(a, b):
    return a.pos.x < b.pos.x
