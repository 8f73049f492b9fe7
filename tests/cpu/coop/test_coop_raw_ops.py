"""RawOp operators in coop primitives, compiled for sm_90 and linked with no GPU: a block
and a warp reduction sharing one RawOp (its LTO-IR among the kernel's link inputs once),
a merge sort by a RawOp comparator, Style 2's reduce by a RawOp; the operator inlines
into the kernel. A RawOp with state is refused naming the argument."""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")
from numba import types  # noqa: E402

from cuprims import RawOp, coop  # noqa: E402
from cuprims._compile.elfmeta import local_memory_bytes  # noqa: E402
from cuprims.errors import ArgumentError  # noqa: E402

import coop_raw_ops  # noqa: E402
from coop_helpers import link_kernel  # noqa: E402

pytestmark = pytest.mark.usefixtures("sm90")


def test_two_primitives_share_a_rawop_linked_once():
    prims, kernel = coop_raw_ops.reductions_kernel()
    raw = [f for f in prims[0].files if "cuprims_raw_" in f.name]
    assert raw and raw == [f for f in prims[1].files if "cuprims_raw_" in f.name]      # the same objects
    i4 = types.Array(types.int32, 1, "C")
    cubin = link_kernel(kernel, (i4, i4), prims)
    assert local_memory_bytes(cubin) == 0


def test_a_merge_sort_by_a_rawop_comparator_links():
    prims, kernel = coop_raw_ops.sort_kernel()
    cubin = link_kernel(kernel, (types.Array(types.float32, 1, "C"),), prims)
    assert local_memory_bytes(cubin) == 0


def test_style2_reduce_by_a_rawop_links():
    kernel = coop_raw_ops.style2_kernel()
    i4 = types.Array(types.int32, 1, "C")
    with coop.target(block=(128, 1, 1)):
        cubin = link_kernel(kernel, (i4, i4), [])
    assert local_memory_bytes(cubin) == 0


def test_a_rawop_with_state_is_refused_naming_the_argument():
    from cpu_helpers import stub_ltoir

    op = RawOp(ltoir=stub_ltoir("coop_stateful", 4), name="coop_stateful", state=b"\0" * 8)
    with pytest.raises(ArgumentError, match="binary_op.*without state"):
        coop.block.make_reduce(numba.int32, 128, op)
