"""Diagnostic: the hint-free segmented sum's grid (waves) against the hinted warp kernel."""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import device_ms, sized_call  # noqa: E402
import cupy as cp, numpy as np
import cuprims
from cuprims.algorithms.segmented_reduce import api
h0 = np.zeros(1, np.float32)
rng = np.random.default_rng(1)
for label, lengths in (("2^20x256", np.full(1 << 20, 256)), ("2^16x4096", np.full(1 << 16, 4096)),
                       ("irregular", rng.integers(1, 8193, 1 << 16)), ("2^22x64", np.full(1 << 22, 64))):
    ends_h = np.cumsum(lengths); ns, n = lengths.size, int(ends_h[-1])
    x = cp.random.random(n, dtype=cp.float32); out = cp.empty(ns, np.float32)
    starts, ends = cp.asarray(ends_h - lengths), cp.asarray(ends_h)
    r = cuprims.make_segmented_reduce(d_in=x, d_out=out, start_offsets_in=starts, end_offsets_in=ends,
                                      op=cuprims.OpKind.PLUS, h_init=h0)
    call = lambda hint: sized_call(r, d_in=x, d_out=out, num_segments=ns, start_offsets_in=starts,
                                   end_offsets_in=ends, op=cuprims.OpKind.PLUS, h_init=h0, max_segment_size=hint)
    res = [f"hint {device_ms(call(int(lengths.max()))):.4f}"]
    for waves in (1, 2, 4, 8, 16, 32):
        api.ADAPTIVE_WAVES = waves
        res.append(f"w{waves} {device_ms(call(None)):.4f}")
    api.ADAPTIVE_WAVES = 16
    for spread in (2, 4, 16):
        api.ADAPTIVE_SPREAD_WAVES = spread
        res.append(f"s{spread} {device_ms(call(None)):.4f}")
    api.ADAPTIVE_SPREAD_WAVES = 8
    print(label, " ".join(res), flush=True)
    if label == "2^20x256":
        print("cupy", device_ms(lambda: x.reshape(ns, 256).sum(axis=1, out=out)), flush=True)
