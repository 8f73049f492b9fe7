"""Tuning probe for radix sort and scan, beside cuda.compute.

Run on a GPU machine:  python bench/tune_probe.py [--out DIR] [--log2n 28] [--only radix|scan]

Radix: times a 2^28 uint32 keys-only sort (and uint32/int32 pairs) for several onesweep
(threads per block, items per thread) shapes and both offset widths, look-back flags
cleared by memset or by CUB's init kernel, CUB 3.6's headers (cuda.compute's) against
ours, and the cost of 1..4 passes (end_bit = 8, 16, 24, 32) for cuprims and
cuda.compute, so a gap can be placed in the histogram or in the passes.
Scan: inclusive int32 PLUS scans of 2^28 items for several look-back policies.
Writes tune.json/.md.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import result_rows, add_extra_path, device_ms, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

KEY_SHAPES = [None, (384, 19), (384, 18), (320, 19), (320, 21), (352, 19), (416, 18), (288, 22), (512, 18)]
PAIR_SHAPES = [None, (384, 22), (384, 24), (512, 17), (448, 20)]
def _shape(threads: int, items: int) -> dict:
    return {"lookback.threads_per_block": threads, "lookback.items_per_thread": items}


# dtype -> look-back policies to time (the first, {}, is CUB's own)
SCAN_POLICIES = {
    "int32": [{}, _shape(128, 32), _shape(64, 64), _shape(128, 32), _shape(64, 64)],
    "float32": [{}, _shape(128, 32), _shape(64, 64)],
    "int64": [{}, _shape(64, 32), _shape(128, 16), _shape(32, 64)],
    "float64": [{}, _shape(64, 32), _shape(128, 16)],
    "int8": [{}, _shape(128, 64), _shape(128, 128), _shape(64, 128)],
    "int16": [{}, _shape(128, 32), _shape(128, 64), _shape(64, 64)],
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--log2n", type=int, default=28)
    parser.add_argument("--only", choices=("radix", "scan"), default=None)
    args = parser.parse_args()
    add_extra_path()

    import cupy as cp
    import numpy as np

    import dataclasses
    import os

    import cuprims
    from cuprims import OpKind, SortOrder
    from cuprims._compile import nvrtc
    from cuprims.algorithms.radix_sort import api as rs
    from cuprims.algorithms.scan import api as scan_mod

    try:
        import cuda.compute as ccomp
    except Exception as exc:  # noqa: BLE001
        ccomp = None
        print("cuda.compute not importable:", exc)


    rows, add = result_rows(34, 34)

    n = 1 << args.log2n
    if args.only != "radix":
        scan_probe(args, add, cp, np, ccomp, scan_mod, OpKind, functools)
    if args.only == "scan":
        return finish(args, rows, cp)
    keys = cp.asarray(np.random.default_rng(0).integers(0, 1 << 32, n, dtype=np.uint32))
    vals = cp.arange(n, dtype=cp.int32)
    out, out_v = cp.empty_like(keys), cp.empty_like(vals)
    expect = cp.sort(keys)
    original_source = rs.radix_sort_source
    original_narrow = rs.NARROW_MAX_ITEMS

    cub36 = os.path.join(os.environ.get("CUPRIMS_BENCH_EXTRA_PATH", "/nonexistent"), "cuda", "cccl", "headers",
                         "include")
    original_include = nvrtc.cccl_include_dir

    def sorter_for(shape, with_values, wide, headers36=False):
        overrides = {} if shape is None else {"onesweep.threads_per_block": shape[0],
                                                "onesweep.items_per_thread": shape[1]}

        def source(**kw):
            src = original_source(policy_overrides=overrides, **kw)
            # the marker keeps the two header sets apart in the build caches
            return dataclasses.replace(src, text="// CUB 3.6 headers\n" + src.text) if headers36 else src

        rs.radix_sort_source = source
        rs.NARROW_MAX_ITEMS = 0 if wide else original_narrow
        if headers36:
            nvrtc.cccl_include_dir = lambda: cub36
        try:
            desc = rs._describe(keys, out, vals if with_values else None, out_v if with_values else None,
                                SortOrder.ASCENDING)
            sorter = rs.RadixSort(desc, None, ())
            if wide:  # build the 64-bit-offset variant now, while the overridden source is in place
                sorter.cubin(wide_offsets=True)
            return sorter
        finally:
            rs.radix_sort_source = original_source
            nvrtc.cccl_include_dir = original_include

    def time_sorter(sorter, with_values, end_bit=None):
        v_in, v_out = (vals, out_v) if with_values else (None, None)
        kw = dict(d_in_keys=keys, d_out_keys=out, d_in_values=v_in, d_out_values=v_out, num_items=n, end_bit=end_bit)
        tmp = cp.empty(sorter(temp_storage=None, **kw), cp.uint8)
        sorter(temp_storage=tmp, **kw)
        if end_bit is None:
            assert bool(cp.all(out == expect)), "wrong keys"
        return device_ms(lambda: sorter(temp_storage=tmp, **kw), inner=5, repeats=7)

    base = {}
    for with_values, shapes in ((False, KEY_SHAPES), (True, PAIR_SHAPES)):
        work = "uint32 keys" + (" + int32 values" if with_values else "") + f" 2^{args.log2n}"
        for wide in (False, True):
            for shape in shapes if not wide else [None, (384, 16)]:
                try:
                    sorter = sorter_for(shape, with_values, wide)
                    t = time_sorter(sorter, with_values)
                except Exception as exc:  # noqa: BLE001
                    print(work, shape, wide, "failed:", str(exc)[:400])
                    continue
                name = f"{'64' if wide else '32'}-bit offsets, " + ("CUB default" if shape is None
                                                                     else f"{shape[0]} x {shape[1]}")
                if shape is None and not wide:
                    base[with_values] = t
                add(work, name, t, "ms", base.get(with_values, t) / t, "ratio = CUB default/this")
        rs.NARROW_MAX_ITEMS = original_narrow
        best = (384, 19) if not with_values else None
        with cuprims.settings.override(radix_memset=False):
            add(work, f"{best}, init kernel clears look-back", time_sorter(sorter_for(best, with_values, False),
                                                                           with_values), "ms")
        add(work, f"{best}, memset clears look-back", time_sorter(sorter_for(best, with_values, False),
                                                                  with_values), "ms")
        if os.path.isdir(cub36):
            for wide in (False, True):
                try:
                    t = time_sorter(sorter_for(best if not wide else None, with_values, wide, True), with_values)
                    add(work, f"CUB 3.6 headers, {'64' if wide else '32'}-bit offsets, {best if not wide else None}",
                        t, "ms", base.get(with_values, t) / t)
                except Exception as exc:  # noqa: BLE001
                    print("CUB 3.6 build failed:", str(exc)[:600])
        if ccomp is not None:
            try:
                v_in, v_out = (vals, out_v) if with_values else (None, None)
                c = ccomp.make_radix_sort(d_in_keys=keys, d_out_keys=out, d_in_values=v_in, d_out_values=v_out,
                                          order=ccomp.SortOrder.ASCENDING)
                c_args = dict(d_in_keys=keys, d_out_keys=out, d_in_values=v_in, d_out_values=v_out, num_items=n)
                c_tmp = cp.empty(c(temp_storage=None, **c_args), cp.uint8)
                c(temp_storage=c_tmp, **c_args)
                ok = bool(cp.all(out == expect))
                t = device_ms(lambda: c(temp_storage=c_tmp, **c_args), inner=5, repeats=7)
                add(work, "cuda.compute", t, "ms", base.get(with_values, t) / t,
                    f"ratio = cuprims default/cuda.compute; keys correct: {ok}")
                if not with_values:
                    for eb in (8, 16, 24):
                        t = device_ms(lambda: c(temp_storage=c_tmp, end_bit=eb, **c_args), inner=5, repeats=7)
                        add(work, f"cuda.compute end_bit={eb}", t, "ms")
            except Exception as exc:  # noqa: BLE001
                print("cuda.compute failed:", exc)
        if not with_values:
            sorter = sorter_for((384, 19), False, False)
            for eb in (8, 16, 24):
                add(work, f"cuprims 384x19 end_bit={eb}", time_sorter(sorter, False, eb), "ms")
    finish(args, rows, cp)


def scan_probe(args, add, cp, np, ccomp, scan_mod, OpKind, functools) -> None:
    n = 1 << args.log2n
    original = scan_mod.scan_source
    for dtype, policies in SCAN_POLICIES.items():
        if dtype.startswith("float"):
            x = cp.random.default_rng(0).random(n, dtype=np.dtype(dtype))
        else:
            x = cp.random.default_rng(0).integers(-3, 4, n, dtype=cp.int32).astype(dtype)
        y = cp.empty_like(x)
        expect = cp.cumsum(x, dtype=x.dtype)
        work = f"inclusive scan {dtype} 2^{args.log2n}"
        base = None
        for overrides in policies:
            scan_mod.scan_source = functools.partial(original, policy_overrides=overrides)
            try:
                obj = scan_mod.Scan(x, y, OpKind.PLUS, None, True, None)
            except Exception as exc:  # noqa: BLE001
                print(dtype, overrides, "failed:", str(exc)[:600])
                continue
            finally:
                scan_mod.scan_source = original
            kw = dict(d_in=x, d_out=y, op=OpKind.PLUS, init_value=None, num_items=n)
            tmp = cp.empty(obj(temp_storage=None, **kw), cp.uint8)
            y.fill(0)
            obj(temp_storage=tmp, **kw)
            if dtype.startswith("float"):
                ok = bool(cp.allclose(y[-1000:], expect[-1000:], rtol=1e-3))
            else:
                ok = bool(cp.all(y == expect))
            assert ok, f"wrong scan for {dtype} {overrides}"
            t = device_ms(lambda: obj(temp_storage=tmp, **kw), inner=20, repeats=15)
            base = base or t
            label = (f"{overrides['lookback.threads_per_block']} x {overrides['lookback.items_per_thread']}"
                     if overrides else "CUB policy")
            add(work, label, t, "ms", base / t, "ratio = CUB policy/this")
        if ccomp is not None and dtype == "int32":
            c = ccomp.make_inclusive_scan(d_in=x, d_out=y, op=ccomp.OpKind.PLUS, init_value=None)
            c_args = dict(d_in=x, d_out=y, op=ccomp.OpKind.PLUS, init_value=None, num_items=n)
            c_tmp = cp.empty(c(temp_storage=None, **c_args), cp.uint8)
            t = device_ms(lambda: c(temp_storage=c_tmp, **c_args), inner=20, repeats=15)
            add(work, "cuda.compute", t, "ms", base / t if base else None, "ratio = cuprims CUB policy/cuda.compute")
        del x, y, expect


def finish(args, rows, cp) -> None:
    extra = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    dirs = [ROOT / "bench" / "results"]
    if args.out:
        dirs.append(Path(args.out))
    print(write_results("tune", rows, extra, dirs))


if __name__ == "__main__":
    main()
