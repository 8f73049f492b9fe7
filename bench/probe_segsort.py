"""Diagnostic: segmented sort's grid caps (WAVES, SMALL_WAVES) and offset forms."""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import device_ms, sized_call, add_extra_path  # noqa: E402
import cupy as cp, numpy as np
import cuprims
from cuprims import CountingIterator, TransformIterator, SortOrder
from cuprims.algorithms.segmented_sort import dispatch as d
add_extra_path()
try:
    import cuda.compute as cc
except Exception:
    cc = None

def ours(keys, out, ns, starts, ends):
    s = cuprims.make_segmented_sort(d_in_keys=keys, d_out_keys=out, start_offsets_in=starts, end_offsets_in=ends,
                                    order=SortOrder.ASCENDING)
    return sized_call(s, d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None, num_items=keys.size,
                      num_segments=ns, start_offsets_in=starts, end_offsets_in=ends)

for ns, size in ((1 << 20, 64), (1 << 22, 16), (1 << 16, 4096)):
    n = ns * size
    keys = cp.random.randint(0, 1 << 30, n, dtype=cp.int32); out = cp.empty_like(keys)
    offsets = cp.arange(0, n + 1, size)
    call = ours(keys, out, ns, offsets[:-1], offsets[1:])
    res = []
    for waves in (1, 2, 8):
        for small in (1, 2, 4, 8, 32):
            d.WAVES, d.SMALL_WAVES = waves, small
            res.append(f"W{waves}/S{small} {device_ms(call):.4f}")
    d.WAVES, d.SMALL_WAVES = 8, 2
    print(f"2^{ns.bit_length()-1}x{size}", " ".join(res), flush=True)
    if size == 4096:
        o32 = offsets.astype(cp.int32)
        print("int32 arrays", device_ms(ours(keys, out, ns, o32[:-1], o32[1:])), flush=True)
        start = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * 4096)
        print("start, start+1", device_ms(ours(keys, out, ns, start, start + 1)), flush=True)
        end = TransformIterator(CountingIterator(np.int64(1)), lambda i: i * 4096)
        print("two transforms", device_ms(ours(keys, out, ns, start, end)), flush=True)
        c32 = TransformIterator(CountingIterator(np.int32(0)), lambda i: i * 4096)
        e32 = TransformIterator(CountingIterator(np.int32(1)), lambda i: i * 4096)
        print("two int32 transforms", device_ms(ours(keys, out, ns, c32, e32)), flush=True)
    if cc is not None:
        s = cc.make_segmented_sort(d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None,
                                   start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:], order=cc.SortOrder.ASCENDING)
        print("cuda.compute", device_ms(sized_call(s, d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None,
              num_items=n, num_segments=ns, start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:])), flush=True)
    del keys, out
