"""Every public docstring example (tests/docstring_examples.py), run on the GPU.

An example runs as written, after the setup its docstring's text implies (``SETUP`` of the
shared module). A fragment of kernel code (cuprims.coop's single-phase calls) runs inside
a kernel (:data:`KERNELS`: the example goes where ``EXAMPLE`` stands), launched on one
block of 128 threads. An example that defines a kernel and stops there is launched and
its result checked (:data:`CHECKS`). tests/cpu/project/test_docstring_examples.py builds those
it can ahead of time, with no GPU.
"""

from __future__ import annotations

import contextlib
import textwrap

import pytest

import cuprims
import docstring_examples  # tests/docstring_examples.py, on sys.path (tests/conftest.py)

EXAMPLES = {e.id: e for e in docstring_examples.collect()}

# The arrays every kernel below reads and writes: one block's tile (128 threads x 4
# items), 500 of them valid.
_FLOAT_TILE = "x = cp.arange(512, dtype=np.float32); y = cp.zeros_like(x); n = 500\n"
_INT_TILE = "x = cp.arange(512, dtype=np.int32)[::-1].copy(); y = cp.zeros_like(x); n = 500\n"
_LAUNCH = "kernel[1, 128](x, y, n)\n"

_LOADED = """@cuda.jit
def kernel(x, y, n):
    block = coop.this_block()
    tile_start = cuda.blockIdx.x * 512
    items = coop.ThreadData(4)
    coop.load(block, x[tile_start:], items)
    EXAMPLE
    coop.store(block, y[tile_start:], items)
"""

_KEYS = """@cuda.jit
def kernel(x, y, n):
    block = coop.this_block()
    keys = coop.ThreadData(4)
    coop.load(block, x, keys)
    EXAMPLE
    coop.store(block, y, keys)
"""

_PAIRS = """@cuda.jit
def kernel(x, y, n):
    block = coop.this_block()
    keys = coop.ThreadData(4)
    VALUES = coop.ThreadData(4)
    coop.load(block, x, keys)
    coop.load(block, y, VALUES)
    EXAMPLE
    coop.store(block, x, keys)
    coop.store(block, y, VALUES)
"""

KERNELS: dict[str, str] = {
    "cuprims.coop.this_block": _FLOAT_TILE + """@cuda.jit
def kernel(x, y, n):
    items = coop.ThreadData(4)
    EXAMPLE
    coop.store(block, y[cuda.blockIdx.x * 512:], items)
""" + _LAUNCH,
    "cuprims.coop.this_warp": _FLOAT_TILE + """@cuda.jit
def kernel(x, y, n):
    EXAMPLE
    if cuda.threadIdx.x % 32 == 0:
        y[cuda.grid(1) // 32] = s
""" + _LAUNCH,
    "cuprims.coop.ThreadData": _FLOAT_TILE + """@cuda.jit
def kernel(x, y, n):
    block = coop.this_block()
    EXAMPLE
    coop.store(block, y[cuda.blockIdx.x * 512:], items)
""" + _LAUNCH,
    "cuprims.coop.load": _FLOAT_TILE + """@cuda.jit
def kernel(x, y, n):
    block = coop.this_block()
    tile_start = cuda.blockIdx.x * 512
    warp_start = tile_start + (cuda.threadIdx.x // 32) * 128
    items = coop.ThreadData(4)
    EXAMPLE
    coop.store(block, y[tile_start:], items)
""" + _LAUNCH,
    "cuprims.coop.store": _FLOAT_TILE + """@cuda.jit
def kernel(x, y, n):
    block = coop.this_block()
    tile_start = cuda.blockIdx.x * 512
    items = coop.ThreadData(4)
    coop.load(block, x[tile_start:], items)
    EXAMPLE
""" + _LAUNCH,
    "cuprims.coop.exchange": _FLOAT_TILE + _LOADED + _LAUNCH,
    "cuprims.coop.sum": _FLOAT_TILE + _LOADED + _LAUNCH,
    "cuprims.coop.reduce": _FLOAT_TILE + _LOADED + _LAUNCH,
    "cuprims.coop.inclusive_sum": _FLOAT_TILE + """def running_total(state, aggregate):
    old = state[0]
    state[0] = old + aggregate
    return old

""" + _LOADED.replace("    EXAMPLE\n", "    total = cuda.local.array(1, numba.float32)\n    total[0] = 0\n    EXAMPLE\n")
    + _LAUNCH,
    "cuprims.coop.exclusive_sum": _INT_TILE + """@cuda.jit
def kernel(x, y, n):
    block = coop.this_block()
    count = x[cuda.threadIdx.x]
    EXAMPLE
    y[cuda.threadIdx.x] = offset
""" + _LAUNCH,
    "cuprims.coop.inclusive_scan": _FLOAT_TILE + _LOADED + _LAUNCH,
    "cuprims.coop.exclusive_scan": _INT_TILE + _LOADED + _LAUNCH,
    "cuprims.coop.merge_sort_keys": _FLOAT_TILE + _KEYS + _LAUNCH,
    "cuprims.coop.radix_sort_keys": _FLOAT_TILE + _KEYS + _LAUNCH,
    "cuprims.coop.merge_sort_pairs": ("x = cp.arange(512, dtype=np.int32)[::-1].copy(); "
                                      "y = cp.arange(512, dtype=np.float32); n = 500\n"
                                      + _PAIRS.replace("VALUES", "values") + _LAUNCH),
    "cuprims.coop.radix_sort_pairs": ("x = cp.arange(512, dtype=np.float32)[::-1].copy(); "
                                      "y = cp.arange(512, dtype=np.int32); n = 500\n"
                                      + _PAIRS.replace("VALUES", "indices") + _LAUNCH),
}

CHECKS: dict[str, str] = {
    "cuprims.coop": """x = cp.arange(128, dtype=np.int32); out = cp.zeros(1, np.int32)
kernel[1, 128](x, out)
assert int(out[0]) == 127 * 128 // 2
""",
    "cuprims.coop.block": """x = cp.arange(128, dtype=np.int32); out = cp.zeros(1, np.int32)
kernel[1, 128](x, out)
assert int(out[0]) == 127 * 128 // 2
""",
    "cuprims.coop.warp": """x = cp.ones(64, dtype=np.float32); out = cp.zeros(2, np.float32)
kernel[1, 64](x, out)
assert out.tolist() == [32.0, 32.0]
""",
    "cuprims.coop.block.make_scan": """x = cp.arange(1024, dtype=np.int32); y = cp.empty_like(x)
kernel[1, 128](x, y, 1024)
assert (y.get() == np.cumsum(np.arange(1024))).all()
""",
    "cuprims.coop.block.make_merge_sort_keys": """host = np.random.default_rng(0).random(512).astype(np.float32)
x = cp.asarray(host)
kernel[1, 128](x, 500)
got = x.get()
assert (got[:500] == np.sort(host[:500])[::-1]).all() and np.isneginf(got[500:]).all()
""",
    "cuprims.coop.block.make_radix_sort_keys": """host = np.random.default_rng(1).random(2048).astype(np.float32)
x = cp.asarray(host)
kernel[2, 256](x)
got = x.get()
assert (got[:1024] == np.sort(host[:1024])).all() and (got[1024:] == np.sort(host[1024:])).all()
""",
    "cuprims.typing": """x = cp.arange(10, dtype=np.int32); out = cp.empty(1, np.int32)
total(x, out, 10)
assert int(out[0]) == 45
""",
}


def in_kernel(template: str, code: str) -> str:
    """``template`` with ``code`` where its ``EXAMPLE`` line stands, indented as that line."""
    lines = template.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.strip() == "EXAMPLE")
    indent = lines[at][:len(lines[at]) - len(lines[at].lstrip())]
    return "".join(lines[:at]) + textwrap.indent(code, indent) + "".join(lines[at + 1:])


def test_every_kernel_fragment_has_a_kernel():
    """The single-phase calls' examples are kernel code: each has its kernel here."""
    fragments = {f"cuprims.coop.{name}" for name in set(cuprims.coop.__all__) - {"block", "warp", "target"}}
    assert fragments <= set(EXAMPLES), sorted(fragments - set(EXAMPLES))
    assert set(KERNELS) == fragments, sorted(set(KERNELS) ^ fragments)
    assert set(CHECKS) <= set(EXAMPLES), sorted(set(CHECKS) - set(EXAMPLES))


@pytest.mark.parametrize("example_id", sorted(EXAMPLES))
def test_example_runs(example_id, tmp_path):
    import cupy as cp

    example = EXAMPLES[example_id]
    code = docstring_examples.source(example)
    if example_id in KERNELS:
        code = in_kernel(KERNELS[example_id], code)
    code += CHECKS.get(example_id, "")
    major, minor = cp.cuda.Device().compute_capability[:-1], cp.cuda.Device().compute_capability[-1]
    ns = docstring_examples.namespace(cp, int(major) * 10 + int(minor), code)
    compiled = compile(code, f"<{example_id}>", "exec", dont_inherit=True)   # as its reader would run it
    own_cache = cuprims.settings.override(cache_dir=tmp_path) if example_id in docstring_examples.OWN_CACHE \
        else contextlib.nullcontext()
    with own_cache:
        exec(compiled, ns)
    cp.cuda.runtime.deviceSynchronize()
