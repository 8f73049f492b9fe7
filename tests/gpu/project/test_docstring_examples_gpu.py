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
_RUNS_TILE = "x = cp.arange(512, dtype=np.int32) // 3; y = cp.zeros_like(x); n = 500\n"
_SQUARES_TILE = "x = cp.arange(512, dtype=np.int32) ** 2 % 1000; y = cp.zeros_like(x); n = 500\n"
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
    "cuprims.coop.flag_heads": _RUNS_TILE + """@cuda.jit
def kernel(x, y, n):
    block = coop.this_block()
    items = coop.ThreadData(4)
    coop.load(block, x, items)
    prev = x[0]
    EXAMPLE
    coop.store(block, y, flags)
""" + _LAUNCH,
    "cuprims.coop.flag_tails": _RUNS_TILE + """@cuda.jit
def kernel(x, y, n):
    block = coop.this_block()
    items = coop.ThreadData(4)
    flags = coop.ThreadData(4, dtype=numba.int32)
    coop.load(block, x, items)
    following = x[511] + 1
    EXAMPLE
    coop.store(block, y, flags)
""" + _LAUNCH,
    "cuprims.coop.flag_heads_and_tails": _RUNS_TILE + """@cuda.jit
def kernel(x, y, n):
    block = coop.this_block()
    items = coop.ThreadData(4)
    heads = coop.ThreadData(4, dtype=numba.int32)
    tails = coop.ThreadData(4, dtype=numba.int32)
    coop.load(block, x, items)
    EXAMPLE
    for i in range(4):
        heads[i] += 2 * tails[i]
    coop.store(block, y, heads)
""" + _LAUNCH,
    "cuprims.coop.subtract_left": _SQUARES_TILE + """@cuda.jit
def kernel(x, y, n):
    block = coop.this_block()
    items = coop.ThreadData(4)
    deltas = coop.ThreadData(4, dtype=numba.int32)
    coop.load(block, x, items)
    prev = 0
    EXAMPLE
    coop.store(block, y, deltas)
""" + _LAUNCH,
    "cuprims.coop.subtract_right": _SQUARES_TILE + _KEYS.replace("keys", "items") + _LAUNCH,
    "cuprims.coop.histogram": """x = cp.asarray(np.arange(1024) * 7 % 256, dtype=np.int32); y = cp.zeros(256, np.int32)
@cuda.jit
def kernel(x, y):
    block = coop.this_block()
    items = coop.ThreadData(4)
    more_items = coop.ThreadData(4)
    coop.load(block, x, items)
    coop.load(block, x[512:], more_items)
    EXAMPLE
    for b in range(cuda.threadIdx.x, 256, 128):
        y[b] = counts[b]
kernel[1, 128](x, y)
""",
    "cuprims.coop.shuffle": """a = cp.arange(512, dtype=np.float32) * 3; y = cp.zeros(1024, np.float32)
@cuda.jit
def kernel(a, y):
    block = coop.this_block()
    x = a[cuda.threadIdx.x]
    items = coop.ThreadData(4)
    coop.load(block, a, items)
    EXAMPLE
    y[cuda.threadIdx.x] = left
    coop.store(block, y[128:], items)
    if cuda.threadIdx.x == 0:
        y[640] = last
kernel[1, 128](a, y)
""",
    "cuprims.coop.run_length_decode": """x = cp.arange(256, dtype=np.float32) * 2; y = cp.zeros(513, np.float32)
@cuda.jit
def kernel(x, y):
    block = coop.this_block()
    values = coop.ThreadData(2)
    lengths = coop.ThreadData(2, dtype=numba.uint32)
    decoded = coop.ThreadData(4, dtype=numba.float32)
    coop.load(block, x, values)
    for i in range(2):
        lengths[i] = 2
    EXAMPLE
    coop.store(block, y, decoded)
    if cuda.threadIdx.x == 0:
        y[512] = total
kernel[1, 128](x, y)
""",
    **{f"cuprims.coop.shuffle_{mode}": """a = cp.arange(128, dtype=np.float32) * 3; y = cp.zeros(128, np.float32)
@cuda.jit
def kernel(a, y):
    warp = coop.this_warp()
    x = a[cuda.threadIdx.x]
    EXAMPLE
    y[cuda.threadIdx.x] = RESULT
kernel[1, 128](a, y)
""".replace("RESULT", result) for mode, result in (("index", "first"), ("up", "before"), ("down", "after"),
                                                    ("xor", "partner"))},
}

CHECKS: dict[str, str] = {
    "cuprims.coop.flag_heads": """h = np.arange(512) // 3
assert (y.get() == np.r_[0, h[1:] != h[:-1]]).all()
""",
    "cuprims.coop.flag_tails": """h = np.arange(512) // 3
assert (y.get() == np.r_[h[:-1] != h[1:], 1]).all()
""",
    "cuprims.coop.flag_heads_and_tails": """h = np.arange(512) // 3
assert (y.get() == np.r_[1, h[1:] != h[:-1]] + 2 * np.r_[h[:-1] != h[1:], 1]).all()
""",
    "cuprims.coop.subtract_left": """h = np.arange(512) ** 2 % 1000
assert (y.get() == np.diff(h, prepend=0)).all()
""",
    "cuprims.coop.subtract_right": """h = np.arange(512) ** 2 % 1000
assert (y.get() == np.r_[h[:499] - h[1:500], h[499:]]).all()
""",
    "cuprims.coop.histogram": """assert (y.get() == np.bincount(np.arange(1024) * 7 % 256, minlength=256)).all()
""",
    "cuprims.coop.shuffle": """h = np.arange(512, dtype=np.float32) * 3
got = y.get()
assert (got[:128] == np.r_[h[0], h[:127]]).all() and (got[128:640] == np.r_[h[0], h[:511]]).all()
assert got[640] == h[511]
""",
    "cuprims.coop.run_length_decode": """got = y.get()
assert (got[:512] == np.repeat(np.arange(256, dtype=np.float32) * 2, 2)).all() and got[512] == 512
""",
    "cuprims.coop.shuffle_index": """lane0 = np.arange(128) // 32 * 32
assert (y.get() == lane0 * 3).all()
""",
    "cuprims.coop.shuffle_up": """i = np.arange(128)
assert (y.get() == np.where(i % 32 == 0, i, i - 1) * 3).all()
""",
    "cuprims.coop.shuffle_down": """i = np.arange(128)
assert (y.get() == np.where(i % 32 == 31, i, i + 1) * 3).all()
""",
    "cuprims.coop.shuffle_xor": """assert (y.get() == (np.arange(128) ^ 1) * 3).all()
""",
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
    compiled = docstring_examples.compiled(code, f"<{example_id}>", code)   # as its reader would run it
    own_cache = cuprims.settings.override(cache_dir=tmp_path) if example_id in docstring_examples.OWN_CACHE \
        else contextlib.nullcontext()
    with own_cache:
        exec(compiled, ns)
    cp.cuda.runtime.deviceSynchronize()
