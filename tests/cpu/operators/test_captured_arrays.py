"""Operators that capture device arrays (CPU, no GPU): recipes without pointers, state
bytes read at call time, builds for sm_90 that link, the disk cache, no references
kept, and the errors."""

from __future__ import annotations

import gc
import struct
import weakref

import numpy as np
import pytest

import cuprims
from cuprims import OpKind, ProxyArray, ProxyValue, TransformIterator
from cuprims._operators.captures import captured_state
from cuprims._operators.recipe import callable_recipe, op_recipe
from cuprims.algorithms.binary_search.api import LowerBound
from cuprims.algorithms.reduce.api import Reduce
from cuprims.algorithms.transform.api import BinaryTransform, UnaryTransform
from cuprims.errors import ArgumentError, OperatorCompileError
from cuprims.op import op_spec as _op_spec
from cpu_helpers import ARCH, check_kernel_params, counters, delta


class FakeDeviceArray:
    """A CUDA Array Interface and nothing else (C-contiguous unless ``strides`` given)."""

    def __init__(self, ptr, shape, typestr="<f4", strides=None):
        if isinstance(shape, int):
            shape = (shape,)
        self._iface = {"data": (ptr, False), "shape": tuple(shape), "typestr": typestr, "version": 3,
                       "strides": strides}

    @property
    def __cuda_array_interface__(self):
        return dict(self._iface)


def op_spec(op):
    """The spec reduce, scan and the transform iterators use: captured arrays are state."""
    return _op_spec(op, bind_captures=True)


def _words(state: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(state) // 8}q", state))


def _closure_over(arr):
    return lambda a, b: a + b + arr[0]


def _reduce(op, d_in=None):
    return cuprims.make_reduce_into(d_in=ProxyArray(np.float32) if d_in is None else d_in,
                                    d_out=ProxyArray(np.float32), op=op, h_init=ProxyValue(np.float32),
                                    compute_capability=ARCH)


# ------------------------------------------------------------------ recipes and specs

def test_recipe_of_a_captured_array_is_persistent_and_pointer_free():
    a = _closure_over(FakeDeviceArray(0x7F0000001000, 16))
    b = _closure_over(FakeDeviceArray(0x7F00DEAD0000, 1 << 20))
    c = _closure_over(ProxyArray(np.float32))
    ra, rb, rc = op_recipe(a), op_recipe(b), op_recipe(c)
    assert ra.persistent and rb.persistent and rc.persistent
    assert ra.digest == rb.digest == rc.digest  # neither the pointer nor the shape counts
    assert len(ra.captures) == 1 and ra.captures[0].name == "arr" and ra.captures[0].ndim == 1
    assert ra.captures[0].dtype == np.float32


def test_spec_key_follows_dtype_and_rank_only():
    s1 = op_spec(_closure_over(FakeDeviceArray(0x1000, 4)))
    s2 = op_spec(_closure_over(FakeDeviceArray(0x2000, 400)))
    assert s1 == s2 and hash(s1) == hash(s2) and s1.key == s2.key
    assert (s1.state_size, s1.state_alignment) == (16, 8)  # pointer, one extent
    f8 = op_spec(_closure_over(FakeDeviceArray(0x1000, 4, "<f8")))
    two_d = op_spec(_closure_over(ProxyArray(np.float32, ndim=2)))
    assert f8.key != s1.key and f8 != s1
    assert two_d.key != s1.key and two_d.state_size == 24
    none = op_spec(lambda a, b: a + b + 1.0)
    assert none.key != s1.key and none.state_size == 0 and none.captures == ()


def test_capture_order_cells_then_globals_by_name_then_defaults():
    ns = {"zeta": ProxyArray(np.float32), "alpha": ProxyArray(np.int32), "beta": 3.0}
    exec("def make(cell_b, cell_a):\n"
         "    def op(a, b, dflt=cell_a):\n"
         "        return a + zeta[0] + cell_b[0] + alpha[0] + cell_a[0] + dflt[0] + beta\n"
         "    return op\n", ns)
    op = ns["make"](ProxyArray(np.float64), ProxyArray(np.int64))
    caps = op_spec(op).captures
    assert [(c.where, c.name) for c in caps] == [("cell", "cell_a"), ("cell", "cell_b"), ("global", "alpha"),
                                                 ("global", "zeta"), ("default", "dflt")]
    assert [c.dtype for c in caps] == [np.int64, np.float64, np.int32, np.float32, np.int64]
    assert op_spec(op).persistent


def test_captured_scalars_still_go_into_the_key():
    def make(scale):
        w = ProxyArray(np.float32)
        return lambda a, b: a + b * scale + w[0]

    assert op_spec(make(2.0)).key == op_spec(make(2.0)).key
    assert op_spec(make(2.0)).key != op_spec(make(3.0)).key


def test_helper_capturing_an_array_keeps_the_old_behaviour():
    # only the operator's own captures are runtime state; a helper's array is compiled in
    def make(arr):
        def helper(x):
            return x + arr[0]
        return lambda a, b: helper(a) + b

    digest, persistent = callable_recipe(make(FakeDeviceArray(0x1000, 4)))
    assert persistent is False
    assert op_spec(make(FakeDeviceArray(0x1000, 4))).captures == ()


def test_op_spec_default_still_compiles_arrays_in():
    # op_spec's default compiles a captured array in, as numba does; every algorithm
    # (reduce, scan, transform, binary search, merge sort) binds it at each call instead
    w = FakeDeviceArray(0x7F0000001000, 4)
    spec = _op_spec(lambda v: v + w[0])
    assert spec.captures == () and spec.state_size == 0 and spec.persistent is False
    assert op_spec(lambda v: v + w[0]).state_size == 16


# ------------------------------------------------------------------ state bytes at call time

def test_state_is_pointers_and_shapes_of_the_current_values():
    box = {"w": FakeDeviceArray(0x1000, 4)}
    m = FakeDeviceArray(0x3000, (2, 5))

    def make():
        w = box["w"]

        def op(a, b):  # cells in co_freevars order: m, w
            return a + b + w[0] + m[1, 1]

        def rebind(x):
            nonlocal w
            w = x
        return op, rebind

    op, rebind = make()
    spec = op_spec(op)
    assert spec.state_size == 8 * 2 + 8 * 3
    assert op.__code__.co_freevars == ("m", "w")
    assert _words(captured_state(op, spec)) == [0x3000, 2, 5, 0x1000, 4]
    rebind(FakeDeviceArray(0x2000, 77))
    assert _words(captured_state(op, spec)) == [0x3000, 2, 5, 0x2000, 77]
    assert op_spec(op) == spec  # same kind of array: the same build


def test_reduce_call_packs_the_current_arrays(monkeypatch):
    w = FakeDeviceArray(0x1000, 8)

    def op(a, b):
        return a + b + w[0]

    reducer = _reduce(op)
    seen = []
    monkeypatch.setattr(Reduce, "_execute",
                        lambda self, temp, stream, one_shot, args, raw, *rest, **kw: seen.append(args))
    d_in, d_out = FakeDeviceArray(0xA000, 100), FakeDeviceArray(0xB000, 1)
    reducer(temp_storage=None, d_in=d_in, d_out=d_out, num_items=100, op=op, h_init=np.float32(0))
    w = FakeDeviceArray(0x2000, 16)  # noqa: F841 - the closure reads the new value
    reducer(temp_storage=None, d_in=d_in, d_out=d_out, num_items=100, op=op, h_init=np.float32(0))
    assert [_words(args[3]) for args in seen] == [[0x1000, 8], [0x2000, 16]]
    with pytest.raises(ArgumentError) as info:
        reducer(temp_storage=None, d_in=d_in, d_out=d_out, num_items=100, h_init=np.float32(0))
    assert info.value.argument == "op" and "captures device arrays" in str(info.value)


def test_transform_iterator_state_holds_the_captured_array(monkeypatch):
    w = FakeDeviceArray(0x5000, 3)
    it = TransformIterator(ProxyArray(np.float32), lambda v: v * w[1])
    assert it.value_type.dtype == np.float32  # inferred with w typed as a float32 array
    reducer = _reduce(OpKind.PLUS, d_in=it)
    call_it = TransformIterator(FakeDeviceArray(0xA000, 10), lambda v: v * w[1])
    state = reducer.desc.d_in.bind(call_it, 10)
    assert _words(state[:24]) == [0xA000, 0x5000, 3]
    w = FakeDeviceArray(0x6000, 9)
    assert _words(reducer.desc.d_in.bind(call_it, 10)[:24]) == [0xA000, 0x6000, 9]


def test_transform_output_iterator_with_a_captured_array():
    scale = FakeDeviceArray(0x7000, 1)
    out = cuprims.TransformOutputIterator(ProxyArray(np.float32), lambda s: s * scale[0], np.float32)
    reducer = cuprims.make_reduce_into(d_in=ProxyArray(np.float32), d_out=out, op=OpKind.PLUS,
                                       h_init=ProxyValue(np.float32), compute_capability=ARCH)
    assert reducer.cubin()[:4] == b"\x7fELF"
    call_out = cuprims.TransformOutputIterator(FakeDeviceArray(0xC000, 1), lambda s: s * scale[0], np.float32)
    assert _words(reducer.desc.d_out.bind(call_out, 1, None)[:24]) == [0xC000, 0x7000, 1]


# ------------------------------------------------------------------ builds for sm_90

def test_reduce_with_a_captured_array_builds_and_links():
    w = ProxyArray(np.float32)
    reducer = _reduce(lambda a, b: a + b + w[0])
    assert reducer.desc.op.state_size == 16
    assert reducer.cubin()[:4] == b"\x7fELF"


def test_transform_iterator_with_a_captured_array_builds():
    w = ProxyArray(np.float32)
    reducer = _reduce(OpKind.PLUS, d_in=TransformIterator(ProxyArray(np.float32), lambda v: v * w[1]))
    assert reducer.cubin()[:4] == b"\x7fELF"


def test_def_default_and_jitted_operators_build():
    from numba import cuda

    w = ProxyArray(np.int32)
    m = ProxyArray(np.float64, ndim=2)

    @cuda.jit(device=True)
    def jitted(a, b):
        return a + b + w[0]

    def with_default(a, b, table=m):
        return a + b + np.int32(table[0, 1] + table.shape[1])

    for op in (jitted, with_default):
        reducer = cuprims.make_reduce_into(d_in=ProxyArray(np.int32), d_out=ProxyArray(np.int32), op=op,
                                           h_init=ProxyValue(np.int32), compute_capability=ARCH)
        assert reducer.desc.op.captures and reducer.cubin()[:4] == b"\x7fELF"


def test_closure_keeps_its_other_values_and_helpers():
    def helper(x):
        return x * 2.0

    def make(offset):
        w = ProxyArray(np.float32)
        return lambda a, b: helper(a) + b + w[0] + offset

    reducer = _reduce(make(1.5))
    assert reducer.cubin()[:4] == b"\x7fELF"


def test_lambda_among_others_on_one_line_is_found():
    w = ProxyArray(np.float32)
    ops = (lambda a, b: a - b, lambda a, b: a + b + w[0], lambda a, b: a * b)  # noqa: E731
    assert _reduce(ops[1]).cubin()[:4] == b"\x7fELF"


def test_lambda_on_a_continuation_line_builds():
    w = ProxyArray(np.float32)
    reducer = cuprims.make_reduce_into(
        d_in=ProxyArray(np.float32), d_out=ProxyArray(np.float32),
        op=lambda a, b: (a + b
                         + w[0]),
        h_init=ProxyValue(np.float32), compute_capability=ARCH)
    assert reducer.cubin()[:4] == b"\x7fELF"


def test_operator_without_source_is_a_clear_error():
    ns = {"w": ProxyArray(np.float32)}
    exec("op = lambda a, b: a + b + w[0]\n", ns)
    with pytest.raises(OperatorCompileError) as info:
        _reduce(ns["op"])
    assert "captures device arrays ('w')" in str(info.value) and "source" in str(info.value)


# ------------------------------------------------------------------ transform and binary search

def _unary(op):
    return cuprims.make_unary_transform(d_in=ProxyArray(np.float32), d_out=ProxyArray(np.float32), op=op,
                                        compute_capability=ARCH)


def _binary(op):
    return cuprims.make_binary_transform(d_in1=ProxyArray(np.float32), d_in2=ProxyArray(np.int32),
                                         d_out=ProxyArray(np.float64), op=op, compute_capability=ARCH)


def _lower(comp):
    return cuprims.make_lower_bound(d_data=ProxyArray(np.int32), d_values=ProxyArray(np.int32),
                                    d_out=ProxyArray(np.int64), comp=comp, compute_capability=ARCH)


def _scaled_by(arr):
    return lambda v: v * arr[1]


def _shifted_by(table):
    return lambda a, b: a + b * table[0, 1] + table.shape[1]


def _by_key(keys):
    return lambda a, b: keys[a] < keys[b]


# name: (build, operator factory, dtype and rank of the captured array, two arrays of that kind)
BOUND_CASES = {
    "unary_transform": (_unary, _scaled_by, np.float32, 1,
                        (FakeDeviceArray(0x1000, 4), FakeDeviceArray(0x2000, 1 << 20))),
    "binary_transform": (_binary, _shifted_by, np.float64, 2,
                         (FakeDeviceArray(0x1000, (2, 3), "<f8"), FakeDeviceArray(0x2000, (7, 5), "<f8"))),
    "lower_bound": (_lower, _by_key, np.int32, 1,
                    (FakeDeviceArray(0x1000, 10, "<i4"), FakeDeviceArray(0x2000, 99, "<i4"))),
}


@pytest.mark.parametrize("case", sorted(BOUND_CASES))
def test_transform_and_search_build_once_for_arrays_of_a_kind(case):
    build, make_op, dtype, ndim, arrays = BOUND_CASES[case]
    before = counters()
    obj = build(make_op(ProxyArray(dtype, ndim=ndim)))
    spec = obj.desc.operator
    assert len(spec.captures) == 1 and spec.captures[0].dtype == dtype and spec.captures[0].ndim == ndim
    assert (spec.state_size, spec.state_alignment) == (8 * (1 + ndim), 8) and spec.persistent
    assert obj.cubin(ARCH)[:4] == b"\x7fELF"
    check_kernel_params(obj)  # the functor parameter carries the state
    assert delta(before) == {"numba_compiles": 1, "nvrtc_compiles": 1, "links": 1}
    for arr in arrays:  # real arrays of the kind: the same description, the same object, no build
        other = build(make_op(arr))
        assert other is obj and other.desc is obj.desc
    assert delta(before) == {"numba_compiles": 1, "nvrtc_compiles": 1, "links": 1}


def _record_calls(monkeypatch, cls):
    seen = []
    monkeypatch.setattr(cls, "_execute", lambda self, temp, stream, one_shot, args, raw, *rest, **kw: seen.append(args))
    return seen


def test_unary_transform_call_packs_the_current_array(monkeypatch):
    w = FakeDeviceArray(0x1000, 8)

    def op(v):
        return v * w[1]

    transform = _unary(op)
    seen = _record_calls(monkeypatch, UnaryTransform)
    x, y = FakeDeviceArray(0xA000, 100), FakeDeviceArray(0xB000, 100)
    transform(d_in=x, d_out=y, op=op, num_items=100)
    w = FakeDeviceArray(0x2000, 16)  # noqa: F841 - the closure reads the new value
    transform(d_in=x, d_out=y, op=op, num_items=100)
    assert [_words(args[3]) for args in seen] == [[0x1000, 8], [0x2000, 16]]
    with pytest.raises(ArgumentError) as info:
        transform(d_in=x, d_out=y, num_items=100)
    assert info.value.argument == "op" and "captures device arrays" in str(info.value)
    assert len(seen) == 2


def test_binary_transform_call_packs_the_current_array(monkeypatch):
    table = FakeDeviceArray(0x3000, (2, 3), "<f8")
    op = _shifted_by(table)
    transform = _binary(op)
    seen = _record_calls(monkeypatch, BinaryTransform)
    a, b, y = FakeDeviceArray(0xA000, 10), FakeDeviceArray(0xB000, 10, "<i4"), FakeDeviceArray(0xC000, 10, "<f8")
    transform(d_in1=a, d_in2=b, d_out=y, op=op, num_items=10)
    op.__closure__[0].cell_contents = FakeDeviceArray(0x4000, (5, 7), "<f8")
    transform(d_in1=a, d_in2=b, d_out=y, op=op, num_items=10)
    assert [_words(args[3]) for args in seen] == [[0x3000, 2, 3], [0x4000, 5, 7]]
    with pytest.raises(ArgumentError) as info:
        transform(d_in1=a, d_in2=b, d_out=y, num_items=10)
    assert info.value.argument == "op"
    op.__closure__[0].cell_contents = FakeDeviceArray(0x4000, (5, 7), "<f4")
    with pytest.raises(ArgumentError, match="float64"):
        transform(d_in1=a, d_in2=b, d_out=y, op=op, num_items=10)


def test_lower_bound_call_packs_the_current_array(monkeypatch):
    keys = FakeDeviceArray(0x5000, 10, "<i4")

    def comp(a, b):
        return keys[a] < keys[b]

    search = _lower(comp)
    seen = _record_calls(monkeypatch, LowerBound)
    data, values, out = (FakeDeviceArray(0xA000, 10, "<i4"), FakeDeviceArray(0xB000, 4, "<i4"),
                         FakeDeviceArray(0xC000, 4, "<i8"))
    search(d_data=data, num_items=10, d_values=values, num_values=4, d_out=out, comp=comp)
    keys = FakeDeviceArray(0x6000, 30, "<i4")  # noqa: F841 - the closure reads the new value
    search(d_data=data, num_items=10, d_values=values, num_values=4, d_out=out, comp=comp)
    assert [_words(args[5]) for args in seen] == [[0x5000, 10], [0x6000, 30]]
    with pytest.raises(ArgumentError) as info:
        search(d_data=data, num_items=10, d_values=values, num_values=4, d_out=out)
    assert info.value.argument == "comp" and "captures device arrays" in str(info.value)


def test_transform_and_search_keep_no_captured_array_alive(monkeypatch):
    w = FakeDeviceArray(0x1000, 8, "<i4")
    ref = weakref.ref(w)

    def op(v):
        return v + w[0]

    def comp(a, b):
        return w[a] < w[b]

    transform, search = _unary(op), _lower(comp)
    monkeypatch.setattr(UnaryTransform, "_execute", lambda *args, **kwargs: None)
    monkeypatch.setattr(LowerBound, "_execute", lambda *args, **kwargs: None)
    transform(d_in=FakeDeviceArray(0xA000, 4), d_out=FakeDeviceArray(0xB000, 4), op=op, num_items=4)
    i4 = FakeDeviceArray(0xA000, 4, "<i4")
    search(d_data=i4, num_items=4, d_values=i4, num_values=4, d_out=FakeDeviceArray(0xB000, 4, "<i8"), comp=comp)
    w = FakeDeviceArray(0x2000, 8, "<i4")  # noqa: F841 - rebinding drops the closures' reference
    gc.collect()
    assert ref() is None
    assert transform.desc.op.captures and search.desc.comp.captures


# ------------------------------------------------------------------ caches

def test_new_arrays_compile_nothing_and_the_disk_cache_serves_a_second_build():
    def make(arr):
        return lambda a, b: a + b * 2.0 + arr[0]

    before = counters()
    r1 = _reduce(make(ProxyArray(np.float32)))
    assert delta(before) == {"numba_compiles": 1, "nvrtc_compiles": 1, "links": 1}
    r2 = _reduce(make(FakeDeviceArray(0x1000, 5)))  # another array of the kind: the same object
    assert r2 is r1 and delta(before) == {"numba_compiles": 1, "nvrtc_compiles": 1, "links": 1}
    cuprims.clear_all_caches()  # memory only: the next build reads the disk
    hits = cuprims.cache_info()["disk_hits"]
    r3 = _reduce(make(FakeDeviceArray(0x2000, 7)))
    assert r3 is not r1 and r3.cubin() == r1.cubin()
    assert delta(before) == {"numba_compiles": 1, "nvrtc_compiles": 1, "links": 1}
    assert cuprims.cache_info()["disk_hits"] > hits


def test_nothing_keeps_the_captured_array_alive(monkeypatch):
    w = FakeDeviceArray(0x1000, 8)
    ref = weakref.ref(w)

    def op(a, b):
        return a + b + w[0]

    reducer = _reduce(op)
    monkeypatch.setattr(Reduce, "_execute", lambda *args, **kwargs: None)
    reducer(temp_storage=None, d_in=FakeDeviceArray(0xA000, 4), d_out=FakeDeviceArray(0xB000, 1), num_items=4,
            op=op, h_init=np.float32(0))
    it = TransformIterator(ProxyArray(np.float32), lambda v: v * w[1])
    _reduce(OpKind.PLUS, d_in=it).cubin()
    del it
    w = FakeDeviceArray(0x2000, 8)  # noqa: F841 - rebinding drops the closure's reference
    gc.collect()
    assert ref() is None
    assert reducer.desc.op.captures  # and the reducer still knows what it captures


# ------------------------------------------------------------------ errors

def test_a_captured_array_of_another_dtype_is_named(monkeypatch):
    w = FakeDeviceArray(0x1000, 8)

    def op(a, b):
        return a + b + w[0]

    reducer = _reduce(op)
    monkeypatch.setattr(Reduce, "_execute", lambda *args, **kwargs: None)
    w = FakeDeviceArray(0x1000, 8, "<f8")
    with pytest.raises(ArgumentError) as info:
        reducer(temp_storage=None, d_in=FakeDeviceArray(0xA000, 4), d_out=FakeDeviceArray(0xB000, 1),
                num_items=4, op=op, h_init=np.float32(0))
    text = str(info.value)
    assert info.value.argument == "op" and "closure variable w" in text and "float32" in text and "float64" in text
    w = FakeDeviceArray(0x1000, (2, 4))
    with pytest.raises(ArgumentError, match="1-d device array"):
        captured_state(op, reducer.desc.op)
    w = FakeDeviceArray(0x1000, (2, 4), strides=(4, 16))
    with pytest.raises(ArgumentError, match="contiguous"):
        captured_state(op, reducer.desc.op)
    w = ProxyArray(np.float32)
    with pytest.raises(ArgumentError):
        captured_state(op, reducer.desc.op)


def test_dtype_change_rebuilds_through_make():
    w = ProxyArray(np.float32)

    def op(a, b):
        return a + b + w[0]

    r1 = _reduce(op)
    w = ProxyArray(np.float64)
    r2 = _reduce(op)
    assert r2 is not r1 and r2.desc.op.captures[0].dtype == np.float64


def test_captured_array_of_structs_is_refused():
    pair = np.dtype([("x", np.float32), ("y", np.float32)])
    w = FakeDeviceArray(0x1000, 4, typestr="|V8")
    w._iface["descr"] = [("x", "<f4"), ("y", "<f4")]
    assert w._iface["descr"] and pair.itemsize == 8
    with pytest.raises(ArgumentError, match="scalar dtype"):
        op_spec(lambda a, b: a + b + w[0].x)
