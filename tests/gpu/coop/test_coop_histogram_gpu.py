"""The block histogram runs on the GPU against numpy's bincount: both algorithms, every
integer item type, each counter type in turn, block shapes 32 to 1024 in one to three
dimensions and 1 or 3 items per thread, every form in one kernel (the whole histogram with
its own storage or the caller's first; ``init`` and ``composite`` over two tiles, storage
first or by keyword), and no LDL/STL in the kernel's SASS.

tests/cpu/coop/test_coop_histogram.py links the same kernels for sm_90 with no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

import coop_forms  # noqa: E402
import coop_histogram  # noqa: E402

CASES = [pytest.param(*case, id=coop_histogram.case_id(*case)) for case in coop_histogram.all_cases()]


@pytest.mark.parametrize("algorithm,item,counter,shape,items", CASES)
def test_every_form_matches_bincount_and_keeps_items_in_registers(algorithm, item, counter, shape, items):
    case = coop_histogram.build(algorithm, item, counter, shape, items)
    x = coop_histogram.inputs(item, 2 * case.tile)
    want = case.expected(x)
    d_y = cuda.device_array(coop_histogram.out_size(), counter)
    case.kernel[1, shape](cuda.to_device(x), d_y)
    y = d_y.copy_to_host()
    bins = coop_histogram.BINS
    for f, form in enumerate(coop_histogram.FORMS):
        np.testing.assert_array_equal(y[f * bins:(f + 1) * bins], want[f * bins:(f + 1) * bins], err_msg=form)
    assert not coop_forms.local_memory_in_sass(case.kernel)


def test_a_grid_counts_a_long_array_into_one_histogram():
    """Each block counts its tiles into its shared histogram, then adds it to the global
    one: the histogram of the whole array, as a user's kernel builds it."""
    from cuprims import coop

    threads, n, bins = 256, 4, 256
    histo = coop.block.make_histogram(numba.uint8, threads, n, coop.block.BlockHistogramAlgorithm.ATOMIC,
                                      bins=bins, counter_dtype=numba.uint32)
    tile = threads * n

    @cuda.jit(link=histo.files)
    def kernel(x, out):
        counts = cuda.shared.array(bins, numba.uint32)
        items = cuda.local.array(n, numba.uint8)
        histo.init(counts)
        cuda.syncthreads()
        for start in range(cuda.blockIdx.x * tile, x.size, cuda.gridDim.x * tile):
            for i in range(n):
                items[i] = x[start + n * cuda.threadIdx.x + i]
            histo.composite(items, counts)
        cuda.syncthreads()
        for b in range(cuda.threadIdx.x, bins, threads):
            cuda.atomic.add(out, b, counts[b])

    x = np.random.default_rng(3).integers(0, 256, 64 * tile, dtype=np.uint8)
    out = cuda.to_device(np.zeros(bins, np.uint32))
    kernel[16, threads](cuda.to_device(x), out)
    np.testing.assert_array_equal(out.copy_to_host(), np.bincount(x, minlength=bins).astype(np.uint32))


@pytest.mark.parametrize("algorithm", ["sort", "atomic"])
@pytest.mark.parametrize("shape", [(128,), (8, 16), (2, 4, 8)])
def test_style2_histogram_of_two_tiles_matches_bincount(algorithm, shape):
    from cuprims import coop

    bins, n = 200, 3
    threads = int(np.prod(shape))
    tile = threads * n
    dx, dy = shape[0], (shape[1] if len(shape) > 1 else 1)

    @cuda.jit
    def kernel(x, first, both):
        block = coop.this_block()
        items = coop.ThreadData(n, dtype=numba.int16)
        counts = cuda.shared.array(bins, numba.uint64)
        t = cuda.threadIdx.x + dx * (cuda.threadIdx.y + dy * cuda.threadIdx.z)
        coop.load(block, x, items)
        coop.histogram(block, items, counts, bins=bins, algorithm=algorithm)
        cuda.syncthreads()
        for b in range(t, bins, threads):
            first[b] = counts[b]
        cuda.syncthreads()
        coop.load(block, x[tile:], items)
        coop.histogram(block, items, counts, bins=bins, algorithm=algorithm, accumulate=True)
        cuda.syncthreads()
        for b in range(t, bins, threads):
            both[b] = counts[b]

    x = np.random.default_rng(5).integers(0, bins, 2 * tile).astype(np.int16)
    first, both = cuda.device_array(bins, np.uint64), cuda.device_array(bins, np.uint64)
    kernel[1, shape](cuda.to_device(x), first, both)
    np.testing.assert_array_equal(first.copy_to_host(), np.bincount(x[:tile], minlength=bins))
    np.testing.assert_array_equal(both.copy_to_host(), np.bincount(x, minlength=bins))
