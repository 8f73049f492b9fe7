"""Initial values given to algorithms: host values (their dtype, and whether it can stand
for a value of the type an algorithm computes in) and one-element device arrays."""

from __future__ import annotations

from typing import Any

import numpy as np

from cuprims._runtime import arrays as _arrays
from cuprims._runtime.proxy import ProxyArray, ProxyValue
from cuprims._value_types import ValueType, host_bytes, same_layout, shown_dtype, value_type
from cuprims.errors import ArgumentError, ArgumentTypeError
from cuprims.struct_values import is_field_values

_HOST_SCALARS = (bool, int, float, complex, np.generic, np.ndarray)


def host_value_dtype(value: Any, argument: str = "h_init") -> np.dtype | None:
    """dtype of a host value: a ProxyValue, a gpu_struct value, a numpy scalar or array, or
    a Python number (None for None)."""
    if value is None:
        return None
    proxy = getattr(value, "_cuprims_proxy_dtype", None)
    if proxy is not None:
        return proxy
    struct_dtype = getattr(type(value), "_cuprims_dtype", None)
    if struct_dtype is not None:
        return struct_dtype
    dt = getattr(value, "dtype", None)
    if isinstance(dt, np.dtype):
        return dt
    try:
        return np.asarray(value).dtype
    except (TypeError, ValueError) as exc:   # a ragged tuple, say
        raise ArgumentError(argument, "a host value: a number, a numpy scalar or array, a gpu_struct value",
                            value) from exc


def checked_host_value(value: Any, accum: ValueType, argument: str) -> np.dtype | None:
    """The dtype of host value ``value`` (None for None), checked as a value of ``accum``:
    for a struct, a dict or tuple of its field values is converted to it now (the check
    that it can be), and a struct value of its layout stands for it."""
    if value is None:
        return None
    if accum.is_struct and is_field_values(value):
        host_bytes(value, accum, argument=argument)
        return accum.dtype
    dtype = host_value_dtype(value, argument)
    if dtype is not None:
        check_host_value(dtype, accum, argument)
    return dtype


def check_host_value(dtype: np.dtype, accum: ValueType, argument: str) -> None:
    """Raise ArgumentError unless a host value of ``dtype`` can be converted to ``accum``."""
    if accum.is_struct or dtype.names is not None:
        # the output's own struct type, or one of its layout: the same bytes (not merely its size)
        if dtype != accum.dtype and not (accum.is_struct and dtype.names is not None
                                         and same_layout(dtype, accum.dtype)):
            raise ArgumentError(argument, f"a value of the output's type {shown_dtype(accum.dtype)} (or of a "
                                "struct of its layout; a dict or tuple of its field values)", shown_dtype(dtype))
        return
    if dtype.kind not in "biufc":
        raise ArgumentError(argument, f"a value convertible to {accum.dtype}", dtype)
    if dtype.kind == "c" and accum.kind != "c":
        raise ArgumentError(argument, f"a real value for a {accum.dtype} output", dtype)
    if not np.can_cast(dtype, accum.dtype, "same_kind"):
        raise ArgumentError(argument, f"a value convertible to {accum.dtype} (numpy's same_kind rule)", dtype)


def init_value_kind(value: Any) -> tuple[str, np.dtype | None]:
    """("none" | "value" | "device", dtype) of an initial value: nothing, a host value, or a
    one-element device array read when the kernel runs."""
    if value is None:
        return "none", None
    if isinstance(value, ProxyArray):
        return "device", value.dtype
    if isinstance(value, ProxyValue):
        return "value", value.dtype
    struct_dtype = getattr(type(value), "_cuprims_dtype", None)
    if struct_dtype is not None:
        return "value", struct_dtype
    if is_field_values(value):   # a struct's field values: their type is the output's
        return "value", None
    if isinstance(value, _HOST_SCALARS):
        dt = getattr(value, "dtype", None)
        return "value", dt if isinstance(dt, np.dtype) else np.asarray(value).dtype
    try:
        return "device", _arrays.array_dtype(value, "init_value")
    except ArgumentError:
        raise ArgumentTypeError("init_value", "a host value (numpy scalar or array, gpu_struct value), a "
                                "one-element device array, or None", value) from None


def check_device_value(dtype: np.dtype, accum: ValueType, argument: str) -> None:
    """A device-held value is read as ``accum`` itself: no conversion happens on the device."""
    if dtype != accum.dtype and not (accum.is_struct and dtype.names is not None and same_layout(dtype, accum.dtype)):
        raise ArgumentError(argument, f"a one-element device array of the output's type {accum.dtype}",
                            f"a device array of {dtype}")


def device_value_pointer(x: Any, accum: ValueType, argument: str) -> int:
    """The address of the one-element device array ``x`` holding an ``accum`` value."""
    ptr, dt, size = _arrays.array_info(x, argument)
    if dt != accum.dtype:
        check_device_value(dt, accum, argument)
    if size != 1:
        raise ArgumentError(argument, "a device array of exactly one element", f"{size} elements")
    if ptr & (accum.alignment - 1):
        raise ArgumentError(argument, f"data aligned to {accum.alignment} bytes", hex(ptr))
    return ptr


def scalar_init_type(accum: ValueType, has_host_value: bool) -> type[np.generic] | None:
    """The numpy scalar type whose values pass as initial values without conversion."""
    return accum.dtype.type if has_host_value and not accum.is_struct else None


def described_init(init_value: Any, accum: ValueType, inclusive: bool, argument: str = "init_value") -> str:
    """The kind ("none", "value" or "device") of a scan's initial value, checked as a value
    of ``accum``; an exclusive scan needs one."""
    kind, dtype = init_value_kind(init_value)
    if kind == "none":
        if not inclusive:
            raise ArgumentError(argument, "an initial value (an exclusive scan's first output); a host value "
                                "or a one-element device array", None)
    elif kind == "value":
        checked_host_value(init_value, accum, argument)
    elif dtype is not None:   # a one-element device array of this dtype
        check_device_value(dtype, accum, argument)
    return kind


def init_argument(kind: str, accum: ValueType, scalar_type: type[np.generic] | None, init_value: Any,
                  argument: str = "init_value") -> bytes | int:
    """A kernel's init argument for an initial value of ``kind`` (what the algorithm was built
    with): the value's bytes, a device array's address, or a placeholder byte for none.
    ``scalar_type`` (:func:`scalar_init_type`) is the numpy scalar type taken as it is."""
    if kind == "value":
        if type(init_value) is scalar_type:  # the common case: a numpy scalar of the output type
            return init_value.tobytes()
        if (type(init_value) is np.ndarray and init_value.size == 1 and init_value.dtype == accum.dtype
                and scalar_type is not None):  # cuda.compute's: a 1-element array of the type
            return init_value.tobytes()
        if init_value is None:
            raise ArgumentError(argument, f"a {accum.dtype} value (this was built with one)", None)
        if init_value_kind(init_value)[0] != "value":
            raise ArgumentError(argument, "a host value (this was built with one)", init_value)
        return host_bytes(init_value, accum, argument=argument)
    if kind == "device":
        if init_value is None:
            raise ArgumentError(argument, "a one-element device array (this was built with one)", None)
        if init_value_kind(init_value)[0] != "device":
            raise ArgumentTypeError(argument, "a one-element device array (this was built with one)", init_value)
        return device_value_pointer(init_value, accum, argument)
    if init_value is not None:
        raise ArgumentError(argument, "None (this was built without an initial value)", init_value)
    return b"\0"


def init_param(kind: str, accum: ValueType) -> int | str:
    """The kernel parameter an initial value of ``kind`` takes: a placeholder byte for none,
    the value's bytes, or a device pointer."""
    params: dict[str, int | str] = {"none": 1, "value": accum.size, "device": "ptr"}
    return params[kind]
