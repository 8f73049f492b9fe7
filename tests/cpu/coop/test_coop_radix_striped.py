"""Block radix sorts leaving their tile striped (``blocked_to_striped=True``, Style 1 and
Style 2), compiled for sm_90 and linked with no GPU, keeping their items in registers;
a flag that is not a bool is refused naming it. CI links one case per sort kind; the
whole matrix runs with the slow tests and, for real, on the GPU."""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")
from numba import types  # noqa: E402

from cuprims import coop  # noqa: E402
from cuprims._compile.elfmeta import local_memory_bytes  # noqa: E402
from cuprims.coop._codegen import provider_text  # noqa: E402
from cuprims.errors import ArgumentError  # noqa: E402

import coop_striped  # noqa: E402
from coop_helpers import link_kernel  # noqa: E402

pytestmark = pytest.mark.usefixtures("sm90")

CI_CASES = {(k, coop_striped.TYPES[(2 * i + 1) % len(coop_striped.TYPES)], coop_striped.SHAPES[i],
             coop_striped.ITEMS[i % 2]) for i, k in enumerate(coop_striped.KINDS) if k.endswith("descending")}
CASES = [pytest.param(*c, id=coop_striped.case_id(*c), marks=() if c in CI_CASES else pytest.mark.slow)
         for c in coop_striped.all_cases()]


@pytest.mark.parametrize("kind,type_name,shape,items", CASES)
def test_striped_sorts_link_in_registers(kind, type_name, shape, items):
    prim, kernel = coop_striped.build(kind, type_name, shape, items)
    method = "SortDescendingBlockedToStriped(" if kind.endswith("descending") else "SortBlockedToStriped("
    assert method in provider_text(prim.spec)[0]
    cubin = link_kernel(kernel, (types.Array(getattr(types, type_name), 1, "C"), types.Array(types.int32, 1, "C")),
                        [prim])
    assert local_memory_bytes(cubin) == 0


def test_striped_and_blocked_are_two_providers():
    blocked = coop.block.make_radix_sort_keys(numba.int32, 128, 4)
    striped = coop.block.make_radix_sort_keys(numba.int32, 128, 4, blocked_to_striped=True)
    assert blocked.spec.symbol != striped.spec.symbol


def test_a_flag_that_is_not_a_bool_is_named():
    with pytest.raises(ArgumentError, match="blocked_to_striped"):
        coop.block.make_radix_sort_pairs(numba.int32, numba.int32, 128, 4, blocked_to_striped=1)


def test_style2_striped_sort_links():
    kernel = coop_striped.style2_kernel()
    with coop.target(block=(128, 1, 1)):
        cubin = link_kernel(kernel, (types.Array(types.uint32, 1, "C"),), [])
    assert local_memory_bytes(cubin) == 0
