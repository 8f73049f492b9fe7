"""The CUDA driver as the rest of cuprims calls it: one namespace over the modules that do
each job, so that call sites read ``driver.launch(...)``, ``driver.current_device()``.

* :mod:`.libcuda`: loading libcuda through ctypes, its prototypes, error names;
* :mod:`.device_queries`: the current device, the device count, the device of a pointer
  or a stream, device attributes (compute capability, SM count);
* :mod:`.modules`: cubins loaded as context-independent libraries, kernel handles, occupancy;
* :mod:`.params`: kernel parameter blocks (``ParamPack``, ``param_size``);
* :mod:`.launch`: launches, plain and with PDL;
* :mod:`.pools`: stream-ordered temporary storage from per-device pools.

Callers look these names up here at call time, so a test that replaces one
(``monkeypatch.setattr(driver, "launch", fake)``) replaces it for every caller outside
``_runtime``'s driver modules. Inside them the modules call each other directly (the
PDL launcher's plain fallback, ``alloc_async``'s current device, ``stream_device``'s
default streams, every module's :func:`.libcuda.load`): replace those in their own module.
"""

from __future__ import annotations

from cuprims._runtime.device_queries import (ATTRIBUTE_L2_CACHE_SIZE, ATTRIBUTE_MULTIPROCESSOR_COUNT, SHARED_MEMORY,
                                             compute_capability, current_device, device_attribute, device_count,
                                             pointer_device, sm_count, stream_device)
from cuprims._runtime.launch import launch, launch_pdl
from cuprims._runtime.libcuda import check, error_name
from cuprims._runtime.modules import Module
from cuprims._runtime.params import ParamPack, param_size
from cuprims._runtime.pools import alloc_async, free_async, trim_pools

__all__ = [
    "ATTRIBUTE_L2_CACHE_SIZE", "ATTRIBUTE_MULTIPROCESSOR_COUNT", "SHARED_MEMORY", "compute_capability",
    "current_device", "device_attribute", "device_count", "pointer_device", "sm_count", "stream_device",
    "launch", "launch_pdl", "check", "error_name", "Module", "ParamPack", "param_size",
    "alloc_async", "free_async", "trim_pools",
]
