"""Per-device state on one GPU, with a second device faked: the fake device is an ordinal
no GPU has, which ``driver.current_device`` returns (per thread) where a test says so,
with the capability and SM count of the real one. Its calls launch on the real GPU,
through a module loaded for the fake ordinal (cuLibraryLoadData loads a
context-independent library, so a second copy loads in the real device's context).

Covered: one build per capability (no recompilation when the second device loads its
own copy), a Loaded/Module and a plan per device, correct results through the fake
device (one thread, and threads on both devices at once), no kernel launched while
another device is current, and the argument checks (on, as with two devices) refusing
arrays and streams claimed to be on the other device.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import OpKind, SortOrder  # noqa: E402
from cuprims._runtime import devices as _devices
from cuprims._runtime import driver  # noqa: E402
from cuprims.errors import ArgumentError, DeviceMismatchError  # noqa: E402
from multi_device_helpers import LaunchChecker, Workload, add, compiles, loaded_devices  # noqa: E402


@pytest.fixture
def fake_device(monkeypatch, tmp_path):
    real = driver.current_device()
    fake = cp.cuda.runtime.getDeviceCount()   # no GPU has this ordinal
    cc, sms = driver.compute_capability(real), driver.sm_count(real)
    real_cc, real_sms = driver.compute_capability, driver.sm_count
    tls = threading.local()

    def current():
        return getattr(tls, "device", real)

    claims: dict[str, int] = {}   # "array" / "stream" -> the device the readers report (default: current)
    monkeypatch.setattr(driver, "current_device", current)
    monkeypatch.setattr(driver, "compute_capability", lambda d: cc if d == fake else real_cc(d))
    monkeypatch.setattr(driver, "sm_count", lambda d: sms if d == fake else real_sms(d))
    monkeypatch.setattr(_devices, "cupy_device", lambda x, ptr: claims.get("array", current()))
    monkeypatch.setattr(_devices, "cupy_stream_device", lambda s, h: claims.get("stream", current()))
    monkeypatch.setenv("CUPRIMS_CACHE_DIR", str(tmp_path / "cache"))
    _devices.reset(True)         # as in a process that sees two devices
    cuprims.clear_all_caches()   # objects made from now on take the per-device path
    state = SimpleNamespace(real=real, fake=fake, claims=claims)

    def use(device):
        tls.device = device

    state.use = use
    yield state
    _devices.reset(None)
    cuprims.clear_all_caches()


@pytest.fixture
def launches(monkeypatch, fake_device):
    return LaunchChecker(monkeypatch)


def test_the_fake_device_loads_its_own_copy_without_compiling(fake_device, launches):
    dev = fake_device
    stream = cp.cuda.Stream()
    w0 = Workload(cp, 1, stream)
    objects = w0.make_objects()
    w0.run_objects(objects)
    w0.check()
    before, loads = compiles(), cuprims.cache_info()["module_loads"]

    dev.use(dev.fake)
    w1 = Workload(cp, 2, stream)
    w1.run_objects(objects)                   # the object built on the real device
    w1.check()
    w1.clear()
    w1.run_one_shot()                         # this thread's cached objects: the same ones
    w1.check()
    assert compiles() == before
    assert cuprims.cache_info()["module_loads"] == loads + len(objects)   # one copy per build, nothing built
    for obj in objects:
        by_device = loaded_devices(obj)
        assert sorted(by_device) == sorted([dev.real, dev.fake])
        real, fake = by_device[dev.real], by_device[dev.fake]
        assert real is not fake and real.module is not fake.module
        assert (real.module.device, fake.module.device) == (dev.real, dev.fake)
        assert set(map(int, real.handles)).isdisjoint(map(int, fake.handles))
        plans = obj._device_plans
        assert plans[(dev.real, 0)] is not plans[(dev.fake, 0)]
        assert (plans[(dev.real, 0)].device, plans[(dev.fake, 0)].device) == (dev.real, dev.fake)
    assert launches.bad == [] and launches.launches.get(dev.fake, 0) > 0

    dev.use(dev.real)                         # and back: the real device's copy again
    w0.clear()
    w0.run_objects(objects)
    w0.check()
    assert launches.bad == [] and compiles() == before


def test_threads_on_the_real_and_the_fake_device(fake_device, launches):
    dev = fake_device
    objects = Workload(cp, 0).make_objects()
    before = compiles()
    errors, barrier = [], threading.Barrier(4)

    def worker(device, seed):
        try:
            dev.use(device)
            with cp.cuda.Device(dev.real):
                stream = cp.cuda.Stream(non_blocking=True)
                w = Workload(cp, seed, stream)
                barrier.wait()
                for _ in range(4):
                    w.clear()
                    w.run_objects(objects)
                    w.check()
                    w.clear()
                    w.run_one_shot()
                    w.check()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(d, i)) for i, d in enumerate([dev.real, dev.fake] * 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert launches.bad == [] and launches.launches.get(dev.fake, 0) > 0
    assert compiles() == before


def _calls(w, objects):
    """Each algorithm's one-shot call and object call, by name."""
    reducer, scanner, sorter = objects
    n = w.n
    temp = cp.empty(1 << 22, np.uint8)
    return {
        "reduce_into": lambda **s: cuprims.reduce_into(**w.reduce_args(), num_items=n, op=add, **s),
        "reducer": lambda **s: reducer(temp_storage=temp, **w.reduce_args(), num_items=n, **s),
        "inclusive_scan": lambda **s: cuprims.inclusive_scan(**w.scan_args(), op=OpKind.PLUS, num_items=n, **s),
        "scanner": lambda **s: scanner(temp_storage=temp, **w.scan_args(), op=OpKind.PLUS, init_value=None,
                                       num_items=n, **s),
        "radix_sort": lambda **s: cuprims.radix_sort(**w.sort_args(), num_items=n, order=SortOrder.ASCENDING, **s),
        "sorter": lambda **s: sorter(temp_storage=temp, **w.sort_args(), num_items=n, **s),
    }


def test_arrays_and_streams_claimed_on_the_other_device_are_refused(fake_device, launches, monkeypatch):
    dev = fake_device
    w = Workload(cp, 3)
    objects = w.make_objects()
    w.run_objects(objects)
    w.check()
    calls = _calls(w, objects)
    stream = cp.cuda.Stream()
    done = launches.total()

    dev.claims["array"] = dev.fake
    for name, call in calls.items():
        with pytest.raises(DeviceMismatchError) as info:
            call()
        err = info.value
        assert (err.current_device, err.device, err.what) == (dev.real, dev.fake, "array"), name
        assert err.argument in ("d_in", "d_in_keys"), (name, err.argument)
        assert isinstance(err, ArgumentError) and f"device {dev.fake}" in str(err), name
    del dev.claims["array"]

    dev.claims["stream"] = dev.fake
    for name, call in calls.items():
        with pytest.raises(DeviceMismatchError) as info:
            call(stream=stream)
        assert (info.value.argument, info.value.device, info.value.what) == ("stream", dev.fake, "stream"), name
    del dev.claims["stream"]

    # an int handle is asked of the driver (faked here to answer the other device)
    monkeypatch.setattr(_devices, "handle_device", lambda s, h: dev.fake)
    for name, call in calls.items():
        with pytest.raises(DeviceMismatchError) as info:
            call(stream=stream.ptr)
        assert info.value.argument == "stream", name
    assert launches.total() == done                    # nothing was launched by a refused call
    for name, call in calls.items():                   # the default stream is the current device's
        call(stream=0)
    cp.cuda.Device().synchronize()
    assert launches.bad == []


def test_the_device_readers_agree_with_the_driver():
    """The readers' cheap sources (CuPy's device ids, DLPack) and the driver's answers
    (pointer and stream attributes) name the same device on a real GPU."""
    real = driver.current_device()
    x = cp.arange(10, dtype=np.int32)
    s = cp.cuda.Stream()
    assert _devices.cupy_device(x, x.data.ptr) == real
    assert _devices.dlpack_device(x, x.data.ptr) == real
    assert _devices.pointer_device(x, x.data.ptr) == real == driver.pointer_device(x.data.ptr)
    assert _devices.cupy_stream_device(s, s.ptr) == real == driver.stream_device(s.ptr)
    assert driver.stream_device(0) == real
    managed = cp.cuda.MemoryPointer(cp.cuda.memory.ManagedMemory(64), 0)
    assert driver.pointer_device(managed.ptr) == driver.SHARED_MEMORY   # reached by every device
    assert driver.pointer_device(0) is None
    assert driver.device_count() == cp.cuda.runtime.getDeviceCount()
