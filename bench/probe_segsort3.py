"""Diagnostic: one segmented sort call of ours and one of cuda.compute (for a kernel profiler)."""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import sized_call, add_extra_path  # noqa: E402
import cupy as cp, numpy as np
import cuprims
from cuprims import SortOrder
from cuprims.algorithms.segmented_sort import dispatch as d
add_extra_path()
import cuda.compute as cc
ns, size = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (1 << 20, 64)
d.SMALL_WAVES = 32
n = ns * size
keys = cp.random.randint(0, 1 << 30, n, dtype=cp.int32); out = cp.empty_like(keys)
offsets = cp.arange(0, n + 1, size)
s = cuprims.make_segmented_sort(d_in_keys=keys, d_out_keys=out, start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:],
                                order=SortOrder.ASCENDING)
mine = sized_call(s, d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None, num_items=n,
                  num_segments=ns, start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:])
c = cc.make_segmented_sort(d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None,
                           start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:], order=cc.SortOrder.ASCENDING)
theirs = sized_call(c, d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None, num_items=n,
                    num_segments=ns, start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:])
cp.cuda.Device().synchronize()
print("=== ours", flush=True); mine(); cp.cuda.Device().synchronize()
print("=== cuda.compute", flush=True); theirs(); cp.cuda.Device().synchronize()
