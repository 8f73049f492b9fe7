"""Kernels written the way users of the established two-phase coop interface write them:
the primitive built by a factory, the caller's storage passed FIRST and positionally
(``cuda.shared.array(shape=prim.temp_storage_bytes, dtype="uint8")``, no alignment), or
left out; one item or a thread's items; separate arrays or one array in place; trailing
extras (``num_valid``, ``begin_bit``/``end_bit``, a prefix state) in that interface's
order. tests/cpu/coop/test_coop_call_forms.py links each kernel for sm_90 and checks it
keeps everything in registers; tests/gpu/coop/test_coop_call_forms_gpu.py runs it.

A :class:`FormCase` is one factory, type, block shape and items per thread. Its kernel
``kernel[1, shape](x, y)`` reads the tile from ``x`` (thread ``t`` its items ``t * n ...``)
and calls the primitive once per form, form ``f`` writing its results to its own part
of ``y``; ``expected(x)`` is ``y`` by numpy. Where the caller's storage and the
primitive's own cannot both fit in a kernel's 48 KiB of static shared memory (an
exchange or sort of 1024 threads), the kernel calls it with the caller's storage only.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from twins import PAIR, dims_of, threads_of

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64"]
COMPLEX = ["complex64", "complex128"]
STRUCT = "struct"                      # twins.PAIR: (v float32, i int32)
FORM_TYPES = INTS + FLOATS + COMPLEX + [STRUCT]
FORM_SHAPES = [(32,), (128,), (256,), (1024,), (8, 16), (2, 4, 8)]
FORM_ITEMS = [1, 3]
# the factories whose call forms are checked (those of ../shared/COOP-TARGET.md's Style 1)
FACTORIES = ["block.load_store", "block.reduce", "block.sum", "block.exclusive_sum", "block.inclusive_sum",
             "block.exclusive_scan", "block.inclusive_scan", "block.scan", "block.sum_prefix", "block.exchange",
             "block.merge_sort", "block.radix_sort", "block.radix_sort_descending", "warp.reduce", "warp.sum",
             "warp.exclusive_sum", "warp.merge_sort"]
WARP = 32


def supports(factory: str, type_name: str, items: int) -> bool:
    """Whether the case exists: warp reductions and scans take one item per lane; radix
    sorts take ints and floats; sums and scans take numbers (a complex scan adds, others
    take the max), a struct is reduced and inclusively scanned by argmax."""
    if factory.startswith("warp.") and factory != "warp.merge_sort" and items != 1:
        return False
    if factory.startswith("block.radix_sort"):
        return type_name in INTS + FLOATS
    if factory in ("block.sum", "block.exclusive_sum", "block.inclusive_sum", "block.sum_prefix", "warp.sum",
                   "warp.exclusive_sum", "block.exclusive_scan", "block.scan"):
        return type_name != STRUCT
    return True


# a kernel calling a primitive with the caller's storage and with its own holds two
# TempStorages; where two do not fit in the 48 KiB of static shared memory a kernel may
# have (a tile's exchange or sort at 1024 threads), the case calls it with the caller's only
SHARED_LIMIT = 48 * 1024


def launch_bounds(threads: int) -> int | None:
    """The launch bounds a kernel declares: a block of 1024 threads, which cannot launch if a
    thread takes more than 64 registers (ptxas keeps to that when told); none below it
    (told 128, ptxas aims at more blocks a multiprocessor and can spill)."""
    return threads if threads >= 1024 else None


def scan_algorithm(threads: int) -> str:
    """CUB's raking block scans (the default) need more registers than a thread of a
    1024-thread block may have for many types (8- and 16-byte values; 1- and 2-byte
    integers by 'max'; structs), and spill to local memory; warp_scans does not."""
    return "warp_scans" if threads >= 1024 else "raking"


SCANS = ("block.exclusive_sum", "block.inclusive_sum", "block.exclusive_scan", "block.inclusive_scan", "block.scan",
         "block.sum_prefix")


def may_spill(factory: str, type_name: str, shape: tuple, items: int) -> bool:
    """The cases that hold more than a 1024-thread block's 64 registers a thread: a scan of
    3 items of 8 or 16 bytes, its input and output arrays live across the kernel's calls,
    spills a few bytes (16-24) even with warp_scans."""
    return (factory in SCANS and threads_of(shape) >= 1024
            and items * np_dtype(type_name).itemsize >= 24)


def fits_twice(storage_bytes: int) -> bool:
    """Whether two TempStorages of ``storage_bytes`` fit in a kernel's static shared memory."""
    return 2 * storage_bytes + 2048 <= SHARED_LIMIT


class BeyondSharedMemory(Exception):
    """The TempStorages a block needs (one, or one per logical warp) pass a kernel's static
    shared memory: no kernel can call the primitive (sorts of 1024 threads of 16-byte
    keys, 3 a thread)."""


def storage_of(prim: Any, count: int = 1) -> tuple[bool, int, int]:
    """(big, bytes, alignment) of the storage a case declares for ``count`` TempStorages of
    ``prim``: ``temp_storage_bytes`` each and no alignment (the users' way), or CUB's size
    each at its alignment (big) where the room to round up would pass the limit."""
    exact, align = prim.temp_storage_layout
    if count * exact > SHARED_LIMIT:
        raise BeyondSharedMemory(f"{prim}: {count} TempStorage{'s' if count > 1 else ''} of {exact} bytes pass "
                                 f"{SHARED_LIMIT} bytes")
    big = too_big(count * prim.temp_storage_bytes)
    return big, exact if big else prim.temp_storage_bytes, max(8, align)


def blocked_io(n: int, tile: int) -> tuple[Any, Any]:
    """Device functions moving a thread's ``n`` items between its local array and a blocked
    tile: ``read(x, items, t)`` from ``x[t * n ...]``, ``write(y, slot, items, t)`` into the
    ``slot``-th tile of ``y`` (a form's results)."""
    from numba import cuda

    @cuda.jit(device=True)
    def read(x, items_, t):
        for i in range(n):
            items_[i] = x[t * n + i]

    @cuda.jit(device=True)
    def write(y, slot, items_, t):
        for i in range(n):
            y[slot * tile + t * n + i] = items_[i]

    return read, write


def too_big(storage_bytes: int) -> bool:
    """Whether ``temp_storage_bytes`` (CUB's size and the room to round an address up)
    passes the limit: such a kernel declares CUB's size with its alignment instead."""
    return storage_bytes > SHARED_LIMIT - 1024


def all_cases() -> list[tuple[str, str, tuple, int]]:
    return [(f, t, s, n) for f in FACTORIES for t in FORM_TYPES for s in FORM_SHAPES for n in FORM_ITEMS
            if supports(f, t, n)]


def np_dtype(type_name: str) -> np.dtype:
    return PAIR if type_name == STRUCT else np.dtype(type_name)


# ------------------------------------------------------------------ inputs and references

def inputs(type_name: str, count: int, for_sort: bool, seed: int = 5) -> np.ndarray:
    """``count`` values of the type. Sums' values keep every partial sum exact (a float16
    sum stays under 2048); sorts' values are a permutation, so each key is distinct where
    the type can hold it (a complex compares by its real part, a struct by ``v``)."""
    rng = np.random.default_rng(seed)
    dtype = np_dtype(type_name)
    if type_name == STRUCT:
        x = np.zeros(count, dtype)
        x["v"] = rng.permutation(count).astype(np.float32)
        x["i"] = np.arange(count)
        return x
    if for_sort:
        perm = rng.permutation(count)
        if dtype.kind == "c":
            return (perm + 1j * rng.integers(0, 4, count)).astype(dtype)
        if dtype.kind == "i":
            return (perm - count // 2).astype(dtype)
        return perm.astype(dtype)
    if type_name == "float16":
        return (np.arange(count) % 3 == 0).astype(dtype)
    if dtype.kind == "c":
        return (rng.integers(-3, 4, count) + 1j * rng.integers(-3, 4, count)).astype(dtype)
    lo = 0 if dtype.kind == "u" else -3
    return rng.integers(lo, 4, count).astype(dtype)


def argmax(a, b):
    return a if a.v >= b.v else b


def less(a, b):
    return a < b


def real_less(a, b):
    return a.real < b.real


def v_less(a, b):
    return a.v < b.v


def running_total(state, aggregate):
    old = state[0]
    state[0] = old + aggregate
    return old


def _sort_key(x: np.ndarray) -> np.ndarray:
    if x.dtype.names:
        return x["v"]
    return x.real if x.dtype.kind == "c" else x


def sorted_tile(x: np.ndarray, descending: bool = False) -> np.ndarray:
    order = np.argsort(_sort_key(x), kind="stable")
    return x[order[::-1]] if descending else x[order]


def _reduce(x: np.ndarray) -> Any:
    if x.dtype.names:
        return x[np.argmax(x["v"])]
    return np.add.reduce(x, dtype=x.dtype)


def _inclusive(x: np.ndarray, op: str) -> np.ndarray:
    if x.dtype.names:
        return x[np.maximum.accumulate(np.where(x["v"] == np.maximum.accumulate(x["v"]), np.arange(x.size), 0))]
    if op == "max":
        return np.maximum.accumulate(x)
    return np.cumsum(x, dtype=x.dtype)


def _exclusive(x: np.ndarray, op: str, init: Any = 0) -> np.ndarray:
    out = np.empty_like(x)
    out[0] = init
    out[1:] = _inclusive(x, op)[:-1]
    if op == "max":
        out[1:] = np.maximum(out[1:], init)
    return out


# ------------------------------------------------------------------ cases

@dataclasses.dataclass
class FormCase:
    """One factory over one type, block shape and item count: its primitives, the kernel
    calling them in every form (``kernel[1, shape](x, y)``), ``y``'s length and numpy's
    ``y`` for an ``x``; ``forms`` names the forms in the order they fill ``y``."""
    factory: str
    type_name: str
    shape: tuple
    items: int
    prims: list
    kernel: Any
    forms: list[str]
    out_size: int
    expected: Callable[[np.ndarray], np.ndarray]
    for_sort: bool

    @property
    def threads(self) -> int:
        return threads_of(self.shape)

    @property
    def tile(self) -> int:
        return threads_of(self.shape) * self.items

    def x(self) -> np.ndarray:
        return inputs(self.type_name, self.tile, self.for_sort)


def build(factory: str, type_name: str, shape: tuple, items: int) -> FormCase:
    """The :class:`FormCase` (its primitives built now, for the current coop target)."""
    import numba
    from numba import cuda
    from numba.cuda.np.numpy_support import from_dtype

    from cuprims import coop

    dtype = np_dtype(type_name)
    nb = from_dtype(dtype)
    bounds = launch_bounds(threads_of(shape))
    dx, dy, _ = dims_of(shape)
    threads, n = threads_of(shape), items
    tile = threads * n
    kind = factory.split(".", 1)[1]
    is_struct, is_complex = type_name == STRUCT, dtype.kind == "c"
    compare = v_less if is_struct else real_less if is_complex else less

    def case(prims, kernel, forms, out_size, expected, for_sort=False):
        return FormCase(factory, type_name, tuple(shape), items, prims, kernel, forms, out_size, expected, for_sort)

    if factory == "block.load_store":
        load = coop.block.make_load(nb, shape, n)
        store = coop.block.make_store(nb, shape, n)
        nbytes = max(load.temp_storage_bytes, store.temp_storage_bytes)

        @cuda.jit(link=load.files + store.files, launch_bounds=bounds)
        def kernel(x, y):
            temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
            items_ = cuda.local.array(n, nb)
            load(temp_storage, x, items_)
            cuda.syncthreads()       # the caller's storage is reused: CUB's rule, the kernel syncs
            store(temp_storage, y, items_)
            load(x, items_)
            store(y[tile:], items_)
        return case([load, store], kernel, ["storage first", "no storage"], 2 * tile, lambda x: np.concatenate([x, x]))

    if kind in ("reduce", "sum") and factory.startswith("block."):
        prim = (coop.block.make_sum(nb, shape, n) if kind == "sum"
                else coop.block.make_reduce(nb, shape, argmax if is_struct else "+", n))
        nbytes = prim.temp_storage_bytes
        half = threads // 2
        if n == 1:
            @cuda.jit(link=prim.files, launch_bounds=bounds)
            def kernel(x, y):
                temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
                t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
                item = x[t]
                a = prim(temp_storage, item)
                b = prim(item)
                cuda.syncthreads()
                c = prim(temp_storage, item, half)
                if t == 0:
                    y[0] = a
                    y[1] = b
                    y[2] = c

            def expected(x):
                return np.array([_reduce(x), _reduce(x), _reduce(x[:half])], dtype=x.dtype)
            return case([prim], kernel, ["storage first", "no storage", "storage first, num_valid"], 3, expected)

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            items_ = cuda.local.array(n, nb)
            for i in range(n):
                items_[i] = x[t * n + i]
            a = prim(temp_storage, items_)
            b = prim(items_)
            if t == 0:
                y[0] = a
                y[1] = b
        return case([prim], kernel, ["storage first", "no storage"], 2,
                    lambda x: np.array([_reduce(x), _reduce(x)], dtype=x.dtype))

    if factory.startswith("block.") and kind in ("exclusive_sum", "inclusive_sum", "exclusive_scan",
                                                   "inclusive_scan", "scan"):
        mode = "inclusive" if kind.startswith("inclusive") else "exclusive"
        if is_struct:
            op, init = argmax, None
        elif kind.endswith("scan") and not is_complex:
            op, init = "max", 0
        else:
            op, init = "+", 0
        algo = scan_algorithm(threads)
        if kind == "exclusive_sum":
            prim = coop.block.make_exclusive_sum(nb, shape, n, algorithm=algo)
        elif kind == "inclusive_sum":
            prim = coop.block.make_inclusive_sum(nb, shape, n, algorithm=algo)
        elif kind == "exclusive_scan":
            prim = coop.block.make_exclusive_scan(nb, shape, op, n, initial_value=init, algorithm=algo)
        elif kind == "inclusive_scan":
            prim = coop.block.make_inclusive_scan(nb, shape, op, n, algorithm=algo)
        else:
            prim = coop.block.make_scan(nb, shape, n, initial_value=init, mode=mode, scan_op=op, algorithm=algo)
        name = "max" if op == "max" else "+"
        nbytes = prim.temp_storage_bytes

        def scanned(x):
            return _inclusive(x, name) if mode == "inclusive" else _exclusive(x, name, 0)

        if n == 1:
            @cuda.jit(link=prim.files, launch_bounds=bounds)
            def kernel(x, y):
                temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
                t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
                item = x[t]
                y[t] = prim(temp_storage, item)
                y[tile + t] = prim(item)
            return case([prim], kernel, ["storage first", "no storage"], 2 * tile,
                        lambda x: np.concatenate([scanned(x)] * 2))

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            items_in = cuda.local.array(n, nb)
            items_out = cuda.local.array(n, nb)
            for i in range(n):
                items_in[i] = x[t * n + i]
            prim(temp_storage, items_in, items_out)
            for i in range(n):
                y[t * n + i] = items_out[i]
            prim(items_in, items_out)
            for i in range(n):
                y[tile + t * n + i] = items_out[i]
            cuda.syncthreads()
            prim(temp_storage, items_in)               # in place
            for i in range(n):
                y[2 * tile + t * n + i] = items_in[i]
        return case([prim], kernel, ["storage first", "no storage", "storage first, in place"], 3 * tile,
                    lambda x: np.concatenate([scanned(x)] * 3))

    if factory == "block.sum_prefix":
        prim = coop.block.make_exclusive_sum(nb, shape, n, prefix_op=running_total, algorithm=scan_algorithm(threads))
        nbytes = prim.temp_storage_bytes

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):                # two tiles, a running total carried between them
            temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            block_prefix_op = cuda.local.array(1, nb)
            block_prefix_op[0] = x[0] - x[0]      # the type's zero
            items_in = cuda.local.array(n, nb)
            items_out = cuda.local.array(n, nb)
            for half in range(2):
                for i in range(n):
                    items_in[i] = x[(t * n + i) % tile]
                if n == 1:                       # one item: prim(temp_storage, item, prefix) -> item
                    if half == 0:
                        items_out[0] = prim(temp_storage, items_in[0], block_prefix_op)
                    else:
                        items_out[0] = prim(items_in[0], block_prefix_op)
                elif half == 0:
                    prim(temp_storage, items_in, items_out, block_prefix_op)
                else:
                    prim(items_in, items_out, block_prefix_op)
                for i in range(n):
                    y[half * tile + t * n + i] = items_out[i]

        def expected(x):
            return _exclusive(np.concatenate([x, x]), "+", 0)
        return case([prim], kernel, ["storage first, prefix", "no storage, prefix"], 2 * tile, expected)

    if factory == "block.exchange":
        prim = coop.block.make_exchange(coop.block.BlockExchangeType.StripedToBlocked, nb, shape, n)
        nbytes = prim.temp_storage_bytes
        big, exact, salign = storage_of(prim)
        own = fits_twice(nbytes)

        @cuda.jit(device=True)
        def striped(x, items_, t):
            for i in range(n):
                items_[i] = x[i * threads + t]

        blocked = blocked_io(n, tile)[1]

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            if big:      # CUB's size, aligned: the room to round up would pass 48 KiB
                temp_storage = cuda.shared.array(shape=exact, dtype="uint8", alignment=salign)
            else:
                temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            items_in = cuda.local.array(n, nb)
            items_out = cuda.local.array(n, nb)
            striped(x, items_in, t)
            prim(temp_storage, items_in, items_out)
            blocked(y, 0, items_out, t)
            striped(x, items_in, t)
            cuda.syncthreads()
            prim(temp_storage, items_in)                 # in place
            blocked(y, 1, items_in, t)
            if own:                                      # the primitive's own storage
                striped(x, items_in, t)
                prim(items_in, items_out)
                blocked(y, 2, items_out, t)
                striped(x, items_in, t)
                prim(items_in)                           # in place
                blocked(y, 3, items_in, t)
        forms = ["storage first", "storage first, in place"] + (["no storage", "in place"] if own else [])
        return case([prim], kernel, forms, len(forms) * tile, lambda x: np.concatenate([x] * len(forms)))

    if factory in ("block.merge_sort", "block.radix_sort", "block.radix_sort_descending"):
        descending = factory.endswith("descending")
        if factory == "block.merge_sort":
            prim = coop.block.make_merge_sort_keys(nb, shape, n, compare)
        elif descending:
            prim = coop.block.make_radix_sort_keys_descending(nb, shape, n)
        else:
            prim = coop.block.make_radix_sort_keys(nb, shape, n)
        nbytes = prim.temp_storage_bytes
        bits = 8 * dtype.itemsize
        big, exact, salign = storage_of(prim)
        radix, own = factory != "block.merge_sort", fits_twice(nbytes)
        forms = (["storage first"] + (["storage first, begin_bit, end_bit"] if radix else [])
                 + (["no storage"] if own else []))

        read, write = blocked_io(n, tile)

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            if big:
                temp_storage = cuda.shared.array(shape=exact, dtype="uint8", alignment=salign)
            else:
                temp_storage = cuda.shared.array(shape=nbytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            keys = cuda.local.array(n, nb)
            read(x, keys, t)
            prim(temp_storage, keys)
            write(y, 0, keys, t)
            slot = 1
            if radix:
                read(x, keys, t)
                cuda.syncthreads()
                prim(temp_storage, keys, 0, bits)
                write(y, slot, keys, t)
                slot += 1
            if own:
                read(x, keys, t)
                prim(keys)
                write(y, slot, keys, t)
        return case([prim], kernel, forms, len(forms) * tile,
                    lambda x: np.concatenate([sorted_tile(x, descending)] * len(forms)), for_sort=True)

    # warps: each logical warp of 32 lanes its own storage, a slice of one shared array
    warps = threads // WARP
    if kind in ("reduce", "sum"):
        prim = coop.warp.make_sum(nb) if kind == "sum" else coop.warp.make_reduce(nb, argmax if is_struct else "+")
        nbytes = prim.temp_storage_bytes
        block_bytes = warps * nbytes

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            temp_storage = cuda.shared.array(shape=block_bytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            w = t // WARP
            item = x[t]
            a = prim(temp_storage[w * nbytes:(w + 1) * nbytes], item)
            b = prim(item)
            if t % WARP == 0:
                y[w] = a
                y[warps + w] = b

        def expected(x):
            per_warp = [_reduce(x[w * WARP:(w + 1) * WARP]) for w in range(warps)]
            return np.array(per_warp * 2, dtype=x.dtype)
        return case([prim], kernel, ["storage first", "no storage"], 2 * warps, expected)

    if kind == "exclusive_sum":
        prim = coop.warp.make_exclusive_sum(nb)
        nbytes = prim.temp_storage_bytes
        block_bytes = warps * nbytes

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            temp_storage = cuda.shared.array(shape=block_bytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            w = t // WARP
            y[t] = prim(temp_storage[w * nbytes:(w + 1) * nbytes], x[t])
            y[tile + t] = prim(x[t])

        def expected(x):
            per_warp = np.concatenate([_exclusive(x[w * WARP:(w + 1) * WARP], "+") for w in range(warps)])
            return np.concatenate([per_warp] * 2)
        return case([prim], kernel, ["storage first", "no storage"], 2 * tile, expected)

    if kind == "merge_sort":
        prim = coop.warp.make_merge_sort_keys(nb, n, compare)
        nbytes = prim.temp_storage_bytes
        big, per_warp, salign = storage_of(prim, warps)
        block_bytes = warps * per_warp
        own = fits_twice(block_bytes)
        forms = ["storage first"] + (["no storage"] if own else [])

        @cuda.jit(link=prim.files, launch_bounds=bounds)
        def kernel(x, y):
            if big:
                temp_storage = cuda.shared.array(shape=block_bytes, dtype="uint8", alignment=salign)
            else:
                temp_storage = cuda.shared.array(shape=block_bytes, dtype="uint8")
            t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
            w = t // WARP
            keys = cuda.local.array(n, nb)
            for i in range(n):
                keys[i] = x[t * n + i]
            prim(temp_storage[w * per_warp:(w + 1) * per_warp], keys)
            for i in range(n):
                y[t * n + i] = keys[i]
            if own:
                for i in range(n):
                    keys[i] = x[t * n + i]
                prim(keys)
                for i in range(n):
                    y[tile + t * n + i] = keys[i]

        def expected(x):
            per_warp = np.concatenate([sorted_tile(x[w * WARP * n:(w + 1) * WARP * n]) for w in range(warps)])
            return np.concatenate([per_warp] * len(forms))
        return case([prim], kernel, forms, len(forms) * tile, expected, for_sort=True)
    raise ValueError(f"no call-form case for {factory}")


def local_memory_in_sass(kernel: Any) -> bool:
    """Whether the launched ``kernel``'s SASS reads or writes local memory (LDL/STL), by
    numba's ``inspect_sass`` where nvdisasm is installed, else by the stack frame its cubin
    records (none without local memory)."""
    try:
        sass = "\n".join(kernel.inspect_sass().values())
    except Exception:  # noqa: BLE001 - nvdisasm missing: numba raises its own error types
        from cuprims._compile.elfmeta import local_memory_bytes

        return any(local_memory_bytes(o.library.get_cubin()) for o in kernel.overloads.values())
    return "LDL" in sass or "STL" in sass


def case_id(factory: str, type_name: str, shape: tuple, items: int) -> str:
    return f"{factory}-{type_name}-{'x'.join(map(str, shape))}-{items}"
