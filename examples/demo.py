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
    """Whether the NVIDIA driver is here and shows a GPU (asked through cuda.core, which
    cuprims depends on: no array library is needed to tell)."""
    try:
        from cuda.core import Device

        Device(0)
        return True
    except Exception:  # noqa: BLE001 - no driver library, no device, or a driver too old
        return False


class DeviceArrays:
    """The few array operations the demo needs: CuPy's where CuPy is installed (the gpu
    extra), numba-cuda's device arrays otherwise (numba-cuda comes with cuprims)."""

    def __init__(self) -> None:
        try:
            import cupy

            self.cupy = cupy
        except ImportError:
            self.cupy = None
        from numba import cuda

        self.numba_cuda = cuda

    @property
    def library(self) -> str:
        return f"CuPy {self.cupy.__version__}" if self.cupy else "numba-cuda device arrays"

    def device_name(self) -> str:
        from cuda.core import Device

        return Device(0).name

    def to_device(self, host: np.ndarray):
        return self.cupy.asarray(host) if self.cupy else self.numba_cuda.to_device(host)

    def empty(self, n: int, dtype):
        return self.cupy.empty(n, dtype) if self.cupy else self.numba_cuda.device_array(n, dtype)

    def to_host(self, d) -> np.ndarray:
        return d.get() if self.cupy else d.copy_to_host()

    def synchronize(self) -> None:
        if self.cupy:
            self.cupy.cuda.Device().synchronize()
        else:
            self.numba_cuda.synchronize()


def less(a, b):
    return a < b


def run_on_gpu() -> None:
    xp = DeviceArrays()
    rng = np.random.default_rng(0)
    n = 1 << 24
    hx = rng.random(n, dtype=np.float32)
    hi = rng.integers(-1000, 1000, n).astype(np.int32)
    x, xi = xp.to_device(hx), xp.to_device(hi)

    def show(label: str, t0: float, ok: bool) -> None:
        xp.synchronize()
        print(f"  {label:46s} {'ok ' if ok else 'WRONG'}  first call incl. build {time.perf_counter() - t0:5.2f} s")

    print(f"cuprims {cuprims.__version__} on {xp.device_name()} with {xp.library}, n = {n}")
    out = xp.empty(1, np.float32)
    for label, op in [("reduce_into, OpKind.PLUS", OpKind.PLUS), ("reduce_into, lambda a, b: a + b",
                                                                   lambda a, b: a + b)]:
        t0 = time.perf_counter()
        cuprims.reduce_into(d_in=x, d_out=out, num_items=n, op=op, h_init=np.float32(0))
        show(label, t0, abs(float(xp.to_host(out)[0]) - float(hx.sum(dtype=np.float64))) < 1e-3 * n)

    scanned = xp.empty(n, np.int32)
    t0 = time.perf_counter()
    cuprims.inclusive_scan(d_in=xi, d_out=scanned, op=OpKind.PLUS, num_items=n)
    show("inclusive_scan, int32 PLUS", t0, bool((xp.to_host(scanned) == np.cumsum(hi, dtype=np.int32)).all()))

    y = xp.empty(n, np.float32)
    t0 = time.perf_counter()
    cuprims.unary_transform(d_in=x, d_out=y, op=lambda v: v * 2 + 1, num_items=n)
    show("unary_transform, lambda v: v * 2 + 1", t0, bool(np.allclose(xp.to_host(y), hx * 2 + 1)))

    hkeys = rng.integers(0, 1 << 32, n, dtype=np.uint32)
    keys = xp.to_device(hkeys)
    sorted_keys = xp.empty(n, np.uint32)
    t0 = time.perf_counter()
    cuprims.radix_sort(d_in_keys=keys, d_out_keys=sorted_keys, num_items=n, order=SortOrder.ASCENDING)
    show("radix_sort, uint32 keys", t0, bool((xp.to_host(sorted_keys) == np.sort(hkeys)).all()))

    merged = xp.empty(n, np.int32)
    t0 = time.perf_counter()
    cuprims.merge_sort(d_in_keys=xi, d_out_keys=merged, num_items=n, op=less)
    show("merge_sort, Python comparator a < b", t0, bool((xp.to_host(merged) == np.sort(hi)).all()))

    hsorted = np.sort(hi)
    data = xp.to_device(hsorted)
    found = xp.empty(4096, np.int64)
    queries = TransformIterator(CountingIterator(np.int32(0)), lambda i: i - 2048, np.int32)
    t0 = time.perf_counter()
    cuprims.lower_bound(d_data=data, num_items=n, d_values=queries, num_values=4096, d_out=found)
    expect = np.searchsorted(hsorted, np.arange(-2048, 2048, dtype=np.int32))
    show("lower_bound, values from an iterator", t0, bool((xp.to_host(found) == expect).all()))

    seg = 256
    sums = xp.empty(n // seg, np.float32)
    starts = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * 256)
    ends = TransformIterator(CountingIterator(np.int64(1)), lambda i: i * 256)
    t0 = time.perf_counter()
    cuprims.segmented_reduce(d_in=x, d_out=sums, num_segments=n // seg, start_offsets_in=starts, end_offsets_in=ends,
                             op=OpKind.PLUS, h_init=np.float32(0), max_segment_size=seg)
    show("segmented_reduce, 256-item segments", t0, bool(np.allclose(xp.to_host(sums),
                                                                     hx.reshape(-1, seg).sum(axis=1), rtol=1e-4)))

    tiles = xp.empty(n, np.int32)
    t0 = time.perf_counter()
    cuprims.segmented_sort(d_in_keys=xi, d_out_keys=tiles, num_items=n, num_segments=n // 4096,
                           start_offsets_in=TransformIterator(CountingIterator(np.int64(0)), lambda i: i * 4096),
                           end_offsets_in=TransformIterator(CountingIterator(np.int64(1)), lambda i: i * 4096),
                           order=SortOrder.ASCENDING)
    show("segmented_sort, 4096-key segments", t0, bool((xp.to_host(tiles) == np.sort(hi.reshape(-1, 4096), axis=1)
                                                        .reshape(-1)).all()))

    evens, count = xp.empty(n, np.int32), xp.empty(1, np.int64)
    t0 = time.perf_counter()
    cuprims.select(d_in=xi, d_out=evens, d_num_selected_out=count, cond=lambda v: v % 2 == 0, num_items=n)
    kept = int(xp.to_host(count)[0])
    show("select, lambda v: v % 2 == 0", t0, bool((xp.to_host(evens)[:kept] == hi[hi % 2 == 0]).all()))

    uk, ui, uc = xp.empty(n, np.int32), xp.empty(n, np.float32), xp.empty(1, np.int64)
    t0 = time.perf_counter()
    cuprims.unique_by_key(d_in_keys=data, d_in_items=x, d_out_keys=uk, d_out_items=ui, d_out_num_selected=uc,
                          op=OpKind.EQUAL_TO, num_items=n)
    show("unique_by_key, int32 keys", t0, bool((xp.to_host(uk)[:int(xp.to_host(uc)[0])] == np.unique(hi)).all()))

    hsamples = rng.integers(0, 256, n).astype(np.uint8)
    samples = xp.to_device(hsamples)
    hist = xp.empty(256, np.int32)
    t0 = time.perf_counter()
    cuprims.histogram_even(d_samples=samples, d_histogram=hist, num_output_levels=257, lower_level=np.int32(0),
                           upper_level=np.int32(256), num_samples=n)
    show("histogram_even, uint8 into 256 bins", t0, bool((xp.to_host(hist) == np.bincount(hsamples, minlength=256))
                                                         .all()))

    reducer = cuprims.make_reduce_into(d_in=x, d_out=out, op=OpKind.PLUS, h_init=np.float32(0))
    t0 = time.perf_counter()
    twin = cuprims.deserialize(cuprims.serialize(reducer))
    tmp = xp.empty(max(1, twin(temp_storage=None, d_in=x, d_out=out, num_items=n, h_init=np.float32(0))), np.uint8)
    twin(temp_storage=tmp, d_in=x, d_out=out, num_items=n, h_init=np.float32(0))
    show("serialize + deserialize + call (no compile)", t0,
         abs(float(xp.to_host(out)[0]) - float(hx.sum(dtype=np.float64))) < 1e-3 * n)


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
