"""Concurrent builds: processes building different Python operators over the same types
share one NVRTC compile of their kernel (the kernel entry has its own per-key lock, taken
inside the cubin lock), and threads on one key compile each stage once."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from cpu_helpers import WAIT_FOR_ALL, counters, delta, make_f4, spawn_builders
from fault_helpers import ELF

# numba's stages counted, one kernel shared by several Python operators: the numba path
pytestmark = pytest.mark.usefixtures("numba_ops")

DIFFERENT_OPS_SCRIPT = r"""
import hashlib, json, sys
import numpy as np, cuprims
from cuprims._jit import build as jit_build
scale = float(sys.argv[3])
ns = {}
exec(f"def op(a, b):\n    return a * {scale!r} + b\n", ns)
""" + WAIT_FOR_ALL + r"""
r = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32),
                             op=ns["op"], h_init=cuprims.ProxyValue(np.float32), compute_capability=90)
source = r._builds.source(90)
info = cuprims.cache_info()
info.update(sha=hashlib.sha256(r.cubin()).hexdigest(), elf=r.cubin()[:4] == b"\x7fELF",
            kernel_key=jit_build.kernel_key(source, 90), cubin_key=jit_build.build_key(source, 90, r._builds._ops))
print(json.dumps(info))
"""


def test_processes_with_different_operators_compile_the_kernel_once(tmp_path, fresh_caches):
    n = 8
    outs = spawn_builders(tmp_path, fresh_caches, DIFFERENT_OPS_SCRIPT, n, "different-ops",
                          args=lambda i: (1.0 + i / 8,), timeout=240)
    assert len({o["kernel_key"] for o in outs}) == 1, "the operators do not share one kernel"
    assert len({o["cubin_key"] for o in outs}) == n
    assert len({o["sha"] for o in outs}) == n and all(o["elf"] for o in outs)
    assert sum(o["nvrtc_compiles"] for o in outs) == 1, [o["nvrtc_compiles"] for o in outs]
    assert sum(o["numba_compiles"] for o in outs) == n
    assert sum(o["links"] for o in outs) == n


def test_threads_on_one_key_compile_each_stage_once():
    op = lambda a, b: a * 0.375 + b  # noqa: E731  (a recipe no other test builds: cold)
    n = 16
    barrier = threading.Barrier(n)

    def work():
        barrier.wait()
        return make_f4(op)

    before = counters()
    with ThreadPoolExecutor(n) as pool:
        objs = [f.result(timeout=240) for f in [pool.submit(work) for _ in range(n)]]
    assert delta(before) == {"numba_compiles": 1, "nvrtc_compiles": 1, "links": 1}
    cubins = {o.cubin() for o in objs}
    assert len(cubins) == 1 and next(iter(cubins))[:4] == ELF
    assert len({id(o._builds.result(90)) for o in objs}) == 1
