"""find_if over 2^28 float32: the first item equal to a value, placed at index 1,000 (the
search should stop after about one wave of tiles) and at the last index (every item read),
beside a read of the input (the floor: our max-reduce), and the ways CuPy, PyTorch and JAX
users find a first match: ``cp.argmax(x == v)``, ``torch.argmax((x == v).int())`` and
``jnp.argmax(x == v)`` (where JAX is installed, timed as ``bench/_jax_peer.py`` says); none
stops early. cuprims is called as a user calls it: a Python predicate, an int64 index array.

Each ratio is the peer's figure over cuprims' (higher is better for cuprims), or cuprims'
over the read (1.0: the search costs a read).

Run on a GPU machine:  python bench/bench_find_if.py [--out DIR] [--log2n 28]
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

    import cupy as cp
    import numpy as np
    import torch

    import cuprims

    n = 1 << args.log2n
    rows, add = result_rows(52, 56)
    x = cp.random.random(n, dtype=cp.float32)        # in [0, 1): 2.0 appears only where placed
    xt = torch.as_tensor(x, device="cuda")
    where = cp.empty(1, np.int64)

    def is_two(v):
        return v == 2.0

    find = cuprims.make_find_if(d_in=x, d_out_index=where, cond=is_two)
    tmp = cp.empty(find(temp_storage=None, d_in=x, d_out_index=where, num_items=n), np.uint8)
    call = lambda: find(temp_storage=tmp, d_in=x, d_out_index=where, num_items=n)  # noqa: E731
    t_read = read_ms(x)
    jax_find = None if jax is None else jax.jit(lambda v: jax.numpy.argmax(v == 2.0))
    for at, label in ((1000, "at index 1,000"), (n - 1, "at the last index")):
        x[at] = 2.0
        work = f"find_if == 2.0, float32, 2^{args.log2n}, first match {label}"
        call()
        assert int(where[0]) == at
        t_ours = device_ms(call)
        add(work, "cuprims find_if", t_ours * 1000, "us", None,
            "target < 20 us" if at == 1000 else "")
        if at == n - 1:
            add(work, "a read of the input (cuprims max-reduce: the floor)", t_read * 1000, "us", t_ours / t_read,
                "ratio = cuprims/read (target <= 1.1)")
        t_cupy = device_ms(lambda: cp.argmax(x == 2.0))
        add(work, "cupy.argmax(x == v)", t_cupy * 1000, "us", t_cupy / t_ours, "ratio = cupy/cuprims")
        t_torch = device_ms(lambda: torch.argmax((xt == 2.0).int()))
        add(work, "torch.argmax((x == v).int())", t_torch * 1000, "us", t_torch / t_ours, "ratio = torch/cuprims")
        if jax is not None:
            with row_or_reason("JAX find_if"):
                xj = from_cupy(jax, x)   # after the match is placed: from_cupy may copy
                assert int(jax_find(xj)) == at
                t_jax = jax_ms(jax, lambda: jax_find(xj))
                add(work, "jnp.argmax(x == v)", t_jax * 1000, "us", t_jax / t_ours, "ratio = jax/cuprims")
                del xj
        x[at] = 0.5
    save_results("find_if", rows, args.out, False)


if __name__ == "__main__":
    main()
