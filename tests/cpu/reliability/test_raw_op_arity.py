"""A RawOp's LTO-IR is probed: it must be LTO-IR this nvJitLink reads whole (checked when
the RawOp is made), and its function must take the parameters the algorithm passes.

LTO-IR does not let the linker compare a declaration with its definition, so a unary
function linked where a binary one is called would read a pointer that was never passed.
These cases build ahead of time for sm_90 with real LTO-IR from numba-cuda and NVRTC."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, types

import cuprims
from cuprims import OpKind, ProxyArray, ProxyValue, RawOp
from cuprims.errors import ArgumentError

F4P = types.CPointer(types.float32)


def _ltoir(fn, n_pointers: int, name: str) -> bytes:
    ltoir, _ = cuda.compile(fn, types.void(*([F4P] * n_pointers)), device=True, abi="c",
                            abi_info={"abi_name": name}, output="ltoir", cc=(9, 0))
    return ltoir


def _unary(a, r):
    r[0] = a[0] * 2


def _binary(a, b, r):
    r[0] = a[0] + b[0]


def _with_state(s, a, r):
    r[0] = a[0] * s[0]


@pytest.fixture(scope="module")
def unary():
    return RawOp(ltoir=_ltoir(_unary, 2, "arity_unary"), name="arity_unary")


@pytest.fixture(scope="module")
def binary():
    return RawOp(ltoir=_ltoir(_binary, 3, "arity_binary"), name="arity_binary")


def _compiles():
    info = cuprims.cache_info()
    return tuple(info[k] for k in ("numba_compiles", "nvrtc_compiles", "links"))


def test_unary_function_refused_by_a_reduction(unary):
    before = _compiles()
    with pytest.raises(ArgumentError) as info:
        cuprims.make_reduce_into(d_in=ProxyArray(np.float32), d_out=ProxyArray(np.float32), op=unary,
                                 h_init=ProxyValue(np.float32), compute_capability=90)
    assert info.value.argument == "op"
    assert "3 pointer parameters" in str(info.value) and "2 parameters" in str(info.value)
    assert _compiles() == before    # refused before NVRTC ran


def test_binary_function_refused_by_a_unary_transform(binary):
    with pytest.raises(ArgumentError) as info:
        cuprims.make_unary_transform(d_in=ProxyArray(np.float32), d_out=ProxyArray(np.float32), op=binary,
                                     compute_capability=90)
    assert info.value.argument == "op"


def test_binary_function_refused_as_a_transform_iterators_operator(binary):
    it = cuprims.TransformIterator(ProxyArray(np.float32), binary, value_type=np.float32)
    with pytest.raises(ArgumentError) as info:
        cuprims.make_reduce_into(d_in=it, d_out=ProxyArray(np.float32), op=OpKind.PLUS,
                                 h_init=ProxyValue(np.float32), compute_capability=90)
    # the operator is the iterator's, given as d_in (the reduction's own op is a built-in)
    assert info.value.argument == "d_in"
    assert "transform_op of a TransformIterator" in str(info.value)


def test_a_raw_predicate_of_the_wrong_arity_names_its_argument(binary):
    with pytest.raises(ArgumentError) as info:
        cuprims.make_three_way_partition(
            d_in=ProxyArray(np.float32), d_first_part_out=ProxyArray(np.float32),
            d_second_part_out=ProxyArray(np.float32), d_unselected_out=ProxyArray(np.float32),
            d_num_selected_out=ProxyArray(np.int64), select_first_part_op=lambda v: v < 0,
            select_second_part_op=binary, compute_capability=90)
    assert info.value.argument == "select_second_part_op"


def test_a_name_the_ltoir_does_not_define(unary):
    wrong = RawOp(ltoir=unary.ltoir, name="not_in_there")
    with pytest.raises(ArgumentError) as info:
        cuprims.make_unary_transform(d_in=ProxyArray(np.float32), d_out=ProxyArray(np.float32), op=wrong,
                                     compute_capability=90)
    assert info.value.argument == "name"


def test_state_counts_as_the_first_parameter():
    from cuprims._operators.raw_probe import check_arity, parameter_count

    stateful = RawOp(ltoir=_ltoir(_with_state, 3, "arity_stateful"), name="arity_stateful",
                     state=np.float32(3).tobytes(), state_alignment=4)
    assert parameter_count(stateful, 90) == 3
    check_arity(stateful, 3, 90)                      # state, input, result: a unary transform
    with pytest.raises(ArgumentError, match="the state's address"):
        check_arity(stateful, 4, 90)                  # a binary one would pass one more


def test_the_right_arity_builds(unary):
    t = cuprims.make_unary_transform(d_in=ProxyArray(np.float32), d_out=ProxyArray(np.float32), op=unary,
                                     compute_capability=90)
    assert t is not None
    assert cuprims.cache_info()["links"] >= 1


# ----------------------------------------------------------------------------- unreadable LTO-IR
# Each damage makes bytes that start with NVVM's magic (so they pass the first look) but are
# not a module nvJitLink can read; one declaration each.
def _garbage_after_magic(good: bytes) -> bytes:
    return b"\xedCN\x7f" + b"\0" * 64


def _truncated(good: bytes) -> bytes:
    return good[: len(good) // 2]


def _header_only(good: bytes) -> bytes:
    return good[:100]


def _body_scrambled(good: bytes) -> bytes:
    data = bytearray(good)
    for i in range(200, len(data), 7):
        data[i] ^= 0x5A
    return bytes(data)


DAMAGE = {"garbage after the magic": _garbage_after_magic, "truncated": _truncated,
          "header only": _header_only, "body scrambled": _body_scrambled}


def _nvrtc_ltoir(arch: int, name: str = "probe_add") -> bytes:
    from cuda.core import Program, ProgramOptions

    options = ProgramOptions(arch=f"sm_{arch}", std="c++17", relocatable_device_code=True,
                             link_time_optimization=True)
    source = f'extern "C" __device__ void {name}(const float* a, const float* b, float* r) {{ *r = *a + *b; }}'
    return bytes(Program(source, "c++", options).compile("ltoir").code)


@pytest.fixture(scope="module")
def good_ltoir() -> bytes:
    return _nvrtc_ltoir(90)


@pytest.mark.parametrize("argument", ["ltoir", "extra_ltoirs"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_unreadable_ltoir_is_refused_when_the_rawop_is_made(good_ltoir, damage, argument):
    bad = DAMAGE[damage](good_ltoir)
    assert bad[:4] == b"\xedCN\x7f"
    kwargs = {"ltoir": good_ltoir, "name": "probe_add"}
    kwargs["ltoir" if argument == "ltoir" else "extra_ltoirs"] = bad if argument == "ltoir" else [bad]
    before = _compiles()
    with pytest.raises(ArgumentError) as info:
        RawOp(**kwargs)
    assert info.value.argument == argument
    assert "cannot read" in str(info.value)
    assert _compiles() == before


@pytest.mark.parametrize("arch", [75, 80, 90, 100, 120])
def test_readable_ltoir_of_any_target_is_accepted(arch):
    op = RawOp(ltoir=_nvrtc_ltoir(arch), name="probe_add")
    assert op.ltoir[:4] == b"\xedCN\x7f"


def test_a_module_is_probed_once():
    ltoir = _nvrtc_ltoir(90, "probe_once")    # a module no other test makes
    probes = [cuprims.cache_info().get("raw_op_probes", 0)]
    for _ in range(3):
        RawOp(ltoir=ltoir, name="probe_once")
        probes.append(cuprims.cache_info()["raw_op_probes"])
    assert [b - a for a, b in zip(probes, probes[1:])] == [1, 0, 0]
