"""Where the host time of one call goes (n = 1024, cuda.compute-style arguments): a
diagnostic of the host time per call, not a benchmark.

For every case of ``bench_defaults.host_cases``: the whole object call of cuprims and of
cuda.compute (when importable), and the launches cuprims' call made (recorded once)
replayed alone, through ``cuLaunchKernelEx`` with the context-independent ``CUkernel``
handle (what cuprims does) and with the context's ``CUfunction`` of it
(``cuKernelGetFunction``), and through ``cuLaunchKernel``. The whole call less the replay
is cuprims' Python path on this host.

    python bench/launch_probe.py
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import add_extra_path, host_us  # noqa: E402
from bench_defaults import host_cases  # noqa: E402


def _recorded_launches(call: Callable[[], Any]) -> list[tuple[bool, tuple]]:
    """(pdl, arguments) of every launch one call makes."""
    from cuprims._runtime import driver

    seen: list[tuple[bool, tuple]] = []
    plain, pdl = driver.launch, driver.launch_pdl

    def record_plain(*args: Any) -> Any:
        seen.append((False, args))
        return plain(*args)

    def record_pdl(*args: Any) -> Any:
        seen.append((True, args))
        return pdl(*args)

    driver.launch, driver.launch_pdl = record_plain, record_pdl
    try:
        call()
    finally:
        driver.launch, driver.launch_pdl = plain, pdl
    return seen


def _replays(seen: list[tuple[bool, tuple]]) -> dict[str, Callable[[], Any]]:
    from cuprims._runtime import driver, libcuda

    lib = libcuda.load()
    launch_plain = lib.cuLaunchKernel
    functions: dict[int, int] = {}
    for _, args in seen:
        func = ctypes.c_void_p()
        libcuda.check("cuKernelGetFunction", lib.cuKernelGetFunction(ctypes.byref(func), args[0]))
        functions[args[0]] = int(func.value or 0)

    def as_ex(use_function: bool) -> Callable[[], None]:
        def run() -> None:
            for pdl, args in seen:
                kernel = functions[args[0]] if use_function else args[0]
                if pdl:
                    driver.launch_pdl(kernel, *args[1:])
                else:
                    driver.launch(kernel, *args[1:])
        return run

    def as_plain() -> None:
        for _, (kernel, grid, block, stream, params, *rest) in seen:
            launch_plain(functions[kernel], grid, 1, 1, block, 1, 1, rest[0] if rest else 0, stream, params, None)

    return {"replay Ex CUkernel": as_ex(False), "replay Ex CUfunction": as_ex(True),
            "replay cuLaunchKernel CUfunction": as_plain}


def main() -> None:
    import cupy as cp

    import cuprims

    add_extra_path()
    try:
        import cuda.compute as cc
    except ImportError as exc:
        print(f"cuda.compute not importable: {exc}")
        cc = None
    theirs = {} if cc is None else host_cases(cc)
    print(f"{'case':34s} {'cuprims':>8s} {'cuda.cc':>8s} {'Ex/kern':>8s} {'Ex/func':>8s} {'plain':>8s} launches")
    for name, (run, _) in host_cases(cuprims).items():
        seen = _recorded_launches(run)
        cp.cuda.Device().synchronize()
        figures = [host_us(run), host_us(theirs[name][0]) if name in theirs else float("nan")]
        figures += [host_us(fn) for fn in _replays(seen).values()]
        kinds = "+".join("pdl" if pdl else "plain" for pdl, _ in seen)
        print(f"{name:34s} " + " ".join(f"{v:8.2f}" for v in figures) + f" {kinds}", flush=True)


if __name__ == "__main__":
    main()
