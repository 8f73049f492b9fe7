"""By key: each run of equal consecutive keys reduced to one value (sums per run, run lengths
from a constant iterator, a Python reduction), run-length encoding, and scans that restart at
every run. Counts are written on the device: nothing synchronises until you read them."""

import cupy as cp
import numpy as np

import cuprims
from cuprims import ConstantIterator, OpKind


def main():
    rng = np.random.default_rng(11)
    n = 100_000
    keys = np.sort(rng.integers(0, 2_000, n)).astype(np.int32)
    values = rng.random(n).astype(np.float32)
    k, v = cp.asarray(keys), cp.asarray(values)
    heads = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])

    # sums per run of equal keys
    unique, sums, runs = cp.empty(n, cp.int32), cp.empty(n, cp.float32), cp.empty(1, cp.int64)
    cuprims.reduce_by_key(d_in_keys=k, d_in_values=v, d_out_unique_keys=unique, d_out_aggregates=sums,
                          d_out_num_runs=runs, reduction_op=OpKind.PLUS, num_items=n)
    r = int(runs[0])
    assert r == heads.size and (unique[:r].get() == keys[heads]).all()
    assert np.allclose(sums[:r].get(), np.add.reduceat(values.astype(np.float64), heads), rtol=1e-4)

    # run lengths: the values are a constant 1 (run-length encoding of sorted keys)
    lengths = cp.empty(n, cp.int32)
    cuprims.reduce_by_key(d_in_keys=k, d_in_values=ConstantIterator(np.int32(1)), d_out_unique_keys=unique,
                          d_out_aggregates=lengths, d_out_num_runs=runs, reduction_op=OpKind.PLUS, num_items=n)
    assert (lengths[:r].get() == np.diff(np.r_[heads, n])).all()

    # the largest value of each run, by a Python operator, with the object API
    def larger(a, b):
        return a if a > b else b

    largest = cp.empty(n, cp.float32)
    r_max = cuprims.make_reduce_by_key(d_in_keys=k, d_in_values=v, d_out_unique_keys=unique,
                                       d_out_aggregates=largest, d_out_num_runs=runs, reduction_op=larger)
    call = dict(d_in_keys=k, d_in_values=v, d_out_unique_keys=unique, d_out_aggregates=largest, d_out_num_runs=runs,
                num_items=n, reduction_op=larger)
    tmp = cp.empty(r_max(temp_storage=None, **call), cp.uint8)
    r_max(temp_storage=tmp, **call)
    assert (largest[:r].get() == np.maximum.reduceat(values, heads)).all()

    # run-length encoding: each run's item and length
    counts = cp.empty(n, cp.int64)
    cuprims.run_length_encode(d_in=k, d_out_unique=unique, d_out_counts=counts, d_out_num_runs=runs, num_items=n)
    assert int(runs[0]) == r and (unique[:r].get() == keys[heads]).all()
    assert (counts[:r].get() == np.diff(np.r_[heads, n])).all()
    # the runs of more than one item: where each starts and how long it is
    offsets, long_lengths = cp.empty(n, cp.int64), cp.empty(n, cp.int32)
    cuprims.non_trivial_runs(d_in=k, d_out_offsets=offsets, d_out_lengths=long_lengths, d_out_num_runs=runs,
                             num_items=n)
    run_lengths = np.diff(np.r_[heads, n])
    repeated = run_lengths > 1
    m = int(runs[0])
    assert m == repeated.sum() and (offsets[:m].get() == heads[repeated]).all()
    assert (long_lengths[:m].get() == run_lengths[repeated]).all()

    # scans that restart at every run: each item's position in its run, and running sums per run
    position = cp.empty(n, cp.int32)
    cuprims.exclusive_scan_by_key(d_in_keys=k, d_in_values=ConstantIterator(np.int32(1)), d_out=position,
                                  scan_op=OpKind.PLUS, init_value=np.int32(0), num_items=n)
    assert (position.get() == np.arange(n) - np.repeat(heads, np.diff(np.r_[heads, n]))).all()
    running = cp.empty(n, cp.float64)
    cuprims.inclusive_scan_by_key(d_in_keys=k, d_in_values=v, d_out=running, scan_op=OpKind.PLUS, num_items=n)
    ends = np.r_[heads[1:], n] - 1
    assert np.allclose(running[ends].get(), np.add.reduceat(values.astype(np.float64), heads))
    print("by_key: ok")


if __name__ == "__main__":
    main()
