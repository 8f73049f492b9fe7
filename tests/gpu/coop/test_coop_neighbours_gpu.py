"""Discontinuity flags and adjacent differences run on the GPU against numpy: every
factory of ``coop_neighbours`` (heads, tails, both; left and right differences) over every
int, float and complex type and a struct, block shapes 32 to 1024 in one to three
dimensions and 1 or 3 items per thread, each form in one kernel (storage first or left
out, the tile's neighbour items, a partial tile, in place), and no LDL/STL in the kernel's
SASS.

tests/cpu/coop/test_coop_neighbours.py links the same kernels for sm_90 with no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

import coop_forms  # noqa: E402
import coop_neighbours  # noqa: E402

CASES = [pytest.param(*case, id=coop_neighbours.case_id(*case)) for case in coop_neighbours.all_cases()]


@pytest.mark.parametrize("factory,type_name,shape,items", CASES)
def test_every_form_matches_numpy_and_keeps_items_in_registers(factory, type_name, shape, items):
    case = coop_neighbours.build(factory, type_name, shape, items)
    x = coop_neighbours.inputs(type_name, case.tile)
    want = case.expected(x)
    d_y = cuda.device_array(case.out_size, want.dtype)
    case.kernel[1, shape](cuda.to_device(x), d_y)
    y = d_y.copy_to_host()
    for f, form in enumerate(case.forms):
        got, expected = y[f * case.tile:(f + 1) * case.tile], want[f * case.tile:(f + 1) * case.tile]
        for name in y.dtype.names or (None,):
            np.testing.assert_array_equal(got if name is None else got[name],
                                          expected if name is None else expected[name], err_msg=form)
    assert not coop_forms.local_memory_in_sass(case.kernel), case.forms


def test_a_python_flag_operator_and_a_tile_split_over_two_calls():
    """Flags of a long array, one tile after another, each tile's predecessor the item
    before it: the flags of the whole array (numpy's), as a run-length encoder needs them."""
    from cuprims import coop

    heads = coop.block.make_discontinuity(numba.float32, 128, 4, flag_op=lambda a, b: abs(a - b) > 0.5,
                                          flag_dtype=numba.int32)
    tile = 128 * 4

    @cuda.jit(link=heads.files)
    def kernel(x, out):
        items = cuda.local.array(4, numba.float32)
        flags = cuda.local.array(4, numba.int32)
        for start in range(0, x.size, tile):
            for i in range(4):
                items[i] = x[start + 4 * cuda.threadIdx.x + i]
            if start == 0:
                heads(items, flags)
            else:
                heads(items, flags, x[start - 1])
            for i in range(4):
                out[start + 4 * cuda.threadIdx.x + i] = flags[i]

    x = np.repeat(np.arange(0, 3 * tile // 8, dtype=np.float32), 8)
    out = cuda.device_array(x.size, np.int32)
    kernel[1, 128](cuda.to_device(x), out)
    want = np.ones(x.size, np.int32)
    want[1:] = np.abs(np.diff(x)) > 0.5
    np.testing.assert_array_equal(out.copy_to_host(), want)


def test_style2_flags_and_differences_match_numpy():
    from cuprims import coop

    threads, n = 128, 3
    tile = threads * n

    @cuda.jit
    def kernel(x, heads_out, tails_out, left_out, right_out):
        block = coop.this_block()
        items = coop.ThreadData(n)
        coop.load(block, x, items)
        heads = coop.ThreadData(n, dtype=numba.int32)
        tails = coop.ThreadData(n, dtype=numba.int32)
        coop.flag_heads_and_tails(block, items, heads, tails, tile_predecessor_item=x[tile - 1])
        deltas = coop.ThreadData(n)
        coop.subtract_left(block, items, deltas, valid_items=tile // 2)
        coop.store(block, left_out, deltas)
        coop.subtract_right(block, items, tile_successor_item=x[0])    # in place
        coop.store(block, right_out, items)
        coop.store(block, heads_out, heads)
        coop.store(block, tails_out, tails)

    x = coop_neighbours.inputs("int32", tile)
    outs = [cuda.device_array(tile, np.int32) for _ in range(4)]
    kernel[1, threads](cuda.to_device(x), *outs)
    heads, tails, left, right = (o.copy_to_host() for o in outs)
    np.testing.assert_array_equal(heads, coop_neighbours.heads(x, x[-1]))
    np.testing.assert_array_equal(tails, coop_neighbours.tails(x))
    np.testing.assert_array_equal(left, coop_neighbours.left(x, valid=tile // 2))
    np.testing.assert_array_equal(right, coop_neighbours.right(x, x[0]))
