"""Element types made with numba's extension API, and the established interface's
``methods=`` that come with them.

Users of the established cooperative interface reduce, scan, sort and exchange their own
value types: a numba ``types.Type`` with a ``StructModel`` data model, a typer and a
lowering (not a gpu_struct), handed to a factory as ``dtype`` with
``methods={"construct": f, "assign": g}``. Here such a type is a :class:`ValueType`
whose ``dtype`` is a struct of the data model's layout (C++ stores and copies its values
as that struct) and whose ``numba`` is the type itself (the kernel's items, the
primitive's device function and the Python operators use it).

Its values are plain data (a data model is its fields), so C++ copies their bytes: the
``construct`` and ``assign`` hooks are checked and accepted, not called. An operator of
such a type is ``op(a, b) -> T`` or, as that interface writes it, ``op(result_ptr, a_ptr,
b_ptr)`` storing ``result_ptr[0]``.

Example::

    block_reduce = coop.block.make_reduce(complex_type, 128, add_complex,
                                          methods={"construct": construct, "assign": assign})
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from cuprims._value_types import ValueType, value_type
from cuprims.errors import ArgumentError

_METHOD_NAMES = ("construct", "assign")
_cache: dict[Any, ValueType] = {}


def check_methods(methods: Any) -> None:
    """``methods`` is None or a dict of callables under "construct" and "assign"."""
    if methods is None:
        return
    expected = 'None or {"construct": f, "assign": g} (Python functions)'
    if not isinstance(methods, dict) or set(methods) - set(_METHOD_NAMES):
        raise ArgumentError("methods", expected, methods)
    for name, fn in methods.items():
        if not callable(fn):
            raise ArgumentError("methods", f"{expected}: {name!r} is not callable", fn)


def is_extension_type(dtype: Any) -> bool:
    """Whether ``dtype`` is a numba type other than a number, a bool or a record."""
    from numba.core import types

    return (isinstance(dtype, types.Type)
            and not isinstance(dtype, (types.Number, types.Boolean, types.Record)))


def extension_value_type(nbtype: Any, argument: str = "dtype") -> ValueType:
    """The :class:`ValueType` of a numba extension type with a ``StructModel``."""
    vt = _cache.get(nbtype)
    if vt is not None:
        return vt
    from numba.cuda.descriptor import cuda_target

    context = cuda_target.target_context
    dt = _layout(nbtype, context, argument)
    data = context.get_data_type(nbtype)
    size, alignment = context.get_abi_sizeof(data), context.get_abi_alignment(data)
    if (dt.itemsize, dt.alignment) != (size, alignment):
        raise ArgumentError(argument, "an extension type whose fields numpy can lay out as numba does", nbtype)
    struct = value_type(dt, argument=argument)
    kind = type(nbtype)
    digest = hashlib.sha256(f"{kind.__module__}.{kind.__qualname__}:{nbtype}:{struct.code}".encode()).hexdigest()
    vt = ValueType(code=f"ext:{digest[:16]}", dtype=dt, cpp=struct.cpp, size=size, alignment=alignment,
                   numba=nbtype)
    if len(_cache) >= 1024:
        _cache.clear()
    _cache[nbtype] = vt
    return vt


def _layout(nbtype: Any, context: Any, argument: str) -> np.dtype:
    """The numpy struct with the fields of ``nbtype``'s data model, in order, aligned as C."""
    from numba.core import types
    from numba.cuda.datamodel import models
    from numba.cuda.np.numpy_support import as_dtype

    model = context.data_model_manager.lookup(nbtype)
    if not isinstance(model, models.StructModel) or not model._fields:
        raise ArgumentError(argument, "a numba type with a StructModel data model of one field or more "
                            "(a numba extension type), or a number, bool or gpu_struct", nbtype)
    formats = []
    for name, member in zip(model._fields, model._members):
        if isinstance(member, (types.Number, types.Boolean)):
            formats.append(as_dtype(member))
        elif is_extension_type(member):
            formats.append(_layout(member, context, argument))
        else:
            raise ArgumentError(argument, "an extension type whose fields are numbers, bools or extension types",
                                f"field {name!r} of {member}")
    return np.dtype({"names": list(model._fields), "formats": formats}, align=True)
