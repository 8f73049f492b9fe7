"""Placeholders for building ahead of time, with no GPU and no data."""

from __future__ import annotations

from typing import Any

import numpy as np

from .types import value_type


class _Proxy:
    def __init__(self, dtype: Any):
        self._cuprims_proxy_dtype = value_type(dtype, argument="dtype").dtype

    @property
    def dtype(self) -> np.dtype:
        return self._cuprims_proxy_dtype

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dtype})"


class ProxyArray(_Proxy):
    """Stands for a device array of ``dtype`` when building with ``compute_capability=``.

    Example::

        import numpy as np, cuprims
        reducer = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32),
                                           d_out=cuprims.ProxyArray(np.float32),
                                           op=cuprims.OpKind.PLUS,
                                           h_init=cuprims.ProxyValue(np.float32),
                                           compute_capability=90)
    """


class ProxyValue(_Proxy):
    """Stands for a host value (such as ``h_init``) of ``dtype`` when building ahead of time.

    Example::

        cuprims.make_exclusive_scan(d_in=cuprims.ProxyArray(np.int32), d_out=cuprims.ProxyArray(np.int32),
                                    op=cuprims.OpKind.PLUS, init_value=cuprims.ProxyValue(np.int32),
                                    compute_capability=90)
    """
