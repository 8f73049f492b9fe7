"""Host time per call without a GPU: cuprims' per-call Python path over a fake driver.

Real ahead-of-time builds (sm_90) are made callable on the CPU by the fake driver of the
CPU tests (tests/cpu/runtime/test_multi_device.py's FakeDevices: launches are recorded,
not run); arrays are fake CuPy ndarrays (tests/cpu/cpu_helpers.fake_cupy_array), read as
CuPy's are, and kernel parameters are packed by the real ParamPack. Arguments are the ones
cuda.compute's users pass, as bench_defaults' ``host`` section passes them: 1-element
numpy initial values and levels, views of larger arrays, ``op=`` on every call.

A diagnostic of the host path, not a benchmark of a GPU: on an H100 a call has cost about
1.5x the figure printed here (cuLaunchKernel and CuPy's attribute reads are not in it).

    PYTHONPATH=src python bench/host_probe_cpu.py [--calls N] [--profile CASE]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

_TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(_TESTS / "cpu"), str(_TESTS / "cpu" / "runtime")]

N = 1024


def cases() -> dict[str, Callable[[], Any]]:
    """name -> one call, built over the fake driver (installed here)."""
    from _pytest.monkeypatch import MonkeyPatch
    from cpu_helpers import fake_cupy_array
    from test_multi_device import FakeDevices

    import cuprims
    from cuprims import OpKind, ProxyArray, ProxyValue, SortOrder
    from cuprims._runtime import driver, params

    mp = MonkeyPatch()
    fake = FakeDevices(mp)
    from cuprims.algorithms.histogram import plan as histogram_plan

    scratch = fake.mem.alloc(8)
    mp.setattr(histogram_plan, "queue_scratch", lambda device: scratch)  # the tile-queue word
    mp.setattr(driver, "ParamPack", params.ParamPack)   # the real packing: host memory only
    mp.setattr(driver, "launch_pdl", lambda *a, **k: False)
    mp.setattr(driver, "launch", lambda *a, **k: None)  # recorded nowhere: a long run keeps nothing

    i4, f4, u4 = np.int32, np.float32, np.uint32
    rng = np.random.default_rng(0)
    arr = lambda host: fake_cupy_array(fake.mem, host)  # noqa: E731
    f = arr(rng.random(4 * N, dtype=f4)).view(0, N)
    i = arr(rng.integers(0, 1 << 20, 4 * N).astype(i4)).view(0, N)
    u = arr(rng.integers(0, 1 << 30, N).astype(u4))
    out1, fo, io, uo = arr(np.zeros(1, f4)), arr(np.zeros(N, f4)), arr(np.zeros(N, i4)), arr(np.zeros(N, u4))
    count, hist = arr(np.zeros(1, np.int64)), arr(np.zeros(256, i4))
    b = arr(rng.integers(0, 256, N).astype(np.uint8))
    offsets = arr(np.arange(0, N + 1, 64, dtype=np.int64))
    starts, ends, fo16 = offsets.view(0, 16), offsets.view(1, 16), fo.view(0, 16)
    h0f, h0i = np.zeros(1, f4), np.zeros(1, i4)
    levels = dict(h_num_output_levels=np.array([257], i4), h_lower_level=np.array([0], i4),
                  h_upper_level=np.array([256], i4))
    negate = lambda v: -v                    # noqa: E731
    even = lambda v: v % 2 == 0              # noqa: E731
    P, PV, cc = ProxyArray, ProxyValue, 90

    def obj(o: Any, **kw: Any) -> Callable[[], Any]:
        temp = arr(np.zeros(max(1, o(temp_storage=None, **kw)), np.uint8))
        return lambda: o(temp_storage=temp, **kw)

    red = dict(d_in=f, d_out=out1, op=OpKind.PLUS, num_items=N, h_init=h0f)
    scan = dict(d_in=i, d_out=io, op=OpKind.PLUS, init_value=h0i, num_items=N)
    tr = dict(d_in=f, d_out=fo, op=negate, num_items=N)
    rs = dict(d_in_keys=u, d_out_keys=uo, d_in_values=None, d_out_values=None, num_items=N)
    ms = dict(d_in_keys=i, d_in_values=None, d_out_keys=io, d_out_values=None, num_items=N, op=OpKind.LESS)
    sel = dict(d_in=i, d_out=io, d_num_selected_out=count, cond=even, num_items=N)
    hist_kw = dict(d_samples=b, d_histogram=hist, num_samples=N, **levels)
    sr = dict(d_in=f, d_out=fo16, num_segments=16, start_offsets_in=starts, end_offsets_in=ends, op=OpKind.PLUS,
              h_init=h0f)
    made = {
        "reduce_into": obj(cuprims.make_reduce_into(d_in=P(f4), d_out=P(f4), op=OpKind.PLUS, h_init=PV(f4),
                                                    compute_capability=cc), **red),
        "exclusive_scan": obj(cuprims.make_exclusive_scan(d_in=P(i4), d_out=P(i4), op=OpKind.PLUS,
                                                          init_value=PV(i4), compute_capability=cc), **scan),
        "unary_transform": (lambda o: lambda: o(**tr))(cuprims.make_unary_transform(
            d_in=P(f4), d_out=P(f4), op=negate, compute_capability=cc)),
        "radix_sort": obj(cuprims.make_radix_sort(d_in_keys=P(u4), d_out_keys=P(u4), d_in_values=None,
                                                  d_out_values=None, order=SortOrder.ASCENDING,
                                                  compute_capability=cc), **rs),
        "merge_sort": obj(cuprims.make_merge_sort(d_in_keys=P(i4), d_out_keys=P(i4), op=OpKind.LESS,
                                                  compute_capability=cc), **ms),
        "select": obj(cuprims.make_select(d_in=P(i4), d_out=P(i4), d_num_selected_out=P(np.int64), cond=even,
                                          compute_capability=cc), **sel),
        "histogram_even": obj(cuprims.make_histogram_even(d_samples=P(np.uint8), d_histogram=P(i4),
                                                          num_samples=N, compute_capability=cc, **levels),
                              **hist_kw),
        "segmented_reduce": obj(cuprims.make_segmented_reduce(
            d_in=P(f4), d_out=P(f4), start_offsets_in=P(np.int64), end_offsets_in=P(np.int64), op=OpKind.PLUS,
            h_init=PV(f4), compute_capability=cc), **sr),
    }
    one_shots = {
        "reduce_into": lambda: cuprims.reduce_into(**red),
        "exclusive_scan": lambda: cuprims.exclusive_scan(**scan),
        "unary_transform": lambda: cuprims.unary_transform(**tr),
        "radix_sort": lambda: cuprims.radix_sort(d_in_keys=u, d_out_keys=uo, num_items=N,
                                                 order=SortOrder.ASCENDING),
        "merge_sort": lambda: cuprims.merge_sort(**ms),
        "select": lambda: cuprims.select(**sel),
        "histogram_even": lambda: cuprims.histogram_even(d_samples=b, d_histogram=hist, num_output_levels=257,
                                                         lower_level=np.int32(0), upper_level=np.int32(256),
                                                         num_samples=N),
        "segmented_reduce": lambda: cuprims.segmented_reduce(**sr),
    }
    table = {f"{k}: object": v for k, v in made.items()}
    table.update({f"{k}: one-shot": v for k, v in one_shots.items()})
    return table


def per_call_us(fn: Callable[[], Any], calls: int) -> float:
    """Best of 5 bursts, microseconds per call (the machine is shared: the minimum is the cost)."""
    for _ in range(min(calls, 2000)):
        fn()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--profile", help="a case name (e.g. 'merge_sort: object'): cProfile it")
    parser.add_argument("--only", help="run only cases whose name contains this")
    args = parser.parse_args()
    table = cases()
    for name, fn in table.items():
        if args.only and args.only not in name:
            continue
        print(f"{name:32s} {per_call_us(fn, args.calls):7.2f} us")
    if args.profile:
        fn = table[args.profile]
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            fn()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
