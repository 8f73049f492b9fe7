"""Lower / upper bound without a GPU: generated source (goldens), comparator rules, the
choice of cached search-tree levels, ahead-of-time builds for sm_90 and sm_80 (parameter
layout read back from the cubin), and argument errors.

Regenerate the golden sources after an intended codegen change with::

    CUPRIMS_UPDATE_GOLDENS=1 python -m pytest tests/cpu/algorithms/test_binary_search.py
"""

from __future__ import annotations


import numpy as np
import pytest

import cuprims
from cuprims import OpKind, ProxyArray
from cuprims._codegen.common import preamble
from cuprims._codegen.functors import comparator_functor
from cuprims._compile.source import Source
from cuprims._value_types import value_type
from cuprims.algorithms.binary_search import source as cgb
from cuprims.algorithms.binary_search.api import (hot_levels, lower_bound, make_lower_bound, make_upper_bound,
                                                  upper_bound)
from cuprims.algorithms.skeleton import functor_size
from cuprims.errors import ArgumentError, CuprimsError, NoDeviceError
from cuprims.op import OpSpec, op_spec
from cpu_helpers import FakeDeviceArray, counters, delta
from cpu_helpers import check_golden, kernel_param_sizes, pack_sizes, render_source

ELF = b"\x7fELF"

Pair = cuprims.gpu_struct({"key": np.int64, "weight": np.float32}, name="Pair")


def vt(x):
    return value_type(x)


PY = OpSpec("python", "0" * 64, name="my_comp")
RAW_STATE = OpSpec("raw", "1" * 64, state_size=8, state_alignment=8, name="my_raw_comp")

SPECS = {
    "binary_search_i4_to_u8_less_sm90": dict(data="i4", out="u8", op=op_spec(OpKind.LESS), arch=90),
    "binary_search_f4_to_i8_greater_sm90": dict(data="f4", out="i8", op=op_spec(OpKind.GREATER), arch=90),
    "binary_search_f2_to_i4_less_sm90": dict(data="f2", out="i4", op=op_spec(OpKind.LESS), arch=90),
    "binary_search_struct_python_sm90": dict(data=Pair, out="u8", op=PY, arch=90),
    "binary_search_u1_raw_state_sm80": dict(data="u1", out="u4", op=RAW_STATE, arch=80),
}


def _generate(spec: dict) -> Source:
    return cgb.binary_search_source(data=vt(spec["data"]), out=vt(spec["out"]), op=spec["op"], arch=spec["arch"])


def test_source_shape():
    src = _generate(SPECS["binary_search_struct_python_sm90"])
    assert src.extern_symbols == ("cuprims_op_0",)
    assert 'extern "C" __device__ void cuprims_op_0(void*, void*, void*);' in src.text
    assert "return flag != 0;" in src.text
    (name,) = src.name_expressions
    assert name.startswith("cuprims::binary_search::binary_search_kernel<cuprims_struct_")
    assert src.meta_fields == cgb.META_FIELDS
    # NaN sorts last in ascending order (numpy's order), first in descending order
    assert "return ((b < a) || (a != a && b == b));" in _generate(SPECS["binary_search_f4_to_i8_greater_sm90"]).text
    assert "return ((a < b) || (b != b && a == a));" in _generate(
        dict(SPECS["binary_search_f4_to_i8_greater_sm90"], op=op_spec(OpKind.LESS))).text
    assert "__hisnan" in _generate(SPECS["binary_search_f2_to_i4_less_sm90"]).text
    raw = _generate(SPECS["binary_search_u1_raw_state_sm80"])
    assert 'extern "C" __device__ void my_raw_comp(void*, void*, void*, void*);' in raw.text
    # lower and upper bound share one source (the mode is a launch argument)
    assert "upper" not in src.name_expressions[0]


@pytest.mark.parametrize("op,code,ok", [
    (OpKind.LESS, "i4", True), (OpKind.GREATER, "f2", True), (OpKind.LESS, "b1", True),
    (OpKind.LESS_EQUAL, "i4", False), (OpKind.PLUS, "i4", False), (OpKind.EQUAL_TO, "f8", False),
    (OpKind.LESS, "c8", False), (OpKind.GREATER, Pair, False),
])
def test_builtin_comparators(op, code, ok):
    try:
        cgb.check_comparator_builtin(op_spec(op), vt(code))
        accepted = True
    except ArgumentError as exc:
        assert exc.argument == "comp"
        accepted = False
    assert accepted is ok


def test_every_builtin_comparator_compiles(shared_cache):
    codes = ["b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"]
    functors = [comparator_functor(f"c{i}_{op.name}", op_spec(op), vt(c), "unused")[0]
                for i, c in enumerate(codes) for op in (OpKind.LESS, OpKind.GREATER)]
    from cuprims._compile.nvrtc import compile_to_ltoir

    ltoir, _ = compile_to_ltoir(Source(preamble(tuple(vt(c) for c in codes), 90) + "\n".join(functors), (), (), ()),
                                90)
    assert ltoir


# ------------------------------------------------------------------ cached levels

def test_hot_levels():
    l2 = 50 << 20
    # a range that fits in half of L2 is read entirely through the cache
    assert hot_levels(1000, 4, l2) == 64
    assert hot_levels((25 << 20) // 4, 4, l2) == 64
    # 2^28 int32 (1 GiB): the first k levels probe < 2^k sectors of 32 bytes; 2^k * 32 <= 25 MiB
    k = hot_levels(1 << 28, 4, l2)
    assert (2 ** k) * 32 <= 25 << 20 < (2 ** (k + 1)) * 32
    assert k == 19
    # wide values need a sector (or more) per probe
    assert hot_levels(1 << 28, 64, l2) == 18
    assert hot_levels(1 << 28, 4, 0) == 0


# ------------------------------------------------------------------ ahead-of-time builds

def _lower_i4(cls=make_lower_bound, cc=90, out=np.int32, comp=None):
    return cls(d_data=ProxyArray(np.int32), d_values=ProxyArray(np.int32), d_out=ProxyArray(out), comp=comp,
               compute_capability=cc)


def _check_build(obj, arch, value_size, out_size):
    cubin = obj.cubin(arch)
    assert cubin[:4] == ELF
    result = obj._builds.result(arch)
    assert result.meta["threads"] > 0 and result.meta["threads"] % 32 == 0
    assert (result.meta["value_size"], result.meta["out_size"]) == (value_size, out_size)
    ((_, lowered),) = result.kernels.items()
    kinds = ("ptr", "i64", "ptr", "i64", "ptr", functor_size(obj.desc.comp), "i32", "i64", "i32")
    assert obj.desc.kernel_params() == (kinds,)
    assert kernel_param_sizes(cubin, lowered) == pack_sizes(kinds)


def test_lower_bound_builtin_sm90(shared_cache):
    obj = _lower_i4()
    assert obj.compute_capabilities == [90]
    _check_build(obj, 90, 4, 4)


def test_lower_and_upper_share_one_build(shared_cache):
    lower = _lower_i4()
    before = counters()
    upper = _lower_i4(make_upper_bound)
    assert upper is not lower and upper._UPPER == 1 and lower._UPPER == 0
    assert upper.cubin() == lower.cubin()
    assert delta(before) == {"numba_compiles": 0, "nvrtc_compiles": 0, "links": 0}
    assert _lower_i4() is lower  # per-thread object cache


def test_struct_python_comparator_sm90(shared_cache):
    def by_key_then_weight(a, b):
        return a.key < b.key or (a.key == b.key and a.weight < b.weight)

    obj = make_upper_bound(d_data=ProxyArray(Pair.dtype), d_values=ProxyArray(Pair.dtype),
                           d_out=ProxyArray(np.int64), comp=by_key_then_weight, compute_capability=90)
    _check_build(obj, 90, 16, 8)


def test_greater_sm80(shared_cache):
    obj = make_lower_bound(d_data=ProxyArray(np.int64), d_values=ProxyArray(np.int64), d_out=ProxyArray(np.int32),
                           comp=OpKind.GREATER, compute_capability=80)
    _check_build(obj, 80, 8, 4)


# ------------------------------------------------------------------ argument errors

def _names(exc, name):
    assert isinstance(exc.value, CuprimsError)
    assert exc.value.argument == name, exc.value


@pytest.mark.parametrize("kwargs,name", [
    (dict(d_out=ProxyArray(np.float32)), "d_out"),
    (dict(d_out=ProxyArray(np.int16)), "d_out"),
    (dict(d_values=ProxyArray(np.int64)), "d_values"),
    (dict(comp=OpKind.PLUS), "comp"),
    (dict(comp=OpKind.LESS_EQUAL), "comp"),
    (dict(comp=OpKind.STATELESS), "comp"),
    (dict(comp=42), "comp"),
    (dict(d_data=np.zeros(3, np.int32)), "d_data"),
    (dict(compute_capability="9.x"), "compute_capability"),
])
def test_build_time_errors(kwargs, name):
    args = dict(d_data=ProxyArray(np.int32), d_values=ProxyArray(np.int32), d_out=ProxyArray(np.uint64),
                compute_capability=90)
    args.update(kwargs)
    with pytest.raises(ArgumentError) as exc:
        make_lower_bound(**args)
    _names(exc, name)


def test_builtin_comparator_on_complex_and_structs():
    with pytest.raises(ArgumentError, match="complex") as exc:
        make_lower_bound(d_data=ProxyArray(np.complex64), d_values=ProxyArray(np.complex64),
                         d_out=ProxyArray(np.int64), compute_capability=90)
    _names(exc, "comp")
    with pytest.raises(ArgumentError, match="struct") as exc:
        make_upper_bound(d_data=ProxyArray(Pair.dtype), d_values=ProxyArray(Pair.dtype), d_out=ProxyArray(np.int64),
                         comp=OpKind.LESS, compute_capability=90)
    _names(exc, "comp")


def test_keyword_only():
    with pytest.raises(TypeError):
        make_lower_bound(ProxyArray(np.int32), ProxyArray(np.int32), ProxyArray(np.uint64))


def test_no_gpu_without_compute_capability():
    with pytest.raises(NoDeviceError, match="compute_capability"):
        lower_bound(d_data=FakeDeviceArray(4, "<i4"), num_items=4, d_values=FakeDeviceArray(2, "<i4"), num_values=2,
                    d_out=FakeDeviceArray(2, "<u8"))
    with pytest.raises(NoDeviceError):
        upper_bound(d_data=FakeDeviceArray(4, "<i4"), num_items=4, d_values=FakeDeviceArray(2, "<i4"), num_values=2,
                    d_out=FakeDeviceArray(2, "<u8"))


CALL = dict(d_data=FakeDeviceArray(100, "<i4"), num_items=100, d_values=FakeDeviceArray(10, "<i4"), num_values=10,
            d_out=FakeDeviceArray(10, "<i4"), comp=None)


@pytest.mark.parametrize("overrides,name", [
    (dict(d_data=FakeDeviceArray(99, "<i4")), "d_data"),            # shorter than num_items
    (dict(d_values=FakeDeviceArray(9, "<i4")), "d_values"),         # shorter than num_values
    (dict(d_out=FakeDeviceArray(9, "<i4")), "d_out"),
    (dict(d_out=FakeDeviceArray(10, "<i8")), "d_out"),              # not the build's index type
    (dict(d_values=FakeDeviceArray(10, "<f4")), "d_values"),
    (dict(d_data=np.zeros(100, np.int32)), "d_data"),               # host memory
    (dict(num_items=-1), "num_items"),
    (dict(num_values=-1), "num_values"),
    (dict(num_values="10"), "num_values"),
    (dict(stream=1.5), "stream"),
    # indices up to num_items must fit the output type
    (dict(d_data=FakeDeviceArray(1 << 31, "<i4"), num_items=1 << 31), "num_items"),
])
def test_call_arguments_checked(shared_cache, overrides, name):
    obj = _lower_i4(out=np.int32)
    args = dict(CALL)
    args.update(overrides)
    with pytest.raises(ArgumentError) as exc:
        obj(**args)
    _names(exc, name)


def test_largest_index_that_fits(shared_cache):
    obj = _lower_i4(out=np.int32)
    n = (1 << 31) - 1
    # no values: checked, nothing launched, no GPU needed
    obj(**dict(CALL, d_data=FakeDeviceArray(n, "<i4"), num_items=n, num_values=0))
    with pytest.raises(NoDeviceError):
        obj(**dict(CALL, d_data=FakeDeviceArray(n, "<i4"), num_items=n))


@pytest.mark.parametrize("name", sorted(SPECS))
def test_golden_source(name):
    src = _generate(SPECS[name])
    assert _generate(SPECS[name]) == src  # deterministic
    check_golden(name, render_source(src))
