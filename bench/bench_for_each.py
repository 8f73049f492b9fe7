"""for_each over 2^28 items, called as a user calls it: a Python operator over a
``CountingIterator`` writing through the device arrays it captures.

* ``out[i] = x[i] * 2`` through captured arrays, beside our ``unary_transform`` of the same
  size (``x * 2`` into another array: the same reads and writes, the floor); once with x
  read by the operator, once with x read by for_each (``ZipIterator(index, x)``);
* a scatter through a random permutation, ``out[perm[i]] = x[i]``, beside CuPy's and
  PyTorch's ``out[perm] = x`` and JAX's ``out.at[perm].set(x)`` (``out`` donated, so that
  the scatter writes in place; where JAX is installed, timed as ``bench/_jax_peer.py`` says).

Each ratio is the peer's figure over cuprims' (higher is better for cuprims), or cuprims'
over the transform (1.0: a for_each costs what the transform costs).

Run on a GPU machine:  python bench/bench_for_each.py [--out DIR] [--log2n 28]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import bench_arguments, device_ms, result_rows, save_results  # noqa: E402
from _jax_peer import from_cupy, jax_ms, load_jax, row_or_reason  # noqa: E402


def main() -> None:
    args = bench_arguments()
    jax = load_jax()

    import cupy as cp
    import numpy as np
    import torch

    import cuprims
    from cuprims import CountingIterator, ZipIterator

    n = 1 << args.log2n
    rows, add = result_rows(52, 56)
    x = cp.random.random(n, dtype=cp.float32)
    out = cp.empty_like(x)
    index = CountingIterator(np.int32(0))

    def doubled(i):
        out[i] = x[i] * 2

    work = f"for_each out[i] = x[i] * 2, float32, 2^{args.log2n}"
    each = cuprims.make_for_each(d_in=index, op=doubled)
    tmp = cp.empty(each(temp_storage=None, d_in=index, num_items=n, op=doubled), np.uint8)
    call = lambda: each(temp_storage=tmp, d_in=index, num_items=n, op=doubled)  # noqa: E731
    call()
    assert bool((out == x * 2).all())
    t_ours = device_ms(call)
    add(work, "cuprims for_each", t_ours, "ms")
    y = cp.empty_like(x)
    transform = cuprims.make_unary_transform(d_in=x, d_out=y, op=lambda v: v * 2)
    t_transform = device_ms(lambda: transform(d_in=x, d_out=y, num_items=n))
    add(work, "cuprims unary_transform x * 2 (the floor)", t_transform, "ms", t_ours / t_transform,
        "ratio = for_each/transform (target <= 1.1)")
    # the items read by for_each itself (a zip of the index and x): all of a thread's loads are in
    # flight at once, where the operator's own x[i] waits on its previous store (they may alias)
    pairs = ZipIterator(index, x)

    def doubled_pair(p):
        out[p[0]] = p[1] * 2

    each_zip = cuprims.make_for_each(d_in=pairs, op=doubled_pair)
    call_zip = lambda: each_zip(temp_storage=tmp, d_in=pairs, num_items=n, op=doubled_pair)  # noqa: E731
    out[:] = 0
    call_zip()
    assert bool((out == x * 2).all())
    t_zip = device_ms(call_zip)
    add(work, "cuprims for_each over ZipIterator(index, x)", t_zip, "ms", t_zip / t_transform,
        "ratio = for_each/transform (target <= 1.1)")

    perm = cp.random.permutation(n).astype(cp.int32)

    def scatter(i):
        out[perm[i]] = x[i]

    work = f"for_each scatter out[perm[i]] = x[i], float32, 2^{args.log2n}"
    scat = cuprims.make_for_each(d_in=index, op=scatter)
    call = lambda: scat(temp_storage=tmp, d_in=index, num_items=n, op=scatter)  # noqa: E731
    call()
    assert bool((out[perm] == x).all())
    t_scatter = device_ms(call)
    add(work, "cuprims for_each", t_scatter, "ms")
    t_cupy = device_ms(lambda: out.__setitem__(perm, x))
    add(work, "cupy out[perm] = x", t_cupy, "ms", t_cupy / t_scatter, "ratio = cupy/cuprims")
    xt, outt, permt = (torch.as_tensor(a, device="cuda") for a in (x, out, perm))
    t_torch = device_ms(lambda: outt.__setitem__(permt, xt))
    add(work, "torch out[perm] = x", t_torch, "ms", t_torch / t_scatter, "ratio = torch/cuprims")
    if jax is not None:
        with row_or_reason("JAX for_each"):
            xj, permj = from_cupy(jax, x), from_cupy(jax, perm)
            jax_scatter = jax.jit(lambda o, p, v: o.at[p].set(v), donate_argnums=0)
            held = [jax.numpy.zeros_like(xj)]

            def jax_call():
                held[0] = jax_scatter(held[0], permj, xj)
                return held[0]

            assert bool((cp.from_dlpack(jax_call())[perm] == x).all())
            t_jax = jax_ms(jax, jax_call)
            add(work, "jax out.at[perm].set(x) (out donated)", t_jax, "ms", t_jax / t_scatter, "ratio = jax/cuprims")
    save_results("for_each", rows, args.out, False)


if __name__ == "__main__":
    main()
