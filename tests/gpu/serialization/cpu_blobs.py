"""Blobs built on a machine with no GPU, for [80, 90], and run on the GPU.

Building needs only numpy and cuprims (every argument a ProxyArray/ProxyValue placeholder)::

    python tests/gpu/serialization/cpu_blobs.py .cpu-blobs        # on the CPU machine: writes one blob per entry

tests/gpu/serialization/test_serialize_gpu.py then loads each blob from ``$CUPRIMS_CPU_BLOBS`` (default:
``.cpu-blobs`` in the repository root; ``scripts/gpu-run`` carries it) and checks its
results against numpy. The blob records the cuprims sources it was built from, so it must
be built from the same tree as the one under test.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

import cuprims
from cuprims import CountingIterator, OpKind, ProxyArray as P, ProxyValue as V, SortOrder, TransformIterator

ARCHS = [80, 90]
i4, i8, f4, f8 = np.int32, np.int64, np.float32, np.float64
PAIR = cuprims.gpu_struct({"lo": np.float32, "hi": np.int64})


def _add(a, b):
    return a + b


def _triple(i):
    return i * 3


def _widest(a, b):
    return PAIR(min(a.lo, b.lo), max(a.hi, b.hi))


def _multiple_of_three(v):
    return v % 3 == 0


def _greater(a, b):
    return a > b


BUILDERS: dict[str, Callable[[], Any]] = {
    "reduce_python_op_over_iterator": lambda: cuprims.make_reduce_into(
        d_in=TransformIterator(CountingIterator(i8(0)), _triple), d_out=P(i8), op=_add, h_init=V(i8),
        compute_capability=ARCHS),
    "reduce_struct_op": lambda: cuprims.make_reduce_into(d_in=P(PAIR.dtype), d_out=P(PAIR.dtype), op=_widest,
                                                        h_init=V(PAIR.dtype), compute_capability=ARCHS),
    "exclusive_scan": lambda: cuprims.make_exclusive_scan(d_in=P(f8), d_out=P(f8), op=OpKind.PLUS, init_value=V(f8),
                                                          compute_capability=ARCHS),
    "radix_sort_pairs": lambda: cuprims.make_radix_sort(d_in_keys=P(np.uint32), d_out_keys=P(np.uint32),
                                                        d_in_values=P(i4), d_out_values=P(i4),
                                                        order=SortOrder.DESCENDING, compute_capability=ARCHS),
    "merge_sort_python_comparator": lambda: cuprims.make_merge_sort(d_in_keys=P(i8), d_out_keys=P(i8), op=_greater,
                                                                    compute_capability=ARCHS),
    "merge_python_comparator": lambda: cuprims.make_merge(d_in_keys1=P(i8), d_in_values1=P(i4), d_in_keys2=P(i8),
                                                          d_in_values2=P(i4), d_out_keys=P(i8), d_out_values=P(i4),
                                                          op=_greater, compute_capability=ARCHS),
    "select_python_cond": lambda: cuprims.make_select(d_in=P(i4), d_out=P(i4), d_num_selected_out=P(i8),
                                                      cond=_multiple_of_three, compute_capability=ARCHS),
    "segmented_reduce": lambda: cuprims.make_segmented_reduce(d_in=P(f4), d_out=P(f4), start_offsets_in=P(i8),
                                                              end_offsets_in=P(i8), op=OpKind.MAXIMUM, h_init=V(f4),
                                                              compute_capability=ARCHS),
    "histogram": lambda: cuprims.make_histogram_even(d_samples=P(np.uint8), d_histogram=P(i4),
                                                     h_num_output_levels=np.array([257]), h_lower_level=np.int32(0),
                                                     h_upper_level=np.int32(256), num_samples=1,
                                                     compute_capability=ARCHS),
    "reduce_by_key": lambda: cuprims.make_reduce_by_key(d_in_keys=P(i4), d_in_values=P(f8), d_out_unique_keys=P(i4),
                                                        d_out_aggregates=P(f8), d_out_num_runs=P(i8),
                                                        reduction_op=OpKind.PLUS, compute_capability=ARCHS),
    "exclusive_scan_by_key": lambda: cuprims.make_exclusive_scan_by_key(
        d_in_keys=P(i8), d_in_values=P(i4), d_out=P(i4), scan_op=OpKind.PLUS, init_value=V(i4),
        compute_capability=ARCHS),
    "top_k_sorted_pairs": lambda: cuprims.make_top_k(d_in_keys=P(f4), d_out_keys=P(f4), d_in_values=P(i4),
                                                     d_out_values=P(i4), sorted=True, compute_capability=ARCHS),
    "segmented_top_k": lambda: cuprims.make_segmented_top_k(d_in_keys=P(f4), d_out_keys=P(f4), d_in_values=P(i4),
                                                            d_out_values=P(i4), start_offsets_in=P(i8),
                                                            end_offsets_in=P(i8), compute_capability=ARCHS),
}


def _temp(obj: Any, cp: Any, **args: Any) -> Any:
    return cp.empty(max(1, obj(temp_storage=None, **args)), cp.uint8)


def _run_reduce_iterator(obj, cp):
    n = 1_000_003
    out = cp.empty(1, i8)
    args = dict(d_in=TransformIterator(CountingIterator(i8(0)), _triple), d_out=out, num_items=n,
                op=_add, h_init=i8(5))
    obj(temp_storage=_temp(obj, cp, **args), **args)
    return int(out.get()[0]) == 5 + 3 * (n - 1) * n // 2


def _run_reduce_struct(obj, cp):
    rng = np.random.default_rng(3)
    host = np.zeros(100_000, PAIR.dtype)
    host["lo"], host["hi"] = rng.random(host.size, f4), rng.integers(-10**12, 10**12, host.size)
    d_in, out = cp.asarray(host), cp.empty(1, PAIR.dtype)
    init = np.zeros((), PAIR.dtype)
    init["lo"], init["hi"] = 2.0, -10**13
    args = dict(d_in=d_in, d_out=out, num_items=host.size, op=_widest, h_init=init)
    obj(temp_storage=_temp(obj, cp, **args), **args)
    got = out.get()[0]
    return float(got["lo"]) == float(host["lo"].min()) and int(got["hi"]) == int(host["hi"].max())


def _run_exclusive_scan(obj, cp):
    host = np.random.default_rng(4).integers(-100, 100, 777_777).astype(f8)
    d_in, out = cp.asarray(host), cp.empty(host.size, f8)
    args = dict(d_in=d_in, d_out=out, op=OpKind.PLUS, init_value=f8(0.5), num_items=host.size)
    obj(temp_storage=_temp(obj, cp, **args), **args)
    want = np.concatenate([[0.5], 0.5 + np.cumsum(host)[:-1]])
    return bool(np.array_equal(out.get(), want))   # integers in float64: exact in any order


def _run_radix_sort_pairs(obj, cp):
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 2**32, 1_234_567, dtype=np.uint64).astype(np.uint32)
    vals = np.arange(keys.size, dtype=i4)
    dk, dv = cp.asarray(keys), cp.asarray(vals)
    ok, ov = cp.empty_like(dk), cp.empty_like(dv)
    args = dict(d_in_keys=dk, d_out_keys=ok, d_in_values=dv, d_out_values=ov, num_items=keys.size)
    obj(temp_storage=_temp(obj, cp, **args), **args)
    order = np.argsort(~keys, kind="stable")   # descending, stable
    return bool(np.array_equal(ok.get(), keys[order]) and np.array_equal(ov.get(), vals[order]))


def _run_merge_sort(obj, cp):
    keys = np.random.default_rng(6).integers(-10**15, 10**15, 300_001).astype(i8)
    dk, ok = cp.asarray(keys), cp.empty(keys.size, i8)
    args = dict(d_in_keys=dk, d_in_values=None, d_out_keys=ok, d_out_values=None, op=_greater, num_items=keys.size)
    obj(temp_storage=_temp(obj, cp, **args), **args)
    return bool(np.array_equal(ok.get(), np.sort(keys)[::-1]))


def _run_merge(obj, cp):
    rng = np.random.default_rng(8)
    k1 = np.sort(rng.integers(-1000, 1000, 200_001))[::-1].astype(i8)
    k2 = np.sort(rng.integers(-1000, 1000, 99_999))[::-1].astype(i8)
    n = k1.size + k2.size
    ok, ov = cp.empty(n, i8), cp.empty(n, i4)
    args = dict(d_in_keys1=cp.asarray(k1), d_in_values1=cp.arange(k1.size, dtype=i4), d_in_keys2=cp.asarray(k2),
                d_in_values2=cp.arange(k1.size, n, dtype=i4), d_out_keys=ok, d_out_values=ov, op=_greater,
                num_items1=k1.size, num_items2=k2.size)
    obj(temp_storage=_temp(obj, cp, **args), **args)
    keys = np.concatenate([k1, k2])
    order = np.lexsort((np.arange(n), -keys))   # descending, the first sequence first among equal keys
    return bool(np.array_equal(ok.get(), keys[order]) and np.array_equal(ov.get(), order.astype(i4)))


def _run_select(obj, cp):
    host = np.random.default_rng(7).integers(-1000, 1000, 2_000_001).astype(i4)
    d_in, out, count = cp.asarray(host), cp.zeros(host.size, i4), cp.zeros(1, i8)
    args = dict(d_in=d_in, d_out=out, d_num_selected_out=count, cond=_multiple_of_three, num_items=host.size)
    obj(temp_storage=_temp(obj, cp, **args), **args)
    want = host[host % 3 == 0]
    k = int(count.get()[0])
    return k == want.size and bool(np.array_equal(out.get()[:k], want))


def _run_segmented_reduce(obj, cp):
    rng = np.random.default_rng(8)
    lengths = rng.integers(0, 3000, 2000)
    ends = np.cumsum(lengths).astype(i8)
    starts = ends - lengths
    host = rng.standard_normal(int(ends[-1])).astype(f4)
    out = cp.empty(lengths.size, f4)
    args = dict(d_in=cp.asarray(host), d_out=out, num_segments=lengths.size, start_offsets_in=cp.asarray(starts),
                end_offsets_in=cp.asarray(ends), op=OpKind.MAXIMUM, h_init=f4(-np.inf))
    obj(temp_storage=_temp(obj, cp, **args), **args)
    want = np.array([host[b:e].max() if e > b else -np.inf for b, e in zip(starts, ends)], f4)
    return bool(np.array_equal(out.get(), want))


def _run_histogram(obj, cp):
    host = np.random.default_rng(9).integers(0, 256, 5_000_000).astype(np.uint8)
    hist = cp.zeros(256, i4)
    args = dict(d_samples=cp.asarray(host), d_histogram=hist, h_num_output_levels=np.array([257]),
                h_lower_level=np.int32(0), h_upper_level=np.int32(256), num_samples=host.size)
    obj(temp_storage=_temp(obj, cp, **args), **args)
    return bool(np.array_equal(hist.get(), np.bincount(host, minlength=256)))


def _run_reduce_by_key(obj, cp):
    rng = np.random.default_rng(10)
    keys = np.sort(rng.integers(0, 5000, 400_000)).astype(i4)
    values = rng.integers(-100, 100, keys.size).astype(f8)
    uk, agg, runs = cp.empty(keys.size, i4), cp.empty(keys.size, f8), cp.zeros(1, i8)
    args = dict(d_in_keys=cp.asarray(keys), d_in_values=cp.asarray(values), d_out_unique_keys=uk, d_out_aggregates=agg,
                d_out_num_runs=runs, reduction_op=OpKind.PLUS, num_items=keys.size)
    obj(temp_storage=_temp(obj, cp, **args), **args)
    heads = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    m = int(runs.get()[0])
    return (m == heads.size and bool(np.array_equal(uk.get()[:m], keys[heads]))
            and bool(np.array_equal(agg.get()[:m], np.add.reduceat(values, heads))))   # integers in float64: exact


def _run_exclusive_scan_by_key(obj, cp):
    rng = np.random.default_rng(11)
    keys = np.sort(rng.integers(0, 3000, 500_000)).astype(i8)
    values = rng.integers(-100, 100, keys.size).astype(i4)
    out = cp.empty(keys.size, i4)
    args = dict(d_in_keys=cp.asarray(keys), d_in_values=cp.asarray(values), d_out=out, init_value=i4(5),
                num_items=keys.size)
    obj(temp_storage=_temp(obj, cp, **args), **args)
    heads = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    want = np.empty_like(values)
    for start, stop in zip(heads, np.r_[heads[1:], keys.size]):
        want[start:stop] = 5 + np.r_[0, np.cumsum(values[start:stop - 1])]
    return bool(np.array_equal(out.get(), want))


def _run_top_k(obj, cp):
    x = np.random.default_rng(12).standard_normal(1_000_003).astype(f4)
    ok, ov = cp.empty(100, f4), cp.empty(100, i4)
    args = dict(d_in_keys=cp.asarray(x), d_out_keys=ok, d_in_values=cp.arange(x.size, dtype=i4), d_out_values=ov,
                k=100, num_items=x.size)
    obj(temp_storage=_temp(obj, cp, **args), **args)
    return bool(np.array_equal(ok.get(), np.sort(x)[::-1][:100]) and np.array_equal(x[ov.get()], ok.get()))


def _run_segmented_top_k(obj, cp):
    rng = np.random.default_rng(12)
    lengths = rng.integers(0, 5000, 500)
    ends = np.cumsum(lengths).astype(i8)
    starts = ends - lengths
    host = rng.standard_normal(int(ends[-1])).astype(f4)
    k = 16
    out_k, out_v = cp.full(lengths.size * k, -1, f4), cp.full(lengths.size * k, -1, i4)
    positions = (np.arange(host.size) - np.repeat(starts, lengths)).astype(i4)   # the column in its row
    args = dict(d_in_keys=cp.asarray(host), d_out_keys=out_k, d_in_values=cp.asarray(positions), d_out_values=out_v,
                k=k, num_segments=lengths.size, start_offsets_in=cp.asarray(starts), end_offsets_in=cp.asarray(ends))
    obj(temp_storage=_temp(obj, cp, **args), **args)
    got_k, got_v = out_k.get().reshape(-1, k), out_v.get().reshape(-1, k)
    for row, (b, e) in enumerate(zip(starts, ends)):
        take = min(k, e - b)
        want = (e - b - 1 - np.argsort(host[b:e][::-1], kind="stable"))[::-1][:take]
        if not (np.array_equal(got_k[row, :take], host[b + want]) and np.array_equal(got_v[row, :take], want)):
            return False
    return True


RUNNERS: dict[str, Callable[[Any, Any], bool]] = {
    "reduce_python_op_over_iterator": _run_reduce_iterator,
    "reduce_struct_op": _run_reduce_struct,
    "exclusive_scan": _run_exclusive_scan,
    "radix_sort_pairs": _run_radix_sort_pairs,
    "merge_sort_python_comparator": _run_merge_sort,
    "merge_python_comparator": _run_merge,
    "select_python_cond": _run_select,
    "segmented_reduce": _run_segmented_reduce,
    "histogram": _run_histogram,
    "reduce_by_key": _run_reduce_by_key,
    "exclusive_scan_by_key": _run_exclusive_scan_by_key,
    "top_k_sorted_pairs": _run_top_k,
    "segmented_top_k": _run_segmented_top_k,
}


def main(out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, build in BUILDERS.items():
        obj = build()
        assert obj.compute_capabilities == ARCHS, obj.compute_capabilities
        (out / f"{name}.blob").write_bytes(cuprims.serialize(obj))
        print(f"{name}: {obj.compute_capabilities}", flush=True)
    (out / PYTHON_FILE).write_text(this_python())


# Python operators inside iterators are known by their bytecode, which is per Python version:
# these blobs run only under the Python that made them (elsewhere the call names the reason)
NEEDS_THE_SAME_PYTHON = frozenset({"reduce_python_op_over_iterator"})
PYTHON_FILE = "python-version"


def this_python() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".cpu-blobs")
