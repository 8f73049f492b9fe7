"""A sort piece's two ways between worker processes on the GPU (cuprims.dask.exchange):
as host bytes, and as IPC handles that another process of this machine maps and copies
from; and the sample sort on a cluster of worker processes sending its pieces by IPC."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

cp = pytest.importorskip("cupy")
pytest.importorskip("dask")

from cuprims.dask import exchange, tasks  # noqa: E402
from cuprims.dask.exchange import DevicePiece  # noqa: E402
from cuprims.errors import CudaError  # noqa: E402

SAME_HOST = {"sender": {"address": "tcp://127.0.0.1:4000"}, "recipient": {"address": "tcp://127.0.0.1:4001"}}
OTHER_HOST = {"sender": {"address": "tcp://10.0.0.1:4000"}, "recipient": {"address": "tcp://10.0.0.2:4000"}}
DTYPES = [np.int8, np.uint16, np.int32, np.float32, np.int64, np.float64]


def _piece(dtype, size: int, values: bool, start: int = 3) -> tuple[DevicePiece, np.ndarray, np.ndarray | None]:
    """A piece of views at an offset into larger arrays, as chunk_piece cuts them."""
    rng = np.random.default_rng(size)
    keys = rng.integers(0, 100, start + size + 5).astype(dtype)
    vals = rng.integers(0, 1 << 30, start + size + 5).astype(np.int64) if values else None
    piece = DevicePiece(cp.asarray(keys)[start:start + size],
                        None if vals is None else cp.asarray(vals)[start:start + size])
    return piece, keys[start:start + size], None if vals is None else vals[start:start + size]


def _equal(piece: DevicePiece, keys: np.ndarray, values: np.ndarray | None) -> None:
    assert piece.keys.dtype == keys.dtype
    np.testing.assert_array_equal(piece.keys.get(), keys)
    if values is None:
        assert piece.values is None
    else:
        np.testing.assert_array_equal(piece.values.get(), values)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("values", [False, True])
@pytest.mark.parametrize("context", [None, OTHER_HOST], ids=["no-recipient", "other-host"])
def test_host_bytes_round_trip(dtype, values, context):
    piece, keys, vals = _piece(dtype, 1000, values)
    header, frames = exchange.dumps(piece, context)
    assert header["ipc"] is False and len(frames) == (2 if values else 1)
    assert sum(memoryview(f).nbytes for f in frames) == piece.nbytes
    _equal(exchange.loads(header, [bytes(f) for f in frames]), keys, vals)


def test_the_switch_sends_host_bytes_to_this_host(monkeypatch):
    monkeypatch.setenv(exchange.IPC_SWITCH, "0")
    piece, keys, _ = _piece(np.float32, 100, False)
    header, frames = exchange.dumps(piece, SAME_HOST)
    assert header["ipc"] is False and len(frames) == 1
    _equal(exchange.loads(header, frames), keys, None)


def test_empty_pieces_both_ways():
    piece = DevicePiece(cp.empty(0, np.float32), cp.empty(0, np.int64))
    for context in (None, SAME_HOST):
        header, frames = exchange.dumps(piece, context)
        back = exchange.loads(header, frames)
        assert back.keys.size == 0 and back.values.size == 0 and back.values.dtype == np.int64


def test_a_non_contiguous_piece_goes_as_host_bytes():
    keys = cp.arange(100, dtype=np.int32)[::2]
    header, frames = exchange.dumps(DevicePiece(keys), SAME_HOST)
    assert header["ipc"] is False
    _equal(exchange.loads(header, frames), np.arange(100, dtype=np.int32)[::2], None)


@pytest.mark.parametrize("values", [False, True])
def test_a_handle_back_in_its_own_process_is_read_directly(values):
    # CUDA opens no handle in the process that made it: the sender's pointer is read
    piece, keys, vals = _piece(np.float64, 3000, values)
    header, frames = exchange.dumps(piece, SAME_HOST)
    assert header["ipc"] is True and frames == []
    _equal(exchange.loads(header, frames), keys, vals)
    assert not exchange._opened


@pytest.mark.parametrize("dtype", DTYPES)
def test_device_frames_for_ucx_round_trip(dtype):
    # what UCX comms send: distributed's "cuda" family, the arrays as device frames
    protocol = pytest.importorskip("distributed.protocol")
    for size, values in ((1000, True), (1, False), (0, True)):
        piece, keys, vals = _piece(dtype, size, values)
        header, frames = protocol.serialize(piece, serializers=("cuda",))
        assert header["serializer"] == "cuda"
        assert all(hasattr(f, "__cuda_array_interface__") for f in frames)
        _equal(protocol.deserialize(header, frames, deserializers=("cuda",)), keys, vals)
    empty = DevicePiece(cp.empty(0, dtype))
    _equal(exchange.device_loads(exchange.device_dumps(empty)[0], [b""]), np.empty(0, dtype), None)


def test_a_handle_from_another_machine_is_refused():
    piece, _, _ = _piece(np.int32, 10, False)
    header, frames = exchange.dumps(piece, SAME_HOST)
    assert header["ipc"] is True and frames == []
    header["machine"] = "another-machine"
    with pytest.raises(CudaError, match="another machine"):
        exchange.loads(header, frames)


_CHILD = """
import pickle, sys
import numpy as np
from cuprims.dask import exchange
header = pickle.load(open(sys.argv[1], "rb"))
pieces = [exchange.loads(h, []) for h in header]
np.savez(sys.argv[2], *[a.get() for p in pieces for a in p.arrays])
print("mapped", len(exchange._opened), "closed", exchange.close_mappings(), "left", len(exchange._opened))
print("calls", *(exchange.spent[step][0] for step in ("open", "copy", "close")))
"""


@pytest.mark.parametrize("dtype", [np.int8, np.float32, np.float64])
def test_another_process_maps_and_copies_the_pieces(tmp_path, dtype):
    # pieces cut from one pair of arrays share their allocations: the child maps each
    # allocation once, keeps the mapping for the next pieces, and closes it on request.
    # The keys and the values are one allocation or two: CuPy's pool may cut both from one
    # block it had freed.
    sizes = [0, 1, 1000, 4097]
    keys = cp.asarray(np.random.default_rng(1).integers(-100, 100, sum(sizes) + 7).astype(dtype))
    vals = cp.arange(sum(sizes) + 7, dtype=np.int64)
    cuts = np.r_[0, np.cumsum(sizes)] + 7
    pieces = [tasks.chunk_piece((keys, vals), cuts, part) for part in range(len(sizes))]   # as the sort cuts them
    assert all(p.ready is not None for p in pieces)
    before, exports = dict(exchange.sent), exchange.spent["export"][0]
    headers = []
    for p in pieces:
        header, frames = exchange.dumps(p, SAME_HOST)
        assert header["ipc"] is True and frames == []
        headers.append(header)
    assert exchange.sent["ipc"] == before["ipc"] + len(pieces)
    assert exchange.spent["export"][0] == exports + len(pieces)
    (tmp_path / "h.pkl").write_bytes(pickle.dumps(headers))
    out = tmp_path / "out.npz"
    run = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "h.pkl"), str(out)], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ))
    assert run.returncode == 0, run.stderr[-3000:]
    allocations = len({a["handle"] for h in headers for a in h["arrays"] if "handle" in a})
    assert allocations in (1, 2)
    # each allocation mapped once, kept, then closed
    assert f"mapped {allocations} closed {allocations} left 0" in run.stdout
    # opened once each; keys and values copied for each of the three pieces not empty
    assert f"calls {allocations} 6 {allocations}" in run.stdout
    got = np.load(out)
    for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        np.testing.assert_array_equal(got[f"arr_{2 * i}"], keys[a:b].get())
        np.testing.assert_array_equal(got[f"arr_{2 * i + 1}"], vals[a:b].get())


def _sent() -> dict:
    return dict(exchange.sent)


def test_the_sort_on_worker_processes_sends_its_pieces_by_ipc():
    distributed = pytest.importorskip("distributed")
    import dask.array as da

    import cuprims.dask as cd

    host = np.random.default_rng(7).standard_normal(400_000).astype(np.float32)
    x = da.from_array(cp.asarray(host), chunks=((50_000, 0, 150_000, 1, 199_999),), asarray=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        keys, values = cd.sort(x, da.from_array(cp.arange(host.size, dtype=np.int64), chunks=x.chunks,
                                                asarray=False))
        got_keys, got_values = client.compute([keys, values], sync=True)
        sent = client.run(_sent)
    order = np.argsort(host, kind="stable")
    np.testing.assert_array_equal(got_keys.get(), host[order])
    np.testing.assert_array_equal(host[got_values.get()], host[order])
    assert sum(s["ipc"] for s in sent.values()) > 0, sent
    assert sum(s["host"] for s in sent.values()) == 0, sent
