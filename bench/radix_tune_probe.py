"""Radix sort tuning probe: onesweep tile shapes and per-pass cost, beside cuda.compute.

Run on a GPU machine:  python bench/radix_tune_probe.py [--out DIR] [--log2n 28]

Times a 2^28 uint32 keys-only sort (and uint32/int32 pairs) for several onesweep
(threads per block, items per thread) shapes and both offset widths, and the cost of
1..4 passes (end_bit = 8, 16, 24, 32) for cuprims and cuda.compute, so a gap can be
placed in the histogram or in the passes. Writes radix_tune.json/.md.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import add_extra_path, device_ms, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

KEY_SHAPES = [None, (384, 16), (384, 17), (384, 18), (384, 19), (384, 22), (512, 14), (512, 16), (512, 18),
              (256, 20), (256, 24), (448, 16), (320, 20)]
PAIR_SHAPES = [None, (384, 16), (384, 18), (384, 20), (512, 16), (256, 24)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--log2n", type=int, default=28)
    args = parser.parse_args()
    add_extra_path()

    import cupy as cp
    import numpy as np

    from cuprims import SortOrder
    from cuprims.algorithms import radix_sort as rs

    try:
        import cuda.compute as ccomp
    except Exception as exc:  # noqa: BLE001
        ccomp = None
        print("cuda.compute not importable:", exc)

    rows: list[dict] = []

    def add(work, variant, value, unit, ratio=None, note=""):
        rows.append({"work": work, "variant": variant, "value": value, "unit": unit, "ratio": ratio, "note": note})
        print(f"{work:34s} {variant:34s} {value:10.4f} {unit:3s} {'' if ratio is None else f'{ratio:.3f}'} {note}",
              flush=True)

    n = 1 << args.log2n
    keys = cp.asarray(np.random.default_rng(0).integers(0, 1 << 32, n, dtype=np.uint32))
    vals = cp.arange(n, dtype=cp.int32)
    out, out_v = cp.empty_like(keys), cp.empty_like(vals)
    expect = cp.sort(keys)
    original_source = rs.radix_sort_source
    original_narrow = rs.NARROW_MAX_ITEMS

    def sorter_for(shape, with_values, wide):
        rs.radix_sort_source = functools.partial(original_source, onesweep_tuning=shape)
        rs.NARROW_MAX_ITEMS = 0 if wide else original_narrow
        try:
            return rs._RadixSort(keys, out, vals if with_values else None, out_v if with_values else None,
                                 SortOrder.ASCENDING, None)
        finally:
            rs.radix_sort_source = original_source

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
            sorter = sorter_for(None, False, False)
            for eb in (8, 16, 24):
                add(work, f"cuprims default end_bit={eb}", time_sorter(sorter, False, eb), "ms")

    extra = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    dirs = [ROOT / "bench" / "results"]
    if args.out:
        dirs.append(Path(args.out))
    print(write_results("radix_tune", rows, extra, dirs))


if __name__ == "__main__":
    main()
