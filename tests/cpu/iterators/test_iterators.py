"""Iterators without a GPU: code keys (kind and types, never state), the bytes packed for
a launch against the struct layouts the compiler sees (read back from the cubin),
ahead-of-time builds of lower_bound over every kind, a golden source, and errors.

Regenerate the golden after an intended codegen change with::

    CUPRIMS_UPDATE_GOLDENS=1 pytest tests/cpu/iterators/test_iterators.py
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

import cuprims
from cuprims import (CacheModifiedInputIterator, ConstantIterator, CountingIterator, OpKind, PermutationIterator,
                     ProxyArray, RawOp, ReverseIterator, TransformIterator)
from cuprims._value_types import value_type
from cuprims.algorithms.binary_search.source import binary_search_source
from cuprims.errors import ArgumentError, NoDeviceError, OperatorCompileError
from cuprims.iterators.units import iterator_unit
from cuprims.op import op_spec
from cpu_helpers import FakeDeviceArray, check_golden, kernel_param_sizes, render_source, stub_ltoir

Pair = cuprims.gpu_struct({"key": np.int64, "weight": np.float32}, name="Pair")


def square(v):
    return v * v


# --- code keys -------------------------------------------------------------------------

def test_key_holds_kind_and_types_not_state():
    assert CountingIterator(np.int32(0))._key() == CountingIterator(np.int32(99))._key()
    assert CountingIterator(np.int32(0))._key() != CountingIterator(np.int64(0))._key()
    assert ConstantIterator(np.float32(1))._key() == ConstantIterator(np.float32(2))._key()
    a = PermutationIterator(ProxyArray(np.float32), ProxyArray(np.int32))
    b = PermutationIterator(ProxyArray(np.float32), ProxyArray(np.int64))
    assert a._key() != b._key()
    assert (CacheModifiedInputIterator(ProxyArray(np.int32), "stream")._key()
            != CacheModifiedInputIterator(ProxyArray(np.int32), "global")._key())
    # reversing an array and reversing an iterator are different code
    assert ReverseIterator(ProxyArray(np.int32))._key() != ReverseIterator(CountingIterator(np.int32(0)))._key()


def test_transform_key_follows_the_operator():
    base = CountingIterator(np.int32(0))
    k1 = TransformIterator(base, square, np.int32)._key()
    k2 = TransformIterator(base, lambda v: v + 1, np.int32)._key()
    k3 = TransformIterator(base, square, np.int64)._key()
    assert len({k1, k2, k3}) == 3
    assert TransformIterator(CountingIterator(np.int32(5)), square, np.int32)._key() == k1


def test_persistence_follows_the_operators_inside():
    class Opaque:  # an object the recipe can only name by identity
        pass

    def odd(v, thing=Opaque()):
        return v

    captured = TransformIterator(CountingIterator(np.int32(0)), odd, np.int32)
    plain = TransformIterator(CountingIterator(np.int32(0)), square, np.int32)
    assert plain._persistent() and not captured._persistent()
    assert not PermutationIterator(ProxyArray(np.float32), ReverseIterator(captured))._persistent()
    assert PermutationIterator(ProxyArray(np.float32), ReverseIterator(plain))._persistent()
    # the same answer the linked operators give
    assert [o.spec.persistent for o in iterator_unit(captured, "t").ops] == [False]
    # a captured device array is runtime state (bound at each call), not an identity
    table = FakeDeviceArray(10, "<i4")

    def lookup(v):
        return table[v]

    assert TransformIterator(CountingIterator(np.int32(0)), lookup, np.int32)._persistent()


# --- state packing ----------------------------------------------------------------------

def test_counting_and_constant_state():
    assert CountingIterator(np.int64(-5))._state(10, "x") == struct.pack("<q", -5)
    assert CountingIterator(np.float32(1.5))._state(None, "x") == struct.pack("<f", 1.5)
    p = Pair(key=7, weight=2.5)
    state = ConstantIterator(p)._state(None, "x")
    assert state == bytes(p) and len(state) == Pair.dtype.itemsize


def test_composite_state_follows_cxx_layout():
    # permutation{ values: counting<int8>{start}, indices: counting<int64>{start} }: int64 aligned at 8
    it = PermutationIterator(CountingIterator(np.int8(3)), CountingIterator(np.int64(-1)))
    unit = iterator_unit(it, "t")
    assert (unit.state_size, unit.state_alignment) == (16, 8)
    assert it._state(4, "x") == struct.pack("<b7xq", 3, -1)


def test_stateful_raw_op_state_is_packed_after_the_underlying():
    op = RawOp(ltoir=stub_ltoir("scale_by"), name="scale_by", state=struct.pack("<f", 0.5), state_alignment=4)
    it = TransformIterator(CountingIterator(np.int8(2)), op, np.float32)
    assert it._state(1, "x") == struct.pack("<b3xf", 2, 0.5)
    unit = iterator_unit(it, "t")
    assert unit.ops[0].symbol == "scale_by" and unit.ops[0].spec.state_size == 4


def test_pointer_state_needs_a_device_array():
    it = CacheModifiedInputIterator(ProxyArray(np.int32))
    with pytest.raises(ArgumentError):
        it._state(10, "d_values")


def test_arrays_inside_iterators_are_checked():
    it = PermutationIterator(FakeDeviceArray(50, "<f4"), FakeDeviceArray(10, "<i4"))
    state = it._state(10, "d_values")
    assert len(state) == 16
    with pytest.raises(ArgumentError, match="at least 11"):
        it._state(11, "d_values")  # the indices array holds 10
    base = 0x7F0000001000
    rev = ReverseIterator(FakeDeviceArray(10, "<i8", ptr=base))
    assert struct.unpack("<Q", rev._state(10, "d_values")) == (base + 9 * 8,)  # the last item of its array
    assert struct.unpack("<Q", CacheModifiedInputIterator(FakeDeviceArray(10, "<i8", ptr=base))._state(10, "v")) == (
        base,)
    with pytest.raises(ArgumentError, match="aligned"):
        CacheModifiedInputIterator(FakeDeviceArray(10, "<i8", ptr=base + 4))._state(10, "d_values")


# --- builds ahead of time -------------------------------------------------------------------

ITERATORS = {
    "counting": lambda: CountingIterator(np.int32(0)),
    "constant": lambda: ConstantIterator(np.int32(4)),
    "cache_modified": lambda: CacheModifiedInputIterator(ProxyArray(np.int32), "stream"),
    "reverse_array": lambda: ReverseIterator(ProxyArray(np.int32)),
    "permutation": lambda: PermutationIterator(ProxyArray(np.int32), ReverseIterator(CountingIterator(np.int64(9)))),
    "transform_python": lambda: TransformIterator(CountingIterator(np.int32(0)), square, np.int32),
    "transform_builtin": lambda: TransformIterator(ProxyArray(np.int32), OpKind.NEGATE),
}


@pytest.mark.ci_sample(every=2)
@pytest.mark.parametrize("kind", sorted(ITERATORS))
def test_lower_bound_over_each_kind_builds_for_sm90(shared_cache, kind):
    it = ITERATORS[kind]()
    search = cuprims.make_lower_bound(d_data=ProxyArray(np.int32), d_values=it, d_out=ProxyArray(np.int64),
                                      compute_capability=90)
    cubin = search.cubin(90)
    result = search._builds.result(90)
    (lowered,) = result.kernels.values()
    sizes = kernel_param_sizes(cubin, lowered)
    assert sizes[2] == it._struct_layout()[0]  # the values parameter is the iterator struct, by value


def test_struct_values_through_a_constant_iterator_build(shared_cache):
    def key_less(a, b):
        return a.key < b.key

    it = ConstantIterator(Pair(key=3, weight=1.0))
    search = cuprims.make_upper_bound(d_data=ProxyArray(Pair.dtype), d_values=it, d_out=ProxyArray(np.uint64),
                                      comp=key_less, compute_capability=90)
    assert search.cubin(90)[:4] == b"\x7fELF"


def test_same_kind_shares_the_built_object(shared_cache):
    kw = dict(d_data=ProxyArray(np.int64), d_out=ProxyArray(np.int64), compute_capability=90)
    a = cuprims.make_lower_bound(d_values=CountingIterator(np.int64(0)), **kw)
    b = cuprims.make_lower_bound(d_values=CountingIterator(np.int64(1000)), **kw)
    c = cuprims.make_lower_bound(d_values=ProxyArray(np.int64), **kw)
    assert a is b and a is not c


def test_golden_iterator_source(numba_ops):
    it = PermutationIterator(TransformIterator(CountingIterator(np.int64(5)), square, np.int64),
                             ReverseIterator(ProxyArray(np.int32)))
    unit = iterator_unit(it, "cuprims_values_it").without_objects()
    src = binary_search_source(data=value_type(np.int64), out=value_type(np.uint64), op=op_spec(OpKind.LESS),
                               arch=90, values=unit)
    assert src.extern_symbols == ("cuprims_values_it_op_0",)
    check_golden("binary_search_i8_permutation_iterator_sm90", render_source(src))


# --- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("make,argument", [
    (lambda: CountingIterator(5), "start"),
    (lambda: CountingIterator(np.complex64(1)), "start"),
    (lambda: ConstantIterator(3.0), "value"),
    (lambda: CacheModifiedInputIterator(ProxyArray(np.int32), modifier="lru"), "modifier"),
    (lambda: PermutationIterator(ProxyArray(np.int32), ProxyArray(np.float32)), "indices"),
    # an output iterator must write somewhere (TransformIterator(..., is_input=False) is one)
    (lambda: TransformIterator(CountingIterator(np.int32(0)), square, is_input=False), "underlying"),
    (lambda: TransformIterator(ProxyArray(np.int32), RawOp(ltoir=stub_ltoir("f", 2), name="f")), "value_type"),
    (lambda: TransformIterator(ProxyArray(np.int32), OpKind.PLUS), "transform_op"),
    (lambda: TransformIterator(ProxyArray(np.float32), OpKind.BIT_NOT), "transform_op"),
    (lambda: ReverseIterator(np.zeros(3)), "underlying"),
])
def test_construction_errors(make, argument):
    with pytest.raises(ArgumentError) as info:
        make()
    assert info.value.argument == argument


def test_operator_that_does_not_compile_is_reported():
    with pytest.raises(OperatorCompileError):
        TransformIterator(CountingIterator(np.int32(0)), lambda v: v.no_such_attribute)


def test_value_type_must_match_the_data(shared_cache):
    with pytest.raises(ArgumentError, match="int32") as info:
        cuprims.make_lower_bound(d_data=ProxyArray(np.int32), d_values=CountingIterator(np.int64(0)),
                                 d_out=ProxyArray(np.int64), compute_capability=90)
    assert info.value.argument == "d_values"


def test_call_checks_the_iterator_kind(shared_cache):
    kw = dict(d_data=ProxyArray(np.int32), d_out=ProxyArray(np.int64), compute_capability=90)
    by_iterator = cuprims.make_lower_bound(d_values=CountingIterator(np.int32(0)), **kw)
    by_array = cuprims.make_lower_bound(d_values=ProxyArray(np.int32), **kw)
    call = dict(d_data=FakeDeviceArray(100, "<i4"), num_items=100, num_values=10, d_out=FakeDeviceArray(10, "<i8"))
    for obj, values in ((by_iterator, ConstantIterator(np.int32(1))), (by_iterator, FakeDeviceArray(10, "<i4")),
                        (by_array, CountingIterator(np.int32(0)))):
        with pytest.raises(ArgumentError) as info:
            obj(d_values=values, **call)
        assert info.value.argument == "d_values"
    # the right kind passes every check and only then needs a GPU
    with pytest.raises(NoDeviceError):
        by_iterator(d_values=CountingIterator(np.int32(7)), **call)


# ------------------------------------------------------------------ it + n

def test_advancing_builds_once_for_every_distance_and_adds_up(shared_cache):
    from cuprims.iterators._advanced import AdvancedIterator

    start = cuprims.TransformIterator(cuprims.CountingIterator(np.int64(0)), lambda i: i * 256)
    end, later = start + 1, 1 + (start + 3) + np.int64(2)
    assert isinstance(end, AdvancedIterator) and later._by == 6 and later._base is start
    assert end._key() == later._key() and end._key() != start._key()      # one build, the distance in the state
    assert end._state(10, "end")[-8:] == (1).to_bytes(8, "little")
    assert "+ 1" in repr(end)
    obj = cuprims.make_segmented_reduce(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32),
                                        start_offsets_in=start, end_offsets_in=end, op=cuprims.OpKind.PLUS,
                                        h_init=cuprims.ProxyValue(np.float32), compute_capability=90)
    assert obj.cubin(90)[:4] == b"\x7fELF"


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True, 1 << 63])
def test_a_bad_distance_is_refused(bad):
    it = cuprims.CountingIterator(np.int32(0))
    with pytest.raises((ArgumentError, TypeError)):
        it + bad


def test_an_advanced_output_builds(shared_cache):
    obj = cuprims.make_unary_transform(d_in=cuprims.CountingIterator(np.int32(0)),
                                       d_out=cuprims.ReverseIterator(cuprims.ProxyArray(np.int32)) + 2,
                                       op=lambda v: v, compute_capability=90)
    assert obj.cubin(90)[:4] == b"\x7fELF"
