"""The warp shuffles (``coop.warp.make_shuffle_index``, ``_up``, ``_down``, ``_xor``; Style 2
``coop.shuffle_*``), compiled for sm_90 and linked with no GPU: each kernel of
``coop_shuffle`` (storage left out, first, by keyword) links, keeps its values in
registers and takes no shared memory; bad arguments are refused naming them.

CI links one case per shuffle (type and block shape rotating); the whole matrix runs with
the slow tests and, for real, on the GPU.
"""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402

from cuprims import coop  # noqa: E402
from cuprims._compile.elfmeta import local_memory_bytes  # noqa: E402
from cuprims.errors import ArgumentError, CoopError  # noqa: E402

import coop_forms  # noqa: E402
import coop_shuffle  # noqa: E402
from coop_helpers import link_kernel, shared_bytes  # noqa: E402

pytestmark = pytest.mark.usefixtures("sm90")

CI_CASES = {(mode, coop_forms.FORM_TYPES[(5 * i + 3) % len(coop_forms.FORM_TYPES)],
             coop_forms.FORM_SHAPES[(2 * i + 1) % len(coop_forms.FORM_SHAPES)])
            for i, mode in enumerate(coop_shuffle.MODES) if mode in ("index", "down")}   # up, xor: Style 2
CASES = [pytest.param(*case, id=coop_shuffle.case_id(*case), marks=() if case in CI_CASES else pytest.mark.slow)
         for case in coop_shuffle.all_cases()]


@pytest.mark.parametrize("mode,type_name,shape", CASES)
def test_every_form_links_in_registers_with_no_shared_memory(mode, type_name, shape):
    case = coop_shuffle.build(mode, type_name, shape)
    arg = types.Array(numba.from_dtype(coop_forms.np_dtype(type_name)), 1, "C")
    cubin = link_kernel(case.kernel, (arg, arg), [case.prim])
    assert cubin[:4] == b"\x7fELF"
    assert local_memory_bytes(cubin) == 0
    assert shared_bytes(cubin) <= 8            # the caller's one-byte storage only: a shuffle keeps nothing there


@pytest.mark.parametrize("kwargs,argument", [
    (dict(threads_in_warp=3), "threads_in_warp"),
    (dict(threads_in_warp=64), "threads_in_warp"),
    (dict(dtype="float128"), "dtype"),
])
def test_bad_arguments_are_named(kwargs, argument):
    full = dict(dtype=numba.int32)
    full.update(kwargs)
    with pytest.raises(ArgumentError, match=argument):
        coop.warp.make_shuffle_up(**full)


def _style2(call: str):
    source = ("def kernel(x, out):\n"
              "    warp = coop.this_warp()\n"
              "    items = coop.ThreadData(2, dtype=numba.float32)\n"
              f"    out[cuda.threadIdx.x] = {call}\n")
    namespace = {"coop": coop, "cuda": cuda, "numba": numba}
    exec(compile(source, "<style2 shuffle>", "exec"), namespace)
    return cuda.jit(namespace["kernel"])


@pytest.mark.parametrize("call", [pytest.param("coop.shuffle_index(warp, x[cuda.threadIdx.x], 0)", marks=pytest.mark.slow),
                                  "coop.shuffle_up(warp, x[cuda.threadIdx.x], 1)",
                                  pytest.param("coop.shuffle_down(warp, x[cuda.threadIdx.x], 2)", marks=pytest.mark.slow),
                                  "coop.shuffle_xor(warp, x[cuda.threadIdx.x], cuda.threadIdx.x % 4)"])
def test_style2_shuffles_link_in_registers(call):
    kernel = _style2(call)
    with coop.target(block=(64, 1, 1)):
        cubin = link_kernel(kernel, (types.Array(types.float64, 1, "C"),) * 2, [])
    assert local_memory_bytes(cubin) == 0


@pytest.mark.parametrize("call,error,match", [
    ("coop.shuffle_up(warp, items, 1)", ArgumentError, "argument 'value': expected one value a lane"),
    ("coop.shuffle_up(warp, x[cuda.threadIdx.x], 1.5)", ArgumentError, "argument 'delta': expected an integer"),
    ("coop.shuffle_index(coop.this_block(), x[cuda.threadIdx.x], 0)", CoopError, r"takes coop.this_warp\(\)"),
])
def test_style2_shuffle_refuses_bad_calls_naming_them(call, error, match):
    kernel = _style2(call)
    with pytest.raises(error, match=match):
        with coop.target(block=(64, 1, 1)):
            link_kernel(kernel, (types.Array(types.float64, 1, "C"),) * 2, [])
