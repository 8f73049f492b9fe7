"""Discontinuity flags and adjacent differences (``coop.block.make_discontinuity``,
``make_adjacent_difference``), compiled for sm_90 and linked with no GPU: each kernel of
``coop_neighbours`` (every form: storage first or left out, the tile's neighbour items,
a partial tile, in place) links and keeps its items in registers; bad arguments are
refused naming them, at the factory or when numba types the call.

CI links one case per factory (type, block shape and item count rotating over them); the
whole matrix runs with the slow tests and, for real, on the GPU.
"""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402
from numba.core.errors import TypingError  # noqa: E402

from cuprims import OpKind, coop  # noqa: E402
from cuprims._compile.elfmeta import local_memory_bytes, register_count  # noqa: E402
from cuprims.errors import ArgumentError, CoopError  # noqa: E402

import coop_forms  # noqa: E402
import coop_neighbours  # noqa: E402
from coop_helpers import link_kernel  # noqa: E402

pytestmark = pytest.mark.usefixtures("sm90")


def _ci_cases() -> set[tuple]:
    chosen = set()
    for i, factory in enumerate(coop_neighbours.FACTORIES):
        type_name = coop_forms.FORM_TYPES[(3 * i + 2) % len(coop_forms.FORM_TYPES)]
        shape = coop_forms.FORM_SHAPES[(i + 1) % len(coop_forms.FORM_SHAPES)]
        chosen.add((factory, type_name, shape, coop_forms.FORM_ITEMS[i % len(coop_forms.FORM_ITEMS)]))
    return chosen


CI_CASES = _ci_cases()
CASES = [pytest.param(*case, id=coop_neighbours.case_id(*case), marks=() if case in CI_CASES else pytest.mark.slow)
         for case in coop_neighbours.all_cases()]


def test_ci_links_every_factory():
    assert {case[0] for case in CI_CASES} == set(coop_neighbours.FACTORIES)


@pytest.mark.parametrize("factory,type_name,shape,items", CASES)
def test_every_form_links_and_keeps_items_in_registers(factory, type_name, shape, items):
    case = coop_neighbours.build(factory, type_name, shape, items)
    item = numba.from_dtype(coop_forms.np_dtype(type_name))
    out = types.int64 if factory.startswith("block.flag_") else item
    cubin = link_kernel(case.kernel, (types.Array(item, 1, "C"), types.Array(out, 1, "C")), case.prims)
    assert cubin[:4] == b"\x7fELF"
    assert register_count(cubin) * case.threads <= 65536, "the block could not launch"
    assert local_memory_bytes(cubin) == 0, f"{case.forms}: the kernel uses local memory"


@pytest.mark.parametrize("kwargs,argument", [
    (dict(block_discontinuity_type="HEAD"), "block_discontinuity_type"),
    (dict(flag_dtype=numba.float32), "flag_dtype"),
    (dict(flag_op=OpKind.PLUS), "flag_op"),
    (dict(flag_op="<"), "flag_op"),
    (dict(methods={"construct": 1}), "methods"),
])
def test_bad_discontinuity_arguments_are_named(kwargs, argument):
    with pytest.raises(ArgumentError) as info:
        coop.block.make_discontinuity(numba.int32, 128, 2, **kwargs)
    assert info.value.argument == argument


@pytest.mark.parametrize("dtype,kwargs,argument", [
    (numba.int32, dict(block_adjacent_difference_type="Left"), "block_adjacent_difference_type"),
    (numba.int32, dict(difference_op=OpKind.LESS), "difference_op"),
    (numba.boolean, dict(), "difference_op"),          # '-' is not defined on bools
    (numba.int32, dict(items_per_thread=0), "items_per_thread"),
])
def test_bad_adjacent_difference_arguments_are_named(dtype, kwargs, argument):
    with pytest.raises(ArgumentError) as info:
        coop.block.make_adjacent_difference(dtype, 128, **{"items_per_thread": 2, **kwargs})
    assert info.value.argument == argument


def test_a_struct_needs_a_python_flag_operator():
    with pytest.raises(ArgumentError) as info:
        coop.block.make_discontinuity(coop_forms.np_dtype(coop_forms.STRUCT), 128, 2)
    assert info.value.argument == "flag_op"


def test_flags_of_another_type_fail_typing():
    heads = coop.block.make_discontinuity(numba.int32, 128, 2, flag_dtype=numba.int32)

    @cuda.jit(link=heads.files)
    def kernel(x):
        items = cuda.local.array(2, numba.int32)
        flags = cuda.local.array(2, numba.boolean)      # the primitive's flags are int32
        items[0], items[1] = x[0], x[1]
        heads(items, flags)
        x[0] = flags[0]

    with pytest.raises(TypingError):
        link_kernel(kernel, (types.int32[::1],), [heads])


def test_a_right_difference_of_a_partial_tile_takes_no_successor():
    diff = coop.block.make_adjacent_difference(numba.int32, 128, 2,
                                               block_adjacent_difference_type="SubtractRight")

    @cuda.jit(link=diff.files)
    def kernel(x, n):
        items = cuda.local.array(2, numba.int32)
        items[0], items[1] = x[0], x[1]
        diff(items, items, n, x[5])
        x[0] = items[0]

    with pytest.raises(TypingError, match="tile_successor_item and num_valid exclude each other"):
        link_kernel(kernel, (types.int32[::1], types.int32), [diff])


def test_keys_differ_by_kind_operator_and_flag_type():
    made = [coop.block.make_discontinuity(numba.int32, 128, 2),
            coop.block.make_discontinuity(numba.int32, 128, 2, block_discontinuity_type="TAILS"),
            coop.block.make_discontinuity(numba.int32, 128, 2, flag_dtype=numba.int8),
            coop.block.make_discontinuity(numba.int32, 128, 2, flag_op="=="),
            coop.block.make_adjacent_difference(numba.int32, 128, 2),
            coop.block.make_adjacent_difference(numba.int32, 128, 2, "+"),
            coop.block.make_adjacent_difference(numba.int32, 128, 2, block_adjacent_difference_type="SubtractRight")]
    assert len({p.spec.key for p in made}) == len(made)
    # CUB keeps each thread's first and last items for the neighbours: a few bytes a thread
    assert 0 < made[0].temp_storage_layout[0] <= 2 * 128 * 4 + 16


def test_style2_calls_link_and_keep_items_in_registers():
    """Style 2's flag_heads / flag_tails / flag_heads_and_tails / subtract_left /
    subtract_right, with and without the tile's neighbours, a partial tile, in place."""
    @cuda.jit
    def kernel(x, flags_out, deltas_out):
        block = coop.this_block()
        items = coop.ThreadData(4)
        coop.load(block, x, items)
        heads = coop.ThreadData(4, dtype=numba.int32)
        tails = coop.ThreadData(4, dtype=numba.int32)
        coop.flag_heads(block, items, heads, tile_predecessor_item=x[0])
        coop.flag_tails(block, items, tails)
        coop.flag_heads_and_tails(block, items, heads, tails, tile_predecessor_item=x[0], tile_successor_item=x[1])
        coop.flag_heads_and_tails(block, items, heads, tails, tile_successor_item=x[1])
        deltas = coop.ThreadData(4)
        coop.subtract_left(block, items, deltas, tile_predecessor_item=x[0], valid_items=100)
        coop.subtract_right(block, items, deltas, valid_items=100)
        coop.subtract_right(block, items, tile_successor_item=x[2])
        coop.subtract_left(block, items)
        coop.store(block, flags_out, heads)
        coop.store(block, deltas_out, deltas)

    with coop.target(block=(128, 1, 1)):
        cubin = link_kernel(kernel, (types.int32[::1],) * 3, [])
    assert local_memory_bytes(cubin) == 0


def test_style2_right_difference_of_a_partial_tile_takes_no_successor():
    @cuda.jit
    def kernel(x, n):
        block = coop.this_block()
        items = coop.ThreadData(2)
        coop.load(block, x, items)
        coop.subtract_right(block, items, tile_successor_item=x[0], valid_items=n)
        coop.store(block, x, items)

    with coop.target(block=(128, 1, 1)), pytest.raises(CoopError, match="exclude each other"):
        link_kernel(kernel, (types.int32[::1], types.int32), [])
