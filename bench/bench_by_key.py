"""Reductions and scans by key: 2^28 sorted int32 keys (about 2^20 runs) with float32 values, beside
what PyTorch users write today and the memory-bandwidth floor.

* ``reduce_by_key`` sums: against a device copy of keys and values (the data read once:
  the floor) and PyTorch's ``unique_consecutive(return_counts=True)`` followed by
  ``segment_reduce(values, "sum", lengths=counts)``;
* ``run_length_encode``: against ``torch.unique_consecutive(keys, return_counts=True)`` and
  a read of the keys (the floor);
* ``inclusive_scan_by_key`` sums: against our own plain ``inclusive_scan`` of the values plus
  a read of the keys (a max-reduction of them: the scan-by-key's extra traffic) and the
  cumsum-based emulation PyTorch users write (run ids from a cumsum of head flags, one
  cumsum of the values, each run's base gathered and subtracted).

Each row's ratio is the peer's figure over cuprims' (higher is better for cuprims), or
cuprims' over the copy (the floor: 1.0).

Run on a GPU machine:  python bench/bench_by_key.py [--out DIR] [--log2n 28]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import bench_arguments, device_ms, read_ms, result_rows, save_results  # noqa: E402


def main() -> None:
    args = bench_arguments()

    import cupy as cp
    import numpy as np
    import torch

    import cuprims
    from cuprims import OpKind

    n = 1 << args.log2n
    rows, add = result_rows(52, 56)
    keys = cp.sort(cp.random.randint(0, 1 << 20, n, dtype=cp.int32))
    values = cp.random.random(n, dtype=cp.float32)
    heads = cp.flatnonzero(cp.concatenate([cp.ones(1, bool), keys[1:] != keys[:-1]]))
    runs_expected = int(heads.size)

    # --- reduce_by_key: sums per run
    work = f"reduce_by_key sum, int32 keys + float32 values, 2^{args.log2n}"
    uk, agg, runs = cp.empty(n, np.int32), cp.empty(n, np.float32), cp.empty(1, np.int64)
    kw = dict(d_in_keys=keys, d_in_values=values, d_out_unique_keys=uk, d_out_aggregates=agg, d_out_num_runs=runs)
    r = cuprims.make_reduce_by_key(reduction_op=OpKind.PLUS, **kw)
    tmp = cp.empty(r(temp_storage=None, num_items=n, **kw), np.uint8)
    call = lambda: r(temp_storage=tmp, num_items=n, **kw)  # noqa: E731
    call()
    m = int(runs.get()[0])
    assert m == runs_expected and bool((uk[:m] == keys[heads]).all())
    want = np.add.reduceat(cp.asnumpy(values).astype(np.float64), cp.asnumpy(heads))
    assert np.allclose(cp.asnumpy(agg[:m]), want, rtol=1e-3)
    t_ours = device_ms(call)
    add(work, "cuprims reduce_by_key", t_ours, "ms", note=f"{m} runs")
    keys2, values2 = cp.empty_like(keys), cp.empty_like(values)

    def copy():
        keys2[...] = keys
        values2[...] = values

    t_copy = device_ms(copy)
    add(work, "device copy of keys and values (the floor)", t_copy, "ms", t_ours / t_copy,
        "ratio = cuprims/copy (target <= 1.3)")
    kt, vt = torch.as_tensor(keys, device="cuda"), torch.as_tensor(values, device="cuda")

    def torch_sums():
        _, counts = torch.unique_consecutive(kt, return_counts=True)
        return torch.segment_reduce(vt, "sum", lengths=counts)

    try:
        t_torch = device_ms(torch_sums)
        add(work, "torch unique_consecutive + segment_reduce", t_torch, "ms", t_torch / t_ours,
            "ratio = torch/cuprims (target >= 5)")
    except Exception as exc:  # noqa: BLE001
        print("torch segment_reduce failed:", exc)

    # --- run_length_encode
    work = f"run_length_encode, int32 keys, 2^{args.log2n}"
    counts = cp.empty(n, np.int64)
    kw = dict(d_in=keys, d_out_unique=uk, d_out_counts=counts, d_out_num_runs=runs)
    rle = cuprims.make_run_length_encode(**kw)
    tmp = cp.empty(rle(temp_storage=None, num_items=n, **kw), np.uint8)
    call = lambda: rle(temp_storage=tmp, num_items=n, **kw)  # noqa: E731
    call()
    assert int(runs.get()[0]) == runs_expected
    assert bool((counts[:m] == cp.diff(cp.concatenate([heads, cp.asarray([n])]))).all())
    t_rle = device_ms(call)
    add(work, "cuprims run_length_encode", t_rle, "ms")
    t_torch_rle = device_ms(lambda: torch.unique_consecutive(kt, return_counts=True))
    add(work, "torch.unique_consecutive(return_counts=True)", t_torch_rle, "ms", t_torch_rle / t_rle,
        "ratio = torch/cuprims (target >= 2)")
    t_read = read_ms(keys)
    add(work, "a read of the keys (cuprims max-reduce: the floor)", t_read, "ms", t_rle / t_read,
        "ratio = cuprims/read")

    # --- inclusive_scan_by_key: running sums that restart at every run
    work = f"inclusive_scan_by_key sum, int32 keys + float32 values, 2^{args.log2n}"
    out = cp.empty(n, np.float32)
    kw = dict(d_in_keys=keys, d_in_values=values, d_out=out)
    sbk = cuprims.make_inclusive_scan_by_key(scan_op=OpKind.PLUS, **kw)
    tmp = cp.empty(sbk(temp_storage=None, num_items=n, **kw), np.uint8)
    call = lambda: sbk(temp_storage=tmp, num_items=n, **kw)  # noqa: E731
    call()
    ends = cp.concatenate([heads[1:], cp.asarray([n])]) - 1
    assert np.allclose(cp.asnumpy(out[ends]), want, rtol=1e-3)
    t_sbk = device_ms(call)
    add(work, "cuprims inclusive_scan_by_key", t_sbk, "ms")
    scan = cuprims.make_inclusive_scan(d_in=values, d_out=values2, op=OpKind.PLUS)
    tmp_scan = cp.empty(scan(temp_storage=None, d_in=values, d_out=values2, op=OpKind.PLUS, init_value=None,
                             num_items=n), np.uint8)
    t_scan = device_ms(lambda: scan(temp_storage=tmp_scan, d_in=values, d_out=values2, op=OpKind.PLUS,
                                    init_value=None, num_items=n))
    add(work, "cuprims inclusive_scan of the values + a read of the keys", t_scan + t_read, "ms",
        t_sbk / (t_scan + t_read), "ratio = scan_by_key/(scan + read) (target <= 1.3)")

    def torch_scan_by_key():
        flags = torch.ones(n, dtype=torch.bool, device="cuda")
        flags[1:] = kt[1:] != kt[:-1]
        ids = torch.cumsum(flags, 0) - 1
        running = torch.cumsum(vt, 0)
        starts = torch.nonzero(flags).squeeze(1)
        return running - (running - vt)[starts][ids]

    t_torch_sbk = device_ms(torch_scan_by_key)
    add(work, "torch cumsum-based emulation", t_torch_sbk, "ms", t_torch_sbk / t_sbk,
        "ratio = torch/cuprims (target >= 5)")
    save_results("by_key", rows, args.out, False)


if __name__ == "__main__":
    main()
