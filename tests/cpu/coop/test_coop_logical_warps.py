"""Warp reductions and scans over logical warps whose size is not a power of two (3, 5, 12,
20, 31 lanes), in both styles, compiled for sm_90 and linked with no GPU: each kernel of
``coop_logical_warps`` links with no local memory, its own storage holds one slot per
logical warp of CUB's per-hardware-warp layout, and the other warp primitives refuse such
sizes naming the argument.

CI links one case per call; the whole matrix runs with the slow tests and, for real, on the
GPU.
"""

from __future__ import annotations

import dataclasses

import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402

from cuprims import coop  # noqa: E402
from cuprims._compile.elfmeta import local_memory_bytes  # noqa: E402
from cuprims.coop._codegen import provider_text  # noqa: E402
from cuprims.errors import ArgumentError, CoopError  # noqa: E402

import coop_logical_warps as lw  # noqa: E402
from coop_helpers import link_kernel  # noqa: E402

pytestmark = pytest.mark.usefixtures("sm90")

CI_CASES = {(call, lw.LANES[i % len(lw.LANES)], lw.SHAPES[(i + 1) % len(lw.SHAPES)])
            for i, call in enumerate(lw.CALLS)}
CASES = [pytest.param(*case, id=lw.case_id(*case), marks=() if case in CI_CASES else pytest.mark.slow)
         for case in lw.all_cases()]


@pytest.mark.parametrize("call,lanes,shape", CASES)
def test_each_call_links_with_no_local_memory(call, lanes, shape):
    case = lw.build(call, lanes, shape)
    nb = numba.from_dtype(case.dtype)
    with coop.target(block=tuple(shape) + (1,) * (3 - len(shape))):
        cubin = link_kernel(case.kernel, (types.Array(nb, 1, "C"),) * 2, case.prims)
    assert local_memory_bytes(cubin) == 0


def test_own_storage_has_a_slot_per_logical_warp_of_cubs_layout():
    # 12 lanes: three logical warps in each of the 32 hardware warps of a 1024-thread block
    source, _ = provider_text(coop.warp.make_sum(numba.int32, threads_in_warp=12).spec)
    assert "storage[96]" in source and "(tid / 32u) * 3u + (tid % 32u) / 12u" in source
    # powers of two keep one slot per 16 threads in a row
    source, _ = provider_text(coop.warp.make_sum(numba.int32, threads_in_warp=16).spec)
    assert "storage[64]" in source and "storage[tid / 16]" in source


@pytest.mark.parametrize("mode", ["exclusive", "inclusive"])
def test_sums_over_partial_logical_warps_go_through_the_functor(mode):
    # CUB pads a shared-memory warp scan with cuda::std::plus's identity written by the
    # lanes present only: the partial logical warp ending each hardware warp (5 lanes:
    # 6 x 5 + 2) would read unset padding. A functor with no identity element makes CUB
    # guard each read by the lane.
    def spec(lanes):   # Style 1 makes the exclusive sum; Style 2's warp calls make both
        return dataclasses.replace(coop.warp.make_exclusive_sum(numba.int64, threads_in_warp=lanes).spec, mode=mode)

    source, _ = provider_text(spec(5))
    assert f"{mode.capitalize()}Sum(" not in source
    init = "zero, " if mode == "exclusive" else ""
    assert f"prim.{mode.capitalize()}Scan(in[0], out[0], {init}" in source and "_functor{})" in source
    assert ("const long long zero{};" in source) == (mode == "exclusive")
    # a power of two keeps CUB's shuffle sum
    source, _ = provider_text(spec(16))
    assert f"prim.{mode.capitalize()}Sum(in[0], out[0]);" in source


@pytest.mark.parametrize("factory,args", [
    (coop.warp.make_load, (numba.int32, 2)), (coop.warp.make_store, (numba.int32, 2)),
    (coop.warp.make_shuffle_up, (numba.int32,)),
    (coop.warp.make_exchange, ("StripedToBlocked", numba.int32, 2)),
])
def test_primitives_cub_keeps_to_powers_of_two_refuse_other_sizes(factory, args):
    with pytest.raises(ArgumentError, match="threads_in_warp.*power of two"):
        factory(*args, threads_in_warp=12)


@pytest.mark.parametrize("bad", [0, 33, 12.0, True, "12"])
def test_any_size_still_means_an_int_from_1_to_32(bad):
    with pytest.raises(ArgumentError, match="threads_in_warp"):
        coop.warp.make_sum(numba.int32, threads_in_warp=bad)


def test_style2_refuses_a_size_the_call_cannot_take_naming_it():
    @cuda.jit
    def kernel(x, y):
        y[cuda.threadIdx.x] = coop.shuffle_up(coop.this_warp(12), x[cuda.threadIdx.x], 1)

    with pytest.raises((ArgumentError, CoopError), match="threads"):
        with coop.target(block=(64, 1, 1)):
            link_kernel(kernel, (types.Array(types.int32, 1, "C"),) * 2, [])
