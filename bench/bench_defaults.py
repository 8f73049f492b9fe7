"""Fast by default: each algorithm called the way users call it, beside the way our other
benchmarks call it (the fast path) and beside cuda.compute, CuPy and PyTorch where they
have the operation, in one process.

"As a user calls it" means the arguments users pass without knowing our internals: no
``max_segment_size`` hint, CuPy's default int64 offsets, offsets from iterators, levels
and initial values as numpy 1-element arrays or scalars of any dtype, ``op=`` on every
call, views of larger arrays (misaligned ones included). Each row's ratio is the peer's
figure over cuprims' as a user calls it (higher is better for cuprims), or the user path
over the fast path (the cliff: 1.0 is none).

Sections (``--only`` a comma list): segreduce, segsort, histogram, host, misaligned.

Run on a GPU machine:  python bench/bench_defaults.py [--out DIR] [--only host,histogram]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import add_extra_path, device_ms, host_us, result_rows, save_results  # noqa: E402
from _harness import sized_call as _object  # noqa: E402

SECTIONS = ("segreduce", "segsort", "histogram", "host", "misaligned")


def _peer(add: Callable[..., None], work: str, variant: str, fn: Callable[[], Any], ours: float,
          measure: Callable[[Callable[[], Any]], float] = device_ms) -> None:
    """Time a peer's call and add its row with the ratio peer/cuprims; a peer that cannot
    run the case is reported, not fatal."""
    try:
        t = measure(fn)
    except Exception as exc:  # noqa: BLE001
        print(f"{variant} failed on {work}: {type(exc).__name__}: {exc}")
        return
    add(work, variant, t, "ms" if measure is device_ms else "us", t / ours, "ratio = peer/cuprims (user's call)")


def segreduce(add: Callable[..., None], cc: Any) -> None:
    import cupy as cp
    import numpy as np
    import torch

    import cuprims
    from cuprims import OpKind

    h0 = np.zeros(1, np.float32)

    def ours(x, out, ns, starts, ends, hint):
        r = cuprims.make_segmented_reduce(d_in=x, d_out=out, start_offsets_in=starts, end_offsets_in=ends,
                                          op=OpKind.PLUS, h_init=h0)
        return _object(r, d_in=x, d_out=out, num_segments=ns, start_offsets_in=starts, end_offsets_in=ends,
                       op=OpKind.PLUS, h_init=h0, max_segment_size=hint)

    rng = np.random.default_rng(1)
    cases = [("2^20 x 256", np.full(1 << 20, 256)), ("2^16 x 4096", np.full(1 << 16, 4096)),
             ("2^16 irregular (1..8192)", rng.integers(1, 8193, 1 << 16))]
    for label, lengths in cases:
        work = f"segmented sum float32, {label}"
        ends_h = np.cumsum(lengths)          # int64, as CuPy's and numpy's defaults
        ns, n = lengths.size, int(ends_h[-1])
        x = cp.random.random(n, dtype=cp.float32)
        out = cp.empty(ns, np.float32)
        starts, ends = cp.asarray(ends_h - lengths), cp.asarray(ends_h)
        user = ours(x, out, ns, starts, ends, None)
        user()
        want = np.add.reduceat(cp.asnumpy(x).astype(np.float64), ends_h - lengths)
        assert np.allclose(cp.asnumpy(out), want, rtol=1e-3), work
        t_user = device_ms(user)
        t_fast = device_ms(ours(x, out, ns, starts, ends, int(lengths.max())))
        add(work, "cuprims, no hint, int64 offset arrays", t_user, "ms")
        add(work, f"cuprims, hint {int(lengths.max())} (fast path)", t_fast, "ms", t_user / t_fast,
            "ratio = user/fast (1.0: no cliff)")
        if label == "2^20 x 256":
            _peer(add, work, "CuPy x.reshape(-1, 256).sum(axis=1)", lambda: x.reshape(ns, 256).sum(axis=1, out=out),
                  t_user)
            xt, outt = torch.as_tensor(x, device="cuda"), torch.as_tensor(out, device="cuda")
            _peer(add, work, "PyTorch sum(dim=1)", lambda: torch.sum(xt.view(ns, 256), dim=1, out=outt), t_user)
        if cc is not None:
            _peer(add, work, "cuda.compute (int64 offset arrays)", _lazy(lambda: _object(
                cc.make_segmented_reduce(d_in=x, d_out=out, start_offsets_in=starts, end_offsets_in=ends,
                                         op=cc.OpKind.PLUS, h_init=h0),
                d_in=x, d_out=out, num_segments=ns, start_offsets_in=starts, end_offsets_in=ends,
                op=cc.OpKind.PLUS, h_init=h0)), t_user)
        del x, out


def segsort(add: Callable[..., None], cc: Any) -> None:
    import cupy as cp
    import numpy as np

    import cuprims
    from cuprims import CountingIterator, SortOrder, TransformIterator

    def ours(keys, out, ns, starts, ends):
        s = cuprims.make_segmented_sort(d_in_keys=keys, d_out_keys=out, start_offsets_in=starts,
                                        end_offsets_in=ends, order=SortOrder.ASCENDING)
        return _object(s, d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None, num_items=keys.size,
                       num_segments=ns, start_offsets_in=starts, end_offsets_in=ends)

    for ns, size in ((1 << 16, 4096), (1 << 20, 64), (1 << 22, 16)):
        work = f"segmented sort int32, 2^{ns.bit_length() - 1} x {size}"
        n = ns * size
        keys = cp.random.randint(0, 1 << 30, n, dtype=cp.int32)
        out = cp.empty_like(keys)
        offsets = cp.arange(0, n + 1, size)                          # int64: CuPy's default
        user = ours(keys, out, ns, offsets[:-1], offsets[1:])
        user()
        assert bool((out.reshape(ns, size) == cp.sort(keys.reshape(ns, size), axis=1)).all()), work
        t_user = device_ms(user)
        add(work, "cuprims int64 offset arrays", t_user, "ms")
        offsets32 = offsets.astype(cp.int32)
        t_fast = device_ms(ours(keys, out, ns, offsets32[:-1], offsets32[1:]))
        add(work, "cuprims int32 offset arrays (fast path)", t_fast, "ms", t_user / t_fast,
            "ratio = int64/int32 (1.0: no cliff)")
        if size == 4096:
            start = TransformIterator(CountingIterator(np.int64(0)), lambda i: i * 4096)
            t_it = device_ms(ours(keys, out, ns, start, start + 1))
            add(work, "cuprims offsets from iterators (start, start + 1)", t_it, "ms", t_it / t_fast,
                "ratio = iterators/int32 arrays")
            end = TransformIterator(CountingIterator(np.int64(1)), lambda i: i * 4096)
            t_two = device_ms(ours(keys, out, ns, start, end))
            add(work, "cuprims offsets from two TransformIterators", t_two, "ms", t_two / t_fast,
                "ratio = iterators/int32 arrays")
        if cc is not None:
            _peer(add, work, "cuda.compute int64 offset arrays", _lazy(lambda: _object(
                cc.make_segmented_sort(d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None,
                                       start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:],
                                       order=cc.SortOrder.ASCENDING),
                d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None, num_items=n, num_segments=ns,
                start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:])), t_user)
        del keys, out


def _lazy(make: Callable[[], Callable[[], Any]]) -> Callable[[], Any]:
    """A call built on its first use (a peer's build failing is then reported by _peer)."""
    made: list[Callable[[], Any]] = []

    def call() -> Any:
        if not made:
            made.append(make())
        return made[0]()

    return call


def _levels(dtype: Any, lower: int, upper: int) -> tuple[Any, Any]:
    import numpy as np

    return np.array([lower], dtype), np.array([upper], dtype)


def histogram(add: Callable[..., None], cc: Any) -> None:
    import cupy as cp
    import numpy as np
    import torch

    import cuprims

    n = 1 << 28
    x = cp.random.randint(0, 256, n, dtype=cp.uint8)
    hist = cp.empty(256, cp.int32)
    want = cp.asnumpy(cp.bincount(x, minlength=256))
    work = "histogram uint8 2^28 -> 256 bins"
    small = x[:1024]
    small_work = "histogram host time, n = 1024"
    times: dict[str, float] = {}
    for dtype in ("int32", "int64", "float32", "float64"):
        lo, hi = _levels(dtype, 0, 256)
        kw = dict(d_samples=x, d_histogram=hist, h_num_output_levels=np.array([257], np.int32), h_lower_level=lo,
                  h_upper_level=hi, num_samples=n)
        obj = _object(cuprims.make_histogram_even(**kw), **kw)
        obj()
        assert (cp.asnumpy(hist) == want).all(), (work, dtype)
        one = lambda: cuprims.histogram_even(d_samples=x, d_histogram=hist, num_output_levels=257,  # noqa: E731
                                             lower_level=lo[0], upper_level=hi[0], num_samples=n)
        times[f"object {dtype}"] = t_obj = device_ms(obj)
        times[f"one-shot {dtype}"] = t_one = device_ms(one)
        add(work, f"cuprims object API, {dtype} levels", t_obj, "ms")
        add(work, f"cuprims histogram_even, {dtype} levels", t_one, "ms", t_one / t_obj, "ratio = one-shot/object")
        if cc is not None and dtype in ("int32", "int64", "float32"):
            _peer(add, work, f"cuda.compute object API, {dtype} levels",
                  _lazy(lambda: _object(cc.make_histogram_even(**kw), **kw)), t_obj)
        skw = dict(kw, d_samples=small, num_samples=small.size)
        s_obj = _object(cuprims.make_histogram_even(**skw), **skw)
        t_host = host_us(s_obj)
        add(small_work, f"cuprims object API, {dtype} levels", t_host, "us")
        add(small_work, f"cuprims histogram_even, {dtype} levels", host_us(
            lambda: cuprims.histogram_even(d_samples=small, d_histogram=hist, num_output_levels=257,
                                           lower_level=lo[0], upper_level=hi[0], num_samples=small.size)), "us")
        if cc is not None and dtype in ("int32", "float32"):
            _peer(add, small_work, f"cuda.compute object API, {dtype} levels",
                  _lazy(lambda: _object(cc.make_histogram_even(**skw), **skw)), t_host, host_us)
    fastest = min(v for k, v in times.items() if k.startswith("object"))
    _peer(add, work, "CuPy bincount(minlength=256)", lambda: cp.bincount(x, minlength=256), fastest)
    xt = torch.as_tensor(x, device="cuda")
    _peer(add, work, "PyTorch bincount(minlength=256)", lambda: torch.bincount(xt, minlength=256), fastest)


_HOST_N = 1024


def host_cases(lib: Any) -> dict[str, tuple[Callable[[], Any], Callable[[], Any] | None]]:
    """name -> (object call, one-shot call or None) of ``lib`` (cuprims or cuda.compute) at
    n = 1024 with cuda.compute-style arguments: 1-element numpy initial values and levels,
    views of larger CuPy arrays, ``op=`` on every call. A case ``lib`` cannot run is
    reported and left out."""
    import cupy as cp
    import numpy as np

    n = _HOST_N
    rng = np.random.default_rng(0)
    f = cp.asarray(rng.random(4 * n, dtype=np.float32))[:n]
    i = cp.asarray(rng.integers(0, 1 << 20, 4 * n).astype(np.int32))[:n]
    u = cp.asarray(rng.integers(0, 1 << 30, n).astype(np.uint32))
    out1, fo, io, uo = cp.empty(1, np.float32), cp.empty_like(f), cp.empty_like(i), cp.empty_like(u)
    count = cp.empty(1, np.int64)
    hist = cp.empty(256, np.int32)
    b = cp.asarray(rng.integers(0, 256, n).astype(np.uint8))
    offsets = cp.arange(0, n + 1, 64)
    negate = lambda v: -v                    # noqa: E731
    even = lambda v: v % 2 == 0              # noqa: E731
    ok, order = lib.OpKind, lib.SortOrder   # both libraries have these
    h0f, h0i = np.zeros(1, np.float32), np.zeros(1, np.int32)
    levels = dict(h_num_output_levels=np.array([257], np.int32), h_lower_level=np.array([0], np.int32),
                  h_upper_level=np.array([256], np.int32))
    spec: dict[str, Any] = {
        "reduce_into": ("make_reduce_into", dict(d_in=f, d_out=out1, op=ok.PLUS, h_init=h0f),
                        dict(d_in=f, d_out=out1, op=ok.PLUS, num_items=n, h_init=h0f), "reduce_into"),
        "exclusive_scan": ("make_exclusive_scan", dict(d_in=i, d_out=io, op=ok.PLUS, init_value=h0i),
                           dict(d_in=i, d_out=io, op=ok.PLUS, init_value=h0i, num_items=n), "exclusive_scan"),
        "unary_transform": ("make_unary_transform", dict(d_in=f, d_out=fo, op=negate),
                            dict(d_in=f, d_out=fo, op=negate, num_items=n), "unary_transform"),
        # cuda.compute compiles Python callables only with numba-cuda-mlir installed: the
        # built-in forms give a row both libraries run
        "unary_transform (OpKind.NEGATE)": ("make_unary_transform", dict(d_in=f, d_out=fo, op=ok.NEGATE),
                                            dict(d_in=f, d_out=fo, op=ok.NEGATE, num_items=n),
                                            "unary_transform"),
        "select (OpKind.IDENTITY)": ("make_select", dict(d_in=i, d_out=io, d_num_selected_out=count,
                                                         cond=ok.IDENTITY),
                                     dict(d_in=i, d_out=io, d_num_selected_out=count, cond=ok.IDENTITY,
                                          num_items=n), "select"),
        "radix_sort": ("make_radix_sort", dict(d_in_keys=u, d_out_keys=uo, d_in_values=None, d_out_values=None,
                                                 order=order.ASCENDING),
                       dict(d_in_keys=u, d_out_keys=uo, d_in_values=None, d_out_values=None, num_items=n),
                       None),
        "merge_sort": ("make_merge_sort", dict(d_in_keys=i, d_out_keys=io, op=ok.LESS),
                       dict(d_in_keys=i, d_in_values=None, d_out_keys=io, d_out_values=None, num_items=n,
                            op=ok.LESS), "merge_sort"),
        "select": ("make_select", dict(d_in=i, d_out=io, d_num_selected_out=count, cond=even),
                   dict(d_in=i, d_out=io, d_num_selected_out=count, cond=even, num_items=n), "select"),
        "histogram_even": ("make_histogram_even", dict(d_samples=b, d_histogram=hist, num_samples=n, **levels),
                           dict(d_samples=b, d_histogram=hist, num_samples=n, **levels), None),
        "segmented_reduce": ("make_segmented_reduce", dict(d_in=f, d_out=fo[:16],
                                                             start_offsets_in=offsets[:-1],
                                                             end_offsets_in=offsets[1:], op=ok.PLUS, h_init=h0f),
                             dict(d_in=f, d_out=fo[:16], num_segments=16, start_offsets_in=offsets[:-1],
                                  end_offsets_in=offsets[1:], op=ok.PLUS, h_init=h0f), "segmented_reduce"),
    }
    one_shots = {
        "radix_sort": lambda: lib.radix_sort(d_in_keys=u, d_out_keys=uo, num_items=n, order=order.ASCENDING),
        "histogram_even": lambda: lib.histogram_even(d_samples=b, d_histogram=hist, num_output_levels=257,
                                                     lower_level=np.int32(0), upper_level=np.int32(256),
                                                     num_samples=n)}
    made = {}
    for name, (make, build, call, one_shot) in spec.items():
        try:     # a case one library cannot run is reported and left out, not the others
            obj = getattr(lib, make)(**build)
            run = (lambda o=obj, c=call: o(**c)) if make == "make_unary_transform" else _object(obj, **call)
            run()
        except Exception as exc:  # noqa: BLE001
            print(f"{lib.__name__} {name} failed: {type(exc).__name__}: {exc}")
            continue
        made[name] = (run, one_shots.get(name, None if one_shot is None
                                         else lambda s=getattr(lib, one_shot), c=call: s(**c)))
    return made


def host(add: Callable[..., None], cc: Any) -> None:
    """Host time per call at n = 1024 with cuda.compute-style arguments (:func:`host_cases`)."""
    import cuprims

    work = "host time per call, n = 1024, cuda.compute-style arguments"
    theirs = {} if cc is None else host_cases(cc)
    for name, (run, one_shot) in host_cases(cuprims).items():
        t_obj = host_us(run)
        t_cc = None
        if name in theirs:
            try:
                t_cc = host_us(theirs[name][0])
            except Exception as exc:  # noqa: BLE001
                print(f"cuda.compute {name} failed: {type(exc).__name__}: {exc}")
        add(work, f"{name}: cuprims object API", t_obj, "us", None if t_cc is None else t_obj / t_cc,
            "ratio = cuprims/cuda.compute object (target <= 0.8)")
        if one_shot is not None:
            t_one = host_us(one_shot)
            add(work, f"{name}: cuprims one-shot", t_one, "us", None if t_cc is None else t_one / t_cc,
                "ratio = cuprims one-shot/cuda.compute object (target <= 1.0)")
        if t_cc is not None:
            add(work, f"{name}: cuda.compute object API", t_cc, "us")


def misaligned(add: Callable[..., None], cc: Any) -> None:
    import cupy as cp
    import numpy as np

    import cuprims

    n = 1 << 28
    for dtype in ("int8", "uint16", "int32", "float32", "float64"):
        work = f"reduce sum {dtype} 2^28, view x[1:]"
        base = cp.ones(n + 1, dtype)
        x = base[1:]
        out = cp.empty(1, dtype)
        h0 = np.zeros(1, dtype)
        kw = dict(d_in=x, d_out=out, op=cuprims.OpKind.PLUS, num_items=n, h_init=h0)
        t_user = device_ms(_object(cuprims.make_reduce_into(d_in=x, d_out=out, op=cuprims.OpKind.PLUS, h_init=h0),
                                   **kw))
        aligned = base[:n]
        t_aligned = device_ms(_object(cuprims.make_reduce_into(d_in=aligned, d_out=out, op=cuprims.OpKind.PLUS,
                                                               h_init=h0), **dict(kw, d_in=aligned)))
        add(work, "cuprims misaligned view", t_user, "ms")
        add(work, "cuprims aligned x[:-1] (fast path)", t_aligned, "ms", t_user / t_aligned,
            "ratio = misaligned/aligned")
        if cc is not None:
            _peer(add, work, "cuda.compute misaligned view", _lazy(lambda: _object(
                cc.make_reduce_into(d_in=x, d_out=out, op=cc.OpKind.PLUS, h_init=h0),
                **dict(kw, op=cc.OpKind.PLUS))), t_user)
        del base, x


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma list of " + ", ".join(SECTIONS))
    args = parser.parse_args()
    add_extra_path()
    try:
        import cuda.compute as cc
    except Exception as exc:  # noqa: BLE001
        cc = None
        print("cuda.compute not importable:", exc)
    rows, add = result_rows(58, 52)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    for name in chosen:
        if name not in SECTIONS:
            raise SystemExit(f"--only: unknown section {name!r} (choose from {', '.join(SECTIONS)})")
        globals()[name](add, cc)
    save_results("defaults" if len(chosen) == len(SECTIONS) else "defaults-" + "-".join(chosen), rows, args.out,
                 cc is not None)


if __name__ == "__main__":
    main()
