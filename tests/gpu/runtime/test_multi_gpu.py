"""Two GPUs (skipped with fewer): one build per compute capability shared by every device,
each device loading its own copy; an object built on device 0 running on device 1; one
thread per GPU (here 8 per GPU) calling reduce, scan and radix sort in a loop; and
arrays or streams of the other device refused before anything is launched."""

from __future__ import annotations

import threading

import numpy as np
import pytest

cp = pytest.importorskip("cupy")


def _device_count() -> int:
    try:
        return cp.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no driver, no GPU
        return 0


pytestmark = pytest.mark.skipif(_device_count() < 2, reason="needs two GPUs")

import cuprims  # noqa: E402
from cuprims import OpKind, SortOrder  # noqa: E402
from cuprims._runtime import devices as _devices
from cuprims._runtime import driver  # noqa: E402
from cuprims.errors import DeviceMismatchError  # noqa: E402
from multi_device_helpers import LaunchChecker, Workload, add, compiles, loaded_devices  # noqa: E402

THREADS_PER_GPU = 8
ROUNDS = 4


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """An empty disk cache and empty memory caches (so every build of the test is counted)."""
    monkeypatch.setenv("CUPRIMS_CACHE_DIR", str(tmp_path / "cache"))
    cuprims.clear_all_caches()
    yield tmp_path
    cuprims.clear_all_caches()


def _same_capability() -> bool:
    return driver.compute_capability(0) == driver.compute_capability(1)


def test_the_checks_are_on_with_two_devices():
    assert driver.device_count() >= 2 and _devices.several()


def test_an_object_built_on_device_0_runs_on_device_1(fresh, monkeypatch):
    launches = LaunchChecker(monkeypatch)
    with cp.cuda.Device(0):
        w0 = Workload(cp, 1)
        objects = w0.make_objects()
        w0.run_objects(objects)
        w0.check()
    before, loads = compiles(), cuprims.cache_info()["module_loads"]
    with cp.cuda.Device(1):
        w1 = Workload(cp, 2)
        w1.run_objects(objects)
        w1.check()
    if _same_capability():
        assert compiles() == before                      # device 1 loaded device 0's build
        assert cuprims.cache_info()["module_loads"] == loads + len(objects)
    for obj in objects:
        by_device = loaded_devices(obj)
        assert sorted(by_device) == [0, 1]
        assert by_device[0].module is not by_device[1].module
        assert (by_device[0].module.device, by_device[1].module.device) == (0, 1)
        assert set(map(int, by_device[0].handles)).isdisjoint(map(int, by_device[1].handles))
        assert obj._device_plans[(0, 0)].device == 0 and obj._device_plans[(1, 0)].device == 1
    assert launches.bad == [] and launches.launches.get(0) and launches.launches.get(1)
    with cp.cuda.Device(0):                              # and device 0 again, on its own copy
        w0.clear()
        w0.run_objects(objects)
        w0.check()
    assert launches.bad == []


def _sequential_compiles(tmp_path, monkeypatch) -> dict:
    """Compiles of one pass of the workload on device 0, from empty caches."""
    monkeypatch.setenv("CUPRIMS_CACHE_DIR", str(tmp_path / "sequential-cache"))
    cuprims.clear_all_caches()
    start = compiles()
    with cp.cuda.Device(0):
        w = Workload(cp, 0)
        w.run_objects(w.make_objects())
        w.run_one_shot()
        w.check()
    return {k: v - start[k] for k, v in compiles().items()}


def test_eight_threads_per_gpu_share_one_build_per_key(fresh, monkeypatch):
    expected = _sequential_compiles(fresh, monkeypatch)
    assert expected["nvrtc_compiles"] >= 1
    monkeypatch.setenv("CUPRIMS_CACHE_DIR", str(fresh / "threaded-cache"))
    cuprims.clear_all_caches()
    launches = LaunchChecker(monkeypatch)
    start = compiles()
    with cp.cuda.Device(0):
        shared = Workload(cp, 0).make_objects()          # the objects every thread calls, built on device 0
    errors = []
    barrier = threading.Barrier(2 * THREADS_PER_GPU)

    def worker(device, seed):
        try:
            with cp.cuda.Device(device):
                stream = cp.cuda.Stream(non_blocking=True)
                w = Workload(cp, seed, stream)
                barrier.wait()
                for _ in range(ROUNDS):
                    w.clear()
                    w.run_objects(shared)                # the shared objects
                    w.check()
                    w.clear()
                    w.run_one_shot()                     # this thread's own cached objects
                    w.check()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append((device, seed, exc))
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i % 2, i)) for i in range(2 * THREADS_PER_GPU)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    got = {k: v - start[k] for k, v in compiles().items()}
    if _same_capability():
        assert got == expected                           # one compile per key for both GPUs and all threads
    assert launches.bad == []
    assert launches.launches.get(0) and launches.launches.get(1)
    for obj in shared:
        assert sorted(loaded_devices(obj)) == [0, 1]


def _calls(w, objects):
    reducer, scanner, sorter = objects
    n = w.n
    with cp.cuda.Device(0):
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


def test_arrays_of_device_1_while_device_0_is_current_are_refused(fresh, monkeypatch):
    launches = LaunchChecker(monkeypatch)
    with cp.cuda.Device(0):
        objects = Workload(cp, 0).make_objects()
    with cp.cuda.Device(1):
        w1 = Workload(cp, 5)
        cp.cuda.Device().synchronize()
    with cp.cuda.Device(0):
        for name, call in _calls(w1, objects).items():
            with pytest.raises(DeviceMismatchError) as info:
                call()
            err = info.value
            assert (err.current_device, err.device, err.what) == (0, 1, "array"), name
            assert err.argument in ("d_in", "d_in_keys"), (name, err.argument)
            assert "device 1" in str(err) and "current device is 0" in str(err), name
    assert launches.total() == 0


def test_a_stream_of_device_1_while_device_0_is_current_is_refused(fresh, monkeypatch):
    launches = LaunchChecker(monkeypatch)
    with cp.cuda.Device(1):
        stream1 = cp.cuda.Stream()
    with cp.cuda.Device(0):
        w0 = Workload(cp, 6)
        objects = w0.make_objects()
        cp.cuda.Device().synchronize()
        for name, call in _calls(w0, objects).items():
            for stream in (stream1, stream1.ptr):
                with pytest.raises(DeviceMismatchError) as info:
                    call(stream=stream)
                assert (info.value.argument, info.value.current_device, info.value.device) == ("stream", 0, 1), name
        assert launches.total() == 0
        w0.run_objects(objects, stream=cp.cuda.Stream.null)   # the default stream is the current device's
        w0.check()
    assert launches.bad == []


def test_temporary_storage_of_device_1_is_refused(fresh):
    with cp.cuda.Device(0):
        w0 = Workload(cp, 7)
        reducer = w0.make_objects()[0]
    with cp.cuda.Device(1):
        temp1 = cp.empty(1 << 20, np.uint8)
    with cp.cuda.Device(0):
        with pytest.raises(DeviceMismatchError) as info:
            reducer(temp_storage=temp1, **w0.reduce_args(), num_items=w0.n)
        assert (info.value.argument, info.value.device) == ("temp_storage", 1)
