"""cuprims.dask on the GPU against numpy: reductions, scans, histograms, top-k, sorts and
runs by key of Dask arrays of CuPy chunks, chunked unevenly with empty chunks, computed by
the synchronous scheduler and by a distributed LocalCluster of worker processes sharing the
GPU (one worker per GPU where several are visible); errors in a worker reach the client as
the same cuprims exception."""

from __future__ import annotations

import os

import numpy as np
import pytest

cp = pytest.importorskip("cupy")
da = pytest.importorskip("dask.array")

import dask  # noqa: E402

import cuprims  # noqa: E402
import cuprims.dask as cd  # noqa: E402
from cuprims import OpKind  # noqa: E402
from cuprims.errors import ArgumentError  # noqa: E402

CHUNKS = (100_000, 0, 33_333, 1, 250_000, 0, 70_000)


def _dask(host: np.ndarray, chunks=CHUNKS):
    return da.from_array(cp.asarray(host), chunks=(chunks,), asarray=False)


def _biggest(a, b):
    return a if a > b else b


def _gpu_ids(gpus: int) -> list[str]:
    """The ids of this process's ``gpus`` visible GPUs as ``CUDA_VISIBLE_DEVICES`` names them."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return visible.split(",")[:gpus] if visible else [str(i) for i in range(gpus)]


def one_worker_per_gpu(distributed, gpus: int):
    """A cluster of one worker process per visible GPU, each seeing its own alone (its
    ``CUDA_VISIBLE_DEVICES``, as dask_cuda's LocalCUDACluster sets it): every thread of
    the worker, the task threads included, then runs on that GPU."""
    workers = {f"gpu-{gpu}": {"cls": distributed.Nanny,
                              "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": gpu}}}
               for gpu in _gpu_ids(gpus)}
    return distributed.SpecCluster(scheduler={"cls": distributed.Scheduler, "options": {"dashboard_address": None}},
                                   workers=workers)


@pytest.fixture(scope="module")
def cluster_client():
    distributed = pytest.importorskip("distributed")
    gpus = cp.cuda.runtime.getDeviceCount()
    if gpus > 1:
        cluster = one_worker_per_gpu(distributed, gpus)
    else:   # worker processes sharing the one GPU
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def _visible_gpu() -> tuple[str | None, int]:
    return os.environ.get("CUDA_VISIBLE_DEVICES"), cp.cuda.runtime.getDeviceCount()


def test_a_cluster_of_one_worker_per_gpu_gives_each_its_own():
    # on a machine of one GPU, a cluster of one such worker: the same setup, checked
    distributed = pytest.importorskip("distributed")
    gpus = cp.cuda.runtime.getDeviceCount()
    with one_worker_per_gpu(distributed, gpus) as cluster, distributed.Client(cluster) as client:
        seen = client.run(_visible_gpu)
        host = np.arange(100_000, dtype=np.int64)
        total = client.compute(cd.sum(_dask(host, (40_000, 0, 60_000))), sync=True)
    assert len(seen) == gpus and all(count == 1 for _, count in seen.values()), seen
    assert sorted(v for v, _ in seen.values()) == sorted(_gpu_ids(gpus))
    assert int(total) == int(host.sum())


@pytest.fixture(params=["sync", "distributed"])
def on_scheduler(request):
    """Each test once on Dask's synchronous scheduler and once on the cluster's workers (the
    distributed client, once made, is the default scheduler)."""
    if request.param == "distributed":
        request.getfixturevalue("cluster_client")
        yield
    else:
        with dask.config.set(scheduler="sync"):
            yield


def test_reductions_match_numpy(on_scheduler):
    rng = np.random.default_rng(1)
    host = rng.integers(-1000, 1000, sum(CHUNKS)).astype(np.int32)
    x = _dask(host)
    assert int(cd.sum(x, dtype=np.int64).compute()) == int(host.sum(dtype=np.int64))
    assert int(cd.min(x).compute()) == int(host.min())
    assert int(cd.max(x, split_every=2).compute()) == int(host.max())
    assert int(cd.reduce(x, _biggest, np.int32(5000)).compute()) == 5000
    assert int(cd.reduce(x, OpKind.PLUS, np.int32(7), split_every=3).compute()) == int(host.sum()) + 7
    f = rng.random(sum(CHUNKS)).astype(np.float32)
    np.testing.assert_allclose(float(cd.sum(_dask(f), dtype=np.float64).compute()), f.sum(dtype=np.float64),
                               rtol=1e-9)


def test_scans_match_numpy(on_scheduler):
    rng = np.random.default_rng(2)
    host = rng.integers(0, 100, sum(CHUNKS)).astype(np.int64)
    x = _dask(host)
    got = cd.inclusive_scan(x, OpKind.PLUS).compute().get()
    np.testing.assert_array_equal(got, np.cumsum(host))
    got = cd.exclusive_scan(x, OpKind.PLUS, np.int64(10)).compute().get()
    np.testing.assert_array_equal(got, 10 + np.r_[0, np.cumsum(host)[:-1]])
    got = cd.inclusive_scan(x, _biggest, np.int64(50)).compute().get()
    np.testing.assert_array_equal(got, np.maximum.accumulate(np.maximum(host, 50)))
    f = rng.random(sum(CHUNKS)).astype(np.float32)
    got = cd.inclusive_scan(_dask(f), OpKind.PLUS, dtype=np.float64).compute().get()
    np.testing.assert_allclose(got, np.cumsum(f.astype(np.float64)), rtol=1e-9)


def test_an_error_in_a_worker_reaches_the_client_as_cuprims_raised_it(cluster_client):
    empty = _dask(np.zeros(0, np.float32), chunks=(0,))
    with pytest.raises(ArgumentError) as info:
        cd.min(empty).compute()
    assert info.value.argument == "h_init"
    assert float(cd.sum(empty).compute()) == 0.0


def test_a_second_run_compiles_nothing_in_any_worker(cluster_client):
    host = np.arange(100_000, dtype=np.uint16)
    x = _dask(host, chunks=(30_000, 30_000, 40_000))
    assert int(cd.reduce(x, OpKind.BIT_XOR, np.uint16(0)).compute()) == int(np.bitwise_xor.reduce(host))
    before = sum(info["nvrtc_compiles"] for info in cluster_client.run(lambda: cuprims.cache_info()).values())
    cluster_client.run(cuprims.clear_all_caches)      # memory only: the disk cache is the machine's
    assert int(cd.reduce(x, OpKind.BIT_XOR, np.uint16(0)).compute()) == int(np.bitwise_xor.reduce(host))
    after = sum(info["nvrtc_compiles"] for info in cluster_client.run(lambda: cuprims.cache_info()).values())
    assert after == before     # the second run found every kernel in the disk cache


def test_histogram_and_top_k_match_numpy(on_scheduler):
    rng = np.random.default_rng(3)
    host = rng.standard_normal(sum(CHUNKS)).astype(np.float32)
    host[[5, 200_000]] = np.nan
    x = _dask(host)
    counts = cd.histogram_even(x, 21, np.float32(-3), np.float32(3)).compute().get()
    np.testing.assert_array_equal(counts, np.histogram(host[~np.isnan(host)], bins=20, range=(-3, 3))[0])
    for k in (0, 1, 100, 5000):
        keys, where = cd.top_k(x, k, return_indices=True, split_every=3)
        keys, where = keys.compute().get(), where.compute().get()
        want = np.sort(host)[::-1][:k]          # NaN above +inf: numpy sorts it last, so first here
        np.testing.assert_array_equal(keys, want)
        np.testing.assert_array_equal(host[where], keys)
    smallest = cd.top_k(x, 50, cuprims.SortOrder.ASCENDING).compute().get()
    np.testing.assert_array_equal(smallest, np.sort(host)[:50])


def test_sample_sort_matches_numpy(on_scheduler):
    rng = np.random.default_rng(5)
    host = np.exp(rng.standard_normal(sum(CHUNKS)) * 3).astype(np.float32)     # skewed keys
    host[[9, 300_000]] = np.nan
    x = _dask(host)
    v = _dask(np.arange(host.size, dtype=np.int64))
    for order in (cuprims.SortOrder.ASCENDING, cuprims.SortOrder.DESCENDING):
        keys, values = cd.sort(x, v, order)
        keys, values = dask.compute(keys, values)
        keys, values = cp.asnumpy(keys), cp.asnumpy(values)
        want = np.sort(host) if order is cuprims.SortOrder.ASCENDING else np.sort(host)[::-1]
        np.testing.assert_array_equal(keys, want)
        np.testing.assert_array_equal(host[values], keys)
    ints = rng.integers(0, 1 << 30, sum(CHUNKS)).astype(np.uint32)
    sizes = [int(p.compute().size) for p in cd.sort(_dask(ints)).to_delayed().ravel()]
    assert sum(sizes) == ints.size and max(sizes) < 1.5 * ints.size / len(CHUNKS), sizes


def test_sample_sort_is_stable_across_chunks(on_scheduler):
    # five keys, each in every chunk: equal keys keep the input's order, in both orders
    host = np.random.default_rng(8).integers(0, 5, sum(CHUNKS)).astype(np.int16)
    positions = np.arange(host.size, dtype=np.int64)
    for order, ranked in ((cuprims.SortOrder.ASCENDING, host), (cuprims.SortOrder.DESCENDING, -host.astype(np.int32))):
        keys, values = dask.compute(*cd.sort(_dask(host), _dask(positions), order))
        np.testing.assert_array_equal(cp.asnumpy(values), np.argsort(ranked, kind="stable"))
        np.testing.assert_array_equal(cp.asnumpy(keys), host[np.argsort(ranked, kind="stable")])


def _same_half(a, b):
    return a // 2 == b // 2


def _run_starts(keys: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])


def test_by_key_matches_numpy(on_scheduler):
    rng = np.random.default_rng(6)
    size = sum(CHUNKS)
    # runs of 1 to 4 and of up to 60,000 keys, of three values so that neighbours repeat
    lengths = np.where(rng.random(2000) < 0.5, rng.integers(1, 5, 2000), rng.integers(1, 60_000, 2000))
    host = np.repeat(rng.integers(0, 3, 2000), lengths)[:size].astype(np.int32)
    host[99_000:140_000] = 9    # one run over the end of chunk 0, an empty chunk, chunk 2, the one-item chunk
    host[380_000:390_000] = 9   # another, over the second empty chunk
    host[99_500:100_000] = 8    # by equal halves (8 // 2 == 9 // 2) the first one's keys differ: its last key is 9
    starts = _run_starts(host)
    ints = rng.integers(-1000, 1000, size).astype(np.int64)
    floats = rng.random(size).astype(np.float32)
    keys, sums = dask.compute(*cd.reduce_by_key(_dask(host), _dask(ints), OpKind.PLUS))
    np.testing.assert_array_equal(cp.asnumpy(keys), host[starts])
    np.testing.assert_array_equal(cp.asnumpy(sums), np.add.reduceat(ints, starts))
    keys, sums = dask.compute(*cd.reduce_by_key(_dask(host), _dask(floats), OpKind.PLUS, dtype=np.float64))
    assert sums.dtype == np.float64
    np.testing.assert_allclose(cp.asnumpy(sums), np.add.reduceat(floats.astype(np.float64), starts), rtol=1e-9)
    _, biggest = dask.compute(*cd.reduce_by_key(_dask(host), _dask(floats), _biggest))
    np.testing.assert_array_equal(cp.asnumpy(biggest), np.maximum.reduceat(floats, starts))
    keys, firsts = dask.compute(*cd.unique_by_key(_dask(host), _dask(np.arange(size, dtype=np.int64))))
    np.testing.assert_array_equal(cp.asnumpy(keys), host[starts])
    np.testing.assert_array_equal(cp.asnumpy(firsts), starts)
    halves = _run_starts(host // 2)
    half_lasts = np.r_[halves[1:], size] - 1   # reduce-by-key writes a run's last key, as CUB does
    keys, mins = dask.compute(*cd.reduce_by_key(_dask(host), _dask(ints), OpKind.MINIMUM, _same_half))
    np.testing.assert_array_equal(cp.asnumpy(keys), host[half_lasts])
    np.testing.assert_array_equal(cp.asnumpy(mins), np.minimum.reduceat(ints, halves))
    keys, firsts = dask.compute(*cd.unique_by_key(_dask(host), _dask(floats), _same_half))
    np.testing.assert_array_equal(cp.asnumpy(keys), host[halves])
    np.testing.assert_array_equal(cp.asnumpy(firsts), floats[halves])


def test_by_key_of_one_run_and_of_distinct_keys(on_scheduler):
    size = sum(CHUNKS)
    ints = np.random.default_rng(7).integers(-1000, 1000, size).astype(np.int64)
    keys, sums = dask.compute(*cd.reduce_by_key(_dask(np.full(size, 4, np.int64)), _dask(ints), OpKind.PLUS))
    assert cp.asnumpy(keys).tolist() == [4] and cp.asnumpy(sums).tolist() == [int(ints.sum())]
    keys, firsts = dask.compute(*cd.unique_by_key(_dask(np.zeros(size, np.uint8)), _dask(ints)))
    assert cp.asnumpy(keys).tolist() == [0] and cp.asnumpy(firsts).tolist() == [int(ints[0])]
    distinct = np.arange(size, dtype=np.float32)
    keys, sums = dask.compute(*cd.reduce_by_key(_dask(distinct), _dask(ints), OpKind.PLUS))
    np.testing.assert_array_equal(cp.asnumpy(keys), distinct)
    np.testing.assert_array_equal(cp.asnumpy(sums), ints)
    parts = cd.unique_by_key(_dask(distinct), _dask(ints))[0].to_delayed().ravel()
    assert [int(p.compute().size) for p in parts] == list(CHUNKS)     # nothing joins: each chunk keeps its own
    empty = _dask(np.zeros(0, np.int32), chunks=(0, 0))
    keys, sums = dask.compute(*cd.reduce_by_key(empty, empty, OpKind.PLUS))
    assert keys.size == 0 and sums.size == 0


def test_the_cluster_example_runs(tmp_path, script_runner):
    """examples/dask/cluster.py, run as a user runs it (a fresh interpreter, which starts its
    own cluster), checks each function against numpy and prints its 'ok' line."""
    from pathlib import Path

    pytest.importorskip("distributed")
    run = script_runner(Path(__file__).resolve().parents[3] / "examples" / "dask" / "cluster.py", tmp_path)
    assert run.returncode == 0, f"exited {run.returncode}\n{run.stdout}\n{run.stderr}"
    assert "dask cluster: ok" in run.stdout, run.stdout


def _use_cache_dir(path):
    """In a worker: ``path`` as the disk cache, nothing of earlier builds in memory; its
    NVRTC compiles so far."""
    cuprims.settings.cache_dir = path
    cuprims.clear_all_caches()
    return cuprims.cache_info()["nvrtc_compiles"]


def _or_of_a_range():
    """In a worker: a reduce built there (from the disk cache, or compiled); its result and
    the worker's NVRTC compiles after it."""
    x = cp.arange(1000, dtype=cp.int16)
    out = cp.empty(1, cp.int16)
    cuprims.reduce_into(d_in=x, d_out=out, op=OpKind.BIT_OR, num_items=x.size, h_init=np.int16(0))
    return int(out.get()[0]), cuprims.cache_info()["nvrtc_compiles"]


def _default_cache_dir():
    del cuprims.settings.cache_dir      # back to CUPRIMS_CACHE_DIR
    cuprims.clear_all_caches()


def test_a_clusters_first_run_compiles_each_kernel_once_per_machine(cluster_client, tmp_path):
    """Every worker builds the same reduce at once from an empty cache they share: one of
    them compiles it, the others wait for it and read it from the disk."""
    try:
        before = cluster_client.run(_use_cache_dir, str(tmp_path / "shared-cache"))
        done = cluster_client.run(_or_of_a_range)       # on every worker at the same time
    finally:
        cluster_client.run(_default_cache_dir)
    assert len(done) >= 2 and all(result == 1023 for result, _ in done.values())
    compiled = sorted(after - before[worker] for worker, (_, after) in done.items())
    assert compiled[-1] >= 1 and compiled[:-1] == [0] * (len(compiled) - 1), compiled
