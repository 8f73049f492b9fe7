"""The memo of an algorithm object's last call (skeleton.Algorithm._recall/_remember):
a call with the very same CuPy arrays and counts reuses the bound pointers without reading
the arrays; anything else is read and checked as before. Real ahead-of-time builds run
over the fake driver of test_multi_device (launches are recorded with their parameters)."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import numpy as np
import pytest

import cuprims
from cuprims import OpKind, ProxyArray, ProxyValue, RawOp, SortOrder
from cuprims._runtime import devices as _devices, driver
from cuprims.algorithms.merge_sort import api as ms
from cuprims.errors import ArgumentError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from cpu_helpers import FakeArray, _FakeCupyBase, fake_cupy_array, stub_ltoir  # noqa: E402
from test_multi_device import FakeDevices  # noqa: E402

f4 = np.float32
N = 1000  # one tile: one launch, no temporary storage


@pytest.fixture
def fake(monkeypatch):
    dev = FakeDevices(monkeypatch)
    dev.calls = []

    def launch(kernel, grid, block, stream, params, shared=0):
        dev.calls.append((kernel, grid, block, stream, params))

    monkeypatch.setattr(driver, "launch", launch)
    monkeypatch.setattr(driver, "launch_pdl", lambda kernel, grid, block, stream, params: launch(
        kernel, grid, block, stream, params) or True)
    _devices.reset(False)  # one device: the memo is on
    _TEMP[:] = [fake_cupy_array(dev.mem, np.zeros(16, np.uint8))]
    yield dev
    _TEMP.clear()
    _devices.reset(None)


def _reducer():
    return cuprims.make_reduce_into(d_in=ProxyArray(f4), d_out=ProxyArray(f4), op=OpKind.PLUS,
                                    h_init=ProxyValue(f4), compute_capability=90)


def _arrays(fake, n=N):
    return fake_cupy_array(fake.mem, np.ones(n, f4)), fake_cupy_array(fake.mem, np.zeros(1, f4))


def _reads() -> int:
    return _FakeCupyBase.reads


_TEMP: list = []  # the fixture's temporary storage (a one-tile reduction needs none, and reads none)
_QUERY = object()


def _call(r, x, out, *, n=N, h_init=None, stream=None, temp=None):
    h_init = np.zeros(1, f4) if h_init is None else h_init
    temp = None if temp is _QUERY else _TEMP[0] if temp is None else temp
    return r(temp_storage=temp, d_in=x, d_out=out, num_items=n, h_init=h_init, op=OpKind.PLUS, stream=stream)


def _ptr(a) -> int:
    return a._data.ptr


def test_a_repeated_call_reads_no_array(fake):
    r, (x, out) = _reducer(), _arrays(fake)
    temp = fake_cupy_array(fake.mem, np.zeros(16, np.uint8))
    _call(r, x, out, temp=temp)
    before = _reads()
    for _ in range(3):
        _call(r, x, out, temp=temp)
    assert _reads() == before  # neither the arrays nor the temporary storage were read again
    params = fake.calls[-1][4]
    assert params[0] == _ptr(x) and params[1] == _ptr(out) and params[3] == N
    assert len(fake.calls) == 4


def test_another_array_object_is_read_and_used(fake):
    r, (x, out) = _reducer(), _arrays(fake)
    _call(r, x, out, temp=fake_cupy_array(fake.mem, np.zeros(16, np.uint8)))
    y = x.view(0, N)  # the same memory, another object: read again
    z = fake_cupy_array(fake.mem, np.ones(N, f4))
    before = _reads()
    _call(r, y, out, temp=fake_cupy_array(fake.mem, np.zeros(16, np.uint8)))
    assert _reads() > before
    _call(r, z, out, temp=fake_cupy_array(fake.mem, np.zeros(16, np.uint8)))
    assert fake.calls[-1][4][0] == _ptr(z)


def test_another_count_is_checked_again(fake):
    r, (x, out) = _reducer(), _arrays(fake)
    _call(r, x, out)
    before = _reads()
    _call(r, x, out, n=N // 2)
    assert _reads() > before and fake.calls[-1][4][3] == N // 2
    with pytest.raises(ArgumentError) as info:
        _call(r, x, out, n=N + 1)  # longer than the array: refused, as without a memo
    assert info.value.argument == "d_in"
    for bad in (True, float(N // 2)):
        with pytest.raises(ArgumentError):
            _call(r, x, out, n=bad)  # equal to a remembered count, but no count


def test_another_stream_is_used(fake):
    r, (x, out) = _reducer(), _arrays(fake)
    _call(r, x, out, stream=None)
    _call(r, x, out, stream=None)
    _call(r, x, out, stream=7)
    assert [c[3] for c in fake.calls] == [0, 0, 7]


def test_a_changed_host_init_value_is_used(fake):
    r, (x, out) = _reducer(), _arrays(fake)
    h = np.zeros(1, f4)
    _call(r, x, out, h_init=h)
    h[0] = 5
    _call(r, x, out, h_init=h)
    assert fake.calls[-1][4][5] == np.float32(5).tobytes()


def test_a_dead_array_and_a_new_one_at_its_address_are_told_apart(fake):
    r = _reducer()
    out = fake_cupy_array(fake.mem, np.zeros(1, f4))
    x = fake_cupy_array(fake.mem, np.ones(N, f4))
    _call(r, x, out)
    old_id, old_ptr = id(x), _ptr(x)
    del x
    gc.collect()
    for _ in range(50):  # CPython usually hands the freed object's memory to the next one of its size
        y = fake_cupy_array(fake.mem, np.ones(N, f4))
        if id(y) == old_id:
            break
    assert _ptr(y) != old_ptr
    before = _reads()
    _call(r, y, out)
    assert _reads() > before and fake.calls[-1][4][0] == _ptr(y)
    assert r._last[0][0]() is y


class _TorchLike:
    """A torch tensor as cuprims reads one, whose storage can change in place (``set_``)."""

    __module__ = "torch"

    def __init__(self, ptr, n):
        self.ptr, self.n, self.is_cuda, self.dtype = ptr, n, True, "torch.float32"

    def data_ptr(self):
        return self.ptr

    def is_contiguous(self):
        return True

    def numel(self):
        return self.n


def test_producers_whose_pointer_can_change_are_read_every_call(fake):
    r = _reducer()
    out = fake_cupy_array(fake.mem, np.zeros(1, f4))
    cai = FakeArray(fake.mem, np.ones(N, f4))
    torch_like = _TorchLike(fake.mem.alloc(4 * N), N)
    for x in (cai, torch_like):
        _call(r, x, out)
        x.ptr = fake.mem.alloc(4 * N)  # the same object, new storage
        _call(r, x, out)
        assert fake.calls[-1][4][0] == x.ptr
        assert r._last is None or r._last[0][0]() is not x


def test_a_stateful_operator_state_is_read_every_call(fake):
    op = RawOp(ltoir=stub_ltoir("my_cmp", 4), name="my_cmp", state=b"\1\2\3\4\5", state_alignment=4)
    obj = ms.MergeSort(ms._describe(ProxyArray(np.int32), None, ProxyArray(np.int32), None, op), 90, (op,))
    keys = fake_cupy_array(fake.mem, np.arange(30, dtype=np.int32))
    out = fake_cupy_array(fake.mem, np.zeros(30, np.int32))
    temp = fake_cupy_array(fake.mem, np.zeros(4096, np.uint8))
    op2 = RawOp(ltoir=stub_ltoir("my_cmp", 4), name="my_cmp", state=b"\x09\x09\x09\x09\x09", state_alignment=4)
    for o, state in ((op, b"\1\2\3\4\5\0\0\0"), (op, b"\1\2\3\4\5\0\0\0"), (op2, b"\x09" * 5 + b"\0\0\0")):
        obj(temp_storage=temp, d_in_keys=keys, d_in_values=None, d_out_keys=out, d_out_values=None, num_items=30,
            op=o)
        assert fake.calls[-1][4][8] == state
    assert obj._last is not None  # the arrays were remembered; the state was not


def test_a_failed_call_is_not_remembered(fake):
    r, (x, out) = _reducer(), _arrays(fake, 100_000)  # two launches, temporary storage
    small = fake_cupy_array(fake.mem, np.zeros(1, np.uint8))
    with pytest.raises(ArgumentError):
        _call(r, x, out, n=100_000, temp=small)
    assert r._last is None and r._last_temp is None
    with pytest.raises(ArgumentError):
        _call(r, x, out, n=100_000, h_init=np.zeros(1, np.complex64))
    assert r._last is None
    needed = _call(r, x, out, n=100_000, temp=_QUERY)  # the size query works, and is remembered
    assert needed > 1 and r._last is not None
    temp = fake_cupy_array(fake.mem, np.zeros(needed, np.uint8))
    _call(r, x, out, n=100_000, temp=temp)
    with pytest.raises(ArgumentError) as info:
        _call(r, x, out, n=100_000, temp=small)  # a remembered buffer too small for another call
    assert info.value.argument == "temp_storage"


def test_a_remembered_temp_storage_is_checked_against_each_call(fake):
    r, (x, out) = _reducer(), _arrays(fake, 100_000)
    needed = _call(r, x, out, n=100_000, temp=_QUERY)
    temp = fake_cupy_array(fake.mem, np.zeros(needed, np.uint8))
    _call(r, x, out, n=50_000, temp=temp)
    big = fake_cupy_array(fake.mem, np.ones(10_000_000, f4))
    with pytest.raises(ArgumentError) as info:
        _call(r, big, out, n=10_000_000, temp=temp)  # needs more than the remembered buffer holds
    assert info.value.argument == "temp_storage"


def test_several_devices_remember_nothing(fake):
    _devices.reset(True)
    r, (x, out) = _reducer(), _arrays(fake)
    _call(r, x, out)
    before = _reads()
    _call(r, x, out)
    assert _reads() > before and r._last is None


def test_every_algorithm_remembers_cupy_arrays(fake, monkeypatch):
    from cuprims.algorithms.histogram import plan as histogram_plan

    scratch = fake.mem.alloc(8)
    monkeypatch.setattr(histogram_plan, "queue_scratch", lambda device: scratch)
    arr = lambda host: fake_cupy_array(fake.mem, host)  # noqa: E731
    i4, u4, P = np.int32, np.uint32, ProxyArray
    i, io, u, uo = arr(np.arange(64, dtype=i4)), arr(np.zeros(64, i4)), arr(np.arange(64, dtype=u4)), \
        arr(np.zeros(64, u4))
    offsets = arr(np.arange(0, 65, 8, dtype=np.int64))
    fo, count, hist = arr(np.zeros(8, f4)), arr(np.zeros(1, np.int64)), arr(np.zeros(4, i4))
    negate = lambda v: -v  # noqa: E731
    even = lambda v: v % 2 == 0  # noqa: E731
    cases = [
        (cuprims.make_exclusive_scan(d_in=P(i4), d_out=P(i4), op=OpKind.PLUS, init_value=ProxyValue(i4),
                                     compute_capability=90),
         dict(d_in=i, d_out=io, op=OpKind.PLUS, init_value=np.zeros(1, i4), num_items=64)),
        (cuprims.make_radix_sort(d_in_keys=P(u4), d_out_keys=P(u4), d_in_values=None, d_out_values=None,
                                 order=SortOrder.ASCENDING, compute_capability=90),
         dict(d_in_keys=u, d_out_keys=uo, d_in_values=None, d_out_values=None, num_items=64)),
        (cuprims.make_merge_sort(d_in_keys=P(i4), d_out_keys=P(i4), op=OpKind.LESS, compute_capability=90),
         dict(d_in_keys=i, d_in_values=None, d_out_keys=io, d_out_values=None, num_items=64, op=OpKind.LESS)),
        (cuprims.make_select(d_in=P(i4), d_out=P(i4), d_num_selected_out=P(np.int64), cond=even,
                             compute_capability=90),
         dict(d_in=i, d_out=io, d_num_selected_out=count, cond=even, num_items=64)),
        (cuprims.make_histogram_even(d_samples=P(i4), d_histogram=P(i4), h_num_output_levels=np.array([5], i4),
                                     h_lower_level=np.array([0], i4), h_upper_level=np.array([64], i4),
                                     num_samples=64, compute_capability=90),
         dict(d_samples=i, d_histogram=hist, h_num_output_levels=np.array([5], i4),
              h_lower_level=np.array([0], i4), h_upper_level=np.array([64], i4), num_samples=64)),
        (cuprims.make_segmented_reduce(d_in=P(f4), d_out=P(f4), start_offsets_in=P(np.int64),
                                       end_offsets_in=P(np.int64), op=OpKind.PLUS, h_init=ProxyValue(f4),
                                       compute_capability=90),
         dict(d_in=arr(np.ones(64, f4)), d_out=fo, num_segments=8, start_offsets_in=offsets.view(0, 8),
              end_offsets_in=offsets.view(1, 8), op=OpKind.PLUS, h_init=np.zeros(1, f4))),
    ]
    for obj, kw in cases:
        temp = arr(np.zeros(max(1, obj(temp_storage=None, **kw)), np.uint8))
        obj(temp_storage=temp, **kw)
        first = fake.calls[-1][4]
        before = _reads()
        obj(temp_storage=temp, **kw)
        assert _reads() == before, type(obj).__name__
        assert fake.calls[-1][4] == first, type(obj).__name__
    t = cuprims.make_unary_transform(d_in=P(f4), d_out=P(f4), op=negate, compute_capability=90)
    src, dst = arr(np.ones(64, f4)), arr(np.zeros(64, f4))
    t(d_in=src, d_out=dst, op=negate, num_items=64)
    before = _reads()
    t(d_in=src, d_out=dst, op=negate, num_items=64)
    assert _reads() == before
