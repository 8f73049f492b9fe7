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
    # a small one-shot call first: the legacy stream's shared buffer, freed in stream order by
    # clear_all_caches() just before the trim, shares the pool's memory with the sort's storage
    from cuprims.algorithms import scratch

    small = cp.arange(5000, 0, -1, dtype=cp.int32)
    sorted_small = cp.empty_like(small)
    cuprims.merge_sort(d_in_keys=small, d_in_values=None, d_out_keys=sorted_small, d_out_values=None,
                       op=cuprims.OpKind.LESS, num_items=small.size)
    assert scratch._buffers and (sorted_small.get() == np.arange(1, 5001)).all()
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


def test_one_shots_on_the_legacy_stream_share_a_buffer_that_grows_between_queued_calls(monkeypatch):
    """Merge sorts of growing sizes, queued without a synchronisation on the legacy default
    stream: each takes the shared buffer, a larger need replaces it (the old one freed in
    stream order, after the calls queued before), and every result is right."""
    from cuprims.algorithms import scratch

    monkeypatch.setattr(scratch, "_buffers", {})   # the growth starts from nothing
    rng = np.random.default_rng(3)
    sizes = [1000, 5000, 1000, 20_000, 3000, 60_000, 10]
    keys = [cp.asarray(rng.integers(-1 << 30, 1 << 30, n).astype(np.int32)) for n in sizes]
    outs = [cp.full(n, 7, np.int32) for n in sizes]
    for k, out in zip(keys, outs):
        cuprims.merge_sort(d_in_keys=k, d_in_values=None, d_out_keys=out, d_out_values=None, op=cuprims.OpKind.LESS,
                           num_items=k.size)
    grown = dict(scratch._buffers)
    assert set(grown) == {0} and grown[0][1] >= 4096 and not scratch.lock.locked()
    for k, out in zip(keys, outs):
        np.testing.assert_array_equal(out.get(), np.sort(k.get()))
    scratch.release()
    assert scratch._buffers == {}
