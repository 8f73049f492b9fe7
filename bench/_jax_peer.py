"""JAX as a benchmark peer, in the same process as CuPy, PyTorch and cuprims.

* JAX is imported with its memory preallocation off: by default it takes most of the GPU's
  memory at its first use, and the other libraries of the process would run out.
* Inputs come from the benchmark's CuPy arrays through DLPack (the same memory, no copy;
  a copy through the host where JAX refuses the buffer).
* Time is wall clock around back-to-back calls of a jitted function, drained once at the
  end: JAX launches on streams of its own, which CuPy's events do not see. Each call's
  dispatch overlaps the previous call's kernels, so for work of a millisecond or more the
  figure is the device's; for a few microseconds of work it is JAX's dispatch.

A benchmark asks ``load_jax()`` once; where it returns None (JAX not installed, no GPU
backend, or ``CUPRIMS_BENCH_JAX=0``) the JAX rows are left out. Each JAX row is measured
inside ``row_or_reason``: a failure there (an XLA error, JAX's memory, a wrong answer) is
printed and that row left out, and the benchmark's other rows still come.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from typing import Any, Callable, Iterator


def load_jax() -> Any:
    """The ``jax`` module, set up to share the GPU, or None where JAX cannot run on one or
    ``CUPRIMS_BENCH_JAX=0`` leaves it out."""
    if os.environ.get("CUPRIMS_BENCH_JAX", "1") == "0":
        return None
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax

        if jax.default_backend() != "gpu":
            return None
    except Exception as exc:  # noqa: BLE001  (an import or plugin failure leaves JAX out, said once)
        print("JAX left out:", exc)
        return None
    return jax


def from_cupy(jax: Any, x: Any) -> Any:
    """CuPy array ``x`` as a JAX array on the GPU: the same memory through DLPack where JAX
    takes it, else a copy through the host."""
    try:
        return jax.dlpack.from_dlpack(x)
    except Exception:  # noqa: BLE001
        return jax.device_put(x.get(), jax.devices("gpu")[0])


def jax_ms(jax: Any, call: Callable[[], Any], *, inner: int = 20, repeats: int = 15, warmup: int = 3) -> float:
    """Median milliseconds per call of ``call`` (which returns JAX arrays): wall clock around
    ``inner`` back-to-back calls and one wait for the last result."""
    import cupy as cp

    cp.cuda.Device().synchronize()
    for _ in range(warmup):
        jax.block_until_ready(call())
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            out = call()
        jax.block_until_ready(out)
        samples.append((time.perf_counter() - t0) * 1e3 / inner)
    return statistics.median(samples)


@contextlib.contextmanager
def row_or_reason(what: str) -> Iterator[None]:
    """Run the block measuring JAX row ``what``; an exception in it is printed, not raised."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001
        print(f"{what} left out: {type(exc).__name__}: {exc}")
