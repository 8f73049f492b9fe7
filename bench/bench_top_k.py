"""Top-k of 2^28 float32 (standard normal, as ``torch.randn``), k = 16, 1024 and 2^20: cuprims'
keys alone, and pairs with the indices as values (a CountingIterator, and an int32 arange
array), beside ``torch.topk`` (sorted, its default, and ``sorted=False``), ``jax.lax.top_k``
(sorted; where JAX is installed, timed as ``bench/_jax_peer.py`` says), CuPy's ``partition``
where it runs, and a read of the keys (cuprims' max-reduce: the floor).
cuprims' results are unsorted but for the ``sorted=True`` row; ``torch.topk`` returns
indices (int64) with its values.

Each ratio is the peer's figure over cuprims' (higher is better for cuprims: the target is
>= 1.5 against torch.topk), or cuprims' over the read.

Run on a GPU machine:  python bench/bench_top_k.py [--out DIR] [--log2n 28]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import bench_arguments, device_ms, read_ms, result_rows, save_results  # noqa: E402
from _jax_peer import from_cupy, jax_ms, load_jax, row_or_reason  # noqa: E402


def main() -> None:
    args = bench_arguments()
    jax = load_jax()

    import functools

    import cupy as cp
    import numpy as np
    import torch

    import cuprims
    from cuprims import CountingIterator

    n = 1 << args.log2n
    rows, add = result_rows(40, 56)
    x = cp.random.default_rng(1).standard_normal(n, dtype=np.float32)
    xt = torch.as_tensor(x, device="cuda")
    t_read = read_ms(x)
    arange = cp.arange(n, dtype=np.int32)
    xj = None if jax is None else from_cupy(jax, x)
    for k in (16, 1024, 1 << 20):
        work = f"top_k float32 2^{args.log2n}, k = {k}"
        want = np.sort(torch.topk(xt, k).values.cpu().numpy())
        ok, ov = cp.empty(k, np.float32), cp.empty(k, np.int32)

        def timed(values, sorted_=False):
            kw = dict(d_in_keys=x, d_out_keys=ok, k=k, num_items=n)
            if values is not None:
                kw.update(d_in_values=values, d_out_values=ov)
            obj = cuprims.make_top_k(sorted=sorted_, **{name: v for name, v in kw.items() if name.startswith("d_")})
            tmp = cp.empty(obj(temp_storage=None, **kw), np.uint8)
            call = lambda: obj(temp_storage=tmp, **kw)  # noqa: E731
            call()
            got = ok.get()
            assert np.array_equal(got[::-1] if sorted_ else np.sort(got), want)
            if values is not None:
                assert bool((x[ov] == ok).all())
            return device_ms(call)

        t_keys = timed(None)
        add(work, "cuprims top_k keys", t_keys, "ms", t_keys / t_read, "ratio = cuprims/read")
        t_pairs = timed(CountingIterator(np.int32(0)))
        add(work, "cuprims top_k pairs (CountingIterator indices)", t_pairs, "ms", t_pairs / t_read,
            "ratio = cuprims/read")
        t_arange = timed(arange)
        add(work, "cuprims top_k pairs (int32 arange values)", t_arange, "ms", t_arange / t_read,
            "ratio = cuprims/read")
        t_sorted = timed(CountingIterator(np.int32(0)), sorted_=True)
        add(work, "cuprims top_k pairs sorted=True (CountingIterator)", t_sorted, "ms", t_sorted / t_read,
            "ratio = cuprims/read")
        t_torch = device_ms(lambda: torch.topk(xt, k))
        add(work, "torch.topk (sorted)", t_torch, "ms", t_torch / t_pairs,
            "ratio = torch/cuprims pairs (target >= 1.5)")
        add(work, "torch.topk (sorted) against cuprims sorted pairs", t_torch, "ms", t_torch / t_sorted,
            "ratio = torch/cuprims sorted pairs")
        t_torch_unsorted = device_ms(lambda: torch.topk(xt, k, sorted=False))
        add(work, "torch.topk(sorted=False)", t_torch_unsorted, "ms", t_torch_unsorted / t_pairs,
            "ratio = torch/cuprims pairs (target >= 1.5)")
        if jax is not None:
            with row_or_reason("JAX top_k"):
                jax_top = jax.jit(functools.partial(jax.lax.top_k, k=k))
                assert np.array_equal(np.sort(np.asarray(jax_top(xj)[0])), want)
                t_jax = jax_ms(jax, lambda: jax_top(xj))
                add(work, "jax.lax.top_k (sorted)", t_jax, "ms", t_jax / t_pairs, "ratio = jax/cuprims pairs")
        try:
            t_cupy = device_ms(lambda: cp.partition(x, n - k)[n - k:], inner=3, repeats=3)
            add(work, "cupy.partition", t_cupy, "ms", t_cupy / t_keys, "ratio = cupy/cuprims keys")
        except Exception as exc:  # noqa: BLE001
            print("cupy.partition failed:", exc)
        add(work, "a read of the keys (cuprims max-reduce: the floor)", t_read, "ms")
    save_results("top_k", rows, args.out, False)


if __name__ == "__main__":
    main()
