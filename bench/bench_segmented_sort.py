"""Segmented sort benchmark: cuprims beside cuda.compute, PyTorch and CuPy, in one process.

* 2^16 segments of 4096 int32 keys (targets: >= 1.0x cuda.compute's make_segmented_sort,
  >= 1.5x torch.sort(dim=-1) on the reshaped keys): cuprims' object API (offsets from
  iterators and as arrays), the one-shot function, a DoubleBuffer, and CUB's large-segment
  tiers alone (the middle tier off: ``mid_items=0``, to see what it brings);
  cuda.compute, torch.sort(dim=-1), cupy.sort(axis=-1);
* the same as pairs (int32 values; torch returns int64 indices instead);
* 2^16 segments of irregular lengths (1..8192) and 2^20 segments of 64 keys, against
  cuda.compute.

Run on a GPU machine:  python bench/bench_segmented_sort.py [--out DIR]
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import bench_arguments, device_ms, result_rows, save_results  # noqa: E402


def main() -> None:
    args = bench_arguments(log2n=None)

    import cupy as cp
    import numpy as np
    import torch

    import cuprims
    from cuprims import CountingIterator, DoubleBuffer, SortOrder, TransformIterator
    from cuprims.algorithms.segmented_sort.api import SegmentedSort

    try:
        import cuda.compute as ccomp
    except Exception as exc:  # noqa: BLE001
        ccomp = None
        print("cuda.compute not importable:", exc)
    rows, add = result_rows(46, 44)
    asc = SortOrder.ASCENDING

    def ours(keys, out, vals, out_v, ns, starts, ends, mid_items=None):
        kw = dict(d_in_keys=keys, d_out_keys=out, d_in_values=vals, d_out_values=out_v, start_offsets_in=starts,
                  end_offsets_in=ends)
        s = cuprims.make_segmented_sort(**kw, order=asc)
        if mid_items is not None:  # a tuning variant of the same sort (see SegmentedSortDescription)
            s = SegmentedSort._make(dataclasses.replace(s.desc, mid_items=mid_items), None, (None, starts, ends))
        call = dict(kw, num_items=keys.size, num_segments=ns)
        tmp = cp.empty(s(temp_storage=None, **call), np.uint8)
        return device_ms(lambda: s(temp_storage=tmp, **call), inner=5, repeats=9)

    def theirs(keys, out, vals, out_v, ns, starts, ends):
        kw = dict(d_in_keys=keys, d_out_keys=out, d_in_values=vals, d_out_values=out_v, start_offsets_in=starts,
                  end_offsets_in=ends)
        s = ccomp.make_segmented_sort(**kw, order=ccomp.SortOrder.ASCENDING)
        call = dict(kw, num_items=keys.size, num_segments=ns)
        tmp = cp.empty(max(1, s(temp_storage=None, **call)), np.uint8)
        return device_ms(lambda: s(temp_storage=tmp, **call), inner=5, repeats=9)

    def fixed(size):
        return (TransformIterator(CountingIterator(np.int32(0)), lambda i: i * size),
                TransformIterator(CountingIterator(np.int32(1)), lambda i: i * size))

    # --- 2^16 x 4096 int32 keys --------------------------------------------------------------
    ns, size = 1 << 16, 4096
    n = ns * size
    work = "int32 keys, 2^16 segments x 4096"
    keys = cp.asarray(np.random.default_rng(1).integers(-(1 << 31), 1 << 31, n, dtype=np.int32))
    out = cp.empty_like(keys)
    starts_it, ends_it = fixed(size)
    offsets = cp.arange(0, n + 1, size, dtype=cp.int32)
    t_it = ours(keys, out, None, None, ns, starts_it, ends_it)
    assert bool(cp.array_equal(out.reshape(ns, size), cp.sort(keys.reshape(ns, size), axis=-1)))
    t_arr = ours(keys, out, None, None, ns, offsets[:-1], offsets[1:])
    t_cub_tiers = ours(keys, out, None, None, ns, starts_it, ends_it, mid_items=0)
    t_one = device_ms(lambda: cuprims.segmented_sort(d_in_keys=keys, d_out_keys=out, num_items=n, num_segments=ns,
                                                     start_offsets_in=starts_it, end_offsets_in=ends_it, order=asc),
                      inner=5, repeats=9)
    scratch = cp.empty_like(keys)
    db = DoubleBuffer(keys.copy(), scratch)  # sorting sorted data costs a radix sort the same
    t_db = device_ms(lambda: cuprims.segmented_sort(d_in_keys=db, num_items=n, num_segments=ns,
                                                    start_offsets_in=starts_it, end_offsets_in=ends_it, order=asc),
                     inner=5, repeats=9)
    kt = torch.as_tensor(keys, device="cuda").view(ns, size)
    t_torch = device_ms(lambda: torch.sort(kt, dim=-1), inner=5, repeats=9)
    k2 = keys.reshape(ns, size)
    t_cupy = device_ms(lambda: cp.sort(k2, axis=-1), inner=5, repeats=9)
    add(work, "cuprims object API, offsets from iterators", t_it, "ms", t_torch / t_it,
        "ratio = torch/cuprims (target >= 1.5)")
    add(work, "cuprims object API, offset arrays", t_arr, "ms", t_torch / t_arr, "ratio = torch/cuprims")
    add(work, "cuprims one-shot segmented_sort", t_one, "ms", t_torch / t_one, "ratio = torch/cuprims")
    add(work, "cuprims DoubleBuffer (one-shot)", t_db, "ms", t_torch / t_db, "ratio = torch/cuprims")
    add(work, "cuprims, CUB's tiers only (mid_items=0)", t_cub_tiers, "ms", t_cub_tiers / t_it,
        "ratio = this/cuprims default (> 1: the middle tier helps)")
    add(work, "torch.sort(dim=-1)", t_torch, "ms")
    add(work, "cupy.sort(axis=-1)", t_cupy, "ms", t_cupy / t_it, "ratio = cupy/cuprims")
    if ccomp is not None:
        try:
            t_cc = theirs(keys, out, None, None, ns, offsets[:-1], offsets[1:])
            add(work, "cuda.compute make_segmented_sort", t_cc, "ms", t_cc / t_arr,
                "ratio = cuda.compute/cuprims arrays (target >= 1.0)")
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute segmented sort (keys) failed:", exc)

    # --- pairs -------------------------------------------------------------------------
    work = "int32 pairs, 2^16 segments x 4096"
    vals, out_v = cp.arange(n, dtype=cp.int32), cp.empty(n, cp.int32)
    t_pairs = ours(keys, out, vals, out_v, ns, starts_it, ends_it)
    add(work, "cuprims object API, offsets from iterators", t_pairs, "ms", t_torch / t_pairs,
        "ratio = torch keys-only sort (values, int64 indices)/cuprims")
    if ccomp is not None:
        try:
            t_cc = theirs(keys, out, vals, out_v, ns, offsets[:-1], offsets[1:])
            add(work, "cuda.compute make_segmented_sort", t_cc, "ms", t_cc / t_pairs, "ratio = cuda.compute/cuprims")
        except Exception as exc:  # noqa: BLE001
            print("cuda.compute segmented sort (pairs) failed:", exc)
    keys = out = vals = out_v = scratch = db = kt = k2 = None  # free the 2^28-item arrays

    # --- irregular lengths, and many short segments -------------------------------------------
    rng = np.random.default_rng(2)
    for work, lengths in (("int32 keys, 2^16 irregular segments (1..8192)", rng.integers(1, 8193, 1 << 16)),
                          ("int32 keys, 2^20 segments x 64", np.full(1 << 20, 64))):
        ends_h = np.cumsum(lengths).astype(np.int32)
        starts_h = ends_h - lengths.astype(np.int32)
        n = int(ends_h[-1])
        keys = cp.asarray(rng.integers(-(1 << 31), 1 << 31, n, dtype=np.int32))
        out = cp.empty_like(keys)
        starts, ends = cp.asarray(starts_h), cp.asarray(ends_h)
        t_ours = ours(keys, out, None, None, lengths.size, starts, ends)
        t_tiers = ours(keys, out, None, None, lengths.size, starts, ends, mid_items=0)
        add(work, "cuprims object API", t_ours, "ms")
        add(work, "cuprims, CUB's tiers only (mid_items=0)", t_tiers, "ms", t_tiers / t_ours,
            "ratio = this/cuprims default")
        if ccomp is not None:
            try:
                t_cc = theirs(keys, out, None, None, lengths.size, starts, ends)
                add(work, "cuda.compute make_segmented_sort", t_cc, "ms", t_cc / t_ours,
                    "ratio = cuda.compute/cuprims (target >= 1.0)")
            except Exception as exc:  # noqa: BLE001
                print("cuda.compute segmented sort failed:", exc)
        keys = out = None

    save_results("segmented_sort", rows, args.out, ccomp is not None)


if __name__ == "__main__":
    main()
