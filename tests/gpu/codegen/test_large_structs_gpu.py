"""Reductions and scans over large structs on a GPU against numpy.

Structs of more than 32 bytes made of fields narrower than a word are held by the
kernels as 32-bit words and combined by a called (not inlined) operator
(``cuprims._codegen.accumulators``); these check that the values come out byte-exact, with
the struct's layout kept in arrays, init values, partials and outputs. The operator picks
the item with the larger key (two int8 fields read as one 16-bit key, distinct per item,
so the result does not depend on the order in which the items are combined).
"""

from __future__ import annotations

import numpy as np
import pytest

import cuprims
from cuprims.algorithms.scan.api import exclusive_scan, inclusive_scan

cp = pytest.importorskip("cupy")

BYTES300 = cuprims.gpu_struct({f"f{i}": np.int8 for i in range(300)}, name="Bytes300")
BYTES301 = cuprims.gpu_struct({f"f{i}": np.int8 for i in range(301)}, name="Bytes301")   # padded words
MIXED = cuprims.gpu_struct({"f0": np.int8, "f1": np.int8, "h": (np.int16, 20), "d": np.float64}, name="Mixed")


def pick(a, b):
    ka = (int(a.f0) + 128) * 256 + (int(a.f1) + 128)
    kb = (int(b.f0) + 128) * 256 + (int(b.f1) + 128)
    return a if ka > kb else b


def _key(rows: np.ndarray) -> np.ndarray:
    return (rows["f0"].astype(np.int64) + 128) * 256 + (rows["f1"].astype(np.int64) + 128)


def _data(struct, n: int, seed: int = 0) -> np.ndarray:
    """``n`` items with distinct keys (n < 65536) and random bytes everywhere else."""
    rng = np.random.default_rng(seed)
    h = np.frombuffer(rng.integers(0, 256, n * struct.dtype.itemsize, dtype=np.uint8).tobytes(),
                      struct.dtype).copy()
    keys = rng.permutation(65535)[:n] + 1           # 1..65535: key 0 is the init values'
    h["f0"] = (keys // 256 - 128).astype(np.int8)
    h["f1"] = (keys % 256 - 128).astype(np.int8)
    if "d" in struct.dtype.names:
        h["d"] = rng.random(n)                        # no NaN bytes: compared with ==
    return h


def _lowest(struct) -> np.ndarray:
    """An init value with the smallest key and recognisable bytes elsewhere."""
    v = np.frombuffer(bytes(range(7, 7 + struct.dtype.itemsize)) if struct.dtype.itemsize < 249
                      else (bytes(range(256)) * 2)[:struct.dtype.itemsize], struct.dtype).copy()
    v["f0"], v["f1"] = -128, -128
    if "d" in struct.dtype.names:
        v["d"] = 0.5
    return v[0]


def _same(a, b) -> bool:
    """Field by field (padding bytes, which the operator leaves alone, are not compared)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and all(np.array_equal(a[name], b[name]) for name in a.dtype.names)


@pytest.mark.parametrize("struct", [BYTES300, BYTES301, MIXED], ids=lambda s: s.__name__)
@pytest.mark.parametrize("n", [0, 1, 191, 192, 193, 1000, 50_000])
def test_reduce(struct, n):
    h = _data(struct, n, seed=n)
    d_in = cp.asarray(h) if n else cp.zeros(0, struct.dtype)
    d_out = cp.zeros(1, struct.dtype)
    init = struct._from_data(np.asarray(_lowest(struct)).reshape(()))
    cuprims.reduce_into(d_in=d_in, d_out=d_out, num_items=n, op=pick, h_init=init)
    want = _lowest(struct) if n == 0 else h[np.argmax(_key(h))]
    assert _same(d_out.get()[0], want)


@pytest.mark.parametrize("struct", [BYTES300, MIXED], ids=lambda s: s.__name__)
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("n", [1, 1000, 20_000])
def test_scan(struct, exclusive, n):
    h = _data(struct, n, seed=n + 1)
    init = _lowest(struct)
    d_out = cp.zeros(n, struct.dtype)
    fn = exclusive_scan if exclusive else inclusive_scan
    fn(d_in=cp.asarray(h), d_out=d_out, op=pick, init_value=struct._from_data(np.asarray(init).reshape(())),
       num_items=n)
    rows = np.concatenate([np.asarray(init).reshape(1), h])
    best = np.maximum.accumulate(_key(rows))             # keys are distinct: best row is unique
    index_of = {k: i for i, k in enumerate(_key(rows))}
    want = rows[[index_of[k] for k in best]]
    want = want[:-1] if exclusive else want[1:]
    assert _same(d_out.get(), want)


def test_scan_with_device_init():
    h = _data(BYTES300, 5000, seed=3)
    d_init = cp.asarray(np.asarray(_lowest(BYTES300)).reshape(1))
    d_out = cp.zeros(h.size, BYTES300.dtype)
    exclusive_scan(d_in=cp.asarray(h), d_out=d_out, op=pick, init_value=d_init, num_items=h.size)
    got = d_out.get()
    assert _same(got[0], _lowest(BYTES300))
    keys = _key(h)
    assert _same(got[-1], h[np.argmax(keys[:-1])])
