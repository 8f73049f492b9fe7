"""cuprims.dask on the CPU: the task graphs its functions build over Dask arrays (numpy
chunks stand in for CuPy ones; nothing is computed), the tree's fan-in, the arguments
refused on the client before any task exists, and that ``import cuprims`` leaves Dask
unimported."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

import dask  # noqa: E402

import cuprims  # noqa: E402
import cuprims.dask as cd  # noqa: E402
from cuprims import OpKind, ProxyArray  # noqa: E402
from cuprims.dask import tasks  # noqa: E402
from cuprims.dask.graph import chunk_keys, fan_in  # noqa: E402
from cuprims.errors import ArgumentError, ArgumentTypeError, CuprimsError  # noqa: E402


def _layer(arr, prefix):
    """The tasks of ``arr``'s graph whose keys' names start with ``prefix``."""
    graph = dict(arr.__dask_graph__())
    return {k: v for k, v in graph.items() if isinstance(k, tuple) and k[0].startswith(prefix)}


@pytest.mark.parametrize("count, split_every, widths", [
    (1, 8, [1]), (8, 8, [1]), (9, 8, [2, 1]), (64, 8, [8, 1]), (65, 8, [9, 2, 1]), (5, 2, [3, 2, 1]),
])
def test_fan_in_combines_every_leaf_once(count, split_every, widths):
    levels = fan_in(count, split_every)
    assert [len(level) for level in levels] == widths
    below = count
    for level in levels:
        covered = [i for group in level for i in group]
        assert covered == list(range(below)) and all(1 <= len(g) <= split_every for g in level)
        below = len(level)


@pytest.mark.parametrize("chunks, split_every", [((300, 300, 0, 400), 8), ((1,) * 20, 3), ((1000,), 8)])
def test_reduce_graph(chunks, split_every):
    x = da.from_array(np.arange(sum(chunks), dtype=np.int32), chunks=(chunks,))
    y = cd.reduce(x, OpKind.PLUS, np.int32(5), split_every=split_every)
    assert y.shape == () and y.dtype == np.int32 and y.chunks == ()
    partial = _layer(y, "cuprims-reduce-partial-")
    tree = _layer(y, "cuprims-reduce-tree-")
    final = _layer(y, "cuprims-reduce-cuprims") or {k: v for k, v in _layer(y, "cuprims-reduce-").items()
                                                     if len(k) == 1}
    assert len(partial) == len(chunks)
    assert [task[1] for _, task in sorted(partial.items())] == chunk_keys(x)      # each chunk, in order
    assert all(task[0] is tasks.partial_reduce and task[2] is OpKind.PLUS for task in partial.values())
    assert len(tree) == sum(len(level) for level in fan_in(len(chunks), split_every))
    ((final_key, final_task),) = final.items()
    assert final_task[0] is tasks.finish_reduce and final_task[1] in tree and final_task[4] == 5


def test_shorthands_and_dtypes():
    x = da.from_array(np.ones((4, 6), np.int8), chunks=(2, 3))
    s = cd.sum(x, dtype=np.int64)
    assert s.dtype == np.int64
    ((_, final),) = [(k, v) for k, v in _layer(s, "cuprims-reduce-").items() if len(k) == 1]
    assert final[4] == 0 and type(final[4]) is np.int64 and final[2] is OpKind.PLUS
    assert len(_layer(s, "cuprims-reduce-partial-")) == 4      # a 2-D array's four chunks
    for fn, kind in ((cd.min, OpKind.MINIMUM), (cd.max, OpKind.MAXIMUM)):
        r = fn(x)
        ((_, final),) = [(k, v) for k, v in _layer(r, "cuprims-reduce-").items() if len(k) == 1]
        assert final[2] is kind and final[4] is None and r.dtype == np.int8


@pytest.mark.parametrize("inclusive", [True, False])
def test_scan_graph(inclusive):
    chunks = (5, 0, 7, 1)
    x = da.from_array(np.arange(13, dtype=np.float32), chunks=(chunks,))
    fn = cd.inclusive_scan if inclusive else cd.exclusive_scan
    y = fn(x, OpKind.PLUS, np.float64(1.5), dtype=np.float64)
    assert y.chunks == (chunks,) and y.dtype == np.float64
    kind = "inclusive" if inclusive else "exclusive"
    totals, scans = _layer(y, f"cuprims-{kind}-total-"), _layer(y, f"cuprims-{kind}-cuprims")
    carry = _layer(y, f"cuprims-{kind}-carry-")
    ((carry_key, carry_task),) = carry.items()
    assert len(totals) == len(chunks) and carry_task[0] is tasks.carries and carry_task[4] == 1.5
    assert sorted(carry_task[1]) == sorted(totals)
    outs = {k: v for k, v in dict(y.__dask_graph__()).items() if isinstance(k, tuple) and k[0] == y.name}
    assert sorted(outs) == [(y.name, i) for i in range(len(chunks))]
    for (_, i), task in outs.items():
        assert task[0] is tasks.chunk_scan and task[2] == carry_key and task[3] == i and task[6] is inclusive


def test_bad_arguments_are_named_before_any_task():
    x = da.from_array(np.arange(10, dtype=np.int32), chunks=4)
    captured = ProxyArray(np.int32)

    def uses_an_array(a, b):
        return a + b + captured[0]

    cases = [
        (lambda: cd.reduce(np.arange(3), OpKind.PLUS), ArgumentTypeError, "x"),
        (lambda: cd.reduce(x, None), ArgumentError, "op"),
        (lambda: cd.reduce(x, uses_an_array), ArgumentError, "op"),
        (lambda: cd.reduce(x, OpKind.PLUS, split_every=1), ArgumentError, "split_every"),
        (lambda: cd.inclusive_scan(da.ones((4, 4), chunks=2), OpKind.PLUS), ArgumentError, "x"),
        (lambda: cd.exclusive_scan(x, OpKind.PLUS, None), ArgumentError, "init_value"),
        (lambda: cd.inclusive_scan(x, uses_an_array), ArgumentError, "op"),
    ]
    for build, error, argument in cases:
        with pytest.raises(error) as info:
            build()
        assert isinstance(info.value, CuprimsError) and info.value.argument == argument


def test_importing_cuprims_leaves_dask_unimported():
    code = "import sys, cuprims; cuprims.OpKind; assert 'dask' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert "reduce" in cuprims.dask.__all__


def test_histogram_graph():
    x = da.from_array(np.arange(1000, dtype=np.float32).reshape(10, 100), chunks=(5, 30))
    h = cd.histogram_even(x, 11, np.float32(0), np.float32(1000), counter_dtype=np.int32, split_every=3)
    assert h.shape == (10,) and h.chunks == ((10,),) and h.dtype == np.int32
    parts = _layer(h, "cuprims-histogram-part-")
    assert len(parts) == 8 and all(t[0] is tasks.chunk_histogram and t[2:] == (11, 0, 1000, np.int32)
                                   for t in parts.values())
    tree = _layer(h, "cuprims-histogram-tree-")
    assert len(tree) == sum(len(level) for level in fan_in(8, 3))
    ((_, alias),) = [(k, v) for k, v in dict(h.__dask_graph__()).items() if k == (h.name, 0)]
    assert alias in tree     # the output is the tree's root


@pytest.mark.parametrize("indices", [False, True])
def test_top_k_graph(indices):
    chunks = (4, 0, 6, 5)
    x = da.from_array(np.arange(15, dtype=np.float64), chunks=(chunks,))
    got = cd.top_k(x, 3, cuprims.SortOrder.ASCENDING, return_indices=indices, split_every=2)
    keys = got[0] if indices else got
    assert keys.shape == (3,) and keys.dtype == np.float64
    parts = _layer(keys, "cuprims-top-k-part-")
    assert sorted(t[2] for t in parts.values()) == [0, 4, 4, 10]          # each chunk's first position
    assert all(t[0] is tasks.chunk_top_k and t[3:] == (3, cuprims.SortOrder.ASCENDING, indices)
               for t in parts.values())
    tree = _layer(keys, "cuprims-top-k-tree-")
    levels = fan_in(4, 2)
    assert len(tree) == sum(len(level) for level in levels)
    assert [t[5] for k, t in sorted(tree.items())] == [False, False, True]   # sorted at the root only
    if indices:
        assert got[1].dtype == np.int64 and got[1].shape == (3,)


def test_histogram_and_top_k_refuse_bad_arguments():
    x = da.from_array(np.arange(10, dtype=np.int32), chunks=4)
    cases = [
        (lambda: cd.histogram_even(x, 1, 0, 10), "num_output_levels"),
        (lambda: cd.histogram_even(x, 3, 0, 10, counter_dtype=np.float32), "counter_dtype"),
        (lambda: cd.top_k(x, 11), "k"),
        (lambda: cd.top_k(x, -1), "k"),
        (lambda: cd.top_k(x, 2, "descending"), "order"),
        (lambda: cd.top_k(da.ones((3, 3), chunks=2), 2), "x"),
    ]
    for build, argument in cases:
        with pytest.raises(ArgumentError) as info:
            build()
        assert info.value.argument == argument


class NumpyTasks:
    """numpy versions of the worker tasks, put in place of tasks.* while a graph is built, so
    that Dask's synchronous scheduler runs the graph's wiring (keys, aliases, the trees'
    inputs, the carries' order) on the CPU. They check the plumbing only: the chunks' work is
    cuprims', run by tests/gpu/dask."""

    FOLDS = {OpKind.PLUS: np.add, OpKind.MINIMUM: np.minimum, OpKind.MAXIMUM: np.maximum}

    @classmethod
    def fold(cls, items, op, dtype, init=None):
        values = [np.asarray(v).astype(dtype) for v in items]
        if init is not None:
            values.insert(0, np.asarray(init).astype(dtype))
        ufunc = cls.FOLDS[op]
        acc = values[0]
        for v in values[1:]:
            acc = ufunc(acc, v).astype(dtype)
        return acc

    @classmethod
    def partial_reduce(cls, block, op, dtype):
        flat = np.asarray(block).reshape(-1)
        return None if flat.size == 0 else np.array([cls.fold(flat, op, dtype)], dtype)

    @classmethod
    def combine(cls, parts, op, dtype):
        present = [p for p in parts if p is not None]
        return cls.partial_reduce(np.concatenate(present), op, dtype) if present else None

    @classmethod
    def finish_reduce(cls, part, op, dtype, h_init):
        items = [] if part is None else list(part)
        return np.asarray(cls.fold(items, op, dtype, h_init)).reshape(())

    @classmethod
    def carries(cls, totals, op, dtype, init):
        out, running = [], None if init is None else np.array([init], dtype)
        for total in totals:
            out.append(running)
            if total is not None:
                running = total if running is None else np.array([cls.fold([running[0], total[0]], op, dtype)])
        return out

    @classmethod
    def chunk_scan(cls, block, carried, index, op, dtype, inclusive):
        flat = np.asarray(block).reshape(-1).astype(dtype)
        carry = carried[index]
        acc = None if carry is None else carry[0]
        out = np.empty(flat.size, dtype)
        for i, v in enumerate(flat):
            if not inclusive:
                out[i] = acc
            acc = v if acc is None else cls.fold([acc, v], op, dtype)
            if inclusive:
                out[i] = acc
        return out

    @staticmethod
    def chunk_histogram(block, levels, lower, upper, counter):
        flat = np.asarray(block).reshape(-1)
        return np.histogram(flat, bins=levels - 1, range=(lower, upper))[0].astype(counter)

    @staticmethod
    def chunk_top_k(block, start, k, order, indices):
        flat = np.asarray(block).reshape(-1)
        pick = np.argsort(-flat if order is cuprims.SortOrder.DESCENDING else flat, kind="stable")[:k]
        return flat[pick], (pick + start) if indices else None

    @staticmethod
    def sort_chunk(keys, values, order):
        flat = np.asarray(keys).reshape(-1)
        pick = np.argsort(flat, kind="stable")
        if order is cuprims.SortOrder.DESCENDING:    # radix sort's descending order is stable too
            pick = np.argsort(-flat.astype(np.float64), kind="stable")
        return flat[pick], None if values is None else np.asarray(values).reshape(-1)[pick]

    @staticmethod
    def sample_chunk(pair, count):
        keys = pair[0]
        return keys[np.linspace(0, keys.size - 1, min(count, keys.size)).astype(np.int64)] if keys.size else keys

    @staticmethod
    def cut_chunk(pair, cuts, descending):
        keys = pair[0]
        where = [int(np.sum(keys > c)) if descending else int(np.sum(keys < c)) for c in cuts]
        return np.array([0, *where, keys.size], np.int64)

    @classmethod
    def gather_part(cls, pieces, order, values):
        keys = np.concatenate([p.keys for p in pieces])
        vals = np.concatenate([p.values for p in pieces]) if values else None
        return cls.sort_chunk(keys, vals, order)

    @staticmethod
    def merge_top_k(parts, k, order, indices, sort):
        keys = np.concatenate([p[0] for p in parts])
        where = np.concatenate([p[1] for p in parts]) if indices else None
        pick = np.argsort(-keys if order is cuprims.SortOrder.DESCENDING else keys, kind="stable")[:k]
        return keys[pick], where[pick] if indices else None


@pytest.fixture
def numpy_tasks(monkeypatch):
    import dask

    for name in ("partial_reduce", "combine", "finish_reduce", "carries", "chunk_scan", "chunk_histogram",
                 "chunk_top_k", "merge_top_k", "sort_chunk", "sample_chunk", "cut_chunk", "gather_part"):
        monkeypatch.setattr(tasks, name, getattr(NumpyTasks, name))
    with dask.config.set(scheduler="sync"):
        yield


CHUNKS = (7, 0, 5, 1, 12, 0, 3)


def test_the_graphs_wiring_computes_numpys_answers(numpy_tasks):
    host = np.random.default_rng(4).integers(-50, 50, sum(CHUNKS)).astype(np.int64)
    x = da.from_array(host, chunks=(CHUNKS,))
    assert int(cd.reduce(x, OpKind.PLUS, np.int64(3), split_every=2).compute()) == host.sum() + 3
    assert int(cd.min(x, split_every=3).compute()) == host.min() and int(cd.max(x).compute()) == host.max()
    assert int(cd.sum(da.from_array(np.zeros(0, np.int64), chunks=((0, 0),))).compute()) == 0
    np.testing.assert_array_equal(cd.inclusive_scan(x, OpKind.PLUS).compute(), np.cumsum(host))
    np.testing.assert_array_equal(cd.exclusive_scan(x, OpKind.MAXIMUM, np.int64(-100)).compute(),
                                  np.maximum.accumulate(np.r_[-100, host[:-1]]))
    np.testing.assert_array_equal(cd.histogram_even(x, 11, -50, 50).compute(),
                                  np.histogram(host, bins=10, range=(-50, 50))[0])
    keys, where = cd.top_k(x, 6, return_indices=True, split_every=2)
    keys, where = keys.compute(), where.compute()
    np.testing.assert_array_equal(np.sort(keys)[::-1], np.sort(host)[::-1][:6])
    np.testing.assert_array_equal(host[where], keys)


@pytest.mark.parametrize("pooled, parts, want", [(0, 4, []), (10, 1, []), (100, 4, [25, 50, 75]), (7, 3, [2, 4])])
def test_splitter_positions(pooled, parts, want):
    from cuprims.dask.graph import splitter_positions

    assert splitter_positions(pooled, parts).tolist() == want


def test_sort_graph():
    x = da.from_array(np.arange(20, dtype=np.int32), chunks=((6, 0, 9, 5),))
    v = da.from_array(np.arange(20, dtype=np.float32), chunks=((6, 0, 9, 5),))
    keys, values = cd.sort(x, v, parts=3)
    assert keys.chunks == ((np.nan,) * 3,) and values.dtype == np.float32 and keys.dtype == np.int32
    graph = dict(keys.__dask_graph__())
    name = keys.name.rsplit("-keys", 1)[0]
    kinds = {}
    for k in graph:
        if isinstance(k, tuple) and k[0].startswith(name):
            kinds[k[0][len(name) + 1:]] = kinds.get(k[0][len(name) + 1:], 0) + 1
    assert kinds == {"sorted": 4, "sample": 4, "splitters": 1, "cut": 4, "piece": 12, "part": 3, "keys": 3}
    # an output chunk's task takes one piece of each chunk, never a whole sorted chunk
    for j in range(3):
        assert [dep[0][len(name) + 1:] for dep in graph[(f"{name}-part", j)][1]] == ["piece"] * 4
        assert [dep[2] for dep in graph[(f"{name}-part", j)][1]] == [j] * 4
    with pytest.raises(ArgumentError) as info:
        cd.sort(x, da.from_array(np.arange(20), chunks=5))
    assert info.value.argument == "values"


@pytest.mark.parametrize("order", [cuprims.SortOrder.ASCENDING, cuprims.SortOrder.DESCENDING])
def test_the_sample_sorts_wiring_sorts_and_balances_skewed_keys(numpy_tasks, order):
    rng = np.random.default_rng(6)
    host = np.exp(rng.standard_normal(sum(CHUNKS) * 40) * 3).astype(np.float32)   # skewed: a long tail
    chunks = tuple(c * 40 for c in CHUNKS)
    x = da.from_array(host, chunks=(chunks,))
    v = da.from_array(np.arange(host.size, dtype=np.int64), chunks=(chunks,))
    sorted_keys, moved = cd.sort(x, v, order, samples_per_chunk=64, parts=5)
    keys, values = dask.compute(sorted_keys, moved)
    want = np.sort(host) if order is cuprims.SortOrder.ASCENDING else np.sort(host)[::-1]
    np.testing.assert_array_equal(keys, want)
    np.testing.assert_array_equal(host[values], keys)
    sizes = [part.compute().size for part in sorted_keys.to_delayed().ravel()]
    assert len(sizes) == 5 and sum(sizes) == host.size and max(sizes) < 1.5 * host.size / 5, sizes
