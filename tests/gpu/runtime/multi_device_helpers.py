"""Shared by the several-device GPU tests: a workload of reduce (Python operator),
inclusive scan and radix sort over one device's arrays, and a launch checker that
records which device each loaded module belongs to and flags any kernel launched while
another device is current."""

from __future__ import annotations

import threading

import numpy as np

import cuprims
from cuprims import OpKind, SortOrder
from cuprims._runtime import driver

COMPILES = ("numba_compiles", "nvrtc_compiles", "links")
N = (1 << 17) + 3   # several tiles: every algorithm runs its multi-kernel path with temporary storage


def add(a, b):
    return a + b


def compiles() -> dict:
    info = cuprims.cache_info()
    return {k: info[k] for k in COMPILES}


class Workload:
    """Arrays of the current device (made on ``stream``) and the expected results."""

    def __init__(self, cp, seed: int, stream=None, n: int = N):
        self.cp, self.n, self.stream = cp, n, stream
        self.host = np.random.default_rng(seed).integers(0, 1000, n).astype(np.int32)
        with _on(cp, stream):
            self.x = cp.asarray(self.host)
            self.total = cp.zeros(1, np.int32)
            self.prefix = cp.zeros(n, np.int32)
            self.keys = cp.zeros(n, np.int32)
        self._temps: list = []

    # the three algorithms' arguments
    def reduce_args(self):
        return dict(d_in=self.x, d_out=self.total, h_init=np.int32(0))

    def scan_args(self):
        return dict(d_in=self.x, d_out=self.prefix)

    def sort_args(self):
        return dict(d_in_keys=self.x, d_out_keys=self.keys, d_in_values=None, d_out_values=None)

    def make_objects(self):
        """Objects for this workload's types (built for the current device's capability)."""
        return (cuprims.make_reduce_into(**self.reduce_args(), op=add),
                cuprims.make_inclusive_scan(**self.scan_args(), op=OpKind.PLUS),
                cuprims.make_radix_sort(**self.sort_args(), order=SortOrder.ASCENDING))

    def run_objects(self, objects, stream=None):
        reducer, scanner, sorter = objects
        stream = self.stream if stream is None else stream
        cp, n = self.cp, self.n
        with _on(cp, stream):
            calls = ((reducer, dict(self.reduce_args(), num_items=n)),
                     (scanner, dict(self.scan_args(), op=OpKind.PLUS, init_value=None, num_items=n)),
                     (sorter, dict(self.sort_args(), num_items=n)))
            for obj, kw in calls:
                temp = cp.empty(obj(temp_storage=None, **kw), np.uint8)
                self._temps.append(temp)
                obj(temp_storage=temp, stream=stream, **kw)

    def run_one_shot(self, stream=None):
        stream = self.stream if stream is None else stream
        cuprims.reduce_into(**self.reduce_args(), num_items=self.n, op=add, stream=stream)
        cuprims.inclusive_scan(**self.scan_args(), op=OpKind.PLUS, num_items=self.n, stream=stream)
        cuprims.radix_sort(**self.sort_args(), num_items=self.n, order=SortOrder.ASCENDING, stream=stream)

    def clear(self):
        with _on(self.cp, self.stream):
            self.total.fill(0)
            self.prefix.fill(0)
            self.keys.fill(0)

    def check(self):
        cp = self.cp
        if self.stream is not None:
            self.stream.synchronize()
        else:
            cp.cuda.Device().synchronize()
        self._temps.clear()
        assert int(self.total.get()[0]) == int(self.host.sum())
        np.testing.assert_array_equal(self.prefix.get(), np.cumsum(self.host, dtype=np.int32))
        np.testing.assert_array_equal(self.keys.get(), np.sort(self.host))


class _on:
    """``with stream:`` where there is one."""

    def __init__(self, cp, stream):
        self.stream = stream

    def __enter__(self):
        if self.stream is not None:
            self.stream.__enter__()

    def __exit__(self, *exc):
        if self.stream is not None:
            self.stream.__exit__(*exc)


def handle_key(kernel) -> int:
    return kernel if type(kernel) is int else int(kernel)   # a cuda.bindings CUkernel: its handle value


class LaunchChecker:
    """Record, for every module loaded from now on, the device it was loaded for, and
    flag a launch of one of its kernels while another device is current (or of a kernel
    no module recorded)."""

    def __init__(self, monkeypatch):
        self.owner: dict[int, int] = {}
        self.bad: list[tuple] = []
        self.launches: dict[int, int] = {}
        self._lock = threading.Lock()
        real_module, real_launch, real_pdl = driver.Module, driver.launch, driver.launch_pdl
        checker = self

        class RecordingModule(real_module):
            def __init__(self, cubin, lowered, device=-1):
                super().__init__(cubin, lowered, device)
                here = driver.current_device()
                with checker._lock:
                    if device != here:
                        checker.bad.append(("loaded for another device", device, here))
                    for kernel in self.kernels.values():
                        checker.owner[handle_key(kernel)] = device

        def launch(kernel, *args, **kwargs):
            checker.check(kernel)
            return real_launch(kernel, *args, **kwargs)

        def launch_pdl(kernel, *args, **kwargs):
            checker.check(kernel)
            return real_pdl(kernel, *args, **kwargs)

        monkeypatch.setattr(driver, "Module", RecordingModule)
        monkeypatch.setattr(driver, "launch", launch)
        monkeypatch.setattr(driver, "launch_pdl", launch_pdl)

    def check(self, kernel) -> None:
        here = driver.current_device()
        key = handle_key(kernel)
        with self._lock:
            owner = self.owner.get(key)
            if owner != here:
                self.bad.append(("launched on another device", key, owner, here))
            self.launches[here] = self.launches.get(here, 0) + 1

    def total(self) -> int:
        with self._lock:
            return sum(self.launches.values())


def loaded_devices(obj) -> dict[int, object]:
    """Device -> Loaded of an object's first build variant."""
    return dict(obj._builds._by_device)
