"""cuprims.dask on a distributed LocalCluster of worker processes sharing one GPU: 2^30 float32
(``--log2n``) in 16 CuPy chunks (``--chunks``), made on the workers (nothing goes through
the client) and persisted there before anything is timed. The data are |N(0, 1)| (positive:
the float32 sum is well conditioned; the top keys are distinct), the same in each run.

* ``cuprims.dask.sum(x)`` beside ``x.sum()`` of dask.array over the same chunks: wall time
  of computing the 0-d result into the client. Ratio cuprims/dask (target <= 1.2).
* ``cuprims.dask.top_k(x, 16)`` beside ``dask.array.topk(x, 16)`` (``np.partition`` of
  each CuPy chunk, through ``__array_function__``: for a kth this near the chunk's end
  CuPy sorts the whole chunk; an error there is a row's note). Ratio dask/cuprims
  (target >= 1.0).
* ``cuprims.dask.sort(x)``, persisted on the workers (the sorted chunks stay there), beside
  one ``cuprims.radix_sort`` of the same 2^30 keys in this (client) process, alone on the
  GPU before the cluster starts; the client's device memory is given back before the
  workers start. Ratio dask sort/single sort, wall times (target <= 3). Then the sort's
  stages, run one after the other from ``cuprims.dask.tasks``' functions (the ones
  ``cuprims.dask.sort``'s graph calls, with a barrier after each): the chunk sorts; the
  samples and the splitters; the cuts (``lower_bound``); the exchange (each chunk's pieces cut out,
  ``chunk_piece``, and brought to the worker of their output chunk); the final stage
  (``gather_part``: the pieces merged), and beside it, outside the staged total, the other
  way to end (the pieces laid end to end and radix sorted). The sort's row says how many pieces
  went between workers by CUDA IPC handle and how many as host bytes
  (``cuprims.dask.exchange``).
* The first run of each (the builds: compiles, or loads from the disk cache) is its own row
  under "first run"; the others are the median of ``--repeats`` runs after it (fewer where
  a section's time budget runs out; the note says how many). Each run computes a fresh
  copy of the graph (``dask.graph_manipulation.clone``, outside the timing), so that no run
  reuses an earlier one's results on the cluster. A sort is timed up to the end of the
  workers' device work (``cudaDeviceSynchronize`` in each worker).
* Checks: the data on the workers (a checksum per chunk) against the same chunks made here;
  the sums against a float64 sum here (relative 1e-5); the top-k equal to the last k of
  the sorted keys here; the dask sort's chunks each sorted, in order across chunks, the
  same count and checksum (the keys' bits summed in uint64) as the data, and equal to the
  single sort at 4097 evenly spaced positions. The staged sort's chunks must have the same
  sizes and checksums as the API's. A failed check is in its row's note and the run exits 1
  (after writing the results).
* ``cuprims.cache_info()`` of each worker at the end: a row each, whose value is the
  compiles (NVRTC + numba) in the runs after the first ones (0: nothing is built twice);
  the note gives the worker's totals.

The workers inherit this process's environment: ``CUPRIMS_CACHE_DIR`` (the disk cache the
workers of a machine share, and this process with them) and ``PYTHONPATH``, to which the
directory cuprims is imported from here is added when it is not an installed package's.

Run on a GPU machine:  python bench/bench_dask.py [--out DIR] [--log2n 30] [--chunks 16] [--workers 4] [--protocol ucx]
(--log2n 24 for a quick try). Writes bench/results/dask.json, .md and .png (dask-ucx.* with
``--protocol ucx``, which needs distributed-ucxx: scripts/fetch-device-wheels puts it in .whl-ucx/),
and copies to --out.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import RESULTS, add_extra_path, device_ms, result_rows, write_results  # noqa: E402

# --- run inside the workers (pickled by value from __main__: they import what they use) ------


def _make_chunk(seed: int, index: int, size: int) -> Any:
    """Chunk ``index`` of the data: ``size`` float32 |N(0, 1)|, from its own seed."""
    import cupy as cp
    import numpy as np

    out = cp.random.default_rng(seed * 1_000_003 + index).standard_normal(size, dtype=np.float32)
    cp.abs(out, out=out)
    return out


def _checksum(keys: Any) -> int:
    """The float32 keys' bit patterns summed in uint64 (exact, order-free)."""
    import cupy as cp

    return int(keys.reshape(-1).view(cp.uint32).sum(dtype=cp.uint64)) if keys.size else 0


def _chunk_stats(part: Any) -> dict:
    """Size, sortedness, first and last key and checksum of one sorted chunk (the keys, or
    ``(keys, values)`` as ``cuprims.dask.tasks.sort_chunk`` returns them)."""
    keys = (part[0] if isinstance(part, tuple) else part).reshape(-1)
    size = int(keys.size)
    if size == 0:
        return {"size": 0, "sorted": True, "first": None, "last": None, "checksum": 0}
    ordered = bool((keys[1:] >= keys[:-1]).all()) if size > 1 else True
    return {"size": size, "sorted": ordered, "first": float(keys[0]), "last": float(keys[-1]),
            "checksum": _checksum(keys)}


def _take(part: Any, positions: Any) -> Any:
    """The keys of one chunk at ``positions`` (host int64), on the host."""
    import cupy as cp

    keys = (part[0] if isinstance(part, tuple) else part).reshape(-1)
    if len(positions) == 0:
        return cp.asnumpy(keys[:0])
    return cp.asnumpy(keys[cp.asarray(positions)])


def _held(pieces: list) -> list:
    """An output chunk's pieces, brought to one worker (the staged sort's exchange)."""
    return pieces


def _gather_held(pieces: list, order: Any) -> tuple:
    """The staged sort's final stage: ``cuprims.dask.tasks.gather_part`` of held pieces."""
    from cuprims.dask import tasks

    return tasks.gather_part(pieces, order, False)


def _sort_held(pieces: list, order: Any) -> tuple:
    """The final stage's other way: the pieces laid end to end and radix sorted."""
    from cuprims.dask import tasks

    keys, values = tasks.join_pieces(pieces, False)
    return tasks.sort_chunk(keys, values, order)


def _sync_device() -> None:
    import cupy as cp

    cp.cuda.Device().synchronize()


def _worker_cache_info() -> dict:
    import cuprims

    return cuprims.cache_info()


def _pieces_sent() -> dict:
    from cuprims.dask import exchange

    return dict(exchange.sent)


def _keep_mappings(count: int | None) -> int:
    """Sets how many unused IPC mappings this worker keeps (None: the default), closing
    every unused one; returns how many it closed."""
    from cuprims import settings
    from cuprims.dask import exchange

    if count is None:
        del settings.dask_ipc_mappings
    else:
        settings.dask_ipc_mappings = count
    return exchange.close_mappings()


def _exchange_switch(count: int) -> str:
    from cuprims.dask import exchange

    return f"{exchange.MAPPINGS_KEPT_SWITCH}={count} in the workers"


def _exchange_spent() -> dict:
    from cuprims.dask import exchange

    return {step: list(entry) for step, entry in exchange.spent.items()}


# --- the client ---------------------------------------------------------------------------------


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None, help="a folder for copies of the results")
    parser.add_argument("--log2n", type=int, default=30, help="log2 of the float32 items (default 30: 4 GiB)")
    parser.add_argument("--chunks", type=int, default=16, help="chunks of the data (default 16)")
    parser.add_argument("--workers", type=int, default=4, help="worker processes, one thread each (default 4)")
    parser.add_argument("--k", type=int, default=16, help="top_k's k (default 16)")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs of sum and top_k after the first")
    parser.add_argument("--sort-repeats", type=int, default=3, help="timed runs of the sort after the first")
    parser.add_argument("--stage-repeats", type=int, default=2, help="runs of the staged sort")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds one computation may take")
    parser.add_argument("--protocol", default="tcp",
                        help="the cluster's comms: tcp (default), or ucx where distributed-ucxx is installed "
                             "(device buffers exchanged through UCX: CUDA IPC between workers of one GPU)")
    parser.add_argument("--budget", type=float, default=300.0,
                        help="seconds after which no section starts another repeat (default 300)")
    args = parser.parse_args()
    if args.chunks < 1 or (1 << args.log2n) % args.chunks:
        parser.error("--chunks must divide 2^log2n")
    if not 1 <= args.k <= (1 << args.log2n):
        parser.error("--k must be from 1 to 2^log2n")
    add_extra_path()
    return args


def _workers_env() -> None:
    """What the workers (spawned: they inherit os.environ) need to import this cuprims."""
    import cuprims

    root = Path(cuprims.__file__).resolve().parent.parent
    if root.name in ("site-packages", "dist-packages"):
        return
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(root) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(root)] + paths)


def _client_phase(args: argparse.Namespace) -> dict:
    """The references and the single-process sort, in this process alone on the GPU; every
    device buffer given back before returning."""
    import cupy as cp
    import numpy as np

    import cuprims

    n, c = 1 << args.log2n, (1 << args.log2n) // args.chunks
    ref: dict[str, Any] = {}
    xf = cp.empty(n, np.float32)
    for i in range(args.chunks):
        xf[i * c:(i + 1) * c] = _make_chunk(args.seed, i, c)
    ref["chunk_checksums"] = [_checksum(xf[i * c:(i + 1) * c]) for i in range(args.chunks)]
    ref["checksum"] = sum(ref["chunk_checksums"])
    ref["sum64"] = float(xf.sum(dtype=np.float64))
    out = cp.empty_like(xf)
    asc = cuprims.SortOrder.ASCENDING

    def one_sort() -> None:
        cuprims.radix_sort(d_in_keys=xf, d_out_keys=out, num_items=n, order=asc)

    before = cuprims.cache_info()
    t0 = time.perf_counter()
    one_sort()
    cp.cuda.Device().synchronize()
    ref["first_s"] = time.perf_counter() - t0
    after = cuprims.cache_info()
    ref["client_compiles"] = ((after["nvrtc_compiles"] - before["nvrtc_compiles"])
                              + (after["numba_compiles"] - before["numba_compiles"]))
    ref["sorted_ok"] = bool((out[1:] >= out[:-1]).all()) and _checksum(out) == ref["checksum"]
    walls = []
    for _ in range(5):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        one_sort()
        cp.cuda.Device().synchronize()
        walls.append(time.perf_counter() - t0)
    ref["wall_ms"] = statistics.median(walls) * 1e3
    ref["device_ms"] = device_ms(one_sort, inner=1, repeats=5, warmup=1)
    ref["topk"] = cp.asnumpy(out[n - args.k:][::-1])
    ref["positions"] = np.unique(np.linspace(0, n - 1, 4097).astype(np.int64))
    ref["at_positions"] = cp.asnumpy(out[cp.asarray(ref["positions"])])
    ref["device"] = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode()
    ref["gpus"] = cp.cuda.runtime.getDeviceCount()
    del xf, out
    cp.get_default_memory_pool().free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()
    cuprims.clear_all_caches()     # gives back the device memory the one-shot sort's pool keeps
    return ref


def _runs(fn: Callable[[], float], repeats: int, budget_s: float, deadline: float) -> tuple[list[float], str]:
    """Up to ``repeats`` timed runs (``fn`` returns seconds), fewer once ``budget_s`` of this
    section or the bench's deadline has passed (at least one)."""
    samples: list[float] = []
    start = time.perf_counter()
    for _ in range(max(1, repeats)):
        samples.append(fn())
        now = time.perf_counter()
        if now - start > budget_s or now > deadline:
            break
    note = f"median of {len(samples)}" + ("" if len(samples) >= repeats else f" (of {repeats} asked: budget)")
    return samples, note


def main() -> None:
    args = _arguments()

    import cupy as cp
    import dask
    import dask.array as da
    import distributed
    import numpy as np
    from dask.graph_manipulation import clone
    from dask.highlevelgraph import HighLevelGraph
    from distributed import futures_of, wait

    import cuprims
    import cuprims.dask as cd
    from cuprims.dask import tasks
    from cuprims.dask.graph import chunk_keys

    bench_start = time.perf_counter()
    deadline = bench_start + args.budget
    n, c, k = 1 << args.log2n, (1 << args.log2n) // args.chunks, args.k
    rows, add = result_rows(52, 50)
    later_rows: list[tuple] = []      # the first runs and the workers' cache_info, added after the rest

    def add_later(*row: Any) -> None:
        later_rows.append(row)
        print(f"({row[0]}) {row[1]}: {row[2]:.4f} {row[3]}", flush=True)

    failures: list[str] = []
    shape = f"float32 2^{args.log2n}, {args.workers} workers x {args.chunks} chunks"

    def checked(ok: bool, what: str, detail: str = "") -> str:
        if not ok:
            failures.append(what)
        return f"check {'ok' if ok else 'FAILED'}{': ' + detail if detail else ''}"

    # --- this process alone on the GPU: references and the single sort; its memory freed ----
    ref = _client_phase(args)
    w_sort = f"sort {shape}"
    w_first = "first run (builds included)"
    single_note = checked(ref["sorted_ok"], "single radix_sort", "sorted, checksum")
    add_later(w_first, "cuprims.radix_sort, one process", ref["first_s"] * 1e3, "ms", None,
        f"{ref['client_compiles']} compiles in the client")

    _workers_env()
    cluster = client = None
    extra: dict[str, Any] = {}
    try:
        cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                           dashboard_address=None, memory_limit=0, protocol=args.protocol)
        client = distributed.Client(cluster)
        client.wait_for_workers(args.workers, timeout=180)
        workers = sorted(client.scheduler_info()["workers"])
        label = {w: f"worker {i}" for i, w in enumerate(workers)}

        def sync_workers() -> None:
            client.run(_sync_device)

        def cache_infos() -> dict:
            return client.run(_worker_cache_info)

        def compiles(infos: dict) -> dict:
            return {w: info["nvrtc_compiles"] + info["numba_compiles"] for w, info in infos.items()}

        first_compiles = dict.fromkeys(workers, 0)

        def first_run(fn: Callable[[], float]) -> tuple[float, int]:
            """``fn``'s first run (seconds) and the compiles it made in all the workers."""
            before = compiles(cache_infos())
            seconds = fn()
            after = compiles(cache_infos())
            for w in workers:
                first_compiles[w] += after.get(w, 0) - before.get(w, 0)
            return seconds, sum(after.get(w, 0) - before.get(w, 0) for w in workers)

        # --- the data, made and kept on the workers --------------------------------------
        name = f"bench-dask-data-{args.seed}-{args.log2n}-{args.chunks}"
        layer = {(name, i): (_make_chunk, args.seed, i, c) for i in range(args.chunks)}
        x = da.Array(HighLevelGraph.from_collections(name, layer, dependencies=()), name,
                     chunks=((c,) * args.chunks,), dtype=np.float32, meta=cp.empty((0,), np.float32))
        t0 = time.perf_counter()
        x = client.persist(x)
        wait(x, timeout=args.timeout)
        sync_workers()
        made_s = time.perf_counter() - t0
        start_infos = cache_infos()
        sums = dask.compute(*[dask.delayed(_checksum)(b) for b in x.to_delayed().ravel()])
        data_ok = list(sums) == ref["chunk_checksums"]
        if not data_ok:
            failures.append("data on the workers")
        extra["data made in"] = f"{made_s:.2f} s"
        print(f"data: {n} float32 in {args.chunks} chunks made on the workers in {made_s:.2f} s; "
              f"checksums {'equal' if data_ok else 'DIFFER from'} the client's", flush=True)

        seed = [0]

        def fresh(a: Any) -> Any:
            """``a`` with new keys (its dependence on the persisted data kept)."""
            seed[0] += 1
            return clone(a, omit=x, seed=seed[0])

        def compute_s(make: Callable[[], Any], out: list | None = None,
                      timeout: float | None = None) -> Callable[[], float]:
            """A timed compute of a fresh copy of ``make()``; the result appended to ``out``."""
            def run() -> float:
                a = fresh(make())
                t0 = time.perf_counter()
                value = client.compute(a).result(timeout=timeout or args.timeout)
                seconds = time.perf_counter() - t0
                if out is not None:
                    out.append(value)
                return seconds
            return run

        # --- 1. sum ---------------------------------------------------------------------------
        def bench_sum() -> None:
            """cuprims.dask.sum beside dask.array's sum."""
            w_sum = f"sum {shape}"
            got: list = []
            s_first, s_comp = first_run(compute_s(lambda: cd.sum(x), got))
            s_times, s_note = _runs(compute_s(lambda: cd.sum(x), got), args.repeats, 30, deadline)
            d_got: list = []
            d_first = compute_s(lambda: x.sum(), d_got)()
            d_times, d_note = _runs(compute_s(lambda: x.sum(), d_got), args.repeats, 30, deadline)
            ours, theirs = statistics.median(s_times), statistics.median(d_times)
            errors = [abs(float(v) - ref["sum64"]) / abs(ref["sum64"]) for v in got]
            sum_check = checked(max(errors) <= 1e-5, "cuprims.dask.sum", f"rel. error <= {max(errors):.1e} "
                                "against a float64 sum")
            add(w_sum, "cuprims.dask.sum(x)", ours * 1e3, "ms", ours / theirs,
                f"ratio = cuprims/dask (target <= 1.2); {s_note}; {sum_check}")
            d_errors = [abs(float(v) - ref["sum64"]) / abs(ref["sum64"]) for v in d_got]
            add(w_sum, "dask.array x.sum() (CuPy chunks)", theirs * 1e3, "ms", None,
                f"{d_note}; rel. error <= {max(d_errors):.1e} against a float64 sum")
            add_later(w_first, "cuprims.dask.sum(x)", s_first * 1e3, "ms", None, f"{s_comp} compiles in the workers")
            add_later(w_first, "dask.array x.sum()", d_first * 1e3, "ms")

        # --- 2. top_k ---------------------------------------------------------------------------
        def bench_top_k() -> None:
            """cuprims.dask.top_k beside dask.array.topk."""
            w_top = f"top_k k = {k}, {shape}"
            got = []
            t_first, t_comp = first_run(compute_s(lambda: cd.top_k(x, k), got))
            t_times, t_note = _runs(compute_s(lambda: cd.top_k(x, k), got), args.repeats, 30, deadline)
            ours = statistics.median(t_times)
            top_ok = all(np.array_equal(cp.asnumpy(v), ref["topk"]) for v in got)
            top_check = checked(top_ok, "cuprims.dask.top_k", "the k largest of the sorted keys, best first")
            try:
                d_got = []
                patience = min(args.timeout, 90.0)     # np.partition of CuPy chunks: its speed is not ours to know
                d_first = compute_s(lambda: da.topk(x, k), d_got, patience)()
                d_times, d_note = _runs(compute_s(lambda: da.topk(x, k), d_got, patience), args.repeats, 40, deadline)
                theirs = statistics.median(d_times)
                d_ok = all(np.array_equal(cp.asnumpy(v), ref["topk"]) for v in d_got)
                add(w_top, "cuprims.dask.top_k(x, k)", ours * 1e3, "ms", theirs / ours,
                    f"ratio = dask/cuprims (target >= 1.0); {t_note}; {top_check}")
                add(w_top, "dask.array.topk(x, k) (CuPy chunks)", theirs * 1e3, "ms", None,
                    f"{d_note}; result {'equal' if d_ok else 'NOT equal'} to the reference")
                add_later(w_first, "dask.array.topk(x, k)", d_first * 1e3, "ms")
            except Exception as exc:  # noqa: BLE001 - dask's topk on CuPy chunks may not run
                add(w_top, "cuprims.dask.top_k(x, k)", ours * 1e3, "ms", None, f"{t_note}; {top_check}")
                add(w_top, "dask.array.topk(x, k) (CuPy chunks)", float("nan"), "ms", None,
                    f"error: {type(exc).__name__}: {str(exc)[:200]}")
            add_later(w_first, "cuprims.dask.top_k(x, k)", t_first * 1e3, "ms", None,
                      f"{t_comp} compiles in the workers")

        # --- 3. sort -----------------------------------------------------------------------------
        def bench_sort() -> None:
            """cuprims.dask.sort beside the single sort, then its stages."""
            kept: list = []

            def sort_s() -> float:
                y = fresh(cd.sort(x))
                kept.clear()     # the previous run's result released before this one starts
                t0 = time.perf_counter()
                y = client.persist(y)
                wait(y, timeout=args.timeout)
                sync_workers()
                seconds = time.perf_counter() - t0
                kept.append(y)
                return seconds

            o_first, o_comp = first_run(sort_s)
            o_times, o_note = _runs(sort_s, args.sort_repeats, 120, deadline)
            ours = statistics.median(o_times)
            parts = kept[0].to_delayed().ravel()
            stats = dask.compute(*[dask.delayed(_chunk_stats)(p) for p in parts])
            sizes = [s["size"] for s in stats]
            offsets = np.r_[0, np.cumsum(sizes)]
            pos = ref["positions"]
            picks = [pos[(pos >= offsets[j]) & (pos < offsets[j + 1])] - offsets[j] for j in range(len(parts))]
            taken = dask.compute(*[dask.delayed(_take)(p, q) for p, q in zip(parts, picks)])
            kept.clear()
            del parts
            present = [s for s in stats if s["size"]]
            problems = []
            if sum(sizes) != n:
                problems.append(f"{sum(sizes)} items")
            if not all(s["sorted"] for s in stats):
                problems.append("a chunk not sorted")
            if any(a["last"] > b["first"] for a, b in zip(present, present[1:])):
                problems.append("chunks out of order")
            if sum(s["checksum"] for s in stats) != ref["checksum"]:
                problems.append("checksum")
            if not np.array_equal(np.concatenate(taken), ref["at_positions"]):
                problems.append("differs from the single sort")
            sort_check = checked(not problems, "cuprims.dask.sort", ", ".join(problems) or
                                 f"sorted, count, checksum, {len(pos)} positions equal to the single sort")
            single = ref["wall_ms"] / 1e3
            sent = client.run(_pieces_sent).values()
            travelled = (f"pieces sent between workers: {sum(c['ipc'] for c in sent)} by IPC handle, "
                         f"{sum(c['host'] for c in sent)} as host bytes")
            add(w_sort, "cuprims.dask.sort(x), persisted", ours * 1e3, "ms", ours / single,
                f"ratio = dask sort/single radix_sort (target <= 3); {o_note}; output chunks "
                f"{min(sizes)}..{max(sizes)} items; {travelled}; {sort_check}")
            add(w_sort, "cuprims.radix_sort, one process (wall, synced)", ref["wall_ms"], "ms", None,
                f"the client alone on the GPU, before the cluster; {single_note}")
            add(w_sort, "cuprims.radix_sort, one process (device time)", ref["device_ms"], "ms")
            add_later(w_first, "cuprims.dask.sort(x)", o_first * 1e3, "ms", None, f"{o_comp} compiles in the workers")
            runs = 1 + len(o_times)
            spent = list(client.run(_exchange_spent).values())
            for step in ("export", "open", "copy", "close"):
                calls, seconds = sum(w[step][0] for w in spent), sum(w[step][1] for w in spent)
                add(w_sort, f"IPC path: {step}, all workers, per sort", seconds * 1e3 / runs, "ms", None,
                    f"{calls / runs:.0f} calls per sort, {seconds * 1e6 / max(calls, 1):.0f} us each; "
                    f"summed over the workers (they overlap), over the {runs} sorts")
            # the same sort with every mapping closed after its copy (settings.dask_ipc_mappings = 0)
            try:
                client.run(_keep_mappings, 0)
                closed_s = sort_s()
                kept.clear()
                add(w_sort, "cuprims.dask.sort(x), each IPC mapping closed after its copy", closed_s * 1e3, "ms",
                    closed_s / ours, f"ratio = this/kept mappings ({_exchange_switch(0)}); one run")
            finally:
                client.run(_keep_mappings, None)

            # --- the sort's stages, one after the other ------------------------------------------------
            order = cuprims.SortOrder.ASCENDING
            count, spc = args.chunks, 256        # cuprims.dask.sort's defaults: parts = chunks, 256 samples
            stage_names = ["1 chunk sort (radix_sort per chunk)", "2 samples + splitters",
                           "3 cut at the splitters (lower_bound)",
                           "4a pieces cut out (a task each, in the chunk's worker)",
                           "4b exchange: the pieces brought to their output chunk's worker",
                           "5 each output chunk's pieces merged (gather_part)"]
            alternative = "5' instead: the pieces laid end to end and radix sorted"

            def staged() -> tuple[list[float], list, float]:
                times = []

                def lap(futures: Any, sync: bool) -> None:
                    wait(futures, timeout=args.timeout)
                    if sync:
                        sync_workers()
                    times.append(time.perf_counter() - t0 - sum(times))

                t0 = time.perf_counter()
                sorted_ = client.map(tasks.sort_chunk, chunk_futures, [None] * count, [order] * count, pure=False)
                lap(sorted_, True)
                samples = client.map(tasks.sample_chunk, sorted_, [spc] * count, pure=False)
                cuts_at = client.submit(tasks.splitters, samples, count, False, pure=False)
                lap(cuts_at, False)
                cuts = client.map(tasks.cut_chunk, sorted_, [cuts_at] * count, [False] * count, pure=False)
                lap(cuts, False)
                chunk_of = list(range(count)) * count              # piece k: chunk k % count, part k // count
                part_of = [j for j in range(count) for _ in range(count)]
                flat = client.map(tasks.chunk_piece, [sorted_[i] for i in chunk_of], [cuts[i] for i in chunk_of],
                                  part_of, pure=False)
                lap(flat, True)
                cut_out = [flat[j * count:(j + 1) * count] for j in range(count)]
                pieces = [client.submit(_held, cut_out[j], pure=False) for j in range(count)]
                lap(pieces, True)
                del sorted_, samples, cuts_at, cuts, cut_out, flat
                out = client.map(_gather_held, pieces, [order] * count, pure=False)
                lap(out, True)
                t1 = time.perf_counter()      # not in the staged total
                other = client.map(_sort_held, pieces, [order] * count, pure=False)
                wait(other, timeout=args.timeout)
                sync_workers()
                other_s = time.perf_counter() - t1
                del pieces, other
                return times, out, other_s

            w_stage = f"sort stages {shape}"
            try:
                by_key = {f.key: f for f in futures_of(x)}
                chunk_futures = [by_key[key] for key in chunk_keys(x)]
                laps, others, out = [], [], None
                for i in range(max(1, args.stage_repeats)):
                    out = None
                    times, out, other_s = staged()
                    laps.append(times)
                    others.append(other_s)
                    if time.perf_counter() > deadline:
                        break
                staged_stats = client.gather(client.map(_chunk_stats, out, pure=False))
                del out
                same = ([s["size"] for s in staged_stats] == sizes
                        and [s["checksum"] for s in staged_stats] == [s["checksum"] for s in stats])
                stage_check = checked(same, "staged sort", "output chunks' sizes and checksums equal the API's")
                medians = [statistics.median(t[j] for t in laps) for j in range(len(stage_names))]
                for stage, value in zip(stage_names, medians):
                    add(w_stage, stage, value * 1e3, "ms", value / sum(medians), "ratio = share of the staged total")
                other = statistics.median(others)
                add(w_stage, alternative, other * 1e3, "ms", other / medians[-1],
                    "ratio = this/stage 5 (not in the staged total)")
                total = statistics.median(sum(t) for t in laps)
                add(w_stage, "staged total (barrier after each stage)", total * 1e3, "ms", total / ours,
                    f"ratio = staged/whole graph; median of {len(laps)}; {stage_check}")
            except Exception as exc:  # noqa: BLE001 - a failed stage is the row's note, not the end of the bench
                failures.append("staged sort")
                add(w_stage, "staged sort", float("nan"), "ms", None, f"error: {type(exc).__name__}: {str(exc)[:200]}")

        # each section on its own: a failure is its row, and the next section still runs
        for section in (bench_sum, bench_top_k, bench_sort):
            try:
                section()
            except Exception as exc:  # noqa: BLE001
                failures.append(f"{section.__name__}: {type(exc).__name__}: {exc}")
                traceback.print_exc()
                add(section.__name__, "error", float("nan"), "", None, f"{type(exc).__name__}: {str(exc)[:300]}")

        # --- 5. what the workers built ---------------------------------------------------------------
        end_infos = cache_infos()
        ended, started = compiles(end_infos), compiles(start_infos)
        for w in workers:
            info = end_infos[w]
            later = ended[w] - started.get(w, 0) - first_compiles[w]
            add_later("cache_info per worker (after the runs)", label[w], later, "compiles", None,
                f"{later} compiles after the first runs, {first_compiles[w]} in them; totals: nvrtc "
                f"{info['nvrtc_compiles']}, numba {info['numba_compiles']}, links {info['links']}, disk hits "
                f"{info['disk_hits']}, module loads {info['module_loads']}")
        extra["cache_dir"] = end_infos[workers[0]].get("cache_dir")
    except Exception as exc:  # noqa: BLE001 - what was measured is still written, and the run fails
        failures.append(f"{type(exc).__name__}: {exc}")
        traceback.print_exc()
        add("error", "the bench stopped", float("nan"), "", None, f"{type(exc).__name__}: {str(exc)[:300]}")
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    for row in later_rows:
        add(*row)

    extra = {"device": ref["device"], "cupy": cp.__version__, "dask": dask.__version__,
             "distributed": distributed.__version__, "cuprims": cuprims.__version__,
             "workers": f"{args.workers} processes x 1 thread, all on device 0 ({ref['gpus']} GPU(s) visible)",
             "comms": args.protocol,
             "data": f"{n} float32 |N(0,1)| in {args.chunks} CuPy chunks of {c}, made on the workers", **extra,
             "checks": "all ok" if not failures else f"FAILED: {'; '.join(failures)}",
             "bench seconds": f"{time.perf_counter() - bench_start:.0f}"}
    name = "dask" if args.protocol == "tcp" else f"dask-{args.protocol}"
    print(write_results(name, rows, extra, [RESULTS] + ([Path(args.out)] if args.out else [])))
    if failures:
        print("checks failed:", ", ".join(failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
