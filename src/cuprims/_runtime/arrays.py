"""Device arrays from any producer: CuPy, PyTorch, numba, ``__cuda_array_interface__``, DLPack.

``array_info(x)`` returns ``(device_pointer, dtype, size)``. The way to read an array is
chosen once per Python type and remembered, so the per-call cost is a dict lookup and
a few attribute reads (the CUDA Array Interface builds a dict on every access, which
costs microseconds on some producers; CuPy and PyTorch have cheaper direct paths).
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

from cuprims._runtime import devices
from cuprims._runtime.proxy import ProxyValue
from cuprims._value_types import same_layout
from cuprims.errors import ArgumentError, ArgumentTypeError

Info = tuple  # (ptr: int, dtype: np.dtype, size: int)

readers: dict[type, Callable[[Any, str], Info]] = {}  # type -> reader, filled on first sight
# Array types whose device pointer, dtype, size and contiguity cannot change for the life of
# an array (CuPy's ndarray: read-only attributes), filled as readers are chosen: what an
# algorithm object's memo of its last call may remember by identity. Not a torch tensor
# (``set_``/``resize_`` change its storage in place), nor any other producer (a CUDA Array
# Interface or DLPack object can answer differently each time).
fixed_types: set[type] = set()
devices.on_reset(readers.clear)
# In a process that sees several devices the registered reader also checks that the
# array is on the current device (cuprims._runtime.devices); with one device it is the plain one.


def _not_contiguous(name: str, x: Any) -> ArgumentError:
    return ArgumentError(name, "a contiguous device array", f"a non-contiguous {type(x).__name__}")


def _read_cupy(x: Any, name: str) -> Info:
    if not x.flags.c_contiguous:
        raise _not_contiguous(name, x)
    return x.data.ptr, x.dtype, x.size


def _read_cupy_fast(x: Any, name: str) -> Info:
    # CuPy's ndarray keeps its contiguity as a plain attribute; ``flags`` builds an object
    # per access (about 0.25 us, a tenth of a call's own host cost)
    if not x._c_contiguous:
        raise _not_contiguous(name, x)
    return x.data.ptr, x.dtype, x.size


_TORCH_DTYPES: dict[Any, np.dtype] = {}


def _torch_dtype(tdt: Any, name: str) -> np.dtype:
    try:
        return _TORCH_DTYPES[tdt]
    except KeyError:
        pass
    text = str(tdt).replace("torch.", "")
    try:
        dt = np.dtype({"bool": "bool"}.get(text, text))
    except TypeError:
        raise ArgumentError(name, "a tensor of a numpy-representable dtype", f"a torch tensor of {tdt}") from None
    _TORCH_DTYPES[tdt] = dt
    return dt


def _read_torch(x: Any, name: str) -> Info:
    if not x.is_cuda:
        raise ArgumentTypeError(name, "a CUDA tensor", f"a torch tensor on {x.device}")
    if not x.is_contiguous():
        raise _not_contiguous(name, x)
    return x.data_ptr(), _torch_dtype(x.dtype, name), x.numel()


def _dtype_from_descr(descr: Any, itemsize: int) -> np.dtype:
    """A structured dtype from an array-interface ``descr``, whose unnamed entries are padding."""
    names, formats, offsets, off = [], [], [], 0
    for entry in descr:
        name, fmt = entry[0], entry[1]
        if isinstance(fmt, list):
            inner = np.dtype(_dtype_from_descr(fmt, sum(np.dtype(_descr_format(e)).itemsize for e in fmt)))
        else:
            inner = np.dtype(fmt)
        if len(entry) > 2:
            inner = np.dtype((inner, entry[2]))
        if name:
            names.append(name)
            formats.append(inner)
            offsets.append(off)
        off += inner.itemsize
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": itemsize})


def _descr_format(entry: Any) -> Any:
    fmt = entry[1]
    if isinstance(fmt, list):
        fmt = _dtype_from_descr(fmt, sum(np.dtype(_descr_format(e)).itemsize for e in fmt))
    return (fmt, entry[2]) if len(entry) > 2 else fmt


def _read_cai(x: Any, name: str) -> Info:
    iface = x.__cuda_array_interface__
    shape = tuple(iface.get("shape", ()))
    descr = iface.get("descr")
    typestr = iface["typestr"]
    base = np.dtype(typestr)
    if descr and (len(descr) > 1 or descr[0][0]):
        dt = _dtype_from_descr(descr, base.itemsize)
    else:
        dt = base
        if dt.kind == "V":  # some producers (numba) export records as plain bytes: ask the array
            own = getattr(x, "dtype", None)
            if isinstance(own, np.dtype) and own.itemsize == dt.itemsize:
                dt = own
    size = 1
    for s in shape:
        size *= s
    strides = iface.get("strides")
    if strides is not None and size > 1:
        expected = dt.itemsize
        for extent, stride in zip(reversed(shape), reversed(strides)):
            if extent != 1 and stride != expected:
                raise _not_contiguous(name, x)
            expected *= extent
    ptr = iface["data"][0] or 0
    return ptr, dt, size


# --- DLPack (consumed through the C struct; no extra dependency) --------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor)))]

_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_set_name = ctypes.pythonapi.PyCapsule_SetName
_set_name.restype = ctypes.c_int
_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]

_DL_CODES = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}
_DL_CUDA_DEVICES = (2, 3, 13)  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged


def _read_dlpack(x: Any, name: str) -> Info:
    capsule = x.__dlpack__()
    managed = ctypes.cast(_get_pointer(capsule, b"dltensor"), ctypes.POINTER(_DLManagedTensor))
    try:
        t = managed.contents.dl_tensor
        if t.device.device_type not in _DL_CUDA_DEVICES:
            raise ArgumentTypeError(name, "a device array", f"a DLPack tensor on device type {t.device.device_type}")
        kind = _DL_CODES.get(t.dtype.code)
        if kind is None or t.dtype.lanes != 1:
            raise ArgumentError(name, "a tensor of a numpy-representable dtype", f"DLPack dtype code {t.dtype.code}")
        dt = np.dtype("bool") if kind == "b" else np.dtype(f"{kind}{t.dtype.bits // 8}")
        shape = [t.shape[i] for i in range(t.ndim)]
        size = 1
        for s in shape:
            size *= s
        if t.strides and size > 1:
            expected = 1
            for i in reversed(range(t.ndim)):
                if shape[i] != 1 and t.strides[i] != expected:
                    raise _not_contiguous(name, x)
                expected *= shape[i]
        ptr = (t.data or 0) + t.byte_offset
    finally:
        # We consumed the capsule: mark it used and release the producer's export record.
        # The memory itself stays owned by ``x``, which the caller keeps alive.
        _set_name(capsule, b"used_dltensor")
        deleter = managed.contents.deleter
        if deleter:
            deleter(managed)
    return ptr, dt, size


def _reader_for(tp: type, x: Any = None) -> Callable[[Any, str], Info] | None:
    if issubclass(tp, np.ndarray):
        return None  # host memory (numpy arrays also speak DLPack, for the CPU)
    mod = tp.__module__ or ""
    if mod.startswith("cupy") and tp.__name__ == "ndarray":
        return _read_cupy_fast if x is not None and isinstance(getattr(x, "_c_contiguous", None), bool) else _read_cupy
    if mod.startswith("torch") and hasattr(tp, "data_ptr"):
        return _read_torch
    if hasattr(tp, "__cuda_array_interface__"):
        return _read_cai
    if hasattr(tp, "__dlpack__"):
        return _read_dlpack
    if x is not None and hasattr(x, "__cuda_array_interface__"):  # set on the instance only
        return _read_cai
    return None


def _plain_reader(x: Any, name: str) -> Callable[[Any, str], Info]:
    reader = _reader_for(type(x), x)
    if reader is _read_cupy_fast or reader is _read_cupy:
        fixed_types.add(type(x))
    if reader is None:
        if isinstance(x, np.ndarray):
            raise ArgumentTypeError(name, "a device array (CuPy, PyTorch, numba, CUDA Array Interface "
                                    "or DLPack)", "a numpy array in host memory")
        raise ArgumentTypeError(name, "a device array (CuPy, PyTorch, numba, CUDA Array Interface "
                                "or DLPack)", x)
    return reader


def array_info(x: Any, name: str) -> Info:
    """(device pointer, numpy dtype, number of items) of device array ``x`` (on the
    current device, where the process sees several)."""
    tp = type(x)
    reader = readers.get(tp)
    if reader is None:
        reader = _plain_reader(x, name)
        if devices.several():
            reader = devices.checked_array_reader(reader)
        readers[tp] = reader
    return reader(x, name)


def array_dtype(x: Any, name: str) -> np.dtype:
    """dtype of device array ``x`` or of a ProxyArray placeholder, read without touching
    the device. Anything else (a host array, a numpy scalar, an iterator, a ProxyValue,
    which stands for a host value) raises ArgumentTypeError naming ``name``."""
    proxy = getattr(x, "_cuprims_proxy_dtype", None)
    if proxy is not None:
        if isinstance(x, ProxyValue):
            raise ArgumentTypeError(name, "a device array or a ProxyArray (a ProxyValue stands for a host value, "
                                    "not an array)", x)
        return proxy
    if isinstance(x, np.ndarray):
        raise ArgumentTypeError(name, "a device array (CuPy, PyTorch, numba, CUDA Array Interface or DLPack) "
                                "or a ProxyArray", "a numpy array in host memory")
    # a build-time read: the array may be on any device (nothing is launched with it here);
    # only a device-array protocol makes an array, not a dtype attribute (numpy scalars and
    # iterators have one too)
    reader = readers.get(type(x))
    reader = getattr(reader, "unchecked", reader) or _plain_reader(x, name)
    dt = getattr(x, "dtype", None)
    if isinstance(dt, np.dtype):  # cheaper than the reader (the CUDA Array Interface builds a dict)
        return dt
    return reader(x, name)[1]


def checked_array(x: Any, name: str, dtype: np.dtype, min_items: int, align_mask: int = 0,
                  count_name: str | None = "num_items") -> tuple[int, int]:
    """(device pointer, number of items) of ``x`` after checking it holds at least
    ``min_items`` items of ``dtype`` (the build's type) at an address its C++ type can be
    loaded from. An array of a struct of ``dtype``'s layout (the same field types at the
    same offsets) holds the same bytes, and passes."""
    reader = readers.get(type(x))
    ptr, dt, size = reader(x, name) if reader else array_info(x, name)
    if dt is not dtype and dt != dtype and not (dt.names is not None and dtype.names is not None
                                                and same_layout(dt, dtype)):
        raise ArgumentError(name, f"an array of {dtype} (as at build time)", f"an array of {dt}")
    if size < min_items:
        need = f"at least {count_name}={min_items} items" if count_name else f"at least {min_items} item(s)"
        raise ArgumentError(name, need, f"an array of {size}")
    if ptr & align_mask:
        raise ArgumentError(name, f"data aligned to {align_mask + 1} bytes (as its C++ type needs)", hex(ptr))
    return ptr, size


def checked_pointer(x: Any, name: str, dtype: np.dtype, min_items: int, align_mask: int = 0,
                    count_name: str | None = "num_items") -> int:
    """Device pointer of ``x``, checked as :func:`checked_array` does."""
    return checked_array(x, name, dtype, min_items, align_mask, count_name)[0]
