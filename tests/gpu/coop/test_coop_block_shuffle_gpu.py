"""The block shuffles run on the GPU against numpy: offset and rotate (distances 1, 3, -2),
up and down (into another array and in place, the tile's edge item returned) over every
int, float and complex type and a struct, block shapes 32 to 1024 in one to three
dimensions, 1 or 3 items per thread, and no LDL/STL in the kernel's SASS; Style 2's
``coop.shuffle`` likewise.

tests/cpu/coop/test_coop_block_shuffle.py links the same kernels for sm_90 with no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

import coop_block_shuffle as cbs  # noqa: E402
import coop_forms  # noqa: E402

CASES = [pytest.param(*c, id=cbs.case_id(*c)) for c in cbs.all_cases()]


@pytest.mark.parametrize("kind,type_name,shape,items", CASES)
def test_every_form_matches_numpy_and_keeps_items_in_registers(kind, type_name, shape, items):
    case = cbs.build(kind, type_name, shape, items)
    x = cbs.inputs(type_name, case.tile)
    want = cbs.expected(kind, x, case.threads)
    d_y = cuda.device_array(cbs.out_size(kind, case.tile, case.threads), x.dtype)
    case.kernel[1, shape](cuda.to_device(x), d_y)
    y = d_y.copy_to_host()
    for name in y.dtype.names or (None,):
        np.testing.assert_array_equal(y if name is None else y[name], want if name is None else want[name])
    assert not coop_forms.local_memory_in_sass(case.kernel)


def test_style2_block_shuffles_match_numpy():
    from cuprims import coop

    threads, n = 128, 3
    tile = threads * n

    @cuda.jit
    def kernel(x, single, up, down, edges):
        block = coop.this_block()
        t = cuda.threadIdx.x
        items = coop.ThreadData(n, dtype=numba.float64)
        moved = coop.ThreadData(n, dtype=numba.float64)
        single[t] = coop.shuffle(block, x[t], block_shuffle_type="offset", distance=-1)
        single[threads + t] = coop.shuffle(block, x[t], block_shuffle_type="rotate", distance=5)
        coop.load(block, x, items)
        last = coop.shuffle(block, items, moved, block_shuffle_type="up")
        coop.store(block, up, moved)
        first = coop.shuffle(block, items, block_shuffle_type=coop.block.BlockShuffleType.Down)
        coop.store(block, down, items)
        edges[t] = last
        edges[threads + t] = first

    x = np.arange(tile, dtype=np.float64) * 0.5
    single, up, down, edges = (cuda.device_array(s, np.float64) for s in (2 * threads, tile, tile, 2 * threads))
    kernel[1, threads](cuda.to_device(x), single, up, down, edges)
    t = np.arange(threads)
    np.testing.assert_array_equal(single.copy_to_host()[:threads], np.where(t >= 1, x[np.maximum(t - 1, 0)], x[t]))
    np.testing.assert_array_equal(single.copy_to_host()[threads:], x[(t + 5) % threads])
    np.testing.assert_array_equal(up.copy_to_host(), np.concatenate([x[:1], x[:-1]]))
    np.testing.assert_array_equal(down.copy_to_host(), np.concatenate([x[1:], x[-1:]]))
    np.testing.assert_array_equal(edges.copy_to_host(), np.concatenate([np.full(threads, x[-1]), np.full(threads, x[0])]))
