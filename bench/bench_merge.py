"""Merge of two sorted sequences of 2^27 int32 keys each (and int32 values) beside a device
copy of the inputs into the output (the floor: the data read once and written once),
``torch.sort(torch.cat(...), stable=True)`` (for pairs: the sort's indices, then a gather of
the values), ``cupy.sort`` of the concatenation (keys; cupy's sort is stable) and JAX's
stable sort of the concatenation (``jnp.sort``; for pairs ``jax.lax.sort`` of keys and values
with one key), where JAX is installed, timed as ``bench/_jax_peer.py`` says.

Each ratio is cuprims' figure over the copy's (1.0: a merge costs what a copy costs; target
<= 1.3), or the peer's over cuprims' (target >= 3 for torch).

Run on a GPU machine:  python bench/bench_merge.py [--out DIR] [--log2n 27]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import bench_arguments, device_ms, result_rows, save_results  # noqa: E402
from _jax_peer import from_cupy, jax_ms, load_jax, row_or_reason  # noqa: E402


def main() -> None:
    args = bench_arguments(27)
    jax = load_jax()

    import cupy as cp
    import numpy as np
    import torch

    import cuprims
    from cuprims import OpKind

    n = 1 << args.log2n
    rows, add = result_rows(44, 52)
    k1 = cp.sort(cp.random.randint(0, 1 << 30, n, dtype=cp.int32))
    k2 = cp.sort(cp.random.randint(0, 1 << 30, n, dtype=cp.int32))
    v1, v2 = cp.arange(n, dtype=cp.int32), cp.arange(n, 2 * n, dtype=cp.int32)
    out_k, out_v = cp.empty(2 * n, cp.int32), cp.empty(2 * n, cp.int32)
    both = cp.concatenate([k1, k2])   # the values below are positions in it
    want = cp.sort(both)

    def timed(values: bool) -> float:
        kw = dict(d_in_keys1=k1, d_in_values1=v1 if values else None, d_in_keys2=k2,
                  d_in_values2=v2 if values else None, d_out_keys=out_k, d_out_values=out_v if values else None)
        m = cuprims.make_merge(op=OpKind.LESS, **kw)
        tmp = cp.empty(m(temp_storage=None, num_items1=n, num_items2=n, **kw), np.uint8)
        call = lambda: m(temp_storage=tmp, num_items1=n, num_items2=n, **kw)  # noqa: E731
        call()
        assert bool((out_k == want).all())
        if values:
            assert bool((both[out_v] == out_k).all())
        return device_ms(call)

    def copy_keys() -> None:
        out_k[:n] = k1
        out_k[n:] = k2

    def copy_pairs() -> None:
        copy_keys()
        out_v[:n] = v1
        out_v[n:] = v2

    tk1, tk2 = torch.as_tensor(k1, device="cuda"), torch.as_tensor(k2, device="cuda")
    tv1, tv2 = torch.as_tensor(v1, device="cuda"), torch.as_tensor(v2, device="cuda")

    def torch_pairs() -> None:
        keys, idx = torch.sort(torch.cat([tk1, tk2]), stable=True)
        torch.cat([tv1, tv2])[idx]

    for what, values, copy in (("keys", False, copy_keys), ("pairs", True, copy_pairs)):
        work = f"merge int32 {what}, 2 x 2^{args.log2n}"
        t_ours = timed(values)
        add(work, f"cuprims merge ({what})", t_ours, "ms")
        t_copy = device_ms(copy)
        add(work, "device copy of the inputs (the floor)", t_copy, "ms", t_ours / t_copy,
            "ratio = cuprims/copy (target <= 1.3)")
        if values:
            t_torch = device_ms(torch_pairs)
        else:
            t_torch = device_ms(lambda: torch.sort(torch.cat([tk1, tk2]), stable=True))
        add(work, "torch.sort(torch.cat, stable=True)" + (" + gather" if values else ""), t_torch, "ms",
            t_torch / t_ours, "ratio = torch/cuprims (target >= 3)")
        if not values:
            t_cupy = device_ms(lambda: cp.sort(cp.concatenate([k1, k2])))
            add(work, "cupy.sort(cupy.concatenate)", t_cupy, "ms", t_cupy / t_ours, "ratio = cupy/cuprims")
        if jax is not None:
            with row_or_reason("JAX merge"):
                t_jax = jax_merge_ms(jax, k1, k2, (v1, v2) if values else None, both, want)
                add(work, "jax stable sort of the concatenation", t_jax, "ms", t_jax / t_ours, "ratio = jax/cuprims")
    save_results("merge", rows, args.out, False)


def jax_merge_ms(jax, k1, k2, values, both, want):
    """Milliseconds of JAX's stable sort of the two key arrays' concatenation ``both`` (with
    ``values``, a pair of value arrays holding positions in ``both``, carried along), checked
    against ``want`` (CuPy's sort of ``both``) first."""
    import cupy as cp

    jnp = jax.numpy
    a, b = from_cupy(jax, k1), from_cupy(jax, k2)
    if values is None:
        sort = jax.jit(lambda x, y: jnp.sort(jnp.concatenate([x, y]), stable=True))
        call = lambda: sort(a, b)  # noqa: E731
        keys = call()
    else:
        va, vb = from_cupy(jax, values[0]), from_cupy(jax, values[1])
        sort = jax.jit(lambda x, y, u, w: jax.lax.sort((jnp.concatenate([x, y]), jnp.concatenate([u, w])),
                                                       num_keys=1, is_stable=True))
        call = lambda: sort(a, b, va, vb)  # noqa: E731
        keys, vals = call()
        assert bool((both[cp.from_dlpack(vals)] == cp.from_dlpack(keys)).all())
    assert bool((cp.from_dlpack(keys) == want).all())
    return jax_ms(jax, call)


if __name__ == "__main__":
    main()
