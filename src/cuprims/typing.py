"""The types of cuprims' public arguments, for annotations and type checkers.

cuprims reads device arrays, streams and operators from any library through protocols
(the CUDA Array Interface, DLPack, ``__cuda_stream__``) rather than through one array
class, so its functions are annotated with the protocols below and with aliases built
from them::

    import cuprims
    from cuprims.typing import ArrayOrIterator, StreamLike

    def total(x: ArrayOrIterator, out: ArrayOrIterator, n: int, stream: StreamLike | None = None) -> None:
        cuprims.reduce_into(d_in=x, d_out=out, num_items=n, op=cuprims.OpKind.PLUS, stream=stream)

The argument kinds, and the names that describe them:

* a device array (:data:`DeviceArrayLike`): a CuPy array, a PyTorch CUDA tensor, a numba
  device array, or any object with ``__cuda_array_interface__`` or ``__dlpack__``;
* while building ahead of time (``compute_capability=``), a :class:`~cuprims.ProxyArray`
  stands for one (:data:`ArrayOrProxy`);
* where an algorithm reads or writes items, an iterator may stand for an array
  (:data:`IteratorLike`, :data:`ArrayOrIterator`, :data:`ArrayIteratorOrProxy`);
* a host value (:data:`HostValue`; :data:`HostValueOrProxy` with a
  :class:`~cuprims.ProxyValue`), a stream (:data:`StreamLike`), an operator
  (:data:`OperatorLike`) and a target (:data:`ComputeCapabilityLike`).

The protocols are structural: any object with the attribute satisfies them, for a type
checker and for ``isinstance``. The runtime checks more (a stream's attribute is read
from the library that made it; an array must be on the device, contiguous, of a
supported dtype) and names the argument when something is off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Protocol, Tuple, Union, runtime_checkable

import numpy as np

from cuprims.enums import Determinism, SortOrder
from cuprims.struct import StructBase

if TYPE_CHECKING:
    from typing_extensions import TypeAlias

    from cuprims._runtime.proxy import ProxyArray, ProxyValue
    from cuprims.iterators.base import IteratorBase
    from cuprims.op import OpKind, RawOp
    from cuprims.types import TypeDescriptor

__all__ = [
    "SupportsCudaArrayInterface", "SupportsDLPack", "SupportsCudaStream", "SupportsStreamPointer",
    "SupportsCudaStreamAttribute", "DeviceArrayLike", "ArrayOrProxy", "IteratorLike", "ArrayOrIterator",
    "ArrayIteratorOrProxy", "HostValue", "HostValueOrProxy", "InitValue", "StructFields", "StreamLike",
    "OperatorLike", "ComputeCapabilityLike", "DeterminismLike", "SortOrderLike", "DTypeLike",
]


@runtime_checkable
class SupportsCudaArrayInterface(Protocol):
    """A device array exposing the CUDA Array Interface: CuPy arrays, numba device
    arrays, PyTorch CUDA tensors."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...


@runtime_checkable
class SupportsDLPack(Protocol):
    """A device array exporting DLPack (``__dlpack__()`` gives a capsule of a CUDA device
    buffer): JAX arrays, and the array libraries of the array API standard."""

    def __dlpack__(self) -> Any: ...


@runtime_checkable
class SupportsCudaStream(Protocol):
    """A stream exposing the CUDA stream protocol: ``__cuda_stream__()`` returns
    ``(version, handle)`` (cuda.core and numba-cuda streams)."""

    def __cuda_stream__(self) -> tuple[int, int]: ...


@runtime_checkable
class SupportsStreamPointer(Protocol):
    """A CuPy stream: its ``ptr`` is the ``CUstream`` handle."""

    @property
    def ptr(self) -> int: ...


@runtime_checkable
class SupportsCudaStreamAttribute(Protocol):
    """A PyTorch stream: its ``cuda_stream`` is the ``CUstream`` handle."""

    @property
    def cuda_stream(self) -> int: ...


DeviceArrayLike: TypeAlias = Union[SupportsCudaArrayInterface, SupportsDLPack]
"""A contiguous device array of any library (read through either protocol)."""

ArrayOrProxy: TypeAlias = Union[SupportsCudaArrayInterface, SupportsDLPack, "ProxyArray"]
"""What a ``make_*`` function takes for an array (a device array, or a
:class:`~cuprims.ProxyArray` of its dtype when building ahead of time)."""

IteratorLike: TypeAlias = "IteratorBase"
"""A cuprims iterator (:class:`~cuprims.CountingIterator`, :class:`~cuprims.ZipIterator`...).
Iterators are cuprims' own classes, not a protocol: each one generates the C++ the
kernel reads it with."""

ArrayOrIterator: TypeAlias = Union[SupportsCudaArrayInterface, SupportsDLPack, "IteratorBase"]
"""What a call takes where an algorithm reads or writes items (a device array, or an
iterator: an input iterator where it reads, an output iterator where it writes)."""

ArrayIteratorOrProxy: TypeAlias = Union[SupportsCudaArrayInterface, SupportsDLPack, "IteratorBase", "ProxyArray"]
"""What a ``make_*`` function takes where the algorithm reads or writes items (an
array, an iterator, or a :class:`~cuprims.ProxyArray` when building ahead of time)."""

StructFields: TypeAlias = Union[Dict[str, Any], Tuple[Any, ...], List[Any]]
"""A struct value given by its field values: a dict keyed by field name, or a tuple or
list in field order (a nested struct in any of these forms again). It is read as the
struct type the algorithm computes in."""

HostValue: TypeAlias = Union[np.generic, np.ndarray, StructBase, bool, int, float, complex, StructFields]
"""A value on the host, such as an initial value (a numpy scalar or one-element array,
a :func:`~cuprims.gpu_struct` value or its field values, or a Python number), converted
to the type the algorithm computes in by numpy's ``same_kind`` rule."""

HostValueOrProxy: TypeAlias = Union[np.generic, np.ndarray, StructBase, bool, int, float, complex, StructFields,
                                    "ProxyValue"]
"""A host value, or a :class:`~cuprims.ProxyValue` of its dtype when building ahead of time."""

InitValue: TypeAlias = Union[np.generic, np.ndarray, StructBase, bool, int, float, complex, StructFields,
                             "ProxyValue", SupportsCudaArrayInterface, SupportsDLPack, "ProxyArray"]
"""A scan's initial value, a host value (or :class:`~cuprims.ProxyValue`) or a one-element
device array (or :class:`~cuprims.ProxyArray`) that the kernel reads when it runs."""

StreamLike: TypeAlias = Union[SupportsCudaStream, SupportsStreamPointer, SupportsCudaStreamAttribute, int]
"""A CUDA stream (an object with ``__cuda_stream__``, a CuPy or PyTorch stream), or a raw
``CUstream`` handle as an int; 0 and ``stream=None`` are the legacy default stream."""

OperatorLike: TypeAlias = Union[Callable[..., Any], "OpKind", "RawOp", str]
"""An operator, a Python callable (compiled by numba-cuda, or straight into the kernel
when it is one small expression), an :class:`~cuprims.OpKind` or the name of one
(``"plus"``), or a :class:`~cuprims.RawOp` of LTO-IR."""

ComputeCapabilityLike: TypeAlias = Union[int, str, Tuple[int, int], List[Union[int, str, Tuple[int, int]]]]
"""Targets to build for ahead of time, as ``90``, ``(9, 0)``, ``"9.0"`` or ``"sm_90"``, or a list of them."""

DeterminismLike: TypeAlias = Union[Determinism, str, int]
"""A :class:`~cuprims.Determinism` value, its name (``"gpu_to_gpu"``) or its number."""

SortOrderLike: TypeAlias = Union[SortOrder, str, int]
"""A :class:`~cuprims.SortOrder` value, its name (``"descending"``) or its number."""

DTypeLike: TypeAlias = Union[np.dtype, type, str, "TypeDescriptor"]
"""A dtype, as a numpy dtype, a scalar type (``np.float32``), a type object of
:mod:`cuprims.types` (``types.float32``, a ``types.struct``), a :func:`~cuprims.gpu_struct`
class or a dtype's name (``"float32"``)."""


def __dir__() -> list[str]:
    return sorted(__all__)
