"""Bad arguments name themselves; every error cuprims raises derives from CuprimsError.
All of these are raised before any GPU is needed (this machine has none)."""

from __future__ import annotations

import numpy as np
import pytest

import cuprims
from cuprims import OpKind, ProxyArray, ProxyValue
from cuprims.errors import ArgumentError, ArgumentTypeError, CuprimsError, NoDeviceError
from cpu_helpers import make_f4


def _make(**overrides):
    args = dict(d_in=ProxyArray(np.float32), d_out=ProxyArray(np.float32), op=OpKind.PLUS,
                h_init=ProxyValue(np.float32), compute_capability=90)
    args.update(overrides)
    return cuprims.make_reduce_into(**args)


def _names(exc: ArgumentError, name: str):
    assert isinstance(exc, CuprimsError)
    assert exc.argument == name
    assert f"'{name}'" in str(exc)


class FakeDeviceArray:
    def __init__(self, n, typestr="<f4", ptr=0x7F0000000000):
        self._iface = {"data": (ptr, False), "shape": (n,), "typestr": typestr, "version": 3, "strides": None}

    @property
    def __cuda_array_interface__(self):
        return self._iface


# ----------------------------------------------------------------- dtypes

UNSUPPORTED = ["U4", "M8[s]", "m8[ns]", "O", ">f4", "S3", "V3"]
if np.dtype(np.longdouble).itemsize > 8:
    UNSUPPORTED.append(np.longdouble)


@pytest.mark.parametrize("dtype", UNSUPPORTED, ids=str)
def test_unsupported_dtype_in_placeholder(dtype):
    with pytest.raises(ArgumentError) as info:
        ProxyArray(dtype)
    _names(info.value, "dtype")


@pytest.mark.parametrize("typestr", ["<M8[s]", "<U4", "|O8"])
def test_unsupported_dtype_of_device_array_names_d_in(typestr):
    with pytest.raises(ArgumentError) as info:
        _make(d_in=FakeDeviceArray(10, typestr))
    _names(info.value, "d_in")


def test_unsupported_dtype_of_output_names_d_out():
    with pytest.raises(ArgumentError) as info:
        _make(d_out=FakeDeviceArray(1, "<M8[s]"), h_init=None)
    _names(info.value, "d_out")


def test_struct_input_with_scalar_output():
    struct = np.dtype([("x", np.float32), ("y", np.float32)], align=True)
    with pytest.raises(ArgumentError) as info:
        _make(d_in=ProxyArray(struct), op=lambda a, b: a)
    _names(info.value, "d_in")


@pytest.mark.parametrize("bad", [object(), [1.0, 2.0], 3.5])
def test_not_an_array(bad):
    with pytest.raises(ArgumentTypeError) as info:
        _make(d_in=bad)
    _names(info.value, "d_in")


# ----------------------------------------------------------------- operators

@pytest.mark.parametrize("op", [123, None, 4.5, b"plus"])
def test_op_of_the_wrong_kind(op):
    with pytest.raises(ArgumentTypeError) as info:
        _make(op=op)
    _names(info.value, "op")


@pytest.mark.parametrize("op", [OpKind.STATELESS, OpKind.STATEFUL, "no_such_op"])
def test_op_value_rejected(op):
    with pytest.raises(ArgumentError) as info:
        _make(op=op)
    _names(info.value, "op")


@pytest.mark.parametrize("op,dtype", [(OpKind.LESS, np.float32), (OpKind.MODULUS, np.float64),
                                      (OpKind.NEGATE, np.int32), (OpKind.PLUS, np.bool_)])
def test_builtin_not_defined_for_type(op, dtype):
    with pytest.raises(ArgumentError) as info:
        _make(op=op, d_in=ProxyArray(dtype), d_out=ProxyArray(dtype), h_init=ProxyValue(dtype))
    _names(info.value, "op")


def test_op_name_string_is_accepted_and_equal_to_the_enum(shared_cache):
    assert _make(op="plus").cubin() == _make(op=OpKind.PLUS).cubin()


def test_rawop_arguments():
    with pytest.raises(ArgumentError) as info:
        cuprims.RawOp(ltoir=b"x", name="not an identifier")
    _names(info.value, "name")
    with pytest.raises(ArgumentTypeError) as info:
        cuprims.RawOp(ltoir=123, name="f")
    _names(info.value, "ltoir")
    with pytest.raises(ArgumentError) as info:
        cuprims.RawOp(ltoir=b"x", name="f", state=b"abc", state_alignment=3)
    _names(info.value, "state_alignment")


# ----------------------------------------------------------------- other arguments

@pytest.mark.parametrize("cc", ["abc", "9.x", 90.0, True, [], 30, 500, (9,), "sm_", [90, "zz"]],
                         ids=repr)
def test_bad_compute_capability(cc):
    with pytest.raises(ArgumentError) as info:
        _make(compute_capability=cc)
    _names(info.value, "compute_capability")


def test_unknown_keyword():
    with pytest.raises(ArgumentError) as info:
        _make(compute_capabilty=90)  # typo of compute_capability
    _names(info.value, "compute_capabilty")
    with pytest.raises(ArgumentError) as info:
        _make(num_items=10)
    _names(info.value, "num_items")


@pytest.mark.parametrize("h_init", [np.complex64(1 + 2j), 1j, ProxyValue(np.complex128), "text",
                                    np.zeros(1, np.dtype([("a", np.float32)]))],
                         ids=["np-complex", "py-complex", "proxy-complex", "str", "struct"])
def test_bad_h_init(h_init):
    with pytest.raises(ArgumentError) as info:
        _make(h_init=h_init)
    _names(info.value, "h_init")


def test_bad_determinism():
    with pytest.raises(ArgumentError) as info:
        _make(determinism="bitwise")
    _names(info.value, "determinism")


def test_determinism_accepts_names(shared_cache):
    a = _make(determinism="gpu_to_gpu")
    b = _make(determinism=cuprims.Determinism.GPU_TO_GPU)
    assert a.cubin() == b.cubin()


def test_no_compute_capability_without_gpu():
    with pytest.raises(NoDeviceError) as info:
        _make(compute_capability=None)
    assert "compute_capability" in str(info.value)
    assert isinstance(info.value, CuprimsError)


def test_reduce_into_without_gpu():
    with pytest.raises(NoDeviceError) as info:
        cuprims.reduce_into(d_in=FakeDeviceArray(10), d_out=FakeDeviceArray(1), num_items=10, op=OpKind.PLUS,
                            h_init=np.float32(0))
    assert "compute_capability" in str(info.value)


# ----------------------------------------------------------------- calling a reducer (checked before the GPU)

@pytest.fixture
def reducer(shared_cache):
    return make_f4(OpKind.PLUS)


def _call(reducer, **overrides):
    args = dict(temp_storage=None, d_in=FakeDeviceArray(100), d_out=FakeDeviceArray(1), num_items=100,
                h_init=np.float32(0))
    args.update(overrides)
    return reducer(**args)


def test_host_array_at_call_time_is_rejected(reducer):
    with pytest.raises(ArgumentTypeError) as info:
        _call(reducer, d_in=np.zeros(100, np.float32))
    _names(info.value, "d_in")
    with pytest.raises(ArgumentTypeError) as info:
        _call(reducer, d_out=np.zeros(1, np.float32))
    _names(info.value, "d_out")


def test_host_array_message_says_host(reducer):
    with pytest.raises(ArgumentTypeError) as info:
        _call(reducer, d_in=np.zeros(100, np.float32))
    assert "host" in str(info.value) or "numpy" in str(info.value)


@pytest.mark.parametrize("overrides,name", [
    (dict(num_items=-1), "num_items"),
    (dict(num_items=2.5), "num_items"),
    (dict(d_in=FakeDeviceArray(100, "<f8")), "d_in"),
    (dict(d_in=FakeDeviceArray(10)), "d_in"),
    (dict(d_out=FakeDeviceArray(1, "<i4")), "d_out"),
    (dict(d_out=FakeDeviceArray(0)), "d_out"),
    (dict(h_init=None), "h_init"),
    (dict(h_init="abc"), "h_init"),
], ids=["negative-n", "float-n", "in-dtype", "in-too-short", "out-dtype", "out-empty", "no-init", "bad-init"])
def test_call_arguments_checked(reducer, overrides, name):
    with pytest.raises(ArgumentError) as info:
        _call(reducer, **overrides)
    _names(info.value, name)


def test_valid_call_without_gpu_raises_no_device(reducer):
    with pytest.raises(NoDeviceError):
        _call(reducer)


def test_init_given_to_reducer_built_without_one(shared_cache):
    r = make_f4(OpKind.MAXIMUM, h_init=False)
    with pytest.raises(ArgumentError) as info:
        _call(r, h_init=np.float32(1))
    _names(info.value, "h_init")


# ----------------------------------------------------------------- known gaps

def test_host_array_rejected_at_build_time(shared_cache):
    with pytest.raises(ArgumentTypeError) as info:
        _make(d_in=np.zeros(10, np.float32))
    _names(info.value, "d_in")


class InstanceAttributeCAI:
    """A producer that sets the interface as an instance attribute (as numba's own ForeignArray
    test helper does); the CUDA Array Interface only asks for the attribute to exist."""

    def __init__(self, n):
        self.__cuda_array_interface__ = {"data": (0x7F0000000000, False), "shape": (n,), "typestr": "<f4",
                                         "version": 3, "strides": None}


def test_instance_attribute_cuda_array_interface_accepted(shared_cache):
    r = _make(d_in=InstanceAttributeCAI(10), d_out=InstanceAttributeCAI(1), h_init=np.float32(0))
    assert r.cubin()[:4] == b"\x7fELF"


def test_invalid_compute_capability_not_masked_by_cache(shared_cache):
    _make(compute_capability=[80, 90])
    with pytest.raises(ArgumentError) as info:
        _make(compute_capability=(80, 90))  # a tuple is (major, minor): 80.90 is no capability
    _names(info.value, "compute_capability")
