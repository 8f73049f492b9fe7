"""Adjacent difference of 2^28 float32 (``OpKind.MINUS``, left: numpy's ``diff`` with the
first item kept) beside a device copy (the floor: the data read once and written once),
``torch.diff``, ``cupy.diff`` and ``jax.numpy.diff`` (where JAX is installed, timed as
``bench/_jax_peer.py`` says), into another array and in place.

Each ratio is the peer's figure over cuprims' (higher is better for cuprims), or cuprims'
over the copy (1.0: a difference costs what a copy costs).

Run on a GPU machine:  python bench/bench_adjacent_difference.py [--out DIR] [--log2n 28]
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
    from cuprims import OpKind

    n = 1 << args.log2n
    rows, add = result_rows(52, 56)
    x = cp.random.random(n, dtype=cp.float32)
    y = cp.empty_like(x)
    work = f"adjacent_difference float32, 2^{args.log2n}"
    diff = cuprims.make_adjacent_difference(d_in=x, d_out=y, op=OpKind.MINUS)
    tmp = cp.empty(diff(temp_storage=None, d_in=x, d_out=y, num_items=n), np.uint8)
    call = lambda: diff(temp_storage=tmp, d_in=x, d_out=y, num_items=n)  # noqa: E731
    call()
    assert bool((y[1:] == x[1:] - x[:-1]).all()) and bool(y[0] == x[0])
    t_ours = device_ms(call)
    add(work, "cuprims adjacent_difference", t_ours, "ms")
    t_copy = device_ms(lambda: y.__setitem__(Ellipsis, x))
    add(work, "device copy (the floor)", t_copy, "ms", t_ours / t_copy, "ratio = cuprims/copy (target <= 1.1)")
    xt = torch.as_tensor(x, device="cuda")
    t_torch = device_ms(lambda: torch.diff(xt))
    add(work, "torch.diff", t_torch, "ms", t_torch / t_ours, "ratio = torch/cuprims (target >= 1.0)")
    t_cupy = device_ms(lambda: cp.diff(x))
    add(work, "cupy.diff", t_cupy, "ms", t_cupy / t_ours, "ratio = cupy/cuprims (target >= 1.0)")
    if jax is not None:
        with row_or_reason("JAX adjacent_difference"):
            xj = from_cupy(jax, x)
            jax_diff = jax.jit(jax.numpy.diff)
            assert bool((cp.from_dlpack(jax_diff(xj)) == x[1:] - x[:-1]).all())
            t_jax = jax_ms(jax, lambda: jax_diff(xj))
            add(work, "jax.numpy.diff", t_jax, "ms", t_jax / t_ours, "ratio = jax/cuprims")
    z = x.copy()
    tmp_in_place = cp.empty(diff(temp_storage=None, d_in=z, d_out=z, num_items=n), np.uint8)
    t_in_place = device_ms(lambda: diff(temp_storage=tmp_in_place, d_in=z, d_out=z, num_items=n))
    add(work, "cuprims adjacent_difference in place", t_in_place, "ms", t_in_place / t_copy, "ratio = cuprims/copy")
    save_results("adjacent_difference", rows, args.out, False)


if __name__ == "__main__":
    main()
