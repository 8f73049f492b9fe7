"""Style 1 factories over a value type made with numba's extension API (``methods=``, as
the established interface takes it), compiled for sm_90 and linked with no GPU: a
reduction and a scan by an operator that writes its result through a pointer, an
exchange, and block and warp merge sorts by a comparator on a field, each called with the
caller's storage first and without it, with no local memory. ``methods=`` that is not a
dict of callables, a numba type without a StructModel and an initial value of a user type
are refused naming the argument.

CI links three of the cases; the rest run with the slow tests, and all on the GPU.
"""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")
from numba import types  # noqa: E402

from cuprims import coop  # noqa: E402
from cuprims._compile.elfmeta import local_memory_bytes, register_count  # noqa: E402
from cuprims.errors import ArgumentError  # noqa: E402

import coop_forms  # noqa: E402
import coop_user_type as user  # noqa: E402
from coop_helpers import link_kernel  # noqa: E402

pytestmark = pytest.mark.usefixtures("sm90")

_ALL = user.user_cases()
# CI: the operator through a result pointer, the exchange, a warp's sort by a field
_CI = {next(c for c in _ALL[i::] if c[0] == f) for i, f in enumerate(user.USER_FACTORIES)
       if f in ("block.reduce", "block.exchange", "warp.merge_sort")}
CASES = [pytest.param(*c, id=f"{c[0]}-{'x'.join(map(str, c[1]))}-{c[2]}", marks=() if c in _CI else pytest.mark.slow)
         for c in _ALL]


@pytest.mark.parametrize("factory,shape,items", CASES)
def test_user_type_primitives_link_in_both_forms_in_registers(factory, shape, items):
    try:
        case = user.build_user_case(factory, shape, items)
    except coop_forms.BeyondSharedMemory as exc:
        pytest.skip(f"no kernel can call it: {exc}")
    arg = types.Array(numba.from_dtype(user.PAIR_X), 1, "C")
    cubin = link_kernel(case.kernel, (arg, arg), case.prims)
    assert register_count(cubin) * case.threads <= 65536, "the block could not launch"
    assert local_memory_bytes(cubin) == 0


def test_user_type_is_laid_out_as_numba_lays_it_out():
    prim = coop.block.make_exchange(coop.block.BlockExchangeType.StripedToBlocked, user.pair_type(), 64, 2,
                                    methods=user.METHODS)
    vt = prim.spec.vt
    assert vt.numba is user.pair_type() and vt.code.startswith("ext:")
    assert (vt.size, vt.alignment) == (16, 8) and vt.dtype.names == ("lo", "hi")
    assert "Pair" in repr(prim)


@pytest.mark.parametrize("methods", [{"construct": 1}, {"copy": user.assign}, [user.construct]])
def test_methods_that_are_not_hooks_are_refused(methods):
    with pytest.raises(ArgumentError, match="methods"):
        coop.block.make_reduce(user.pair_type(), 64, user.add_pairs, methods=methods)


def test_a_numba_type_without_a_struct_model_is_refused():
    with pytest.raises(ArgumentError, match="StructModel"):
        coop.block.make_reduce(types.NPDatetime("s"), 64, user.add_pairs, methods=user.METHODS)


def test_an_initial_value_of_a_user_type_is_refused_naming_it():
    with pytest.raises(ArgumentError, match="initial_value"):
        coop.block.make_exclusive_scan(user.pair_type(), 64, user.add_pairs, 1, initial_value=(0, 0),
                                       methods=user.METHODS)
