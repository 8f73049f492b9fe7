"""Structs as cuda.compute programs write them, built ahead of time for sm_90 (no GPU):
nested structs declared and given as dicts or tuples, structs that are one by layout (a
ZipIterator's items into a named gpu_struct), and a struct built inside a
TransformIterator's operator. tests/gpu/operators/test_struct_compat_gpu.py runs these
programs; the struct types and operators both use are in tests/twins.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import cuprims
from cuprims import (ConstantIterator, CountingIterator, ProxyArray, ProxyValue, TransformIterator, ZipIterator,
                     gpu_struct)
from cuprims._value_types import host_bytes, value_type
from cuprims.errors import ArgumentError, CuprimsError
from cuprims.struct import GpuStructType
from twins import (MinMax, Particle, SumCount, ValueFlag, ValueScale, by_pos_x, ema_combine, ema_term, minmax_op,
                   negate, particle_sum, rightmost, segmented_sum, sum_count, to_minmax)

pytestmark = pytest.mark.usefixtures("shared_cache")

P = ProxyArray
Pos = Particle._cuprims_fields["pos"]


def _built(obj):
    """The object's sm_90 cubin, checked (the build compiled and linked)."""
    cubin = obj.cubin()
    assert cubin.startswith(b"\x7fELF") and len(cubin) > 1000
    return obj


class StructDeviceArray:
    """A CUDA Array Interface of ``dtype`` items (structured ones with their descr)."""

    def __init__(self, dtype, n, ptr=0x7F0000100000):
        dt = np.dtype(dtype)
        self._iface = {"data": (ptr, False), "shape": (n,), "typestr": dt.str, "version": 3, "strides": None}
        if dt.names is not None:
            self._iface["descr"] = dt.descr

    @property
    def __cuda_array_interface__(self):
        return dict(self._iface)


# ----------------------------------------------------------------------------- (3) nested structs as dicts

def test_nested_dict_declares_a_nested_struct_class():
    assert Particle.dtype == np.dtype([("id", np.int32), ("pos", [("x", np.float32), ("y", np.float32)])],
                                      align=True)
    assert isinstance(Pos, GpuStructType) and Pos.__name__ == "Particle_pos"    # cuda.compute's naming
    assert Pos.dtype == Particle.dtype.fields["pos"][0]
    assert repr(Particle) == "<gpu_struct Particle(id: int32, pos: struct(x: float32, y: float32)), 12 bytes>"
    anonymous = gpu_struct({"id": np.int32, "inner": {"a": np.int32, "b": np.float32}})
    assert anonymous._cuprims_fields["inner"].__name__ == "AnonymousStruct_inner"
    # a nested structured dtype is a nested struct class too
    from_dtype = gpu_struct(np.dtype([("k", np.int8), ("v", [("a", np.float64)])]), name="Rec")
    assert from_dtype._cuprims_fields["v"].__name__ == "Rec_v" and from_dtype.dtype.itemsize == 16
    assert from_dtype(1, (2.5,)).v.a == 2.5


def test_nested_values_as_dicts_tuples_and_instances():
    p = Particle(7, {"x": 1.5, "y": -2.0})
    assert p.id == 7 and p.pos.x == 1.5 and p.pos.y == -2.0 and isinstance(p.pos, Pos)
    assert p == Particle(7, (1.5, -2.0)) == Particle(id=7, pos=Pos(1.5, -2.0)) == (7, (1.5, -2.0))
    assert p == Particle({"id": 7, "pos": {"x": 1.5, "y": -2.0}})       # cuda.compute's S(dict)
    assert repr(p) == "Particle(id=7, pos=Particle_pos(x=1.5, y=-2.0))"
    p.pos = {"x": 3.0, "y": 4.0}
    assert p.pos == (3.0, 4.0)
    record = np.zeros((), Particle.dtype)
    record[()] = (7, (3.0, 4.0))
    assert bytes(p) == record.tobytes()


@pytest.mark.parametrize("value", [
    {"id": 7, "pos": {"x": 1.5, "y": -2.0}},
    (7, (1.5, -2.0)),
    [7, [1.5, -2.0]],
    {"id": 7, "pos": (1.5, -2.0)},
    Particle(7, (1.5, -2.0)),
    np.array([(7, (1.5, -2.0))], Particle.dtype),                       # a one-element array
    np.array([(7, (1.5, -2.0))], Particle.dtype)[0],                    # a numpy record
    np.array((7, (1.5, -2.0)), Particle.dtype),                         # a 0-d array
], ids=["dict", "tuple", "list", "dict-of-tuple", "instance", "array", "record", "0-d"])
def test_host_bytes_of_every_form(value):
    assert host_bytes(value, value_type(Particle), argument="h_init") == bytes(Particle(7, (1.5, -2.0)))


@pytest.mark.parametrize("value, expected", [
    ({"id": 7}, "a dict with the fields ['id', 'pos']"),
    ({"id": 7, "pos": {"x": 1.0}}, "for field 'pos'"),
    ((7,), "2 field values"),
    ((7, (1.0, 2.0, 3.0)), "for field 'pos'"),
    ((7, ("a", 2.0)), "for field 'pos.x'"),
    ((7, 1.0), "for field 'pos'"),
    (np.zeros(2, Particle.dtype), "(2 items)"),
    (SumCount(1.0, 2), "same layout"),
    (3, "a value of struct(id: int32"),
], ids=["missing", "nested-missing", "short", "nested-long", "nested-text", "nested-scalar", "two-items",
        "other-layout", "number"])
def test_bad_struct_values_name_the_argument_and_field(value, expected):
    with pytest.raises(ArgumentError) as info:
        host_bytes(value, value_type(Particle), argument="h_init")
    assert info.value.argument == "h_init" and expected in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, CuprimsError)


def test_bad_nested_declarations():
    with pytest.raises(ArgumentError) as info:
        gpu_struct({"id": np.int32, "pos": {}})
    assert info.value.argument == "field_dict"
    deep: dict = {"x": np.int8}
    for _ in range(40):       # far past MAX_STRUCT_DEPTH: refused before Python's recursion limit
        deep = {"n": deep}
    with pytest.raises(ArgumentError) as info:
        gpu_struct(deep)
    assert info.value.argument == "field_dict" and "nested at most" in str(info.value)


@pytest.mark.parametrize("h_init", [
    {"id": 0, "pos": {"x": 0.0, "y": 0.0}},
    (0, (0.0, 0.0)),
    np.zeros(1, Particle.dtype),
    ProxyValue(Particle),
], ids=["dict", "tuple", "array", "proxy"])
def test_reduce_with_nested_h_init_builds(h_init):
    obj = _built(cuprims.make_reduce_into(d_in=P(Particle), d_out=P(Particle), op=particle_sum, h_init=h_init,
                                          compute_capability=90))
    assert obj.desc.has_init and obj.desc.d_out.value == value_type(Particle)


@pytest.mark.slow       # four more whole builds; CI builds the nested reduce
def test_nested_scans_segmented_reduce_sort_and_constants_build():
    scan = cuprims.make_exclusive_scan(d_in=P(Particle), d_out=P(Particle), op=particle_sum,
                                       init_value={"id": 0, "pos": {"x": 0.0, "y": 0.0}}, compute_capability=90)
    assert _built(scan).desc.init_kind == "value"
    inclusive = cuprims.make_inclusive_scan(d_in=P(Particle), d_out=P(Particle), op=rightmost,
                                            init_value=(0, (-np.inf, 0.0)), compute_capability=90)
    assert _built(inclusive).desc.init_kind == "value"
    seg = cuprims.make_segmented_reduce(d_in=P(Particle), d_out=P(Particle), start_offsets_in=P(np.int32),
                                        end_offsets_in=P(np.int32), op=rightmost,
                                        h_init={"id": -1, "pos": {"x": -np.inf, "y": 0.0}}, compute_capability=90)
    _built(seg)
    _built(cuprims.make_merge_sort(d_in_keys=P(Particle), d_out_keys=P(Particle), d_in_values=None,
                                   d_out_values=None, op=by_pos_x, compute_capability=90))
    const = ConstantIterator(Particle(1, {"x": 0.5, "y": 0.25}))
    assert const.value_type == value_type(Particle)
    assert ConstantIterator(np.array([(1, (0.5, 0.25))], Particle.dtype)).value_type == value_type(Particle)
    _built(cuprims.make_reduce_into(d_in=const, d_out=P(Particle), op=particle_sum, h_init=(0, (0.0, 0.0)),
                                    compute_capability=90))


def test_a_dict_without_a_type_is_refused_where_no_type_is_known():
    with pytest.raises(ArgumentError) as info:
        ConstantIterator({"id": 1, "pos": {"x": 0.5, "y": 0.25}})
    assert info.value.argument == "value" and "S(d)" in str(info.value)
    with pytest.raises(ArgumentError) as info:      # a struct's field values for a number
        cuprims.make_reduce_into(d_in=P(np.int32), d_out=P(np.int32), op=cuprims.OpKind.PLUS,
                                 h_init=(1, (2, 3)), compute_capability=90)
    assert info.value.argument == "h_init"
    with pytest.raises(ArgumentError) as info:
        cuprims.make_exclusive_scan(d_in=P(Particle), d_out=P(Particle), op=particle_sum, init_value={"id": 0},
                                    compute_capability=90)
    assert info.value.argument == "init_value"


def test_operators_read_nested_fields_on_the_host_too():
    """The operators are plain Python: on host instances they give what the device computes."""
    a, b = Particle(1, (0.5, 2.0)), Particle(2, {"x": 1.5, "y": -1.0})
    assert particle_sum(a, b) == (3, (2.0, 1.0))
    assert rightmost(a, b) is b and by_pos_x(a, b)


# ----------------------------------------------------------------------------- (4) structs one by layout

def test_zip_scans_into_a_named_struct_build():
    """A segmented sum written as an inclusive scan of (value, head flag) pairs, h_init the
    named struct: the zip's items (v0, v1) are read as ValueFlag."""
    obj = _built(cuprims.make_inclusive_scan(d_in=ZipIterator(P(np.int64), P(np.int32)), d_out=P(ValueFlag),
                                             op=segmented_sum, init_value=ValueFlag(0, 0), compute_capability=90))
    assert obj.desc.d_in.value == obj.desc.d_out.value == value_type(ValueFlag)
    assert obj.desc.d_in.key.startswith("zip(")


@pytest.mark.slow       # four builds more; CI builds the segmented sum above
def test_more_zip_scans_into_named_structs_build():
    # the exponential moving average's scan: values beside negated exponents
    ema = cuprims.make_inclusive_scan(d_in=ZipIterator(P(np.float64), TransformIterator(CountingIterator(np.int64(0)),
                                                                                        negate)),
                                      d_out=P(ValueScale), op=ema_combine, init_value=ValueScale(0.0, 0),
                                      compute_capability=90)
    assert _built(ema).desc.d_in.value == value_type(ValueScale)
    _built(cuprims.make_binary_transform(d_in1=P(ValueScale), d_in2=CountingIterator(np.int64(0)), d_out=P(np.float64),
                                         op=ema_term, compute_capability=90))
    # the same scan written with no initial value, and an exclusive one with a tuple
    _built(cuprims.make_inclusive_scan(d_in=ZipIterator(P(np.int64), P(np.int32)), d_out=P(ValueFlag),
                                       op=segmented_sum, init_value=None, compute_capability=90))
    _built(cuprims.make_exclusive_scan(d_in=ZipIterator(P(np.int64), P(np.int32)), d_out=P(ValueFlag),
                                       op=segmented_sum, init_value=(0, 0), compute_capability=90))


def test_zip_reduces_into_a_named_struct_build():
    obj = _built(cuprims.make_reduce_into(d_in=ZipIterator(P(np.float32), ConstantIterator(np.int32(1))),
                                          d_out=P(SumCount), op=sum_count, h_init=SumCount(0.0, 0),
                                          compute_capability=90))
    assert obj.desc.d_in.value == value_type(SumCount)
    seg = cuprims.make_segmented_reduce(d_in=ZipIterator(P(np.float32), ConstantIterator(np.int32(1))),
                                        d_out=P(SumCount), start_offsets_in=P(np.int64), end_offsets_in=P(np.int64),
                                        op=sum_count, h_init={"total": 0.0, "count": 0}, compute_capability=90)
    assert _built(seg).desc.d_in.value == value_type(SumCount)


@pytest.mark.slow       # CI builds the zip of that layout
def test_an_array_of_another_struct_of_the_layout_is_read_as_the_output():
    pair = np.dtype([("v0", np.int64), ("v1", np.int32)], align=True)      # a ZipIterator's own item type
    obj = cuprims.make_inclusive_scan(d_in=P(pair), d_out=P(ValueFlag), op=segmented_sum, init_value=(0, 0),
                                      compute_capability=90)
    assert obj.desc.d_in.value == value_type(ValueFlag)
    arg = obj.desc.d_in
    assert arg.bind(StructDeviceArray(pair, 10), 10) == 0x7F0000100000      # the call takes the array as built
    assert arg.bind(StructDeviceArray(ValueFlag.dtype, 10), 10) == 0x7F0000100000
    with pytest.raises(ArgumentError) as info:
        arg.bind(StructDeviceArray(np.dtype([("a", np.int32), ("b", np.int64)], align=True), 10), 10)
    assert info.value.argument == "d_in"
    _built(cuprims.make_inclusive_scan(d_in=P(pair), d_out=P(ValueFlag), op=segmented_sum, init_value=None,
                                       compute_capability=90))
    # a host value of the layout stands for the output's type
    red = cuprims.make_reduce_into(d_in=P(ValueFlag), d_out=P(ValueFlag), op=segmented_sum,
                                   h_init=np.zeros(1, pair), compute_capability=90)
    assert red.desc.has_init


@pytest.mark.parametrize("build, argument", [
    (lambda: cuprims.make_inclusive_scan(d_in=ZipIterator(P(np.float32), P(np.int32)), d_out=P(ValueFlag),
                                         op=segmented_sum, init_value=ValueFlag(0, 0), compute_capability=90), "d_in"),
    (lambda: cuprims.make_reduce_into(d_in=ZipIterator(P(np.int64), P(np.int32), P(np.int32)), d_out=P(ValueFlag),
                                      op=segmented_sum, h_init=ValueFlag(0, 0), compute_capability=90), "d_in"),
    (lambda: cuprims.make_reduce_into(d_in=ZipIterator(P(np.int32), P(np.int64)), d_out=P(ValueFlag),
                                      op=segmented_sum, h_init=ValueFlag(0, 0), compute_capability=90), "d_in"),
    (lambda: cuprims.make_exclusive_scan(d_in=P(np.int64), d_out=P(ValueFlag), op=segmented_sum,
                                         init_value=ValueFlag(0, 0), compute_capability=90), "d_in"),
    (lambda: cuprims.make_inclusive_scan(d_in=ZipIterator(P(np.int64), P(np.int32)), d_out=P(ValueFlag),
                                         op=segmented_sum, init_value=SumCount(0.0, 0), compute_capability=90),
     "init_value"),
    (lambda: cuprims.make_reduce_into(d_in=ZipIterator(P(np.float32), P(np.int32)), d_out=P(SumCount), op=sum_count,
                                      h_init=ValueFlag(0, 0), compute_capability=90), "h_init"),
    (lambda: cuprims.make_segmented_reduce(d_in=P(SumCount), d_out=P(SumCount), start_offsets_in=P(np.int32),
                                           end_offsets_in=P(np.int32), op=sum_count, h_init=MinMax(0.0, 0.0),
                                           compute_capability=90), "h_init"),
    (lambda: cuprims.make_exclusive_scan(d_in=P(SumCount), d_out=P(SumCount), op=sum_count,
                                         init_value=P(ValueFlag), compute_capability=90), "init_value"),
], ids=["zip-field-type", "zip-field-count", "zip-field-order", "scalar-into-struct", "scan-init", "reduce-init",
        "segmented-init", "device-init"])
def test_other_layouts_are_refused_naming_the_argument(build, argument):
    with pytest.raises(ArgumentError) as info:
        build()
    assert info.value.argument == argument
    assert isinstance(info.value, ValueError)


# ----------------------------------------------------------------------------- (5) a struct built in an iterator

def test_transform_iterator_building_a_struct_has_the_struct_as_its_value_type():
    it = TransformIterator(P(np.float64), to_minmax)
    assert it.value_type == value_type(MinMax) and it.value_type.dtype == MinMax.dtype
    assert "value_type=struct(lo: float64, hi: float64)" in repr(it)
    by_lambda = TransformIterator(P(np.float64), lambda v: MinMax(abs(v), abs(v)))
    assert by_lambda.value_type == value_type(MinMax)
    obj = _built(cuprims.make_reduce_into(d_in=it, d_out=P(MinMax), op=minmax_op, h_init=MinMax(np.inf, -np.inf),
                                          compute_capability=90))
    assert obj.desc.d_in.value == obj.desc.d_out.value == value_type(MinMax)
    assert len(obj.desc.d_in.linked_ops()) == 1            # the transform's operator is linked in
    _built(cuprims.make_reduce_into(d_in=by_lambda, d_out=P(MinMax), op=minmax_op, h_init=MinMax(np.inf, -np.inf),
                                    compute_capability=90))


def test_transform_iterator_value_types_over_structs_are_inferred():
    zipped = ZipIterator(P(np.float32), P(np.int32))
    assert TransformIterator(zipped, lambda p: p[0] * p[0]).value_type.dtype == np.float32
    assert TransformIterator(zipped, lambda p: p.v1 + p.v1).value_type.dtype == np.int64
    assert TransformIterator(zipped, lambda p: p).value_type == zipped.value_type
    assert TransformIterator(P(Particle), lambda p: p.pos.x).value_type.dtype == np.float32
    built = TransformIterator(P(np.int32), lambda i: Particle(i, (i, -i)))
    assert built.value_type == value_type(Particle)
    # a struct read from a zip and rebuilt as a named one, reduced into that type
    sums = TransformIterator(zipped, lambda p: SumCount(p.v0, 1))
    assert sums.value_type == value_type(SumCount)
    _built(cuprims.make_reduce_into(d_in=sums, d_out=P(SumCount), op=sum_count, h_init=(0.0, 0),
                                    compute_capability=90))


def test_struct_results_convert_to_the_layout_of_the_output():
    """A transform's struct result reduced into another struct of its layout, and an
    operator building that other struct: both are the output's bytes."""
    pairs = TransformIterator(P(np.int64), lambda v: ValueFlag(v, 1 if v == 0 else 0))
    other = gpu_struct({"amount": np.int64, "head": np.int32}, name="Other")

    def restart(a, b):       # reads the output's fields, builds a ValueFlag
        return ValueFlag(b.amount if b.head else a.amount + b.amount, 1 if a.head or b.head else 0)

    obj = cuprims.make_inclusive_scan(d_in=pairs, d_out=P(other), op=restart, init_value=other(0, 0),
                                      compute_capability=90)
    assert _built(obj).desc.d_in.value == value_type(other)
