"""cuprims.types: cuda.compute's type objects, accepted wherever a dtype is; builds ahead
of time for sm_90 (no GPU)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import cuprims
from cuprims import types
from cuprims._value_types import value_type
from cuprims.errors import ArgumentError, ArgumentTypeError, CuprimsError
from cpu_helpers import ARCH, stub_ltoir

SCALARS = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
           "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "float16": np.float16,
           "float32": np.float32, "float64": np.float64, "boolean": np.bool_}


@pytest.mark.parametrize("name", SCALARS)
def test_scalar_objects_are_their_dtype(name):
    t, dt = getattr(types, name), np.dtype(SCALARS[name])
    assert t.dtype == dt and t.size == dt.itemsize and t.alignment == dt.alignment
    assert types.from_numpy_dtype(dt) is t and types.from_numpy_dtype(SCALARS[name]) is t
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # numpy reads .dtype without a DeprecationWarning
        assert np.dtype(t) == dt and np.zeros(2, dtype=t).dtype == dt
    assert value_type(t) == value_type(dt)


def test_equality_and_hash_follow_the_dtype():
    assert types.int32 == types.from_numpy_dtype("i4") and types.int32 != types.uint32
    assert hash(types.int32) == hash(np.dtype(np.int32))
    assert {types.int32: "x"}[types.TypeDescriptor(np.int32)] == "x"
    assert types.int32 == np.dtype(np.int32) and np.dtype(np.int32) == types.int32   # numpy's own comparison
    assert types.int32 != "nonsense" and types.int32 != 4
    a = types.struct({"x": types.int32, "y": types.float32}, name="A")
    b = types.struct({"x": types.int32, "y": types.float32}, name="B")
    assert a == b and hash(a) == hash(b) and a != types.struct({"y": types.float32, "x": types.int32})
    assert pickle.loads(pickle.dumps(a)) == a and pickle.loads(pickle.dumps(types.int8)) == types.int8


def test_complex_alignment_is_the_devices():
    c = types.from_numpy_dtype(np.complex64)
    assert c.dtype == np.complex64 and c.size == 8 and c.alignment == 8      # cuda::std::complex<float>


def test_struct_layout_fields_and_name():
    inner = types.struct({"a": types.int8, "b": types.float64}, name="Inner")
    outer = types.struct({"flag": types.boolean, "inner": inner, "v": np.dtype((np.float32, 3))}, name="Outer")
    assert inner.dtype == np.dtype([("a", "i1"), ("b", "f8")], align=True)
    assert (inner.size, inner.alignment, inner.name) == (16, 8, "Inner")
    assert list(outer.fields) == ["flag", "inner", "v"] and outer.fields["inner"] is inner
    assert outer.dtype.fields["inner"][1] == 8 and outer.size == 40 and outer.alignment == 8
    assert types.struct({"x": types.int32}).name == "AnonStruct"
    assert "Inner" in repr(inner) and "16 bytes" in repr(inner) and repr(types.int32) == "TypeDescriptor(int32)"
    assert isinstance(outer, types.StructTypeDescriptor) and isinstance(outer, types.TypeDescriptor)


def test_from_numpy_dtype_of_structs_lays_them_out_aligned():
    packed = np.dtype([("c", np.int8), ("d", np.int32), ("v", np.float32, 2)])     # itemsize 13, not aligned
    t = types.from_numpy_dtype(packed)
    assert isinstance(t, types.StructTypeDescriptor) and t.name == "AnonStruct"
    assert t.dtype == np.dtype([("c", np.int8), ("d", np.int32), ("v", np.float32, 2)], align=True)
    assert t.fields["d"] is types.int32 and t.fields["v"].dtype == np.dtype((np.float32, 2))
    Pixel = cuprims.gpu_struct({"r": np.int32, "g": np.float32}, name="Pixel")
    assert types.from_numpy_dtype(Pixel).dtype == Pixel.dtype and types.from_numpy_dtype(Pixel).name == "Pixel"
    assert types.from_numpy_dtype(t) is t


def test_accepted_wherever_a_dtype_is():
    Pair = types.struct({"key": types.int64, "weight": types.float32}, name="Pair")
    assert cuprims.ProxyArray(types.float16).dtype == np.float16
    assert cuprims.ProxyValue(Pair).dtype == Pair.dtype
    G = cuprims.gpu_struct({"p": Pair, "n": types.uint8}, name="G")
    assert G.dtype.fields["p"][0] == Pair.dtype and G.dtype.fields["n"][0] == np.uint8
    g = G((3, 1.5), 7)
    assert g.p["key"] == 3 and g.n == 7
    assert cuprims.gpu_struct(Pair).__name__ == "Pair" and cuprims.gpu_struct(Pair).dtype == Pair.dtype

    @cuprims.gpu_struct
    class Annotated:
        a: types.int16
        b: types.float64

    assert Annotated.dtype == np.dtype([("a", "i2"), ("b", "f8")], align=True)
    assert cuprims.DiscardIterator(cuprims.ProxyArray(types.int32)).value_type == value_type(np.int32)


@pytest.mark.parametrize("make, error, argument", [
    (lambda: types.struct([("a", types.int32)]), ArgumentTypeError, "fields"),
    (lambda: types.struct({}), ArgumentError, "fields"),
    (lambda: types.struct({"a": types.int32}, name="not a name"), ArgumentError, "name"),
    (lambda: types.struct({"class": types.int32}), ArgumentError, "fields"),
    (lambda: types.struct({"a": None}), ArgumentTypeError, "fields"),
    (lambda: types.struct({"a": np.dtype("U4")}), ArgumentError, "fields"),
    (lambda: types.struct({"a": np.dtype((np.uint8, types.MAX_STRUCT_BYTES + 1))}), ArgumentError, "fields"),
    (lambda: types.from_numpy_dtype(None), ArgumentTypeError, "dtype"),
    (lambda: types.from_numpy_dtype(object()), ArgumentTypeError, "dtype"),
    (lambda: types.from_numpy_dtype(">i4"), ArgumentError, "dtype"),
    (lambda: types.from_numpy_dtype("datetime64[s]"), ArgumentError, "dtype"),
    (lambda: cuprims.ProxyArray(types.struct), ArgumentError, "dtype"),
])
def test_bad_input_is_named(make, error, argument):
    with pytest.raises(error) as info:
        make()
    assert info.value.argument == argument and isinstance(info.value, CuprimsError)
    assert isinstance(info.value, TypeError if error is ArgumentTypeError else ValueError)


def test_transform_iterator_with_a_raw_op_names_its_value_type():
    op = cuprims.RawOp(ltoir=stub_ltoir("triple", 2), name="triple")
    it = cuprims.TransformIterator(cuprims.ProxyArray(np.int32), op, value_type=types.int64)
    assert it.value_type == value_type(np.int64) and "value_type=int64" in repr(it)
    with pytest.raises(ArgumentError, match="cuprims.types.int32") as info:
        cuprims.TransformIterator(cuprims.ProxyArray(np.int32), op)
    assert info.value.argument == "value_type"


def test_reduce_builds_over_type_objects(shared_cache):
    obj = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(types.float32), d_out=cuprims.ProxyArray(types.float32),
                                   op=cuprims.OpKind.PLUS, h_init=cuprims.ProxyValue(types.float32),
                                   compute_capability=ARCH)
    assert obj.cubin().startswith(b"\x7fELF") and "d_in=float32 array" in repr(obj)


@pytest.mark.slow       # a whole numba build; CI builds the scalar reductions above
def test_reduce_of_a_struct_type_with_a_python_operator(shared_cache):
    Pair = types.struct({"key": types.int32, "weight": types.float32}, name="Pair")

    def heavier(a, b):
        return a if a.weight >= b.weight else b

    obj = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(Pair), d_out=cuprims.ProxyArray(Pair), op=heavier,
                                   h_init=np.void((0, -np.inf), dtype=Pair.dtype), compute_capability=ARCH)
    assert obj.cubin().startswith(b"\x7fELF")
