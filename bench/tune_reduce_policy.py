"""Diagnostic: device time of struct-accumulator reductions under other CUB reduce
policies (items per thread, threads per block). Not a benchmark; it informs the policy
cuprims picks for reductions whose accumulator is larger than the items they load.

Run on a GPU machine:  python bench/tune_reduce_policy.py [--out DIR]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import device_ms, write_results  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--log2n", type=int, default=28)
    args = parser.parse_args()

    import cupy as cp
    import numpy as np

    import cuprims
    import cuprims.algorithms.reduce as reduce_module
    from cuprims import CountingIterator, ZipIterator
    from cuprims._jit.codegen import tuned_selector

    original = reduce_module.reduce_source
    overrides: dict[str, int] = {}

    def patched(**kw):
        src = original(**kw)
        if not overrides:
            return src
        match = re.search(r"using cuprims_selector_t = (.*);\n", src.text)
        text = src.text.replace(match.group(0), tuned_selector(match.group(1), overrides))
        return type(src)(text=text, name_expressions=src.name_expressions, extern_symbols=src.extern_symbols,
                         meta_fields=src.meta_fields)

    reduce_module.reduce_source = patched
    n = 1 << args.log2n
    x = cp.random.default_rng(3).random(n, dtype=cp.float32)
    Pair = cuprims.gpu_struct({"value": np.float32, "index": np.int64})

    def better(a, b):
        if a[0] > b[0] or (a[0] == b[0] and a[1] < b[1]):
            return a
        return b

    best = cp.empty(1, Pair.dtype)
    init = Pair(-np.inf, np.iinfo(np.int64).max)
    expected = int(cp.argmax(x))
    rows = [{"work": f"cupy.argmax 2^{args.log2n}", "variant": "reference", "value": device_ms(lambda: cp.argmax(x)),
             "unit": "ms"}]
    for threads in (256, 512):
        for items in (4, 6, 8, 12, 16):
            overrides.clear()
            if (threads, items) != (256, 4):
                overrides.update({"multi_tile.items_per_thread": items, "single_tile.items_per_thread": items,
                                  "multi_tile.threads_per_block": threads, "single_tile.threads_per_block": threads})
            cuprims.clear_all_caches()
            it = ZipIterator(x, CountingIterator(np.int64(0)))
            r = cuprims.make_reduce_into(d_in=it, d_out=best, op=better, h_init=init)
            tmp = cp.empty(r(temp_storage=None, d_in=it, d_out=best, num_items=n, h_init=init), np.uint8)
            run = lambda: r(temp_storage=tmp, d_in=it, d_out=best, num_items=n, h_init=init)  # noqa: E731
            run()
            assert int(best.get()[0]["index"]) == expected
            t = device_ms(run)
            label = "CUB default" if not overrides else "override"
            rows.append({"work": f"argmax Zip(x, Counting) 2^{args.log2n}", "variant": f"{threads} x {items} ({label})",
                         "value": t, "unit": "ms"})
            print(rows[-1], flush=True)
    dirs = [Path(__file__).resolve().parent / "results"] + ([Path(args.out)] if args.out else [])
    print(write_results("tune-reduce-struct", rows, {"device": "H200"}, dirs))


if __name__ == "__main__":
    main()
