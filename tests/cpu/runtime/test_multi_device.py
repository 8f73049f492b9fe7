"""Several devices without a GPU: per-device loading and plans, the device checks of array
and stream arguments, and the one-device gate that keeps them off the per-call path.

A real (ahead-of-time) reduction build runs over a fake driver: a device is an ordinal
the fake ``current_device`` returns (per thread), a loaded module is a set of fresh
kernel handles, a launch records the handle and the device current at the time, and
the device of an array or stream is whatever the test claims for it.
"""

from __future__ import annotations

import itertools
import threading
import traceback

import numpy as np
import pytest

import cuprims
from cuprims import OpKind, ProxyArray, ProxyValue
from cuprims._runtime import arrays as _arrays, devices as _devices, streams as _streams
from cuprims._runtime import device_queries, driver, libcuda
from cuprims.errors import ArgumentError, DeviceMismatchError
from cpu_helpers import FakeArray, FakeMemory, FakePack, counters, delta

f4 = np.float32
COMPILES = ("numba_compiles", "nvrtc_compiles", "links")
N = 100_000  # more than one tile: two launches and temporary storage
_REAL_CHECK_STREAM = _devices.check_stream


class FakeModule:
    """What driver.Module gives, without a driver: fresh kernel handles per load."""

    _handles = itertools.count(1 << 20)

    def __init__(self, cubin, lowered, device=-1):
        self.device = device
        self.kernels = {expr: next(FakeModule._handles) for expr in lowered}

    def max_active_blocks(self, expr, block, dynamic_smem=0):
        return 2


class FakeDevices:
    """A fake driver with several devices of one capability (sm_90)."""

    def __init__(self, monkeypatch):
        self.tls = threading.local()
        self.owner: dict[int, int] = {}     # kernel handle -> the device its module was loaded for
        self.launches: list[tuple[int, int]] = []   # (handle, device current at launch)
        self.allocs: list[tuple[int, int]] = []     # (bytes, pool device)
        self.array_claims: dict[int, int] = {}      # pointer -> device (default: the current one)
        self.stream_claims: dict[int, int] = {}     # handle -> device (default: the current one)
        self.current_calls = 0
        self.mem = FakeMemory()
        fake = self

        class RecordingModule(FakeModule):
            def __init__(self, cubin, lowered, device=-1):
                super().__init__(cubin, lowered, device)
                for handle in self.kernels.values():
                    fake.owner[handle] = device

        monkeypatch.setattr(driver, "Module", RecordingModule)
        monkeypatch.setattr(driver, "ParamPack", FakePack)
        monkeypatch.setattr(driver, "current_device", self.current_device)
        monkeypatch.setattr(driver, "compute_capability", lambda device: (9, 0))
        monkeypatch.setattr(driver, "sm_count", lambda device: 4)
        monkeypatch.setattr(driver, "launch", self.launch)
        monkeypatch.setattr(driver, "alloc_async", self.alloc_async)
        monkeypatch.setattr(driver, "free_async", lambda ptr, stream: self.mem.free(ptr))
        monkeypatch.setattr(driver, "pointer_device", lambda ptr: self.array_claims.get(ptr, self.current_device()))
        monkeypatch.setattr(driver, "stream_device", lambda h: self.stream_claims.get(h, self.current_device()))

    @property
    def device(self) -> int:
        return getattr(self.tls, "device", 0)

    @device.setter
    def device(self, value: int) -> None:
        self.tls.device = value

    def current_device(self) -> int:
        self.current_calls += 1
        return self.device

    def launch(self, kernel, grid, block, stream, params, shared=0):
        self.launches.append((kernel, self.device))

    def alloc_async(self, nbytes, stream, device=-1):
        self.allocs.append((nbytes, device))
        return self.mem.alloc(nbytes)


@pytest.fixture
def fake_devices(monkeypatch):
    fake = FakeDevices(monkeypatch)
    yield fake
    _devices.reset(None)


@pytest.fixture
def several(fake_devices):
    """Two devices seen: the checks and per-device plans are on."""
    _devices.reset(True)
    return fake_devices


def _reducer():
    return cuprims.make_reduce_into(d_in=ProxyArray(f4), d_out=ProxyArray(f4), op=OpKind.PLUS,
                                    h_init=ProxyValue(f4), compute_capability=90)


def _run(obj, fake, *, stream=None, x=None, out=None, temp=None):
    x = FakeArray(fake.mem, np.ones(N, f4)) if x is None else x
    out = FakeArray.empty(fake.mem, 1, f4) if out is None else out
    if temp is None:
        temp = FakeArray.empty(fake.mem, obj(temp_storage=None, d_in=x, d_out=out, num_items=N, h_init=f4(0)),
                               np.uint8)
    obj(temp_storage=temp, d_in=x, d_out=out, num_items=N, h_init=f4(0), stream=stream)
    return x, out


def _wrong_launches(fake):
    return [(k, d, fake.owner.get(k)) for k, d in fake.launches if fake.owner.get(k) != d]


# ------------------------------------------------------------------ per-device loading

def test_each_device_loads_its_own_copy_of_one_build(shared_cache, fake_devices):
    obj = _reducer()
    before = counters()
    loads = cuprims.cache_info()["module_loads"]
    first, second = obj._builds.loaded(0), obj._builds.loaded(1)
    assert first is not second and (first.device, second.device) == (0, 1)
    assert (first.module.device, second.module.device) == (0, 1)
    assert set(first.handles).isdisjoint(second.handles)
    assert obj._builds.loaded(1) is second and sorted(obj._builds._by_device) == [0, 1]
    assert delta(before, COMPILES) == dict.fromkeys(COMPILES, 0)        # loaded from the payload
    assert cuprims.cache_info()["module_loads"] == loads + 2

    # another thread's object of the same description shares the build, so its loads too
    other = []
    thread = threading.Thread(target=lambda: other.append(_reducer()))
    thread.start()
    thread.join()
    assert other[0] is not obj and other[0]._builds.result(90) is obj._builds.result(90)
    assert other[0]._builds.loaded(1) is second
    assert cuprims.cache_info()["module_loads"] == loads + 2
    assert delta(before, COMPILES) == dict.fromkeys(COMPILES, 0)


def test_calls_on_two_devices_use_each_devices_plan_and_handles(shared_cache, several):
    fake = several
    obj = _reducer()
    _run(obj, fake)
    before = counters()
    fake.device = 1
    _run(obj, fake)
    fake.device = 0
    _run(obj, fake)
    assert delta(before, COMPILES) == dict.fromkeys(COMPILES, 0)
    assert _wrong_launches(fake) == [] and {d for _, d in fake.launches} == {0, 1}
    assert len(fake.launches) == 6                                   # two passes per call, no failed launch
    assert [d for _, d in fake.allocs] == []                         # the caller's storage: nothing allocated
    plans = obj._device_plans
    assert sorted(plans) == [(0, 0), (1, 0)] and plans[(0, 0)] is not plans[(1, 0)]
    assert (plans[(0, 0)].device, plans[(1, 0)].device) == (0, 1)
    assert obj._fast_plans == {}                                     # never read a last-used plan
    assert plans[(1, 0)].first != plans[(0, 0)].first


def test_one_shot_allocates_from_the_current_devices_pool(shared_cache, several):
    fake = several
    for device in (0, 1, 0):
        fake.device = device
        x, out = FakeArray(fake.mem, np.ones(N, f4)), FakeArray.empty(fake.mem, 1, f4)
        cuprims.reduce_into(d_in=x, d_out=out, num_items=N, op=OpKind.PLUS, h_init=f4(0))
    assert [d for _, d in fake.allocs] == [0, 1]   # each device's own shared buffer, taken again on device 0
    assert _wrong_launches(fake) == [] and len(fake.launches) == 6


def test_threads_on_two_devices_never_launch_another_devices_handles(shared_cache, several):
    fake = several
    obj = _reducer()
    errors, barrier = [], threading.Barrier(4)

    def worker(device):
        try:
            fake.device = device
            barrier.wait()
            for _ in range(30):
                _run(obj, fake)
                x, out = FakeArray(fake.mem, np.ones(N, f4)), FakeArray.empty(fake.mem, 1, f4)
                cuprims.reduce_into(d_in=x, d_out=out, num_items=N, op=OpKind.PLUS, h_init=f4(0))
        except Exception:   # noqa: BLE001 - reported below, with where it was raised
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=worker, args=(d,)) for d in (0, 1, 0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [], "\n".join(errors)
    assert _wrong_launches(fake) == [] and len(fake.launches) == 4 * 30 * 4
    assert sorted(obj._builds._by_device) == [0, 1]


# ------------------------------------------------------------------ the device checks

def test_an_array_of_another_device_is_refused_before_any_launch(shared_cache, several):
    fake = several
    obj = _reducer()
    x, out = _run(obj, fake)
    fake.launches.clear()
    fake.array_claims[x.ptr] = 1
    with pytest.raises(DeviceMismatchError) as info:
        _run(obj, fake, x=x, out=out, temp=FakeArray.empty(fake.mem, 1 << 16, np.uint8))
    err = info.value
    assert (err.argument, err.current_device, err.device, err.what) == ("d_in", 0, 1, "array")
    assert isinstance(err, ArgumentError) and isinstance(err, ValueError)
    text = str(err)
    assert "'d_in'" in text and "device 1" in text and "current device is 0" in text
    with pytest.raises(DeviceMismatchError) as info:                 # the one-shot call, the size query
        cuprims.reduce_into(d_in=x, d_out=out, num_items=N, op=OpKind.PLUS, h_init=f4(0))
    assert info.value.argument == "d_in"
    with pytest.raises(DeviceMismatchError):
        obj(temp_storage=None, d_in=x, d_out=out, num_items=N, h_init=f4(0))
    del fake.array_claims[x.ptr]
    fake.array_claims[out.ptr] = 3
    with pytest.raises(DeviceMismatchError) as info:
        cuprims.reduce_into(d_in=x, d_out=out, num_items=N, op=OpKind.PLUS, h_init=f4(0))
    assert (info.value.argument, info.value.device) == ("d_out", 3)
    del fake.array_claims[out.ptr]
    temp = FakeArray.empty(fake.mem, 1 << 16, np.uint8)
    fake.array_claims[temp.ptr] = 1
    with pytest.raises(DeviceMismatchError) as info:
        _run(obj, fake, x=x, out=out, temp=temp)
    assert info.value.argument == "temp_storage"
    assert fake.launches == []
    # memory every device reaches (managed, host) is never refused
    fake.array_claims[x.ptr] = fake.array_claims[temp.ptr] = driver.SHARED_MEMORY
    _run(obj, fake, x=x, out=out, temp=temp)
    assert len(fake.launches) == 2


class _ProtocolStream:
    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def test_a_stream_of_another_device_is_refused(shared_cache, several):
    fake = several
    obj = _reducer()
    x, out = _run(obj, fake)
    fake.launches.clear()
    fake.stream_claims[0xBEEF] = 1
    for stream in (0xBEEF, _ProtocolStream(0xBEEF)):
        with pytest.raises(DeviceMismatchError) as info:
            _run(obj, fake, x=x, out=out, stream=stream)
        assert (info.value.argument, info.value.current_device, info.value.device, info.value.what) == \
            ("stream", 0, 1, "stream")
        assert "the stream is on device 1" in str(info.value)
        with pytest.raises(DeviceMismatchError):
            cuprims.reduce_into(d_in=x, d_out=out, num_items=N, op=OpKind.PLUS, h_init=f4(0), stream=stream)
    assert fake.launches == [] and fake.allocs == []
    # the default streams belong to the current device, whatever the driver is asked
    for handle in (0, 1, 2):
        fake.stream_claims[handle] = 5
        _run(obj, fake, x=x, out=out, stream=handle)
    fake.stream_claims[0xF00D] = 0
    _run(obj, fake, x=x, out=out, stream=_ProtocolStream(0xF00D))
    assert len(fake.launches) == 8
    fake.device = 1                                                  # now the stream's device is current
    _run(obj, fake, stream=0xBEEF)
    assert _wrong_launches(fake) == []


def test_build_time_reads_take_arrays_of_any_device(shared_cache, several):
    fake = several

    class NoDtype(FakeArray):   # a CUDA Array Interface array without a numpy dtype attribute
        dtype = None

    x = FakeArray(fake.mem, np.ones(10, f4))
    bare = NoDtype(fake.mem, np.ones(10, f4))
    fake.array_claims[x.ptr] = fake.array_claims[bare.ptr] = 1
    assert _arrays.array_dtype(bare, "d_in") == np.dtype(f4)         # describing launches nothing
    with pytest.raises(DeviceMismatchError):
        _arrays.array_info(x, "d_in")


# ------------------------------------------------------------------ the one-device gate

def test_with_one_device_nothing_is_checked_and_calls_skip_the_device_lookup(shared_cache, fake_devices,
                                                                           monkeypatch):
    fake = fake_devices
    monkeypatch.setattr(driver, "device_count", lambda: 1)
    _devices.reset(None)

    def never(*args):
        raise AssertionError("a device check ran with one device")

    monkeypatch.setattr(driver, "pointer_device", never)
    monkeypatch.setattr(driver, "stream_device", never)
    monkeypatch.setattr(_devices, "check_stream", never)
    obj = _reducer()
    x, out = _run(obj, fake, stream=0xBEEF)
    assert _devices.several() is False
    assert _arrays.readers[FakeArray] is _arrays._read_cai                 # the plain reader, no wrapper
    assert _streams._check_ints is False
    assert _streams.stream_handle(_ProtocolStream(0xF00D)) == 0xF00D
    assert _streams._readers[_ProtocolStream] is _streams._from_protocol
    assert obj._fast_plans is obj._plans and sorted(obj._plans) == [0]
    fake.current_calls = 0
    temp = FakeArray.empty(fake.mem, 1 << 16, np.uint8)
    _run(obj, fake, x=x, out=out, temp=temp, stream=0xBEEF)
    assert fake.current_calls == 0                                      # the hot path asks nothing
    # the same call with two devices asks for the current device (plan and checks)
    _devices.reset(True)
    monkeypatch.setattr(driver, "pointer_device", lambda ptr: fake.current_device())
    monkeypatch.setattr(driver, "stream_device", lambda h: fake.current_device())
    monkeypatch.setattr(_devices, "check_stream", _REAL_CHECK_STREAM)
    obj = _reducer()
    _run(obj, fake, x=x, out=out, temp=temp, stream=0xBEEF)
    fake.current_calls = 0
    _run(obj, fake, x=x, out=out, temp=temp, stream=0xBEEF)
    assert fake.current_calls >= 1


def test_device_count_without_a_driver_is_zero(monkeypatch):
    monkeypatch.setattr(device_queries, "_device_count", None)

    def no_driver():
        raise cuprims.errors.NoDeviceError("no CUDA driver found")

    monkeypatch.setattr(libcuda, "load", no_driver)
    assert driver.device_count() == 0
    assert driver.pointer_device(1 << 36) is None
