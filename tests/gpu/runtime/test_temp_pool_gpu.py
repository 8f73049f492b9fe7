"""One-shot calls take temporary storage from cuprims' own memory pool, which keeps what
they free for the next call (no remapping after each synchronisation) until
clear_all_caches() trims it."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import SortOrder  # noqa: E402
from cuprims._runtime import pools  # noqa: E402


def _reserved(device: int = 0) -> int:
    from cuda.bindings import driver as drv

    pool = pools._pools.get(device)
    assert pool, "no cuprims pool on this device"
    err, value = drv.cuMemPoolGetAttribute(drv.CUmemoryPool(pool),
                                           drv.CUmemPool_attribute.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
    assert int(err) == 0
    return int(value)


def test_one_shot_temporary_storage_is_kept_for_the_next_call_and_trimmed_on_clear():
    n = 1 << 22
    keys = cp.asarray(np.random.default_rng(1).integers(0, 1 << 31, n).astype(np.int32))
    out = cp.empty_like(keys)
    cuprims.radix_sort(d_in_keys=keys, d_out_keys=out, num_items=n, order=SortOrder.ASCENDING)
    cp.cuda.Device().synchronize()
    first = _reserved()
    assert first > 0
    out[...] = 0
    cuprims.radix_sort(d_in_keys=keys, d_out_keys=out, num_items=n, order=SortOrder.ASCENDING)
    cp.cuda.Device().synchronize()
    assert _reserved() == first   # the freed block was reused, not given back and mapped again
    np.testing.assert_array_equal(out.get(), np.sort(keys.get()))
    cuprims.clear_all_caches()
    cp.cuda.Device().synchronize()
    assert _reserved() < first
    # and the next call still works
    cuprims.radix_sort(d_in_keys=keys, d_out_keys=out, num_items=n, order=SortOrder.ASCENDING)
    np.testing.assert_array_equal(out.get(), np.sort(keys.get()))
