"""Placeholders for building ahead of time, with no GPU and no data."""

from __future__ import annotations

from typing import Any

import numpy as np

from cuprims._value_types import value_type
from cuprims.typing import DTypeLike


class _Proxy:
    def __init__(self, dtype: DTypeLike):
        self._cuprims_proxy_dtype = value_type(dtype, argument="dtype").dtype

    @property
    def dtype(self) -> np.dtype:
        return self._cuprims_proxy_dtype

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dtype})"


class ProxyArray(_Proxy):
    """Stands for a device array of ``dtype`` when building with ``compute_capability=``.

    ``ndim`` matters only for an array an operator captures (a closure variable, global
    or default argument): the build is made for captured arrays of that many dimensions.

    Example::

        import numpy as np, cuprims
        reducer = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32),
                                           d_out=cuprims.ProxyArray(np.float32),
                                           op=cuprims.OpKind.PLUS,
                                           h_init=cuprims.ProxyValue(np.float32),
                                           compute_capability=90)
    """

    def __init__(self, dtype: DTypeLike, ndim: int = 1):
        super().__init__(dtype)
        if not isinstance(ndim, int) or isinstance(ndim, bool) or ndim < 0:
            from cuprims.errors import ArgumentError

            raise ArgumentError("ndim", "a number of dimensions >= 0", ndim)
        self.ndim = ndim

    def __repr__(self) -> str:
        return f"ProxyArray({self.dtype})" if self.ndim == 1 else f"ProxyArray({self.dtype}, ndim={self.ndim})"


class ProxyValue(_Proxy):
    """Stands for a host value (such as ``h_init``) of ``dtype`` when building ahead of time.

    Example::

        cuprims.make_exclusive_scan(d_in=cuprims.ProxyArray(np.int32), d_out=cuprims.ProxyArray(np.int32),
                                    op=cuprims.OpKind.PLUS, init_value=cuprims.ProxyValue(np.int32),
                                    compute_capability=90)
    """
