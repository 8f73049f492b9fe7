"""The block histogram (``coop.block.make_histogram``), compiled for sm_90 and linked with
no GPU: each kernel of ``coop_histogram`` (the whole histogram with its own storage or the
caller's first; ``init`` and ``composite`` as methods, storage first or by keyword) links
and keeps its items in registers; bad arguments are refused naming them.

CI links a few cases (both algorithms, a 1-, 2- and 3-D block); the whole matrix runs
with the slow tests and, for real, on the GPU.
"""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402
from numba.core.errors import TypingError  # noqa: E402

from cuprims import coop  # noqa: E402
from cuprims._compile.elfmeta import local_memory_bytes, register_count  # noqa: E402
from cuprims.errors import ArgumentError, CoopError  # noqa: E402

import coop_histogram  # noqa: E402
from coop_helpers import link_kernel  # noqa: E402

pytestmark = pytest.mark.usefixtures("sm90")

CI_CASES = {("sort", "int64", "float32", (2, 4, 8), 3)}   # the atomic algorithm: its Style 2 test
CASES = [pytest.param(*case, id=coop_histogram.case_id(*case), marks=() if case in CI_CASES else pytest.mark.slow)
         for case in sorted(set(coop_histogram.all_cases()) | CI_CASES)]


@pytest.mark.parametrize("algorithm,item,counter,shape,items", CASES)
def test_every_form_links_and_keeps_items_in_registers(algorithm, item, counter, shape, items):
    case = coop_histogram.build(algorithm, item, counter, shape, items)
    args = (types.Array(getattr(types, item), 1, "C"), types.Array(getattr(types, counter), 1, "C"))
    cubin = link_kernel(case.kernel, args, [case.prim])
    assert cubin[:4] == b"\x7fELF"
    assert register_count(cubin) * case.tile // items <= 65536, "the block could not launch"
    assert local_memory_bytes(cubin) == 0, "the kernel uses local memory"


def test_the_methods_are_primitives_of_the_same_provider():
    histo = coop.block.make_histogram(numba.uint8, 128, 4, bins=256)
    assert histo.init.files == histo.files == histo.composite.files
    assert histo.init.temp_storage_bytes == histo.temp_storage_bytes > 1
    assert "block.histogram.SORT" in repr(histo) and "bins 256" in repr(histo) and "counters int32" in repr(histo)
    other = coop.block.make_histogram(numba.uint8, 128, 4, bins=255)
    assert other.spec.symbol != histo.spec.symbol        # the bins are part of the provider
    atomic = coop.block.make_histogram(numba.uint8, 128, 4, coop.block.BlockHistogramAlgorithm.ATOMIC, bins=256)
    assert atomic.temp_storage_layout[0] == 1            # CUB's atomic algorithm keeps nothing shared


@pytest.mark.parametrize("kwargs,argument", [
    (dict(item_dtype=numba.float32), "item_dtype"),
    (dict(item_dtype="bool"), "item_dtype"),
    (dict(counter_dtype=numba.int8), "counter_dtype"),
    (dict(counter_dtype="complex64"), "counter_dtype"),
    (dict(bins=0), "bins"),
    (dict(bins=True), "bins"),
    (dict(bins=2.0), "bins"),
    (dict(algorithm="radix"), "algorithm"),
    (dict(threads_per_block=0), "threads_per_block"),
    (dict(items_per_thread=0), "items_per_thread"),
])
def test_bad_arguments_are_named(kwargs, argument):
    full = dict(item_dtype=numba.uint8, threads_per_block=128, items_per_thread=2, bins=16)
    full.update(kwargs)
    with pytest.raises(ArgumentError, match=argument) as info:
        coop.block.make_histogram(**full)
    assert isinstance(info.value, ValueError)


def test_counters_of_another_type_fail_typing():
    histo = coop.block.make_histogram(numba.uint8, 128, 1, bins=16)     # int32 counters

    @cuda.jit(link=histo.files)
    def kernel(x):
        counts = cuda.shared.array(16, numba.float32)
        items = cuda.local.array(1, numba.uint8)
        items[0] = x[cuda.threadIdx.x]
        histo(items, counts)

    with pytest.raises(TypingError):
        link_kernel(kernel, (types.Array(types.uint8, 1, "C"),), [histo])


# ---------------------------------------------------------------- Style 2: coop.histogram

def _style2_kernel(algorithm: str, bins: int):
    @cuda.jit
    def kernel(x, out):
        block = coop.this_block()
        items = coop.ThreadData(4, dtype=numba.uint8)
        counts = cuda.shared.array(bins, numba.uint32)
        coop.load(block, x, items)
        coop.histogram(block, items, counts, bins=bins, algorithm=algorithm)
        coop.load(block, x[512:], items)
        coop.histogram(block, items, counts, bins=bins, algorithm=algorithm, accumulate=True)
        cuda.syncthreads()
        for b in range(cuda.threadIdx.x, bins, 128):
            out[b] = counts[b]
    return kernel


@pytest.mark.parametrize("algorithm", [pytest.param("sort", marks=pytest.mark.slow), "atomic"])
def test_style2_histogram_links_and_keeps_items_in_registers(algorithm):
    kernel = _style2_kernel(algorithm, 200)
    with coop.target(block=(128, 1, 1)):
        cubin = link_kernel(kernel, (types.Array(types.uint8, 1, "C"), types.Array(types.uint32, 1, "C")), [])
    assert cubin[:4] == b"\x7fELF" and local_memory_bytes(cubin) == 0


@pytest.mark.parametrize("call,error,match", [
    ("coop.histogram(block, items, counts)", CoopError, "missing a required argument: 'bins'"),
    ("coop.histogram(block, items, counts, bins=0)", ArgumentError, "argument 'bins'"),
    ("coop.histogram(block, items, counts, bins=16, algorithm='radix')", ArgumentError, "argument 'algorithm'"),
    ("coop.histogram(block, fitems, counts, bins=16)", ArgumentError, "argument 'items': expected a coop.ThreadData "
                                                                       "of integers"),
    ("coop.histogram(block, items, x, bins=16)", ArgumentError, "argument 'histogram': expected a writable 1-D"),
])
def test_style2_histogram_refuses_bad_calls_naming_them(call, error, match):
    source = (
        "def kernel(x, out):\n"
        "    block = coop.this_block()\n"
        "    items = coop.ThreadData(2, dtype=numba.uint8)\n"
        "    fitems = coop.ThreadData(2, dtype=numba.float32)\n"
        "    counts = cuda.shared.array(16, numba.int32)\n"
        "    coop.load(block, x, items)\n"
        "    coop.load(block, out, fitems)\n"
        f"    {call}\n")
    namespace = {"coop": coop, "cuda": cuda, "numba": numba}
    exec(compile(source, "<style2 histogram>", "exec"), namespace)
    kernel = cuda.jit(namespace["kernel"])
    with pytest.raises(error, match=match):
        with coop.target(block=(128, 1, 1)):
            link_kernel(kernel, (types.Array(types.uint8, 1, "C"), types.Array(types.float32, 1, "C")), [])
