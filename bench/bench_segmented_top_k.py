"""Segmented top-k of float32 rows beside ``torch.topk(x.view(rows, cols), k, dim=-1)``
(sorted, the default), ``jax.lax.top_k`` on the same rows (where JAX is installed, timed as
``bench/_jax_peer.py`` says) and a read of the input (the floor: every key read once): 2^14 rows
of 2^14 keys at k = 8 and k = 64, and 2^20 rows of 256 keys at k = 8.

cuprims runs four ways: keys alone on fixed rows, pairs with int32 column indices as
values (what torch.topk's indices are), keys alone on rows given by int64 offset arrays
(the way a CuPy user passes them), and the one-shot function. Each ratio is torch's
figure over cuprims' (higher is better for cuprims; the target is 1.5), or cuprims' over
the read.

Run on a GPU machine:  python bench/bench_segmented_top_k.py [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import bench_arguments, device_ms, result_rows, save_results, sized_call  # noqa: E402
from _jax_peer import from_cupy, jax_ms, load_jax, row_or_reason  # noqa: E402

CASES = ((14, 14, 8), (14, 14, 64), (20, 8, 8))   # log2 rows, log2 columns, k


def main() -> None:
    args = bench_arguments(None)
    jax = load_jax()

    import functools

    import cupy as cp
    import numpy as np
    import torch

    import cuprims

    rows_out, add = result_rows(52, 56)
    for log_rows, log_cols, k in CASES:
        rows, cols = 1 << log_rows, 1 << log_cols
        work = f"top-{k} of 2^{log_rows} rows x 2^{log_cols} float32"
        x = cp.random.default_rng(0).standard_normal(rows * cols, dtype=cp.float32)
        xt = torch.as_tensor(x, device="cuda").view(rows, cols)
        out_k = cp.empty(rows * k, np.float32)
        out_v = cp.empty(rows * k, np.int32)
        col_index = cp.tile(cp.arange(cols, dtype=np.int32), rows)
        offsets = cp.arange(rows + 1, dtype=np.int64) * cols

        keys = dict(d_in_keys=x, d_out_keys=out_k)
        fixed = dict(k=k, num_segments=rows, segment_size=cols)
        keys_call = sized_call(cuprims.make_segmented_top_k(**keys), **keys, **fixed)
        keys_call()
        values, indices = torch.topk(xt, k, dim=-1)
        assert bool((torch.as_tensor(out_k, device="cuda").view(rows, k) == values).all())
        t_keys = device_ms(keys_call)

        pairs = dict(keys, d_in_values=col_index, d_out_values=out_v)
        pairs_call = sized_call(cuprims.make_segmented_top_k(**pairs), **pairs, **fixed)
        pairs_call()
        # the indices point at the keys torch gives (equal keys may be told apart otherwise)
        picked = xt.gather(1, torch.as_tensor(out_v, device="cuda").view(rows, k).long())
        assert bool((picked == values).all())
        t_pairs = device_ms(pairs_call)

        by_offsets = dict(keys, start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:])
        offsets_call = sized_call(cuprims.make_segmented_top_k(**by_offsets), **by_offsets, k=k, num_segments=rows)
        t_offsets = device_ms(offsets_call)
        t_one_shot = device_ms(lambda: cuprims.segmented_top_k(**keys, **fixed))

        t_torch = device_ms(lambda: torch.topk(xt, k, dim=-1))
        t_read = device_ms(lambda: x.max())   # every key read once, a few bytes written
        target = "ratio = torch/cuprims (target >= 1.5)"
        add(work, "cuprims keys, fixed rows", t_keys, "ms", t_torch / t_keys, target)
        add(work, "cuprims pairs (int32 column indices), fixed rows", t_pairs, "ms", t_torch / t_pairs, target)
        add(work, "cuprims keys, int64 offset arrays", t_offsets, "ms", t_torch / t_offsets, target)
        add(work, "cuprims keys, one-shot segmented_top_k", t_one_shot, "ms", t_torch / t_one_shot, target)
        add(work, "torch.topk(dim=-1)", t_torch, "ms")
        if jax is not None:
            with row_or_reason("JAX segmented_top_k"):
                xj = from_cupy(jax, x).reshape(rows, cols)
                jax_top = jax.jit(functools.partial(jax.lax.top_k, k=k))
                assert np.array_equal(np.asarray(jax_top(xj)[0]), values.cpu().numpy())
                t_jax = jax_ms(jax, lambda: jax_top(xj))
                add(work, "jax.lax.top_k (last axis)", t_jax, "ms", t_jax / t_keys, "ratio = jax/cuprims keys")
                del xj
        add(work, "read of the input (cupy max, the floor)", t_read, "ms", t_keys / t_read,
            "ratio = cuprims keys/read")
        del x, xt, out_k, out_v, col_index, values, indices
    save_results("segmented_top_k", rows_out, args.out, False)


if __name__ == "__main__":
    main()
