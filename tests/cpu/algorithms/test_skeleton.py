"""The algorithm skeleton without a GPU: descriptions as cache keys, the objects passed for
builds, the settings object, and the run flow of ``Algorithm._execute`` (temporary
storage, one-shot allocation, the retry on another device) over a fake driver."""

from __future__ import annotations

import types

import numpy as np
import pytest

import cuprims
from cuprims import CountingIterator, OpKind, ProxyArray, ProxyValue, TransformIterator
from cuprims._value_types import value_type
from cuprims.algorithms import scratch
from cuprims.algorithms import skeleton as _skeleton
from cuprims.algorithms.arguments import describe
from cuprims.algorithms.common import Builds
from cuprims.errors import ArgumentError, ArgumentTypeError, CudaError
from cpu_helpers import check_kernel_params


def square(v):
    return v * v


def plus(a, b):
    return a + b


# ------------------------------------------------------------------ descriptions

def test_equal_arguments_give_one_description_and_one_object(shared_cache):
    kw = dict(d_in=TransformIterator(ProxyArray(np.float32), square), d_out=ProxyArray(np.float32), op=plus,
              h_init=ProxyValue(np.float32), compute_capability=90)
    a = cuprims.make_reduce_into(**kw)
    b = cuprims.make_reduce_into(**kw)
    assert a is b and a.desc == b.desc and hash(a.desc) == hash(b.desc)
    other = cuprims.make_reduce_into(**{**kw, "d_in": TransformIterator(ProxyArray(np.float64), square)})
    assert other.desc != a.desc


def test_linked_objects_follow_linked_ops(shared_cache):
    it = TransformIterator(ProxyArray(np.float32), square)
    reducer = cuprims.make_reduce_into(d_in=it, d_out=ProxyArray(np.float32), op=plus, h_init=ProxyValue(np.float32),
                                       compute_capability=90)
    ops = reducer.desc.linked_ops()
    objs = reducer._objects(plus, it, ProxyArray(np.float32))
    assert [o.spec.kind for o in ops] == ["python", "python"]
    assert list(objs) == [plus, square]
    scan = cuprims.make_inclusive_scan(d_in=it, d_out=ProxyArray(np.float32), op=OpKind.PLUS,
                                       compute_capability=90)
    assert list(scan._objects(OpKind.PLUS, it, None)) == [square]
    assert len(scan.desc.linked_ops()) == 1


def test_argument_kinds_carry_the_cpp_alignment():
    for dt in (np.int8, np.float16, np.float32, np.int64, np.complex64, np.complex128):
        kind = describe(ProxyArray(dt), "d_in")
        assert kind.alignment == value_type(dt).alignment
    assert describe(ProxyArray(np.complex64), "d_in").alignment == 8  # C++'s complex<float>, not numpy's 4


def test_iterators_only_where_allowed():
    with pytest.raises(ArgumentTypeError) as info:
        describe(CountingIterator(np.int32(0)), "d_in")
    assert info.value.argument == "d_in"
    with pytest.raises(ArgumentTypeError) as info:
        describe(CountingIterator(np.int32(0)), "d_out", iterators=True, output=True)
    assert info.value.argument == "d_out"


# ------------------------------------------------------------------ kernel parameters against the cubin

def _offset_by(w):
    return lambda v: v + w[0]


def _blend(table):
    return lambda a, b: a * table[0, 1] + b


def _combine(w):
    return lambda a, b: a + b + w[0]


def _key_order(keys):
    return lambda a, b: keys[a] < keys[b]


P, f4, i4 = ProxyArray, np.float32, np.int32
# Descriptions of each algorithm with and without captured arrays (an operator's state is
# a by-value functor parameter of state_size bytes; without state the functor takes 1).
KERNEL_PARAM_CASES = {
    "reduce_builtin": lambda: cuprims.make_reduce_into(d_in=P(f4), d_out=P(f4), op=OpKind.PLUS, h_init=ProxyValue(f4),
                                                       compute_capability=90),
    "reduce_captured": lambda: cuprims.make_reduce_into(d_in=P(f4), d_out=P(f4), op=_combine(P(f4)),
                                                        h_init=ProxyValue(f4), compute_capability=90),
    "inclusive_scan_captured": lambda: cuprims.make_inclusive_scan(d_in=P(i4), d_out=P(i4), op=_combine(P(i4)),
                                                                   compute_capability=90),
    "unary_transform_python": lambda: cuprims.make_unary_transform(d_in=P(f4), d_out=P(f4), op=square,
                                                                   compute_capability=90),
    "unary_transform_captured": lambda: cuprims.make_unary_transform(d_in=P(f4), d_out=P(f4), op=_offset_by(P(f4)),
                                                                     compute_capability=90),
    "unary_transform_captured_iterator": lambda: cuprims.make_unary_transform(
        d_in=CountingIterator(np.int64(0)), d_out=P(f4), op=_offset_by(P(f4)), compute_capability=90),
    "binary_transform_builtin": lambda: cuprims.make_binary_transform(d_in1=P(f4), d_in2=P(i4), d_out=P(np.float64),
                                                                      op=OpKind.PLUS, compute_capability=90),
    "binary_transform_captured_2d": lambda: cuprims.make_binary_transform(
        d_in1=P(f4), d_in2=P(i4), d_out=P(np.float64), op=_blend(P(np.float64, ndim=2)), compute_capability=90),
    "lower_bound_builtin": lambda: cuprims.make_lower_bound(d_data=P(i4), d_values=P(i4), d_out=P(np.int64),
                                                            compute_capability=90),
    "lower_bound_captured": lambda: cuprims.make_lower_bound(d_data=P(i4), d_values=P(i4), d_out=P(np.int64),
                                                             comp=_key_order(P(i4)), compute_capability=90),
    "upper_bound_captured_iterator": lambda: cuprims.make_upper_bound(
        d_data=P(i4), d_values=CountingIterator(i4(0)), d_out=P(np.uint32), comp=_key_order(P(i4)),
        compute_capability=90),
}


@pytest.mark.ci_sample(every=2)
@pytest.mark.parametrize("case", sorted(KERNEL_PARAM_CASES))
def test_kernel_params_match_the_cubin(shared_cache, case):
    obj = KERNEL_PARAM_CASES[case]()
    check_kernel_params(obj, 90)
    spec = obj.desc.operator
    assert bool(spec.captures) == ("captured" in case)
    if spec.captures:
        assert spec.state_size and _skeleton.functor_size(spec) == spec.state_size


# ------------------------------------------------------------------ settings

def test_settings_are_typed_environment_backed_and_restorable(monkeypatch):
    s = cuprims.settings
    monkeypatch.setenv("CUPRIMS_PDL", "0")
    assert s.pdl is False
    monkeypatch.delenv("CUPRIMS_PDL")
    assert s.pdl is True
    version = s.version
    with s.override(pdl=False, memory_cache=7):
        assert s.pdl is False and s.memory_cache == 7
        assert s.version > version
    assert s.pdl is True and s.memory_cache == 256
    s.disk_cache = False
    try:
        assert cuprims.cache_info()["disk_enabled"] is False
    finally:
        del s.disk_cache
    assert s.disk_cache is True
    with pytest.raises(ArgumentTypeError):
        s.pdl = "yes"
    with pytest.raises(ArgumentError):
        s.memory_cache = 0
    with pytest.raises(ArgumentError):
        with s.override(no_such_setting=1):
            pass


# ------------------------------------------------------------------ the run flow over a fake driver

@_skeleton.description
class _FakeDescription(_skeleton.Description):
    tag: str

    def source(self, arch):
        raise AssertionError("not compiled in this test")

    def kernel_params(self):
        return (("ptr",),)


class _FakePlan(_skeleton.Plan):
    def __init__(self, bytes_needed):
        self.bytes_needed = bytes_needed
        self.temp_align = 16


class _FakeAlgorithm(_skeleton.Algorithm):
    needs = {0: 100, 1: 100}  # temporary bytes per device
    log: list = []

    def _make_plan(self, loaded, variant):
        return _FakePlan(self.needs[loaded.device])

    def _temp_bytes(self, plan, args):
        return plan.bytes_needed

    def _dispatch(self, plan, args, temp, stream):
        if plan.device != _FakeDriver.current:
            raise CudaError("cuLaunchKernel", "CUDA_ERROR_INVALID_HANDLE")
        self.log.append((plan.device, temp, stream))


class _FakeDriver:
    current = 0
    allocs: list = []
    frees: list = []


@pytest.fixture
def fake_driver(monkeypatch):
    _FakeDriver.current = 0
    _FakeDriver.allocs, _FakeDriver.frees = [], []
    _FakeAlgorithm.log = []
    monkeypatch.setattr(Builds, "build_for", lambda self, archs, objs: None)
    loaded = _FakeDriver.loaded = {}
    monkeypatch.setattr(Builds, "loaded", lambda self, device, objs: loaded.setdefault(
        device, types.SimpleNamespace(device=device, extra={})))
    monkeypatch.setattr(_skeleton.driver, "current_device", lambda: _FakeDriver.current)

    def alloc(n, s, device=-1):
        _FakeDriver.allocs.append(n)
        return 4096 * len(_FakeDriver.allocs)

    monkeypatch.setattr(_skeleton.driver, "alloc_async", alloc)
    monkeypatch.setattr(_skeleton.driver, "free_async", lambda p, s: _FakeDriver.frees.append(p))
    monkeypatch.setattr(_skeleton, "temp_storage_info", lambda t, needed: (t[0], t[1]) if t[1] >= needed else
                        (_ for _ in ()).throw(ArgumentError("temp_storage", f"at least {needed} bytes", t[1])))
    return _FakeDriver


def test_query_one_shot_and_caller_storage(fake_driver):
    algo = _FakeAlgorithm(_FakeDescription("a"), [90], ())
    assert algo._execute(None, None, False, (), ()) == 100          # the query launches nothing
    assert _FakeAlgorithm.log == [] and fake_driver.allocs == []
    algo._execute(None, 5, True, (), ())                            # one-shot: allocated and freed on the stream
    assert fake_driver.allocs == [100] and fake_driver.frees == [4096] and _FakeAlgorithm.log == [(0, 4096, 5)]
    algo._execute((1 << 20, 128), None, False, (), ())              # the caller's storage
    assert _FakeAlgorithm.log[-1] == (0, 1 << 20, 0)
    with pytest.raises(ArgumentError) as info:
        algo._execute((1 << 20, 64), None, False, (), ())           # too small
    assert info.value.argument == "temp_storage"
    with pytest.raises(ArgumentError):
        algo._execute(((1 << 20) + 8, 128), None, False, (), ())    # misaligned for the plan
    assert fake_driver.allocs == [100]


def test_retry_on_another_device(fake_driver):
    algo = _FakeAlgorithm(_FakeDescription("b"), [90], ())
    algo._execute(None, 5, True, (), ())
    fake_driver.current = 1
    algo._execute(None, 5, True, (), ())                            # first launch fails, the retry uses device 1
    assert [d for d, _, _ in _FakeAlgorithm.log] == [0, 1]
    assert len(fake_driver.allocs) == len(fake_driver.frees) == 2
    _FakeAlgorithm.needs = {0: 100, 1: 1000}
    try:
        fake_driver.current = 0
        algo._execute((1 << 20, 100), None, False, (), ())          # sized for device 0
        fake_driver.current = 1
        for loaded in fake_driver.loaded.values():
            loaded.extra.clear()                                    # plans made afresh with the new needs
        algo._device_plan(0, ())                                    # the last plan is device 0's again
        with pytest.raises(ArgumentError) as info:                  # device 1 needs more: a stale size
            algo._execute((1 << 20, 100), None, False, (), ())
        assert info.value.argument == "temp_storage"
        algo._device_plan(0, ())
        algo._execute(None, 5, True, (), ())                        # one-shot re-allocates instead
        assert fake_driver.allocs[-2:] == [100, 1000] and len(fake_driver.frees) == len(fake_driver.allocs)
    finally:
        _FakeAlgorithm.needs = {0: 100, 1: 100}


def test_one_shots_on_the_legacy_stream_share_a_buffer_per_device(fake_driver, monkeypatch):
    algo = _FakeAlgorithm(_FakeDescription("s"), [90], ())
    first = scratch._FIRST_BYTES
    algo._execute(None, None, True, (), ())
    algo._execute(None, None, True, (), ())
    assert fake_driver.allocs == [first] and fake_driver.frees == []             # allocated once, kept
    assert [t for _, t, _ in _FakeAlgorithm.log] == [4096, 4096] and not scratch.lock.locked()

    def needing(needs):
        _FakeAlgorithm.needs = needs
        for loaded in fake_driver.loaded.values():
            loaded.extra.clear()                                                 # plans made afresh
        algo._plans.clear()
        algo._device_plans.clear()

    try:
        needing({0: first + 1, 1: 100})
        algo._execute(None, None, True, (), ())        # a larger need: a larger buffer, the old one freed
        assert fake_driver.allocs == [first, 2 * first] and fake_driver.frees == [4096]
        assert _FakeAlgorithm.log[-1] == (0, 8192, 0)
        fake_driver.current = 1
        algo._execute(None, None, True, (), ())        # another device: its own buffer
        assert _FakeAlgorithm.log[-1] == (1, 12288, 0) and fake_driver.allocs[-1] == first
        needing({0: scratch.MAX_BYTES + 1, 1: 100})
        fake_driver.current = 0
        algo._execute(None, None, True, (), ())        # past the cap: allocated and freed per call
        assert fake_driver.allocs[-1] == scratch.MAX_BYTES + 1 and fake_driver.frees[-1] == _FakeAlgorithm.log[-1][1]
        needing({0: 100, 1: 100})
        monkeypatch.setattr(_FakeAlgorithm, "_dispatch", lambda *a: (_ for _ in ()).throw(CudaError("x", "y")))
        with pytest.raises(CudaError):
            algo._execute(None, None, True, (), ())    # a failed launch leaves the buffer to the next call
        assert not scratch.lock.locked()
    finally:
        _FakeAlgorithm.needs = {0: 100, 1: 100}
    scratch.release()
    assert sorted(fake_driver.frees[-2:]) == [8192, 12288] and scratch._buffers == {}


def test_a_one_shot_inside_another_ones_launches_allocates_its_own_storage(fake_driver, monkeypatch):
    outer = _FakeAlgorithm(_FakeDescription("outer"), [90], ())
    inner = _FakeAlgorithm(_FakeDescription("inner"), [90], ())
    real = _FakeAlgorithm._dispatch
    seen = []

    def dispatch(self, plan, args, temp, stream):
        real(self, plan, args, temp, stream)
        seen.append((self.desc.tag, temp))
        if self is outer:   # the outer call holds the shared buffer: the inner one must not wait for it
            inner._execute(None, None, True, (), ())

    monkeypatch.setattr(_FakeAlgorithm, "_dispatch", dispatch)
    outer._execute(None, None, True, (), ())
    (_, shared), (_, own) = seen
    assert own != shared and fake_driver.allocs == [scratch._FIRST_BYTES, 100] and fake_driver.frees == [own]
    assert not scratch.lock.locked() and scratch.holder is None
    scratch.release()


def test_objects_are_computed_only_for_a_build(fake_driver, monkeypatch):
    calls = []
    real = _FakeAlgorithm._objects
    monkeypatch.setattr(_FakeAlgorithm, "_objects", lambda self, *raw: calls.append(raw) or real(self, *raw))
    algo = _FakeAlgorithm(_FakeDescription("c"), [90], (plus,))
    algo._execute(None, None, True, (), (plus,))
    algo._execute(None, None, True, (), (plus,))
    assert calls == [(plus,), (plus,)]  # the build, then the first plan; the second call had its plan


def _tripled(i):
    return i * 3


def _quadrupled(i):
    return i * 4


def test_an_iterator_whose_python_operator_differs_is_refused_and_the_error_says_why():
    from cuprims import CountingIterator, TransformIterator
    from cuprims.errors import ArgumentError

    built = describe(TransformIterator(CountingIterator(np.int64(0)), _tripled), "d_in", iterators=True)
    same = TransformIterator(CountingIterator(np.int64(7)), _tripled)
    assert len(built.bind(same, 10)) == built.state_size          # the same operator: accepted
    other = TransformIterator(CountingIterator(np.int64(0)), _quadrupled)
    with pytest.raises(ArgumentError, match="argument 'd_in'.*differs between Python versions"):
        built.bind(other, 10)
    with pytest.raises(ArgumentError, match="argument 'd_in'") as caught:   # another kind: no such hint
        built.bind(CountingIterator(np.int64(0)), 10)
    assert "Python versions" not in str(caught.value)
