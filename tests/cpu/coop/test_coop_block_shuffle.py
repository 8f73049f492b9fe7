"""The block shuffles (``coop.block.make_shuffle``: offset, rotate, up, down; Style 2
``coop.shuffle``), compiled for sm_90 and linked with no GPU: each kernel of
``coop_block_shuffle`` links and keeps its items in registers; bad arguments are refused
naming them. CI links one case per shuffle; the whole matrix runs with the slow tests
and, for real, on the GPU."""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402

from cuprims import coop  # noqa: E402
from cuprims._compile.elfmeta import local_memory_bytes, register_count  # noqa: E402
from cuprims.errors import ArgumentError, CoopError  # noqa: E402

import coop_block_shuffle as cbs  # noqa: E402
import coop_forms  # noqa: E402
from coop_helpers import link_kernel  # noqa: E402

pytestmark = pytest.mark.usefixtures("sm90")

CI_CASES = {(k, coop_forms.FORM_TYPES[(4 * i + 1) % len(coop_forms.FORM_TYPES)],
             coop_forms.FORM_SHAPES[(i + 2) % len(coop_forms.FORM_SHAPES)], cbs.ITEMS[k][-1])
            for i, k in enumerate(cbs.KINDS) if k in ("Rotate", "Down")}   # Offset, Up: the Style 2 test
CASES = [pytest.param(*c, id=cbs.case_id(*c), marks=() if c in CI_CASES else pytest.mark.slow)
         for c in cbs.all_cases()]


@pytest.mark.parametrize("kind,type_name,shape,items", CASES)
def test_every_form_links_and_keeps_items_in_registers(kind, type_name, shape, items):
    case = cbs.build(kind, type_name, shape, items)
    arg = types.Array(numba.from_dtype(coop_forms.np_dtype(type_name)), 1, "C")
    cubin = link_kernel(case.kernel, (arg, arg), [case.prim])
    assert register_count(cubin) * case.threads <= 65536, "the block could not launch"
    assert local_memory_bytes(cubin) == 0


@pytest.mark.parametrize("kwargs,argument", [
    (dict(block_shuffle_type="Sideways"), "block_shuffle_type"),
    (dict(block_shuffle_type="Offset", items_per_thread=2), "items_per_thread"),
    (dict(threads_per_block=(0,)), "threads_per_block"),
])
def test_bad_arguments_are_named(kwargs, argument):
    full = dict(dtype=numba.int32, threads_per_block=128, items_per_thread=1)
    full.update(kwargs)
    with pytest.raises(ArgumentError, match=argument):
        coop.block.make_shuffle(**full)


def _style2(body: str):
    source = ("def kernel(x, out):\n"
              "    block = coop.this_block()\n"
              "    items = coop.ThreadData(3, dtype=numba.float64)\n"
              "    moved = coop.ThreadData(3, dtype=numba.float64)\n"
              "    coop.load(block, x, items)\n"
              f"{body}"
              "    coop.store(block, out, items)\n")
    namespace = {"coop": coop, "cuda": cuda, "numba": numba}
    exec(compile(source, "<style2 block shuffle>", "exec"), namespace)
    return cuda.jit(namespace["kernel"])


def _link2(kernel):
    with coop.target(block=(128, 1, 1)):
        return link_kernel(kernel, (types.Array(types.float64, 1, "C"),) * 2, [])


def test_style2_block_shuffles_link_in_registers():
    kernel = _style2("    out[0] = coop.shuffle(block, x[cuda.threadIdx.x], block_shuffle_type='offset')\n"
                     "    out[1] = coop.shuffle(block, x[cuda.threadIdx.x], block_shuffle_type='rotate', distance=5)\n"
                     "    out[2] = coop.shuffle(block, items, moved, block_shuffle_type='up')\n"
                     "    out[3] = coop.shuffle(block, items, block_shuffle_type=coop.block.BlockShuffleType.Down)\n")
    assert local_memory_bytes(_link2(kernel)) == 0


@pytest.mark.parametrize("body,error,match", [
    ("    coop.shuffle(block, items, block_shuffle_type='offset')\n", ArgumentError, "argument 'items': expected one"),
    ("    coop.shuffle(block, x[0], block_shuffle_type='up')\n", ArgumentError, "argument 'items': expected a coop"),
    ("    coop.shuffle(block, items, block_shuffle_type='up', distance=2)\n", CoopError, "distance= is for"),
    ("    coop.shuffle(block, items, block_shuffle_type='left')\n", ArgumentError, "block_shuffle_type"),
    ("    coop.shuffle(block, x[0], block_shuffle_type='offset', distance=1.5)\n", ArgumentError, "distance"),
])
def test_style2_block_shuffle_refuses_bad_calls_naming_them(body, error, match):
    with pytest.raises(error, match=match):
        _link2(_style2(body))
