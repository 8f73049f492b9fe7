"""cuprims demo: run the algorithms on the GPU (each result checked against numpy), or,
without a GPU, build them ahead of time for sm_90.

    bash scripts/demo
"""

from __future__ import annotations

import time

import numpy as np

import cuprims
from cuprims import CountingIterator, OpKind, ProxyArray, ProxyValue, SortOrder, TransformIterator


def have_gpu() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def less(a, b):
    return a < b


def run_on_gpu() -> None:
    import cupy as cp

    rng = np.random.default_rng(0)
    n = 1 << 24
    hx = rng.random(n, dtype=np.float32)
    hi = rng.integers(-1000, 1000, n).astype(np.int32)
    x, xi = cp.asarray(hx), cp.asarray(hi)

    def show(label: str, t0: float, ok: bool) -> None:
        cp.cuda.Device().synchronize()
        print(f"  {label:46s} {'ok ' if ok else 'WRONG'}  first call incl. build {time.perf_counter() - t0:5.2f} s")

    print(f"cuprims {cuprims.__version__} on {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, n = {n}")
    out = cp.empty(1, cp.float32)
    for label, op in [("reduce_into, OpKind.PLUS", OpKind.PLUS), ("reduce_into, lambda a, b: a + b",
                                                                   lambda a, b: a + b)]:
        t0 = time.perf_counter()
        cuprims.reduce_into(d_in=x, d_out=out, num_items=n, op=op, h_init=np.float32(0))
        show(label, t0, abs(float(out[0]) - float(hx.sum(dtype=np.float64))) < 1e-3 * n)

    scanned = cp.empty_like(xi)
    t0 = time.perf_counter()
    cuprims.inclusive_scan(d_in=xi, d_out=scanned, op=OpKind.PLUS, num_items=n)
    show("inclusive_scan, int32 PLUS", t0, bool((scanned.get() == np.cumsum(hi, dtype=np.int32)).all()))

    y = cp.empty_like(x)
    t0 = time.perf_counter()
    cuprims.unary_transform(d_in=x, d_out=y, op=lambda v: v * 2 + 1, num_items=n)
    show("unary_transform, lambda v: v * 2 + 1", t0, bool(np.allclose(y.get(), hx * 2 + 1)))

    keys = cp.asarray(rng.integers(0, 1 << 32, n, dtype=np.uint32))
    sorted_keys = cp.empty_like(keys)
    t0 = time.perf_counter()
    cuprims.radix_sort(d_in_keys=keys, d_out_keys=sorted_keys, num_items=n, order=SortOrder.ASCENDING)
    show("radix_sort, uint32 keys", t0, bool((sorted_keys.get() == np.sort(keys.get())).all()))

    merged = cp.empty_like(xi)
    t0 = time.perf_counter()
    cuprims.merge_sort(d_in_keys=xi, d_out_keys=merged, num_items=n, op=less)
    show("merge_sort, Python comparator a < b", t0, bool((merged.get() == np.sort(hi)).all()))

    data = cp.sort(xi)
    found = cp.empty(4096, cp.int64)
    queries = TransformIterator(CountingIterator(np.int32(0)), lambda i: i - 2048, np.int32)
    t0 = time.perf_counter()
    cuprims.lower_bound(d_data=data, num_items=n, d_values=queries, num_values=4096, d_out=found)
    expect = np.searchsorted(data.get(), np.arange(-2048, 2048, dtype=np.int32))
    show("lower_bound, values from an iterator", t0, bool((found.get() == expect).all()))

    seg = 256
    sums = cp.empty(n // seg, cp.float32)
    starts = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * 256)
    ends = TransformIterator(CountingIterator(np.int64(1)), lambda i: i * 256)
    t0 = time.perf_counter()
    cuprims.segmented_reduce(d_in=x, d_out=sums, num_segments=n // seg, start_offsets_in=starts, end_offsets_in=ends,
                             op=OpKind.PLUS, h_init=np.float32(0), max_segment_size=seg)
    show("segmented_reduce, 256-item segments", t0, bool(np.allclose(sums.get(), hx.reshape(-1, seg).sum(axis=1),
                                                                     rtol=1e-4)))

    tiles = cp.empty_like(xi)
    t0 = time.perf_counter()
    cuprims.segmented_sort(d_in_keys=xi, d_out_keys=tiles, num_items=n, num_segments=n // 4096,
                           start_offsets_in=TransformIterator(CountingIterator(np.int64(0)), lambda i: i * 4096),
                           end_offsets_in=TransformIterator(CountingIterator(np.int64(1)), lambda i: i * 4096),
                           order=SortOrder.ASCENDING)
    show("segmented_sort, 4096-key segments", t0, bool((tiles.get() == np.sort(hi.reshape(-1, 4096), axis=1)
                                                        .reshape(-1)).all()))

    evens, count = cp.empty_like(xi), cp.empty(1, cp.int64)
    t0 = time.perf_counter()
    cuprims.select(d_in=xi, d_out=evens, d_num_selected_out=count, cond=lambda v: v % 2 == 0, num_items=n)
    kept = int(count.get()[0])
    show("select, lambda v: v % 2 == 0", t0, bool((evens[:kept].get() == hi[hi % 2 == 0]).all()))

    runs = cp.sort(xi)
    uk, ui, uc = cp.empty_like(xi), cp.empty_like(x), cp.empty(1, cp.int64)
    t0 = time.perf_counter()
    cuprims.unique_by_key(d_in_keys=runs, d_in_items=x, d_out_keys=uk, d_out_items=ui, d_out_num_selected=uc,
                          op=OpKind.EQUAL_TO, num_items=n)
    show("unique_by_key, int32 keys", t0, bool((uk[:int(uc.get()[0])].get() == np.unique(hi)).all()))

    samples = cp.asarray(rng.integers(0, 256, n).astype(np.uint8))
    hist = cp.empty(256, cp.int32)
    t0 = time.perf_counter()
    cuprims.histogram_even(d_samples=samples, d_histogram=hist, num_output_levels=257, lower_level=np.int32(0),
                           upper_level=np.int32(256), num_samples=n)
    show("histogram_even, uint8 into 256 bins", t0, bool((hist.get() == np.bincount(samples.get(), minlength=256))
                                                         .all()))

    reducer = cuprims.make_reduce_into(d_in=x, d_out=out, op=OpKind.PLUS, h_init=np.float32(0))
    t0 = time.perf_counter()
    twin = cuprims.deserialize(cuprims.serialize(reducer))
    tmp = cp.empty(max(1, twin(temp_storage=None, d_in=x, d_out=out, num_items=n, h_init=np.float32(0))), cp.uint8)
    twin(temp_storage=tmp, d_in=x, d_out=out, num_items=n, h_init=np.float32(0))
    show("serialize + deserialize + call (no compile)", t0, abs(float(out[0]) - float(hx.sum(dtype=np.float64)))
         < 1e-3 * n)


def build_ahead_of_time() -> None:
    print("no GPU here: building ahead of time for sm_90")
    P, V = ProxyArray, ProxyValue
    f4, i4, u4, i8 = np.float32, np.int32, np.uint32, np.int64
    builds = [
        ("reduce_into, float32 PLUS", lambda: cuprims.make_reduce_into(
            d_in=P(f4), d_out=P(f4), op=OpKind.PLUS, h_init=V(f4), compute_capability=90)),
        ("reduce_into, float32 lambda a + b", lambda: cuprims.make_reduce_into(
            d_in=P(f4), d_out=P(f4), op=lambda a, b: a + b, h_init=V(f4), compute_capability=90)),
        ("inclusive_scan, int32 PLUS", lambda: cuprims.make_inclusive_scan(
            d_in=P(i4), d_out=P(i4), op=OpKind.PLUS, compute_capability=90)),
        ("unary_transform, lambda v: v * 2 + 1", lambda: cuprims.make_unary_transform(
            d_in=P(f4), d_out=P(f4), op=lambda v: v * 2 + 1, compute_capability=90)),
        ("radix_sort, uint32 keys", lambda: cuprims.make_radix_sort(
            d_in_keys=P(u4), d_out_keys=P(u4), d_in_values=None, d_out_values=None, order=SortOrder.ASCENDING,
            compute_capability=90)),
        ("merge_sort, Python comparator a < b", lambda: cuprims.make_merge_sort(
            d_in_keys=P(i4), d_out_keys=P(i4), op=less, compute_capability=90)),
        ("lower_bound, values from an iterator", lambda: cuprims.make_lower_bound(
            d_data=P(i4), d_values=CountingIterator(np.int32(0)), d_out=P(i8), compute_capability=90)),
        ("segmented_reduce, fixed-size segments", lambda: cuprims.make_segmented_reduce(
            d_in=P(f4), d_out=P(f4), start_offsets_in=TransformIterator(CountingIterator(i8(0)), lambda i: i * 256),
            end_offsets_in=TransformIterator(CountingIterator(i8(1)), lambda i: i * 256), op=OpKind.PLUS,
            h_init=V(f4), compute_capability=90)),
        ("unique_by_key, int32 keys", lambda: cuprims.make_unique_by_key(
            d_in_keys=P(i4), d_in_items=P(f4), d_out_keys=P(i4), d_out_items=P(f4), d_out_num_selected=P(i8),
            op=OpKind.EQUAL_TO, compute_capability=90)),
        ("select, lambda v: v % 2 == 0", lambda: cuprims.make_select(
            d_in=P(i4), d_out=P(i4), d_num_selected_out=P(i8), cond=lambda v: v % 2 == 0, compute_capability=90)),
        ("segmented_sort, int32 keys", lambda: cuprims.make_segmented_sort(
            d_in_keys=P(i4), d_out_keys=P(i4), start_offsets_in=P(i8), end_offsets_in=P(i8),
            order=SortOrder.ASCENDING, compute_capability=90)),
        ("three_way_partition, two lambdas", lambda: cuprims.make_three_way_partition(
            d_in=P(i4), d_first_part_out=P(i4), d_second_part_out=P(i4), d_unselected_out=P(i4),
            d_num_selected_out=P(i8), select_first_part_op=lambda v: v < 0, select_second_part_op=lambda v: v > 9,
            compute_capability=90)),
        ("histogram_even, uint8 into 256 bins", lambda: cuprims.make_histogram_even(
            d_samples=P(np.uint8), d_histogram=P(i4), h_num_output_levels=np.array([257]),
            h_lower_level=np.int32(0), h_upper_level=np.int32(256), num_samples=1 << 24, compute_capability=90)),
    ]
    for label, make in builds:
        t0 = time.perf_counter()
        algorithm = make()
        print(f"  {label:40s} -> sm_90 cubin of {len(algorithm.cubin(90)):7d} bytes in "
              f"{time.perf_counter() - t0:5.2f} s")
    blob = cuprims.serialize(algorithm)
    again = cuprims.deserialize(blob)
    print(f"  serialized the last one: {len(blob)} bytes; deserialized for {again.compute_capabilities}, "
          "nothing compiled")


def main() -> None:
    if have_gpu():
        run_on_gpu()
    else:
        build_ahead_of_time()
    info = cuprims.cache_info()
    print("cache:", {k: info[k] for k in ("numba_compiles", "nvrtc_compiles", "links", "memory_hits", "disk_hits")},
          "at", info["cache_dir"])


if __name__ == "__main__":
    main()
