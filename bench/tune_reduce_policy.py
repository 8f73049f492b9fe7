"""Diagnostic: device time of struct-accumulator reductions under other CUB reduce
policies (items per thread, threads per block). Not a benchmark; it informs the policy
cuprims picks for reductions whose accumulator is larger than the items they load.

Run on a GPU machine:  python bench/tune_reduce_policy.py [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import RESULTS, argmax_pieces, bench_arguments, device_ms, write_results  # noqa: E402


def main() -> None:
    args = bench_arguments()

    import cupy as cp
    import numpy as np

    import cuprims
    import cuprims._codegen.common as codegen
    from cuprims import CountingIterator, ZipIterator

    # Every reduce unit declares its policy through codegen.tuned_selector; the probe puts
    # its own tile shape there (for every unit: only the argmax's is timed).
    original = codegen.tuned_selector
    shape: dict[str, int] = {}
    codegen.tuned_selector = lambda base, overrides, name="cuprims_selector_t": original(base, dict(shape), name)

    n = 1 << args.log2n
    x = cp.random.default_rng(3).random(n, dtype=cp.float32)
    Pair, better, init = argmax_pieces()
    best = cp.empty(1, Pair.dtype)
    expected = int(cp.argmax(x))
    rows = [{"work": f"cupy.argmax 2^{args.log2n}", "variant": "reference", "value": device_ms(lambda: cp.argmax(x)),
             "unit": "ms"}]
    for threads in (256, 512):
        for items in (4, 6, 8, 12, 16):
            shape.clear()
            shape.update({"multi_tile.items_per_thread": items, "single_tile.items_per_thread": items,
                          "multi_tile.threads_per_block": threads, "single_tile.threads_per_block": threads})
            cuprims.clear_all_caches()
            it = ZipIterator(x, CountingIterator(np.int64(0)))
            r = cuprims.make_reduce_into(d_in=it, d_out=best, op=better, h_init=init)
            tmp = cp.empty(r(temp_storage=None, d_in=it, d_out=best, num_items=n, h_init=init), np.uint8)
            run = lambda: r(temp_storage=tmp, d_in=it, d_out=best, num_items=n, h_init=init)  # noqa: E731
            run()
            assert int(best.get()[0]["index"]) == expected
            t = device_ms(run)
            # 256 x 4 is CUB's own scaling for a 16-byte accumulator
            label = "CUB's scaling" if (threads, items) == (256, 4) else "override"
            rows.append({"work": f"argmax Zip(x, Counting) 2^{args.log2n}", "variant": f"{threads} x {items} ({label})",
                         "value": t, "unit": "ms"})
            print(rows[-1], flush=True)
    dirs = [RESULTS] + ([Path(args.out)] if args.out else [])
    print(write_results("tune-reduce-struct", rows, {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()},
                        dirs))


if __name__ == "__main__":
    main()
