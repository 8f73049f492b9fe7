"""cuprims.dask's reduce_by_key and unique_by_key on the CPU: the graph they build (numpy
chunks stand in for CuPy ones), the bookkeeping of the runs that cross chunk boundaries
against a brute-force joining of every run, the arguments refused before any task exists,
and the graph's wiring computed by Dask's synchronous scheduler with numpy stand-ins for
the tasks that call cuprims, against numpy; and those tasks themselves on numpy, with numpy
versions of the cuprims algorithms they call."""

from __future__ import annotations

import functools
import sys
import types

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

import dask  # noqa: E402

import cuprims  # noqa: E402
import cuprims.dask as cd  # noqa: E402
from cuprims import CountingIterator, OpKind, ProxyArray  # noqa: E402
from cuprims.dask import tasks  # noqa: E402
from cuprims.dask.graph import chunk_keys, joined_runs  # noqa: E402
from cuprims.errors import ArgumentError, ArgumentTypeError  # noqa: E402


@pytest.mark.parametrize("runs, joins, drops, groups", [
    ([2, 3], [True], [False, True], [[0, 1]]),
    ([1, 1, 1], [True, True], [False, True, True], [[0, 1, 2]]),
    ([2, 0, 1, 0, 3], [True, True], [False, False, True, False, True], [[0, 2, 4]]),
    ([2, 2, 2], [True, True], [False, True, True], [[0, 1], [1, 2]]),
    ([3, 1, 2], [False, True], [False, False, True], [[1, 2]]),
    ([1, 1, 1, 1], [True, False, True], [False, True, False, True], [[0, 1], [2, 3]]),
    ([0, 4, 0], [], [False, False, False], []),
    ([0, 0], [], [False, False], []),
    ([], [], [], []),
])
def test_joined_runs(runs, joins, drops, groups):
    assert joined_runs(runs, joins) == (drops, groups)


def test_joined_runs_match_joining_every_run():
    """Every chunk's runs laid end to end and joined at the boundaries: a chunk drops its
    first run where that run is not a joined run's head; each joined run that spans chunks
    is a group of the chunks it spans."""
    rng = np.random.default_rng(7)
    for _ in range(500):
        runs = rng.choice([0, 1, 1, 2, 3], rng.integers(0, 9)).tolist()
        present = [i for i, n in enumerate(runs) if n]
        joins = rng.random(max(len(present) - 1, 0)) < 0.6
        joined: list[list[tuple[int, int]]] = []
        for position, i in enumerate(present):
            for r in range(runs[i]):
                if r == 0 and position and joins[position - 1]:
                    joined[-1].append((i, r))
                else:
                    joined.append([(i, r)])
        want_drops = [False] * len(runs)
        want_groups = []
        for run in joined:
            for chunk, r in run[1:]:
                want_drops[chunk] = True
            if len(run) > 1:
                want_groups.append([chunk for chunk, _ in run])
        assert joined_runs(runs, joins.tolist()) == (want_drops, want_groups), (runs, joins)


def test_joined_runs_refuse_a_join_count_unlike_the_chunks():
    with pytest.raises(ValueError):
        joined_runs([1, 0, 2], [])


def _names(arr):
    """How many tasks of each kind (the name's tail after the function's name) ``arr``'s graph has."""
    name = arr.name.rsplit("-", 1)[0]
    kinds: dict[str, int] = {}
    for k in dict(arr.__dask_graph__()):
        if isinstance(k, tuple) and k[0].startswith(name + "-"):
            kind = k[0][len(name) + 1:]
            kinds[kind] = kinds.get(kind, 0) + 1
    return name, kinds


@pytest.mark.parametrize("reduce", [True, False])
def test_by_key_graph(reduce):
    chunks = ((6, 0, 9, 5),)
    k = da.from_array(np.arange(20, dtype=np.int32), chunks=chunks)
    v = da.from_array(np.arange(20, dtype=np.float32), chunks=chunks)
    keys, values = cd.reduce_by_key(k, v, OpKind.PLUS, dtype=np.float64) if reduce else cd.unique_by_key(k, v)
    assert keys.chunks == values.chunks == ((np.nan,) * 4,)
    assert keys.dtype == np.int32 and values.dtype == (np.float64 if reduce else np.float32)
    name, kinds = _names(keys)
    assert kinds == {"runs": 4, "ends": 4, "stitch": 1, "fix": 4, "part": 4, "keys": 4}
    assert _names(values) == (name, {"runs": 4, "ends": 4, "stitch": 1, "fix": 4, "part": 4, "values": 4})
    graph = dict(keys.__dask_graph__())
    runs = [graph[(f"{name}-runs", i)] for i in range(4)]
    assert [t[1:3] for t in runs] == list(zip(chunk_keys(k), chunk_keys(v)))
    assert all(t[0] is tasks.chunk_by_key and (t[3] is OpKind.PLUS) == reduce and t[4] is OpKind.EQUAL_TO
               for t in runs)
    assert all(graph[(f"{name}-ends", i)] == (tasks.run_ends, (f"{name}-runs", i), reduce) for i in range(4))
    stitch = graph[(f"{name}-stitch",)]
    # the one task that sees every chunk is given their ends alone
    assert stitch[0] is tasks.stitch_runs and stitch[1] == [(f"{name}-ends", i) for i in range(4)]
    for i in range(4):
        assert graph[(f"{name}-part", i)] == (tasks.patch_runs, (f"{name}-runs", i), (f"{name}-fix", i))


def test_by_key_refuses_bad_arguments():
    k = da.from_array(np.arange(10, dtype=np.int32), chunks=4)
    v = da.from_array(np.arange(10, dtype=np.float32), chunks=4)
    captured = ProxyArray(np.int32)

    def uses_an_array(a, b):
        return a + b + captured[0]

    def equal_by_an_array(a, b):
        return a == b + captured[0]

    cases = [
        (lambda: cd.reduce_by_key(np.arange(10), v, OpKind.PLUS), ArgumentTypeError, "keys"),
        (lambda: cd.unique_by_key(k, np.arange(10)), ArgumentTypeError, "values"),
        (lambda: cd.reduce_by_key(k, da.from_array(np.arange(10), chunks=5), OpKind.PLUS), ArgumentError, "values"),
        (lambda: cd.unique_by_key(da.ones((4, 4), chunks=2), da.ones((4, 4), chunks=2)), ArgumentError, "keys"),
        (lambda: cd.reduce_by_key(k, v, None), ArgumentError, "op"),
        (lambda: cd.reduce_by_key(k, v, uses_an_array), ArgumentError, "op"),
        (lambda: cd.reduce_by_key(k, v, OpKind.PLUS, equal_by_an_array), ArgumentError, "equality_op"),
        (lambda: cd.unique_by_key(k, v, equal_by_an_array), ArgumentError, "equality_op"),
    ]
    for build, error, argument in cases:
        with pytest.raises(error) as info:
            build()
        assert info.value.argument == argument


FOLDS = {OpKind.PLUS: np.add, OpKind.MINIMUM: np.minimum, OpKind.MAXIMUM: np.maximum}


def _equal(equality, a, b):
    return bool(a == b) if equality is OpKind.EQUAL_TO else bool(equality(a, b))


def _fold(items, op, dtype):
    items = np.asarray(items).astype(dtype)
    if op in FOLDS:
        return FOLDS[op].reduce(items)
    return functools.reduce(op, items)


def _runs(keys, values, op, equality, dtype):
    """numpy's answer: each run's last key (reduce-by-key, as CUB writes it) and its values
    folded by ``op``, or with ``op`` None its first key and first value (unique-by-key)."""
    keys, values = np.asarray(keys).reshape(-1), np.asarray(values).reshape(-1)
    starts = [i for i in range(keys.size) if i == 0 or not _equal(equality, keys[i - 1], keys[i])]
    if op is None:
        return keys[starts], values[starts]
    ends = [*starts[1:], keys.size] if starts else []
    folded = np.array([_fold(values[s:e], op, dtype) for s, e in zip(starts, ends)], dtype)
    return keys[np.asarray(ends, dtype=np.int64) - 1], folded


class NumpyByKeyTasks:
    """numpy versions of the tasks that call cuprims, put in place of tasks.* while a graph
    is built and run: the bookkeeping, the stitch and the patches run as they are."""

    @staticmethod
    def chunk_by_key(keys, values, op, equality, dtype):
        flat = np.asarray(keys).reshape(-1)
        out_keys, out_values = _runs(flat, values, op, equality, dtype)
        return out_keys, out_values.astype(dtype), flat[-1:].copy() if flat.size else None

    @staticmethod
    def boundary_joins(lasts, firsts, equality):
        return [_equal(equality, a[0], b[0]) for a, b in zip(lasts, firsts)]

    @staticmethod
    def fold_groups(groups, op, dtype):
        return [np.array([_fold(np.concatenate(group), op, dtype)], dtype) for group in groups]


@pytest.fixture
def numpy_by_key(monkeypatch):
    for name in ("chunk_by_key", "boundary_joins", "fold_groups"):
        monkeypatch.setattr(tasks, name, getattr(NumpyByKeyTasks, name))
    with dask.config.set(scheduler="sync"):
        yield


def _biggest(a, b):
    return a if a > b else b


def _runs_across_chunks(rng, size):
    """Keys in runs of 1 to 12 (values 0 to 3, so that neighbouring runs often repeat a key)."""
    lengths = rng.integers(1, 13, size)
    return np.repeat(rng.integers(0, 4, size), lengths)[:size]


CHUNKS = (7, 0, 5, 1, 12, 0, 3, 0)


@pytest.mark.parametrize("case", ["runs", "one run", "distinct", "ones", "empty", "one chunk"])
def test_the_by_key_wiring_computes_numpys_answers(numpy_by_key, case):
    rng = np.random.default_rng(8)
    chunks = {"ones": (1,) * 9, "empty": (0, 0, 0), "one chunk": (20,)}.get(case, CHUNKS)
    size = sum(chunks)
    host = {"one run": np.full(size, 3, np.int64), "distinct": np.arange(size, dtype=np.int64),
            "ones": np.array([1, 1, 1, 2, 1, 1, 3, 3, 3], np.int64)}.get(case, _runs_across_chunks(rng, size))
    host = host.astype(np.int64)
    vals = rng.integers(-50, 50, size).astype(np.int32)
    k, v = da.from_array(host, chunks=(chunks,)), da.from_array(vals, chunks=(chunks,))
    for op, equality, dtype in [(OpKind.PLUS, None, np.int64), (OpKind.MAXIMUM, None, np.int32),
                                (_biggest, lambda a, b: a // 2 == b // 2, np.float64), (None, None, np.int32),
                                (None, lambda a, b: a // 2 == b // 2, np.int32)]:
        if op is None:
            got_keys, got_values = dask.compute(*cd.unique_by_key(k, v, equality))
        else:
            got_keys, got_values = dask.compute(*cd.reduce_by_key(k, v, op, equality, dtype=dtype))
        want_keys, want_values = _runs(host, vals, op, OpKind.EQUAL_TO if equality is None else equality, dtype)
        np.testing.assert_array_equal(got_keys, want_keys)
        np.testing.assert_array_equal(got_values, want_values)
        assert got_values.dtype == dtype


def test_a_run_that_crosses_chunks_is_output_by_the_chunk_it_starts_in(numpy_by_key):
    host = np.array([5, 5, 5, 5, 6, 6, 6, 7, 7, 8], np.int64)
    chunks = (2, 0, 1, 3, 2, 2)
    keys, sums = cd.reduce_by_key(da.from_array(host, chunks=(chunks,)),
                                  da.from_array(np.ones(10, np.int64), chunks=(chunks,)), OpKind.PLUS)
    parts = [(p[0].compute().tolist(), p[1].compute().tolist())
             for p in zip(keys.to_delayed().ravel(), sums.to_delayed().ravel())]
    assert parts == [([5], [4]), ([], []), ([], []), ([6], [3]), ([7], [2]), ([8], [1])]


def _numpy_posing_as_cupy():
    fake = types.ModuleType("cupy")
    for name in ("empty", "empty_like", "concatenate", "asarray", "ascontiguousarray"):
        setattr(fake, name, getattr(np, name))
    fake.asnumpy = np.asarray
    return fake


def _unique_by_key(*, d_in_keys, d_in_items, d_out_keys, d_out_items, d_out_num_selected, op, num_items):
    # a CountingIterator starts at 0 wherever the tasks give one
    items = np.arange(num_items) if isinstance(d_in_items, CountingIterator) else d_in_items[:num_items]
    keys, firsts = _runs(d_in_keys[:num_items], items, None, op, None)
    d_out_keys[:keys.size], d_out_items[:keys.size], d_out_num_selected[0] = keys, firsts, keys.size


def _reduce_by_key(*, d_in_keys, d_in_values, d_out_unique_keys, d_out_aggregates, d_out_num_runs, reduction_op,
                   num_items, equality_op=None):
    keys, folded = _runs(d_in_keys[:num_items], d_in_values[:num_items], reduction_op,
                         OpKind.EQUAL_TO if equality_op is None else equality_op, d_out_aggregates.dtype)
    d_out_unique_keys[:keys.size], d_out_aggregates[:keys.size], d_out_num_runs[0] = keys, folded, keys.size


@pytest.fixture
def numpy_cuprims(monkeypatch):
    """The tasks as they are, with numpy for CuPy and numpy versions of the two cuprims
    algorithms they call (which the GPU tests check against numpy)."""
    monkeypatch.setitem(sys.modules, "cupy", _numpy_posing_as_cupy())
    monkeypatch.setattr(cuprims, "unique_by_key", _unique_by_key)
    monkeypatch.setattr(cuprims, "reduce_by_key", _reduce_by_key)


@pytest.mark.parametrize("chunks", [CHUNKS, (1,) * 9, (4, 0, 0, 5)])
def test_the_tasks_lay_the_boundaries_out_and_fold_the_runs_that_cross_them(numpy_cuprims, chunks):
    rng = np.random.default_rng(9)
    size = sum(chunks)
    cuts = np.cumsum(chunks)[:-1]
    for host in (_runs_across_chunks(rng, size), np.full(size, 2, np.int64), np.arange(size)):
        vals = rng.integers(-50, 50, size)
        for op, equality in [(OpKind.PLUS, OpKind.EQUAL_TO), (_biggest, OpKind.EQUAL_TO), (None, OpKind.EQUAL_TO),
                             (OpKind.MINIMUM, lambda a, b: a // 2 == b // 2)]:
            parts = [tasks.chunk_by_key(k, v, op, equality, vals.dtype)
                     for k, v in zip(np.split(host, cuts), np.split(vals, cuts))]
            fixes = tasks.stitch_runs([tasks.run_ends(p, op is not None) for p in parts], op, equality, vals.dtype)
            outs = [tasks.patch_runs(p, f) for p, f in zip(parts, fixes)]
            want_keys, want_values = _runs(host, vals, op, equality, vals.dtype)
            np.testing.assert_array_equal(np.concatenate([o[0] for o in outs]), want_keys)
            np.testing.assert_array_equal(np.concatenate([o[1] for o in outs]), want_values)
