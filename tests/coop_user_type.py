"""A value type made with numba's extension API, as users of the established cooperative
interface make theirs (a ``types.Type``, a StructModel, a typer and a lowering; not a
gpu_struct), and kernels that reduce, scan, exchange and sort it through Style 1 factories
given ``methods={"construct": ..., "assign": ...}``, each in the storage-first form and
without storage. Shared by tests/cpu/coop/test_coop_user_types.py (links them for sm_90)
and tests/gpu/coop/test_coop_user_types_gpu.py (runs them against numpy).

A ``Pair`` is (lo int32, hi int64); the kernels read and write arrays of :data:`PAIR_X`,
the numpy struct of the same fields, converting each element.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from coop_forms import fits_twice, launch_bounds, scan_algorithm, storage_of
from twins import dims_of, threads_of

PAIR_X = np.dtype([("lo", np.int32), ("hi", np.int64)], align=True)
USER_FACTORIES = ["block.reduce", "block.inclusive_scan", "block.exchange", "block.merge_sort", "warp.reduce",
                  "warp.merge_sort", "block.shuffle_up", "warp.shuffle_index", "block.run_length_decode"]
WARP = 32


class Pair:
    """A host-side stand-in; inside kernels ``Pair(lo, hi)`` makes a value of :data:`pair_type`."""

    def __init__(self, lo: int, hi: int):
        self.lo, self.hi = lo, hi


def _register() -> Any:
    from numba.cuda import cgutils, types
    from numba.cuda.extending import lower_builtin, make_attribute_wrapper, models, register_model, type_callable

    class PairType(types.Type):
        def __init__(self) -> None:
            super().__init__(name="Pair")

    @register_model(PairType)
    class PairModel(models.StructModel):
        def __init__(self, dmm: Any, fe_type: Any) -> None:
            super().__init__(dmm, fe_type, [("lo", types.int32), ("hi", types.int64)])

    make_attribute_wrapper(PairType, "lo", "lo")
    make_attribute_wrapper(PairType, "hi", "hi")
    pair = PairType()

    @type_callable(Pair)
    def type_pair(context: Any) -> Any:
        def typer(lo: Any, hi: Any) -> Any:
            if isinstance(lo, types.Integer) and isinstance(hi, types.Integer):
                return pair
        return typer

    @lower_builtin(Pair, types.Integer, types.Integer)
    def make_pair(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        out = cgutils.create_struct_proxy(sig.return_type)(context, builder)
        out.lo = context.cast(builder, args[0], sig.args[0], types.int32)
        out.hi = context.cast(builder, args[1], sig.args[1], types.int64)
        return out._getvalue()

    return pair


_pair_type: list = []


def pair_type() -> Any:
    """The numba type of a Pair (registered with numba once, on first use)."""
    if not _pair_type:
        _pair_type.append(_register())
    return _pair_type[0]


# the established interface's hooks and operators of a user type: pointers in, result by pointer
def construct(this):
    this[0] = Pair(0, 0)


def assign(this, that):
    this[0] = Pair(that[0].lo, that[0].hi)


def add_pairs(result, a, b):
    result[0] = Pair(a[0].lo + b[0].lo, a[0].hi + b[0].hi)


def lo_less(a, b):
    return a.lo < b.lo


METHODS = {"construct": construct, "assign": assign}


@dataclasses.dataclass
class UserCase:
    factory: str
    shape: tuple
    items: int
    prims: list
    kernel: Any
    forms: list[str]
    out_size: int
    expected: Callable[[np.ndarray], np.ndarray]

    @property
    def threads(self) -> int:
        return threads_of(self.shape)

    @property
    def tile(self) -> int:
        return threads_of(self.shape) * self.items

    def x(self) -> np.ndarray:
        rng = np.random.default_rng(3)
        x = np.zeros(self.tile, PAIR_X)
        x["lo"] = rng.permutation(self.tile)                  # distinct: a sort by lo is one order
        x["hi"] = rng.integers(-1000, 1000, self.tile)
        return x


def _sums(x: np.ndarray) -> np.ndarray:
    out = np.zeros(1, PAIR_X)
    out["lo"], out["hi"] = x["lo"].sum(dtype=np.int32), x["hi"].sum()
    return out


def _running(x: np.ndarray) -> np.ndarray:
    out = np.zeros(x.size, PAIR_X)
    out["lo"], out["hi"] = np.cumsum(x["lo"], dtype=np.int32), np.cumsum(x["hi"])
    return out


def _sorted(x: np.ndarray) -> np.ndarray:
    return x[np.argsort(x["lo"], kind="stable")]


def build_user_case(factory: str, shape: tuple, items: int) -> UserCase:
    """The kernel ``kernel[1, shape](x, y)`` calling ``factory``'s primitive of Pairs in both forms."""
    import numba
    from numba import cuda

    from cuprims import coop

    pt = pair_type()
    bounds = launch_bounds(threads_of(shape))
    dx, dy, _ = dims_of(shape)
    threads, n = threads_of(shape), items
    tile = threads * n
    warps = max(1, threads // WARP)

    def case(prims, kernel, out_size, expected, own=True):
        forms = ["storage first"] + (["no storage"] if own else [])
        return UserCase(factory, tuple(shape), items, prims, kernel, forms, out_size, expected)

    if factory == "block.reduce":
        prim = coop.block.make_reduce(pt, shape, add_pairs, n, methods=METHODS)
        nbytes = prim.temp_storage_bytes

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            items_ = cuda.local.array(n, pt)
            for i in range(n):
                items_[i] = Pair(x[t * n + i].lo, x[t * n + i].hi)
            a = prim(temp_storage, items_[0]) if n == 1 else prim(temp_storage, items_)
            b = prim(items_[0]) if n == 1 else prim(items_)
            if t == 0:
                y[0].lo, y[0].hi = a.lo, a.hi
                y[1].lo, y[1].hi = b.lo, b.hi
        return case([prim], kernel, 2, lambda x: np.concatenate([_sums(x)] * 2))

    if factory == "block.inclusive_scan":
        prim = coop.block.make_inclusive_scan(pt, shape, add_pairs, n, algorithm=scan_algorithm(threads),
                                              methods=METHODS)
        nbytes = prim.temp_storage_bytes

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            items_in = cuda.local.array(n, pt)
            items_out = cuda.local.array(n, pt)
            for form in range(2):
                for i in range(n):
                    items_in[i] = Pair(x[t * n + i].lo, x[t * n + i].hi)
                if n == 1:
                    items_out[0] = prim(temp_storage, items_in[0]) if form == 0 else prim(items_in[0])
                elif form == 0:
                    prim(temp_storage, items_in, items_out)
                else:
                    prim(items_in, items_out)
                for i in range(n):
                    y[form * tile + t * n + i].lo = items_out[i].lo
                    y[form * tile + t * n + i].hi = items_out[i].hi
        return case([prim], kernel, 2 * tile, lambda x: np.concatenate([_running(x)] * 2))

    if factory == "block.exchange":
        prim = coop.block.make_exchange(coop.block.BlockExchangeType.StripedToBlocked, pt, shape, n, methods=METHODS)
        nbytes = prim.temp_storage_bytes
        big, exact, salign = storage_of(prim)
        own = fits_twice(nbytes)

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            if big:      # CUB's size, aligned: the room to round up would pass 48 KiB
                temp_storage = cuda.shared.array(shape=exact, dtype="uint8", alignment=salign)
            else:
                temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            items_ = cuda.local.array(n, pt)
            for i in range(n):
                items_[i] = Pair(x[i * threads + t].lo, x[i * threads + t].hi)         # striped
            prim(temp_storage, items_)                                               # in place
            for i in range(n):
                y[t * n + i].lo, y[t * n + i].hi = items_[i].lo, items_[i].hi        # blocked
            if own:
                for i in range(n):
                    items_[i] = Pair(x[i * threads + t].lo, x[i * threads + t].hi)
                prim(items_, items_)
                for i in range(n):
                    y[tile + t * n + i].lo, y[tile + t * n + i].hi = items_[i].lo, items_[i].hi
        return case([prim], kernel, 2 * tile, lambda x: np.concatenate([x] * (2 if own else 1)), own)

    if factory in ("block.merge_sort", "warp.merge_sort"):
        if factory == "block.merge_sort":
            prim = coop.block.make_merge_sort_keys(pt, shape, n, lo_less, methods=METHODS)
        else:
            prim = coop.warp.make_merge_sort_keys(pt, n, lo_less, methods=METHODS)
        group = tile if factory == "block.merge_sort" else WARP * n
        storages = 1 if factory == "block.merge_sort" else warps
        big, nbytes, salign = storage_of(prim, storages)
        block_bytes = nbytes * storages
        own = fits_twice(block_bytes)

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            if big:
                temp_storage = cuda.shared.array(shape=block_bytes, dtype="uint8", alignment=salign)
            else:
                temp_storage = cuda.shared.array(shape=block_bytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            mine = temp_storage[(t * n // group) * nbytes:(t * n // group + 1) * nbytes]
            keys = cuda.local.array(n, pt)
            for i in range(n):
                keys[i] = Pair(x[t * n + i].lo, x[t * n + i].hi)
            prim(mine, keys)
            for i in range(n):
                y[t * n + i].lo, y[t * n + i].hi = keys[i].lo, keys[i].hi
            if own:
                for i in range(n):
                    keys[i] = Pair(x[t * n + i].lo, x[t * n + i].hi)
                prim(keys)
                for i in range(n):
                    y[tile + t * n + i].lo, y[tile + t * n + i].hi = keys[i].lo, keys[i].hi

        def expected(x):
            parts = [_sorted(x[g:g + group]) for g in range(0, tile, group)]
            return np.concatenate(parts * (2 if own else 1))
        return case([prim], kernel, 2 * tile, expected, own)

    if factory == "warp.reduce":
        prim = coop.warp.make_reduce(pt, add_pairs, methods=METHODS)
        nbytes = prim.temp_storage_bytes
        block_bytes = warps * nbytes

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            temp_storage = cuda.shared.array(shape=block_bytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            w = t // WARP
            item = Pair(x[t].lo, x[t].hi)
            a = prim(temp_storage[w * nbytes:(w + 1) * nbytes], item)
            b = prim(item)
            if t % WARP == 0:
                y[w].lo, y[w].hi = a.lo, a.hi
                y[warps + w].lo, y[warps + w].hi = b.lo, b.hi

        def expected(x):
            per_warp = np.concatenate([_sums(x[w * WARP:(w + 1) * WARP]) for w in range(warps)])
            return np.concatenate([per_warp] * 2)
        return case([prim], kernel, 2 * warps, expected)
    if factory == "block.shuffle_up":
        prim = coop.block.make_shuffle(pt, shape, n, coop.block.BlockShuffleType.Up, methods=METHODS)
        nbytes = prim.temp_storage_bytes

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            items_in = cuda.local.array(n, pt)
            items_out = cuda.local.array(n, pt)
            for i in range(n):
                items_in[i] = Pair(x[t * n + i].lo, x[t * n + i].hi)
            prim(items_in, items_out)
            for i in range(n):
                y[t * n + i].lo, y[t * n + i].hi = items_out[i].lo, items_out[i].hi
            prim(temp_storage, items_in)                 # in place
            for i in range(n):
                y[tile + t * n + i].lo, y[tile + t * n + i].hi = items_in[i].lo, items_in[i].hi

        def expected_up(x):
            moved = x.copy()
            moved[1:] = x[:-1]
            return np.concatenate([moved, moved])
        return UserCase(factory, tuple(shape), items, [prim], kernel, ["no storage", "storage first, in place"],
                        2 * tile, expected_up)

    if factory == "warp.shuffle_index":
        prim = coop.warp.make_shuffle_index(pt, methods=METHODS)
        nbytes = prim.temp_storage_bytes

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            item = Pair(x[t].lo, x[t].hi)
            a = prim(item, (t + 1) % WARP)
            b = prim(temp_storage, item, (t + 1) % WARP)
            y[t].lo, y[t].hi = a.lo, a.hi
            y[threads + t].lo, y[threads + t].hi = b.lo, b.hi

        def expected_index(x):
            t = np.arange(threads)
            pulled = x[:threads][t - t % WARP + (t + 1) % WARP]
            return np.concatenate([pulled, pulled])
        return UserCase(factory, tuple(shape), items, [prim], kernel, ["no storage", "storage first"], 2 * threads,
                        expected_index)

    if factory == "block.run_length_decode":
        prim = coop.block.make_run_length_decode(pt, shape, 1, n, methods=METHODS)
        nbytes = prim.temp_storage_bytes

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            values = cuda.local.array(1, pt)
            lengths = cuda.local.array(1, numba.uint32)
            decoded = cuda.local.array(n, pt)
            values[0] = Pair(x[t].lo, x[t].hi)
            lengths[0] = 1 + x[t].lo % 3
            prim(values, lengths, decoded)
            for i in range(n):
                y[t * n + i].lo, y[t * n + i].hi = decoded[i].lo, decoded[i].hi
            prim(temp_storage, values, lengths, decoded)
            for i in range(n):
                y[tile + t * n + i].lo, y[tile + t * n + i].hi = decoded[i].lo, decoded[i].hi

        def expected_decode(x):
            runs = x[:threads]
            lengths = 1 + runs["lo"] % 3
            sequence = np.repeat(runs, lengths)
            window = np.concatenate([sequence, np.repeat(runs[-1:], max(0, tile - sequence.size))])[:tile]
            return np.concatenate([window, window])
        return UserCase(factory, tuple(shape), items, [prim], kernel, ["no storage", "storage first"], 2 * tile,
                        expected_decode)
    raise ValueError(f"no user-type case for {factory}")


def user_cases() -> list[tuple[str, tuple, int]]:
    """Every factory over the block shapes and item counts of the call-form matrix (warp
    reductions one item per lane)."""
    from coop_forms import FORM_ITEMS, FORM_SHAPES

    return [(f, s, n) for f in USER_FACTORIES for s in FORM_SHAPES for n in FORM_ITEMS
            if not (f in ("warp.reduce", "warp.shuffle_index") and n != 1)]
