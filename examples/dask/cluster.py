"""cuprims.dask on a cluster of worker processes sharing this machine's GPUs: one worker per
GPU with dask_cuda's LocalCUDACluster where it is installed, otherwise two workers of a
distributed LocalCluster on the current GPU. A sum, a scan, a histogram, a top-k, a sort
and runs reduced by key of arrays of CuPy chunks, each checked against numpy."""

import cupy as cp
import dask.array as da
import numpy as np
from distributed import Client, LocalCluster

import cuprims
import cuprims.dask as cd


def start_cluster():
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        return LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)
    return LocalCUDACluster(dashboard_address=None)


def main():
    with start_cluster() as cluster, Client(cluster) as client:
        rng = np.random.default_rng(0)
        host = rng.standard_normal(3_000_000).astype(np.float32)
        # uneven chunks, one of them empty: each is a CuPy array, held by one worker
        x = da.from_array(cp.asarray(host), chunks=((1_000_000, 0, 1_500_000, 500_000),), asarray=False)

        total = cd.sum(x, dtype=np.float64).compute()
        assert np.isclose(float(total), host.astype(np.float64).sum(), rtol=1e-9, atol=1e-6)

        running_max = cd.inclusive_scan(x, cuprims.OpKind.MAXIMUM).compute().get()
        assert (running_max == np.maximum.accumulate(host)).all()

        counts = cd.histogram_even(x, 9, np.float32(-4), np.float32(4)).compute().get()
        assert (counts == np.histogram(host, bins=8, range=(-4, 4))[0]).all()

        best, where = cd.top_k(x, 10, return_indices=True)
        best, where = best.compute().get(), where.compute().get()
        assert (best == np.sort(host)[::-1][:10]).all() and (host[where] == best).all()

        ordered = cd.sort(x).compute().get()
        assert (ordered == np.sort(host)).all()

        # runs of equal consecutive keys, summed: runs cross the chunks' boundaries
        keys_host = np.repeat(np.arange(1000, dtype=np.int32), 3000)
        keys = da.from_array(cp.asarray(keys_host), chunks=x.chunks, asarray=False)
        unique, sums = cd.reduce_by_key(keys, x, cuprims.OpKind.PLUS, dtype=np.float64)
        unique, sums = unique.compute().get(), sums.compute().get()
        assert (unique == np.arange(1000)).all()
        assert np.allclose(sums, np.add.reduceat(host.astype(np.float64), np.arange(0, host.size, 3000)))

        # every worker compiled from, and into, the disk cache they share
        for worker, info in client.run(cuprims.cache_info).items():
            print(f"{worker}: {info['nvrtc_compiles']} compiles, {info['disk_hits']} from the disk cache")
    print("dask cluster: ok")


if __name__ == "__main__":   # worker processes import this file: the cluster starts only here
    main()
