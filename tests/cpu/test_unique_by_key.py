"""Unique-by-key on the CPU: ahead-of-time sm_90 builds (arrays, iterators, struct keys with a
Python equality, a DiscardIterator output), a golden, the kernels' parameters against the
cubin, the temporary-storage layout, and bad arguments named before any compile."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import cuprims
from cpu_helpers import check_golden, check_kernel_params, counters, delta, render_source
from cuprims import CountingIterator, DiscardIterator, OpKind, ProxyArray as P
from cuprims.algorithms.unique_by_key import storage_layout
from cuprims.errors import ArgumentError

i4, i8, f4 = np.int32, np.int64, np.float32


def _make(**over):
    kw = dict(d_in_keys=P(i4), d_in_items=P(f4), d_out_keys=P(i4), d_out_items=P(f4), d_out_num_selected=P(i8),
              op=OpKind.EQUAL_TO, compute_capability=90)
    kw.update(over)
    return cuprims.make_unique_by_key(**kw)


def test_golden_and_parameters(shared_cache):
    obj = _make()
    check_golden("unique_by_key_i4_f4_equal_to_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    assert meta["threads"] * meta["items"] >= 128 and meta["tile_word_bytes"] == 16 and meta["tile_padding"] > 0


def test_struct_keys_python_equality_iterator_items_and_discard(shared_cache):
    pair = cuprims.gpu_struct({"a": np.int32, "b": np.int32})
    obj = _make(d_in_keys=P(pair.dtype), d_out_keys=P(pair.dtype), d_in_items=CountingIterator(i8(0)),
                d_out_items=DiscardIterator(P(i8)), d_out_num_selected=P(np.uint32),
                op=lambda x, y: x.a == y.a and x.b == y.b)
    check_kernel_params(obj, 90)


@pytest.mark.parametrize("over, argument", [
    (dict(d_out_num_selected=P(f4)), "d_out_num_selected"),
    (dict(d_out_num_selected=P(np.int16)), "d_out_num_selected"),
    (dict(d_out_num_selected=CountingIterator(i8(0))), "d_out_num_selected"),
    (dict(d_out_keys=P(i8)), "d_out_keys"),
    (dict(d_out_items=P(np.float64)), "d_out_items"),
    (dict(op=OpKind.LESS), "op"),
    (dict(op=OpKind.EQUAL_TO, d_in_keys=P(cuprims.gpu_struct({"q": i4}).dtype)), "d_out_keys"),
    (dict(d_in_keys=np.zeros(4, i4)), "d_in_keys"),
    (dict(compute_capability=199), "compute_capability"),
])
def test_bad_arguments_are_named_before_any_compile(over, argument):
    before = counters()
    with pytest.raises(ArgumentError) as info:
        _make(**over)
    assert info.value.argument == argument, str(info.value)
    assert delta(before) == {"numba_compiles": 0, "nvrtc_compiles": 0, "links": 0}


def test_struct_keys_need_a_python_equality():
    s = cuprims.gpu_struct({"q": i4})
    with pytest.raises(ArgumentError) as info:
        _make(d_in_keys=P(s.dtype), d_out_keys=P(s.dtype))
    assert info.value.argument == "op"


def test_storage_layout():
    plan = SimpleNamespace(tile_items=7168, padding=32, word_bytes=16, vsmem_per_block=0)
    tiles, vsmem_at, total = storage_layout(plan, 7168 * 10 + 1)
    assert tiles == 11 and vsmem_at >= 256 + (11 + 32) * 16 and total == vsmem_at
    assert storage_layout(plan, 0)[0] == 0 and storage_layout(plan, 0)[2] >= 256 + 33 * 16   # the init still runs
    plan.vsmem_per_block = 1024
    tiles, vsmem_at, total = storage_layout(plan, 7168 * 3)
    assert total == vsmem_at + 3 * 1024 and vsmem_at % 256 == 0
