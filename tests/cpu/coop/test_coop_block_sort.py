"""coop.block radix sort of keys and exchanges: real numba-cuda kernels calling each
primitive, compiled for sm_90 with no GPU and linked (nvJitLink, LTO) into a cubin."""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402

from cuprims import coop  # noqa: E402
from cuprims._base import stats  # noqa: E402
from cuprims.coop import _build  # noqa: E402
from cuprims.errors import ArgumentError, LinkError  # noqa: E402

from coop_helpers import kernel_sections, link_kernel, linked_ptx, shared_bytes  # noqa: E402
from twins import PAIR  # noqa: E402

KEY_TYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
             "float64"]
EXCHANGES = ["StripedToBlocked", "BlockedToStriped", "WarpStripedToBlocked", "BlockedToWarpStriped"]


pytestmark = pytest.mark.usefixtures("sm90")     # coop primitives built for sm_90 (tests/cpu/conftest.py)


def _sort_kernel(sort, nb, dims, items):
    dx, dy = dims
    tile = dx * dy * items

    @cuda.jit(link=sort.files)
    def kernel(x):
        t = cuda.threadIdx.x + dx * cuda.threadIdx.y
        base = cuda.blockIdx.x * tile + t * items
        keys = cuda.local.array(items, nb)
        for i in range(items):
            keys[i] = x[base + i]
        sort(keys)
        for i in range(items):
            x[base + i] = keys[i]

    return kernel


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("dtype", KEY_TYPES)
def test_radix_sort_every_int_and_float_links_and_needs_its_files(dtype):
    nb = getattr(types, dtype)
    sort = coop.block.make_radix_sort_keys(nb, (32, 4), 4)
    kernel = _sort_kernel(sort, nb, (32, 4), 4)
    cubin = link_kernel(kernel, (nb[::1],), [sort])
    assert len([n for n in kernel_sections(cubin) if n.startswith(".text.")]) == 1
    assert sort.temp_storage_bytes > 1
    assert shared_bytes(cubin) >= sort.temp_storage_bytes     # the provider's own storage
    with pytest.raises(LinkError, match=sort.spec.symbol):
        link_kernel(kernel, (nb[::1],), [sort], with_files=False)


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("dims,items", [((128,), 1), ((256,), 4), ((32, 4), 7), ((64, 2, 2), 16)])
def test_radix_sort_descending_shapes_items_bits_and_user_storage(dims, items):
    sort = coop.block.make_radix_sort_keys_descending(numba.uint32, dims, items)
    nbytes, align = sort.temp_storage_bytes, sort.temp_storage_alignment
    dx, dy, dz = tuple(dims) + (1,) * (3 - len(dims))

    @cuda.jit(link=sort.files)
    def kernel(x):
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
        keys = cuda.local.array(items, numba.uint32)
        for i in range(items):
            keys[i] = x[t * items + i]
        sort(keys)                      # all bits, own storage
        sort(keys, 4, 12)               # bits [4, 12) only
        sort(keys, temp_storage=temp)   # the caller's storage
        for i in range(items):
            x[t * items + i] = keys[i]

    cubin = link_kernel(kernel, (types.uint32[::1],), [sort])
    assert shared_bytes(cubin) >= 2 * nbytes


def test_sort_and_exchange_inline_into_the_kernel():
    sort = coop.block.make_radix_sort_keys(numba.int32, 128, 4)
    ex = coop.block.make_exchange(coop.block.BlockExchangeType.BlockedToStriped, numba.int32, 128, 4)

    @cuda.jit(link=sort.files + ex.files)
    def kernel(x):
        keys = cuda.local.array(4, numba.int32)
        for i in range(4):
            keys[i] = x[4 * cuda.threadIdx.x + i]
        sort(keys)
        ex(keys, keys)
        for i in range(4):
            x[cuda.threadIdx.x + 128 * i] = keys[i]

    lines = linked_ptx(kernel, (types.int32[::1],), [sort, ex]).splitlines()
    assert not [line for line in lines if "call" in line.split("//")[0]]
    assert sum("bar.sync" in line or "barrier.sync" in line for line in lines) >= 4   # the sort's passes


def test_sort_keys_change_with_type_items_threads_and_order():
    base = coop.block.make_radix_sort_keys(numba.int32, 128, 4)
    others = [coop.block.make_radix_sort_keys(numba.uint32, 128, 4),
              coop.block.make_radix_sort_keys(numba.float32, 128, 4),
              coop.block.make_radix_sort_keys(numba.int32, 128, 2),
              coop.block.make_radix_sort_keys(numba.int32, 256, 4),
              coop.block.make_radix_sort_keys(numba.int32, (64, 2), 4),
              coop.block.make_radix_sort_keys_descending(numba.int32, 128, 4)]
    symbols = {base.spec.symbol} | {o.spec.symbol for o in others}
    assert len(symbols) == 1 + len(others)
    keys = {_build.unit_key([p.spec], 90) for p in [base, *others]}
    assert len(keys) == 1 + len(others)


def test_second_sort_build_compiles_nothing(fresh_caches):
    first = coop.block.make_radix_sort_keys(numba.float64, (32, 4), 3)
    assert stats.snapshot()["nvrtc_compiles"] == 1
    coop.block.make_radix_sort_keys(numba.float64, (32, 4), 3)       # memory hit
    _build.clear_memory()                                          # as a new process: disk hit
    third = coop.block.make_radix_sort_keys(numba.float64, (32, 4), 3)
    counts = stats.snapshot()
    assert counts["nvrtc_compiles"] == 1 and counts.get("links", 0) == 1
    assert [f.data for f in third.files] == [f.data for f in first.files]
    assert third.temp_storage_bytes == first.temp_storage_bytes > 1


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("kind", EXCHANGES)
@pytest.mark.parametrize("sliced", [False, True])
def test_exchange_every_kind_in_place_and_apart(kind, sliced):
    ex = coop.block.make_exchange(getattr(coop.block.BlockExchangeType, kind), numba.float64, (32, 4), 5,
                                  warp_time_slicing=sliced)

    @cuda.jit(link=ex.files)
    def kernel(x, y):
        t = cuda.threadIdx.x + 32 * cuda.threadIdx.y
        a = cuda.local.array(5, numba.float64)
        b = cuda.local.array(5, numba.float64)
        for i in range(5):
            a[i] = x[t * 5 + i]
        ex(a, b)      # apart
        ex(b, b)      # in place
        for i in range(5):
            y[t * 5 + i] = b[i]

    cubin = link_kernel(kernel, (types.float64[::1], types.float64[::1]), [ex])
    assert shared_bytes(cubin) >= ex.temp_storage_bytes > 1


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("dtype", KEY_TYPES + ["complex64", "complex128", "boolean"])
def test_exchange_any_type(dtype):
    nb = getattr(types, dtype)
    ex = coop.block.make_exchange(coop.block.BlockExchangeType.StripedToBlocked, nb, 128, 2)
    nbytes, align = ex.temp_storage_bytes, ex.temp_storage_alignment

    @cuda.jit(link=ex.files)
    def kernel(x):
        temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
        a = cuda.local.array(2, nb)
        a[0] = x[cuda.threadIdx.x]
        a[1] = x[cuda.threadIdx.x + 128]
        ex(a, a, temp_storage=temp)
        x[2 * cuda.threadIdx.x] = a[0]
        x[2 * cuda.threadIdx.x + 1] = a[1]

    assert link_kernel(kernel, (nb[::1],), [ex])[:4] == b"\x7fELF"


def test_exchange_of_structs():
    from numba.cuda.np.numpy_support import from_dtype

    ex = coop.block.make_exchange("BlockedToStriped", PAIR, 64, 3)
    rec = from_dtype(PAIR)

    @cuda.jit(link=ex.files)
    def kernel(x):
        a = cuda.local.array(3, rec)
        for i in range(3):
            a[i] = x[3 * cuda.threadIdx.x + i]
        ex(a, a)
        for i in range(3):
            x[cuda.threadIdx.x + 64 * i] = a[i]

    link_kernel(kernel, (rec[::1],), [ex])


def test_arguments_are_checked_before_any_compile():
    T = coop.block.BlockExchangeType
    with pytest.raises(ArgumentError, match="dtype"):
        coop.block.make_radix_sort_keys(types.complex64, 128, 4)
    with pytest.raises(ArgumentError, match="dtype"):
        coop.block.make_radix_sort_keys_descending(types.boolean, 128, 4)
    with pytest.raises(ArgumentError, match="items_per_thread"):
        coop.block.make_radix_sort_keys(numba.int32, 128, 0)
    with pytest.raises(ArgumentError, match="threads_per_block"):
        coop.block.make_radix_sort_keys(numba.int32, 2048, 1)
    with pytest.raises(ArgumentError, match="block_exchange_type"):
        coop.block.make_exchange("Sideways", numba.int32, 128, 4)
    with pytest.raises(ArgumentError, match="threads_per_block"):
        coop.block.make_exchange(T.WarpStripedToBlocked, numba.int32, 48, 4)
    with pytest.raises(ArgumentError, match="warp_time_slicing"):
        coop.block.make_exchange(T.StripedToBlocked, numba.int32, 128, 4, warp_time_slicing="yes")
    with pytest.raises(ArgumentError, match="methods"):
        coop.block.make_exchange(T.StripedToBlocked, numba.int32, 128, 4, methods=[])
    assert stats.snapshot().get("nvrtc_compiles", 0) == 0
