"""Style 1 primitives called as the established two-phase interface calls them (storage
first and positional, or left out; in place; trailing extras), compiled for sm_90 and
linked with no GPU: each kernel of ``coop_forms`` links, and keeps everything in registers
(its cubin records no stack frame, so its SASS has no LDL/STL). A bad storage argument
fails at typing time, naming ``temp_storage``.

CI links one case per family of call forms (type, block shape and item count rotating
over them); the whole matrix runs with the slow tests and, for real, on the GPU.
"""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402
from numba.core.errors import TypingError  # noqa: E402

from cuprims import coop  # noqa: E402
from cuprims._compile.elfmeta import local_memory_bytes, register_count  # noqa: E402

import coop_forms  # noqa: E402
from coop_helpers import link_kernel  # noqa: E402

pytestmark = pytest.mark.usefixtures("sm90")


# one factory of each family of call forms (the sum, inclusive and descending variants
# share their family's device function text)
CI_FACTORIES = ["block.load_store", "block.reduce", "block.exclusive_sum", "block.scan", "block.sum_prefix",
                "block.exchange", "block.merge_sort", "block.radix_sort", "warp.reduce", "warp.exclusive_sum",
                "warp.merge_sort"]


def _ci_cases() -> set[tuple]:
    """One case per CI factory: the i-th factory's first supported type from the i-th on."""
    chosen = set()
    for i, factory in enumerate(CI_FACTORIES):
        for k in range(len(coop_forms.FORM_TYPES)):
            type_name = coop_forms.FORM_TYPES[(i + k) % len(coop_forms.FORM_TYPES)]
            shape = coop_forms.FORM_SHAPES[i % len(coop_forms.FORM_SHAPES)]
            items = coop_forms.FORM_ITEMS[i % len(coop_forms.FORM_ITEMS)]
            if not coop_forms.supports(factory, type_name, items):
                items = 1
            if coop_forms.supports(factory, type_name, items):
                chosen.add((factory, type_name, shape, items))
                break
    return chosen


CI_CASES = _ci_cases()
CASES = [pytest.param(*case, id=coop_forms.case_id(*case), marks=() if case in CI_CASES else pytest.mark.slow)
         for case in coop_forms.all_cases()]


def test_every_ci_factory_has_a_ci_case():
    assert {case[0] for case in CI_CASES} == set(CI_FACTORIES) <= set(coop_forms.FACTORIES)


@pytest.mark.parametrize("factory,type_name,shape,items", CASES)
def test_call_forms_link_and_keep_items_in_registers(factory, type_name, shape, items):
    try:
        case = coop_forms.build(factory, type_name, shape, items)
    except coop_forms.BeyondSharedMemory as exc:
        pytest.skip(f"no kernel can call it: {exc}")
    arg = types.Array(numba.from_dtype(coop_forms.np_dtype(type_name)), 1, "C")
    cubin = link_kernel(case.kernel, (arg, arg), case.prims)
    assert cubin[:4] == b"\x7fELF"
    assert register_count(cubin) * case.threads <= 65536, "the block could not launch"
    if coop_forms.may_spill(factory, type_name, shape, items):
        assert local_memory_bytes(cubin) <= 64           # a few bytes (docs/coop.rst)
    else:
        assert local_memory_bytes(cubin) == 0, f"{case.forms}: the kernel uses local memory"


def test_local_memory_is_seen_when_a_kernel_uses_it():
    # the check above can fail: an array indexed at run time cannot live in registers
    @cuda.jit
    def kernel(x, y):
        items = cuda.local.array(64, numba.int32)
        for i in range(64):
            items[i] = x[i * 128 + cuda.threadIdx.x]
        y[cuda.threadIdx.x] = items[y[cuda.threadIdx.x] % 64]

    cubin = link_kernel(kernel, (types.int32[::1], types.int32[::1]), [])
    assert local_memory_bytes(cubin) >= 64 * 4


def _kernel_with_storage(storage_dtype, ndim=1):
    load = coop.block.make_load(numba.int32, 128, 4)
    nbytes = load.temp_storage_bytes

    if ndim == 1:
        @cuda.jit(link=load.files)
        def kernel(x):
            temp_storage = cuda.shared.array(shape=nbytes, dtype=storage_dtype)
            items = cuda.local.array(4, numba.int32)
            load(temp_storage, x, items)
            x[cuda.threadIdx.x] = items[0]
    else:
        @cuda.jit(link=load.files)
        def kernel(x):
            temp_storage = cuda.shared.array(shape=(nbytes, 2), dtype=storage_dtype)
            items = cuda.local.array(4, numba.int32)
            load(temp_storage, x, items)
            x[cuda.threadIdx.x] = items[0]
    return kernel, load


@pytest.mark.parametrize("storage_dtype,ndim", [(numba.int32, 1), (numba.float64, 1), (numba.uint8, 2)])
def test_storage_of_another_dtype_or_rank_fails_typing_naming_it(storage_dtype, ndim):
    kernel, load = _kernel_with_storage(storage_dtype, ndim)
    with pytest.raises(TypingError, match="temp_storage.*1-D uint8 array"):
        link_kernel(kernel, (types.int32[::1],), [load])


def test_storage_keyword_of_another_dtype_fails_typing_naming_it():
    reduce = coop.block.make_sum(numba.float32, 128)

    @cuda.jit(link=reduce.files)
    def kernel(x):
        temp = cuda.shared.array(64, numba.float32)
        x[0] = reduce(x[cuda.threadIdx.x], temp_storage=temp)

    with pytest.raises(TypingError, match="temp_storage must be a 1-D uint8 array"):
        link_kernel(kernel, (types.float32[::1],), [reduce])


def test_storage_needs_no_alignment_of_its_own():
    # temp_storage_bytes leaves room to round a byte-aligned array up to CUB's alignment
    load = coop.block.make_load(numba.float64, 128, 4, algorithm="transpose")
    nbytes, align = load.temp_storage_layout
    assert align > 1 and load.temp_storage_bytes == nbytes + align - 1
    assert load.temp_storage_alignment == max(8, align)


@pytest.mark.parametrize("dtype", [numba.int32, numba.complex64])
def test_a_sum_seeded_by_an_initial_value_links(dtype):
    # '+' with an initial value goes through the operator's functor (CUB's Sum takes none)
    scan = coop.block.make_exclusive_scan(dtype, 128, "+", 2, initial_value=5)

    @cuda.jit(link=scan.files)
    def kernel(x):
        items = cuda.local.array(2, dtype)
        for i in range(2):
            items[i] = x[2 * cuda.threadIdx.x + i]
        scan(items, items)
        for i in range(2):
            x[2 * cuda.threadIdx.x + i] = items[i]

    cubin = link_kernel(kernel, (types.Array(dtype, 1, "C"),), [scan])
    assert local_memory_bytes(cubin) == 0
