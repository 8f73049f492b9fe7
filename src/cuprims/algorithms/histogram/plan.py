"""An even-bin histogram's launch facts on one device (:class:`HistogramPlan`) and the
scratch word its one-shot calls pass as CUB's tile queue (:func:`queue_scratch`)."""

from __future__ import annotations

import threading
from typing import Any

from cuprims._base.lazy import driver_bindings
from cuprims._runtime import driver
from cuprims.algorithms.common import Loaded
from cuprims.algorithms.skeleton import Plan
from cuprims.algorithms.sort_common import temp_layout
from cuprims.errors import CudaError

QUEUE_BYTES = 8  # CUB's GridQueue<int>::AllocationSize()
#: Calls of at most this many samples (in at most 256 bins, those a block's shared memory
#: privatizes) run as one block: one launch, 16 samples a thread, instead of the init
#: kernel and the sweep.
ONE_BLOCK_SAMPLES = 4096
#: The most bins privatized in a block's shared memory (cuprims::histogram::privatized_smem_bins,
#: CUB's max_privatized_smem_bins, in the meta)
SMEM_BINS = 256


def one_block(n: int, bins: int) -> bool:
    """Whether a call of ``n`` samples into ``bins`` bins runs as one block (one launch)."""
    return n <= ONE_BLOCK_SAMPLES and bins <= SMEM_BINS


class HistogramPlan(Plan):
    """The three kernels, their launch shapes, the grid cap and the temporary-storage facts."""

    def __init__(self, loaded: Loaded, kernel_params: tuple[tuple[Any, ...], ...], waves: int):
        meta = loaded.meta
        self.init, self.sweep, self.one_block = loaded.handles  # codegen order: init, sweep, one block
        self.packs = tuple(driver.ParamPack(kinds) for kinds in kernel_params)
        self.threads, self.init_threads = meta["threads"], meta["init_threads"]
        self.one_block_threads = meta["one_block_threads"]
        self.tile = meta["threads"] * meta["pixels"]
        occupancy = loaded.module.max_active_blocks(loaded.names[1], self.threads)
        self.max_grid = max(1, occupancy) * driver.sm_count(loaded.device) * waves
        self.global_privatized = bool(meta["global_privatized"])
        self.counter_size = meta["counter_size"]
        self.pdl_capable = loaded.arch >= 90  # CUB launches both kernels as dependent launches there
        # Without work stealing the sweep never reads the tile queue (the init kernel only
        # writes a zero to it): a one-shot call whose privatized counters live in shared
        # memory passes the device's scratch word and allocates nothing, so it launches
        # what the object API launches and nothing between.
        self.queue = 0 if meta["work_stealing"] else queue_scratch(loaded.device)
        self.queue_layout = temp_layout((0, QUEUE_BYTES))
        self.last_layout: tuple = ()  # (n, bins, layout) of the last call: _temp_bytes' work, reused


_scratch: dict[int, int] = {}  # device -> its tile-queue scratch word
_scratch_lock = threading.Lock()


def queue_scratch(device: int) -> int:
    """The device memory every histogram call on ``device`` (the current one) passes as
    CUB's tile queue where the sweep does not steal work: the init kernel writes a zero
    to it, nothing reads it, so calls on any stream may share it. Allocated at the first
    plan on the device, kept for the process."""
    ptr = _scratch.get(device)
    if ptr is None:
        with _scratch_lock:
            ptr = _scratch.get(device)
            if ptr is None:
                err, got = driver_bindings().cuMemAlloc(QUEUE_BYTES)
                if int(err):
                    raise CudaError("cuMemAlloc", driver.error_name(int(err)), f"{QUEUE_BYTES} bytes")
                ptr = _scratch[device] = int(got)
    return ptr
