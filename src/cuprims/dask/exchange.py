"""How a sort's pieces travel between the worker processes of one machine: as CUDA IPC
handles, device to device, instead of through host memory.

``distributed``'s TCP comms send a CuPy array as host bytes: copied off the device by the
sender, through the socket, and back onto the device by the recipient. A
:class:`DevicePiece` sent to a process on the sender's host (the recipient's address has
the sender's IP) travels as the IPC handle of its allocation and its place in it. The
recipient maps the allocation, copies the piece into memory of its own and waits for the
copy, all while ``distributed`` reads the message: the sender still holds the piece then
(a worker keeps a result it sends until the recipient has read it and confirmed). Before
it exports a handle the sender waits for the piece's ``ready`` event (else its whole
device), so that the kernels writing the piece have finished when another process reads
it. A piece that comes back to the process that sent it is copied from where it lies (CUDA
maps no handle in the process that made it). A mapping stays open for the next pieces of
the same allocation (a sorted chunk's pieces share one): each process keeps up to
``settings.dask_ipc_mappings`` (``CUPRIMS_DASK_IPC_MAPPINGS``, default 32; 0 closes each
after its copy) that no copy uses, closing the least recently used past it, and
:func:`close_mappings` closes them all. An open mapping may keep memory the sender has
freed from going back to its device until it closes.

To any other recipient, and where ``distributed`` names none (a piece spilled to disk), a
piece travels as host bytes. ``CUPRIMS_DASK_IPC=0`` in the workers' environment
(``settings.dask_ipc``) sends every piece over TCP as host bytes (for machines whose
processes cannot share device memory, such as containers without a shared IPC namespace).
Over UCX (``protocol="ucx"``) a piece goes as device frames, which UCX moves device to
device itself (:func:`device_dumps`).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any

import numpy as np

from cuprims.config import Settings, settings
from cuprims.errors import CudaError

#: the environment variable behind ``settings.dask_ipc``, which turns the IPC path off ("0")
IPC_SWITCH: str = Settings.dask_ipc.env

#: pieces this process has serialized, by the way they went ("ipc" or "host")
sent = {"ipc": 0, "host": 0}

#: this process's calls and seconds in each step of the IPC path: ``export`` (the sender's
#: wait for the piece and its handles), ``open`` and ``close`` (the recipient's mapping of
#: the sender's allocation) and ``copy`` (the copy into the recipient's memory and its wait)
spent: dict[str, list] = {step: [0, 0.0] for step in ("export", "open", "copy", "close")}


class _Timed:
    """Adds the time of its ``with`` block to ``spent[step]``."""

    __slots__ = ("step", "t0")

    def __init__(self, step: str):
        self.step = step

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: Any) -> None:
        entry = spent[self.step]
        entry[0] += 1
        entry[1] += time.perf_counter() - self.t0


# this process, told apart from every other (a pid may repeat across containers)
_PROCESS = uuid.uuid4().hex


def _new_process_id() -> None:
    global _PROCESS
    _PROCESS = uuid.uuid4().hex


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_process_id)   # a forked child is another process


class DevicePiece:
    """A piece of a sorted chunk on its way to the task gathering an output chunk:
    ``keys`` and ``values`` (or None), one-dimensional CuPy arrays; ``ready``, where
    given, an event recorded after the work that wrote them (else the sender waits for
    its whole device before another process reads the piece)."""

    __slots__ = ("keys", "values", "ready")

    def __init__(self, keys: Any, values: Any = None, ready: Any = None):
        self.keys, self.values, self.ready = keys, values, ready

    @property
    def arrays(self) -> tuple:
        return (self.keys,) if self.values is None else (self.keys, self.values)

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self.arrays)

    def __repr__(self) -> str:
        values = "" if self.values is None else f", values {self.values.dtype}"
        return f"DevicePiece({self.keys.size} keys {self.keys.dtype}{values})"


def host_of(address: str) -> str | None:
    """The host part of a ``distributed`` address (``"tcp://10.0.0.2:8786"`` ->
    ``"10.0.0.2"``, ``"tcp://[::1]:8786"`` -> ``"::1"``), or None for an address of no
    network host (``inproc://``) or no address."""
    scheme, sep, rest = address.partition("://")
    if not sep or scheme not in ("tcp", "tls", "ws", "wss", "ucx"):
        return None
    if rest.startswith("["):
        end = rest.find("]")
        return rest[1:end] if end > 1 else None
    host = rest.rsplit(":", 1)[0] if ":" in rest else rest
    return host or None


def travels_by_ipc(context: dict | None) -> bool:
    """Whether a piece written with ``distributed``'s serialization ``context`` goes by IPC
    handle: the sender's and the recipient's addresses name one host, and
    ``settings.dask_ipc`` (``CUPRIMS_DASK_IPC``) is on."""
    if not context or not settings.dask_ipc:
        return False
    sender = host_of(str((context.get("sender") or {}).get("address", "")))
    recipient = host_of(str((context.get("recipient") or {}).get("address", "")))
    return sender is not None and sender == recipient


def machine_id() -> str:
    """This machine's identity for the recipient's check that it shares the sender's
    devices: the kernel's boot id where Linux gives one, else the host name."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        import socket

        return socket.gethostname()


def _described(array: Any) -> dict:
    """What a recipient needs to make an array of the piece: its dtype and size."""
    return {"dtype": array.dtype.str, "size": int(array.size)}


def _export(array: Any) -> dict:
    """An array's IPC description: its allocation's handle and its place in it."""
    import cupy as cp
    from cuda.bindings import driver

    entry = _described(array)
    if array.size:
        ptr = int(array.data.ptr)
        # cudaSetDevice makes the device's primary context current in this (comms) thread,
        # which the driver's call needs
        cp.cuda.runtime.setDevice(array.device.id)
        err, base, _ = driver.cuMemGetAddressRange(ptr)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise CudaError("cuMemGetAddressRange", err, "exporting a sort piece to another worker")
        entry["handle"] = bytes(cp.cuda.runtime.ipcGetMemHandle(int(base)))
        entry["offset"] = ptr - int(base)
        entry["pointer"] = ptr      # read directly where the recipient is the sender's own process
    return entry


#: the environment variable behind ``settings.dask_ipc_mappings``: the most mappings of other
#: processes' allocations this process keeps open when no copy uses them (CUDA's open and
#: close of a mapping cost about a millisecond each, and the pieces of one sorted chunk
#: share its allocation); past it the least recently used close
MAPPINGS_KEPT_SWITCH: str = Settings.dask_ipc_mappings.env

# handle -> [mapped base address, copies using it], the least recently used first. A handle
# names one allocation for its life: memory freed and allocated again gets another handle,
# so a kept mapping is never one of other memory.
_opened: OrderedDict[bytes, list] = OrderedDict()
_opened_lock = threading.Lock()


def _open(handle: bytes) -> int:
    import cupy as cp

    with _opened_lock:
        entry = _opened.get(handle)
        if entry is None:
            try:
                with _Timed("open"):
                    base = cp.cuda.runtime.ipcOpenMemHandle(handle)   # peer access enabled as needed
            except cp.cuda.runtime.CUDARuntimeError as exc:
                raise CudaError("cudaIpcOpenMemHandle", exc,
                                f"a sort piece sent from another process of this machine could not be mapped; "
                                f"{IPC_SWITCH}=0 in the workers' environment sends pieces through host memory") from exc
            entry = _opened[handle] = [base, 0]
        else:
            _opened.move_to_end(handle)
        entry[1] += 1
        return int(entry[0])


def _close(handle: bytes) -> None:
    kept = settings.dask_ipc_mappings     # read first: a bad value raises with nothing changed
    with _opened_lock:
        _opened[handle][1] -= 1
        _close_unused(len(_opened) - kept)


def _close_unused(count: int) -> int:
    """Closes up to ``count`` mappings no copy uses, the least recently used first (the
    caller holds the lock); returns how many it closed."""
    import cupy as cp

    unused = [handle for handle, entry in _opened.items() if entry[1] == 0][:max(count, 0)]
    for handle in unused:
        with _Timed("close"):
            cp.cuda.runtime.ipcCloseMemHandle(_opened.pop(handle)[0])
    return len(unused)


def close_mappings() -> int:
    """Closes every mapping of another process's allocation that no copy is using (they stay
    open for the next pieces of the same allocations); returns how many it closed.

    Example::

        from cuprims.dask import exchange
        exchange.close_mappings()   # in a worker, e.g. by client.run(exchange.close_mappings)
    """
    with _opened_lock:
        return _close_unused(len(_opened))


_streams = threading.local()


def _copy_stream() -> Any:
    """This thread's stream for the pieces' copies: a non-blocking one, so that a copy waits
    for no kernel this process runs on the legacy stream meanwhile (a merge of another
    output chunk), nor they for it."""
    import cupy as cp

    stream = getattr(_streams, "stream", None)
    if stream is None:
        stream = _streams.stream = cp.cuda.Stream(non_blocking=True)
    return stream


def _copy_from(out: Any, source: int, stream: Any) -> None:
    import cupy as cp

    with _Timed("copy"):
        cp.cuda.runtime.memcpyAsync(int(out.data.ptr), source, out.nbytes, cp.cuda.runtime.memcpyDefault,
                                    stream.ptr)
        stream.synchronize()   # copied before the mapping goes and the sender lets the piece go


def _import(entry: dict, own: bool) -> Any:
    """A copy, in this process's memory, of the array ``entry`` describes (``own``: the
    sender was this process, whose pointer is valid here and whose handle CUDA does not
    open again)."""
    import cupy as cp

    stream = _copy_stream()
    with stream:    # allocated on the stream it is written on
        out = cp.empty(entry["size"], np.dtype(entry["dtype"]))
    if out.size and own:
        _copy_from(out, entry["pointer"], stream)
    elif out.size:
        handle = entry["handle"]
        base = _open(handle)
        try:
            _copy_from(out, base + entry["offset"], stream)
        finally:
            _close(handle)
    return out


def dumps(piece: DevicePiece, context: dict | None = None) -> tuple[dict, list]:
    """``distributed``'s serialization of a piece: IPC descriptions and no frames to a
    process of this host (:func:`travels_by_ipc`), else host bytes."""
    import cupy as cp

    arrays = piece.arrays
    # a handle names the array's own memory: only a contiguous one can travel that way
    if travels_by_ipc(context) and all(a.flags.c_contiguous for a in arrays):
        try:
            with _Timed("export"):
                # the piece written before another process reads it
                if piece.ready is not None:
                    piece.ready.synchronize()
                else:
                    for device in {a.device.id for a in arrays}:
                        cp.cuda.Device(device).synchronize()
                header = {"ipc": True, "machine": machine_id(), "process": _PROCESS,
                          "arrays": [_export(a) for a in arrays]}
        except (CudaError, cp.cuda.runtime.CUDARuntimeError):
            pass   # memory no handle can export (a stream-ordered pool's): host bytes instead
        else:
            sent["ipc"] += 1
            return header, []
    sent["host"] += 1
    header = {"ipc": False, "arrays": [_described(a) for a in arrays]}
    return header, [np.ascontiguousarray(cp.asnumpy(a)).reshape(-1).view(np.uint8).data for a in arrays]


def loads(header: dict, frames: list) -> DevicePiece:
    """The piece :func:`dumps` wrote, in this process's device memory."""
    import cupy as cp

    if header["ipc"]:
        if header["machine"] != machine_id():
            raise CudaError("cudaIpcOpenMemHandle", "another machine",
                            "a sort piece's IPC handle reached a process on another machine than its sender's; "
                            f"{IPC_SWITCH}=0 in the workers' environment sends pieces through host memory")
        own = header["process"] == _PROCESS
        arrays = [_import(entry, own) for entry in header["arrays"]]
    else:
        arrays = [cp.asarray(np.frombuffer(frame, np.dtype(entry["dtype"]), entry["size"]))
                  for entry, frame in zip(header["arrays"], frames)]
    return DevicePiece(*arrays)


def device_dumps(piece: DevicePiece) -> tuple[dict, list]:
    """The serialization UCX comms try first (``distributed``'s "cuda" family): the arrays
    as device frames, which UCX moves device to device itself."""
    import cupy as cp

    arrays = [cp.ascontiguousarray(a) for a in piece.arrays]
    header = {"arrays": [_described(a) for a in arrays]}
    return header, [a.reshape(-1).view(cp.uint8) for a in arrays]


def device_loads(header: dict, frames: list) -> DevicePiece:
    """The piece :func:`device_dumps` wrote, from the device frames the comms received."""
    import cupy as cp

    arrays = []
    for entry, frame in zip(header["arrays"], frames):
        dtype = np.dtype(entry["dtype"])
        if hasattr(frame, "__cuda_array_interface__"):
            raw = cp.asarray(frame).reshape(-1).view(cp.uint8)
        else:   # an empty frame may come as host bytes
            raw = cp.asarray(np.frombuffer(frame, np.uint8))
        arrays.append(raw[:entry["size"] * dtype.itemsize].view(dtype))
    return DevicePiece(*arrays)


def _register() -> None:
    """Registers :func:`dumps` and :func:`loads` with ``distributed`` and the piece's size
    with Dask's memory accounting, where they are installed."""
    try:
        from dask.sizeof import sizeof
    except ImportError:
        return
    sizeof.register(DevicePiece)(lambda piece: piece.nbytes)
    try:
        from distributed.protocol import dask_deserialize, dask_serialize
    except ImportError:
        return
    dask_serialize.register(DevicePiece)(dumps)
    dask_deserialize.register(DevicePiece)(loads)
    try:
        from distributed.protocol.cuda import cuda_deserialize, cuda_serialize
    except ImportError:
        return
    cuda_serialize.register(DevicePiece)(device_dumps)
    cuda_deserialize.register(DevicePiece)(device_loads)


_register()
