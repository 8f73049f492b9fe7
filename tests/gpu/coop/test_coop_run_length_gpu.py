"""The block run-length decode runs on the GPU against numpy: every int, float and complex
type and a struct as run values, block shapes 32 to 1024 in one to three dimensions, one
run and item or two runs and three items per thread; two windows (the second past the
first, with each item's offset in its run), the storage left out, first, or by keyword;
no LDL/STL in the kernel's SASS. Style 2's ``coop.run_length_decode`` likewise.

tests/cpu/coop/test_coop_run_length.py links the same kernels for sm_90 with no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

import coop_forms  # noqa: E402
import coop_run_length as crl  # noqa: E402

CASES = [pytest.param(*c, id=crl.case_id(*c)) for c in crl.all_cases()]


@pytest.mark.parametrize("type_name,shape,runs,items", CASES)
def test_every_form_matches_numpy_and_keeps_items_in_registers(type_name, shape, runs, items):
    case = crl.build(type_name, shape, runs, items)
    values, lengths = crl.inputs(type_name, case.threads, runs, items)
    want_items, want_offsets, want_totals = crl.expected(values, lengths, case.threads, items)
    window = case.threads * items
    decoded = cuda.device_array(3 * window, values.dtype)
    offsets = cuda.device_array(2 * window, np.uint32)
    totals = cuda.device_array(3 * case.threads, np.int64)
    case.kernel[1, shape](cuda.to_device(values), cuda.to_device(lengths), decoded, offsets, totals)
    got = decoded.copy_to_host()
    for name in got.dtype.names or (None,):
        np.testing.assert_array_equal(got if name is None else got[name],
                                      want_items if name is None else want_items[name])
    np.testing.assert_array_equal(offsets.copy_to_host(), want_offsets)
    np.testing.assert_array_equal(totals.copy_to_host(), want_totals)
    assert not coop_forms.local_memory_in_sass(case.kernel)


def test_style2_decodes_a_long_sequence_window_by_window():
    from cuprims import coop

    threads, runs, items = 128, 2, 4
    window = threads * items

    @cuda.jit
    def kernel(values_in, lengths_in, out, offsets_out, total_out):
        block = coop.this_block()
        values = coop.ThreadData(runs, dtype=numba.float32)
        lengths = coop.ThreadData(runs, dtype=numba.uint32)
        decoded = coop.ThreadData(items, dtype=numba.float32)
        offsets = coop.ThreadData(items, dtype=numba.uint32)
        coop.load(block, values_in, values)
        coop.load(block, lengths_in, lengths)
        total = coop.run_length_decode(block, values, lengths, decoded, offsets)
        start = 0
        while start < total:
            coop.run_length_decode(block, values, lengths, decoded, offsets, window_offset=start)
            coop.store(block, out[start:], decoded)
            coop.store(block, offsets_out[start:], offsets)
            start += window
        if cuda.threadIdx.x == 0:
            total_out[0] = total

    rng = np.random.default_rng(8)
    values = rng.standard_normal(threads * runs).astype(np.float32)
    lengths = rng.integers(1, 9, threads * runs).astype(np.uint32)
    total = int(lengths.sum())
    room = -(-total // window) * window
    out, offsets = cuda.device_array(room, np.float32), cuda.device_array(room, np.uint32)
    total_out = cuda.device_array(1, np.int64)
    kernel[1, threads](cuda.to_device(values), cuda.to_device(lengths), out, offsets, total_out)
    assert total_out.copy_to_host()[0] == total
    np.testing.assert_array_equal(out.copy_to_host()[:total], np.repeat(values, lengths))
    np.testing.assert_array_equal(offsets.copy_to_host()[:total],
                                  np.concatenate([np.arange(n, dtype=np.uint32) for n in lengths]))
