"""Three-way partition on the CPU: ahead-of-time sm_90 builds (arrays, iterators, a
DiscardIterator output, captured arrays), a golden, the kernels' parameters against the
cubin, and the storage size (bad arguments: tests/cpu/reliability/test_bad_arguments.py)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import cuprims
from cpu_helpers import check_golden, check_kernel_params, render_source
from cuprims import CountingIterator, DiscardIterator, ProxyArray as P
from cuprims.algorithms.lookback import tile_storage

i4, i8, f4 = np.int32, np.int64, np.float32


def _make(**over):
    kw = dict(d_in=P(i4), d_first_part_out=P(i4), d_second_part_out=P(i4), d_unselected_out=P(i4),
              d_num_selected_out=P(i8), select_first_part_op=lambda v: v < 3, select_second_part_op=lambda v: v > 6,
              compute_capability=90)
    kw.update(over)
    return cuprims.make_three_way_partition(**kw)


def test_golden_and_parameters(shared_cache):
    obj = _make()
    check_golden("three_way_partition_i4_python_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)


def test_iterators_discard_and_captured_arrays(shared_cache):
    bounds = P(i8)  # a captured device array stands in as a ProxyArray at build time

    def first(v):
        return v < bounds[0]

    obj = _make(d_in=CountingIterator(i8(0)), d_first_part_out=P(i8), d_second_part_out=P(i8),
                d_unselected_out=DiscardIterator(P(i8)), d_num_selected_out=P(np.uint32),
                select_first_part_op=first, select_second_part_op=lambda v: v % 2 == 0)
    check_kernel_params(obj, 90)
    assert obj.desc.first_op.state_size > 0 and obj.desc.second_op.state_size == 0


def test_storage_bytes():
    plan = SimpleNamespace(tile_items=3840, padding=32, word_bytes=16)
    assert tile_storage(plan, 3840 * 5 + 1) == (6, 256 + (6 + 32) * 16)
    assert tile_storage(plan, 0) == (0, 256 + 33 * 16)
