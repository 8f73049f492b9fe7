"""The pure parts of how a sort's pieces travel (cuprims.dask.exchange): which recipients
get an IPC handle, the host part of distributed's addresses, and the pieces' sizes in
Dask's memory accounting. The device paths run in tests/gpu/dask."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("dask")

from cuprims import settings  # noqa: E402
from cuprims.dask import exchange  # noqa: E402
from cuprims.errors import ArgumentError  # noqa: E402
from cuprims.dask.exchange import DevicePiece  # noqa: E402


def _context(sender: str, recipient: str) -> dict:
    return {"sender": {"address": sender}, "recipient": {"address": recipient}}


@pytest.mark.parametrize("address,host", [
    ("tcp://127.0.0.1:8786", "127.0.0.1"),
    ("tcp://10.1.2.3:40123", "10.1.2.3"),
    ("tls://node-7.cluster:9000", "node-7.cluster"),
    ("tcp://[::1]:8786", "::1"),
    ("tcp://[fe80::1%eth0]:1", "fe80::1%eth0"),
    ("ucx://10.0.0.5:13337", "10.0.0.5"),
    ("tcp://hostonly", "hostonly"),
    ("inproc://10.0.0.1/1234/5", None),
    ("", None),
    ("127.0.0.1:8786", None),
    ("tcp://[]:1", None),
])
def test_host_of_reads_distributeds_addresses(address, host):
    assert exchange.host_of(address) == host


def test_only_a_recipient_on_the_senders_host_gets_a_handle():
    assert exchange.travels_by_ipc(_context("tcp://127.0.0.1:4000", "tcp://127.0.0.1:4001"))
    assert exchange.travels_by_ipc(_context("tcp://10.0.0.1:4000", "tcp://10.0.0.1:5000"))
    assert not exchange.travels_by_ipc(_context("tcp://10.0.0.1:4000", "tcp://10.0.0.2:4000"))
    assert not exchange.travels_by_ipc(_context("inproc://a/1/1", "inproc://a/1/2"))
    assert not exchange.travels_by_ipc(None)
    assert not exchange.travels_by_ipc({})
    assert not exchange.travels_by_ipc({"sender": {"address": "tcp://10.0.0.1:1"}})


@pytest.mark.parametrize("value,ipc", [("0", False), (" 0 ", False), ("off", False), ("1", True), ("", True),
                                       ("yes", True)])
def test_the_switch_turns_the_ipc_path_off(value, ipc, monkeypatch):
    context = _context("tcp://127.0.0.1:4000", "tcp://127.0.0.1:4001")
    monkeypatch.setenv(exchange.IPC_SWITCH, value)
    assert exchange.travels_by_ipc(context) is ipc
    with settings.override(dask_ipc=not ipc):     # set in code, it wins over the variable
        assert exchange.travels_by_ipc(context) is not ipc


def test_a_switch_it_cannot_read_names_the_variable(monkeypatch):
    monkeypatch.setenv(exchange.IPC_SWITCH, "maybe")
    with pytest.raises(ArgumentError, match="CUPRIMS_DASK_IPC"):
        exchange.travels_by_ipc(_context("tcp://127.0.0.1:4000", "tcp://127.0.0.1:4001"))


def test_the_machine_id_is_stable_and_not_empty():
    first = exchange.machine_id()
    assert first and first == exchange.machine_id()


def test_a_pieces_size_in_dasks_accounting_is_its_bytes():
    from dask.sizeof import sizeof

    keys, values = np.arange(1000, dtype=np.float32), np.arange(1000, dtype=np.int64)
    assert sizeof(DevicePiece(keys)) == 4000
    assert sizeof(DevicePiece(keys[10:20], values[10:20])) == 40 + 80
    assert DevicePiece(keys, values).arrays == (keys, values) and DevicePiece(keys).arrays == (keys,)
    assert "1000 keys float32, values int64" in repr(DevicePiece(keys, values))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork")
def test_a_forked_child_is_another_process():
    # a piece's handle read back in "its own process" is read by pointer: a child must
    # not take its parent's pointers for its own
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, exchange._PROCESS.encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.waitpid(pid, 0)
    assert child and child != exchange._PROCESS


class _Runtime:
    """The two CUDA runtime calls the mappings' bookkeeping makes, recorded (the real calls
    run in tests/gpu/dask/test_exchange_gpu.py)."""

    class CUDARuntimeError(Exception):
        pass

    def __init__(self):
        self.opened: list[bytes] = []
        self.closed: list[int] = []

    def ipcOpenMemHandle(self, handle):
        self.opened.append(handle)
        return 0x1000 * len(self.opened)

    def ipcCloseMemHandle(self, base):
        self.closed.append(base)


@pytest.fixture
def runtime(monkeypatch):
    import sys
    import types

    fake = _Runtime()
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(runtime=fake)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(exchange, "_opened", type(exchange._opened)())
    monkeypatch.setenv(exchange.MAPPINGS_KEPT_SWITCH, "2")
    return fake


def test_a_mapping_is_opened_once_and_kept_for_the_next_pieces(runtime):
    for _ in range(3):
        assert exchange._open(b"a") == 0x1000
        exchange._close(b"a")
    assert runtime.opened == [b"a"] and runtime.closed == []


def test_past_the_limit_the_least_recently_used_unused_mapping_closes(runtime):
    a = exchange._open(b"a")
    exchange._close(b"a")
    b = exchange._open(b"b")      # b stays in use
    exchange._open(b"a")          # a used again: b is now the least recently used
    exchange._close(b"a")
    exchange._open(b"c")
    exchange._close(b"c")         # three mappings, two kept: b is in use, so a goes
    assert runtime.closed == [a]
    exchange._close(b"b")
    assert list(exchange._opened) == [b"b", b"c"]
    assert exchange.close_mappings() == 2 and runtime.closed == [a, b, 0x3000] and not exchange._opened


def test_no_mapping_kept_when_the_limit_is_zero(runtime, monkeypatch):
    monkeypatch.setenv(exchange.MAPPINGS_KEPT_SWITCH, "0")
    base = exchange._open(b"a")
    exchange._close(b"a")
    assert runtime.closed == [base] and not exchange._opened


def test_the_limit_set_in_code_wins_and_a_negative_one_is_refused(runtime):
    with settings.override(dask_ipc_mappings=0):
        base = exchange._open(b"a")
        exchange._close(b"a")
        assert runtime.closed == [base]
    with pytest.raises(ArgumentError, match="dask_ipc_mappings"):
        settings.dask_ipc_mappings = -1


@pytest.mark.parametrize("text", ["-1", "many", "2.5"])
def test_a_limit_it_cannot_read_names_the_variable(runtime, monkeypatch, text):
    monkeypatch.setenv(exchange.MAPPINGS_KEPT_SWITCH, text)
    exchange._open(b"a")
    with pytest.raises(ArgumentError, match="CUPRIMS_DASK_IPC_MAPPINGS") as caught:
        exchange._close(b"a")
    assert "a whole number >= 0" in str(caught.value)
    assert exchange._opened[b"a"][1] == 1 and runtime.closed == []     # nothing changed
