"""Diagnostic: segmented sort offsets from int64 vs int32 iterators (host and device), uncapped small grids."""
import sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import device_ms, sized_call, host_us  # noqa: E402
import cupy as cp, numpy as np
import cuprims
from cuprims import CountingIterator, TransformIterator, SortOrder
from cuprims.algorithms.segmented_sort import dispatch as d

def ours(keys, out, ns, starts, ends):
    s = cuprims.make_segmented_sort(d_in_keys=keys, d_out_keys=out, start_offsets_in=starts, end_offsets_in=ends,
                                    order=SortOrder.ASCENDING)
    return sized_call(s, d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None, num_items=keys.size,
                      num_segments=ns, start_offsets_in=starts, end_offsets_in=ends)
mode = sys.argv[1] if len(sys.argv) > 1 else "all"
ns, size = 1 << 16, 4096
n = ns * size
keys = cp.random.randint(0, 1 << 30, n, dtype=cp.int32); out = cp.empty_like(keys)
offsets = cp.arange(0, n + 1, size)
want = cp.sort(keys.reshape(ns, size), axis=1).reshape(-1)
s64 = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * 4096)
e64 = TransformIterator(CountingIterator(np.int64(1)), lambda i: i * 4096)
s32 = TransformIterator(CountingIterator(np.int32(0)), lambda i: i * 4096)
e32 = TransformIterator(CountingIterator(np.int32(1)), lambda i: i * 4096)
forms = {"arr64": (offsets[:-1], offsets[1:]), "it64": (s64, e64), "it32": (s32, e32)}
for name, (a, b) in forms.items():
    if mode != "all" and name != mode:
        continue
    call = ours(keys, out, ns, a, b)
    out.fill(0); call(); ok = bool((out == want).all())
    cp.cuda.Device().synchronize(); t0 = time.perf_counter(); call(); t1 = time.perf_counter()
    cp.cuda.Device().synchronize()
    print(f"{name}: correct={ok} device {device_ms(call):.4f} ms, one call's host {1e3*(t1-t0):.3f} ms", flush=True)
if mode == "all":
    for ns2, size2 in ((1 << 20, 64), (1 << 22, 16)):
        n2 = ns2 * size2
        k2 = cp.random.randint(0, 1 << 30, n2, dtype=cp.int32); o2 = cp.empty_like(k2)
        off2 = cp.arange(0, n2 + 1, size2)
        call = ours(k2, o2, ns2, off2[:-1], off2[1:])
        res = []
        for small in (8, 32, 128, 1 << 20):
            d.SMALL_WAVES = small
            res.append(f"S{small} {device_ms(call):.4f}")
        d.SMALL_WAVES = 2
        print(f"2^{ns2.bit_length()-1}x{size2}", " ".join(res), flush=True)
