"""Warp-wide cooperative primitives (``cuprims.coop.warp``): two-phase factories.

Every thread of a logical warp (``threads_in_warp`` consecutive threads in the block's
linear order) must call the primitive; the result is valid in the warp's first lane.
Without ``temp_storage=`` each logical warp of the block uses its own slot of the
provider's shared memory.

Example::

    warp_sum = coop.warp.make_sum(numba.float32)

    @cuda.jit(link=warp_sum.files)
    def kernel(x, out):
        s = warp_sum(x[cuda.threadIdx.x])
        if cuda.threadIdx.x % 32 == 0:
            out[cuda.threadIdx.x // 32] = s
"""

from __future__ import annotations

from typing import Any

from ..errors import ArgumentError
from ..op import OpKind, op_spec
from ._factory import combiner, entry_table, make_primitive, no_methods, value_in_value_out
from ._spec import ProviderSpec, element_type

__all__ = ["make_reduce", "make_sum", "make_exclusive_sum"]


def _warp_size(threads_in_warp: Any) -> int:
    # CUB lays other sizes out per hardware warp (12 lanes: 12 + 12 + 8 in each warp of 32),
    # which neither our per-logical-warp storage nor the docs promise yet: powers of two only.
    if (not isinstance(threads_in_warp, int) or isinstance(threads_in_warp, bool)
            or threads_in_warp not in (1, 2, 4, 8, 16, 32)):
        raise ArgumentError("threads_in_warp", "1, 2, 4, 8, 16 or 32", threads_in_warp)
    return threads_in_warp


def make_reduce(dtype: Any, binary_op: Any, threads_in_warp: int = 32, methods: Any = None) -> Any:
    """``reduce(item, num_valid=-1, temp_storage=None) -> value``: the logical warp's
    reduction by ``binary_op``, valid in its first lane; ``num_valid`` counts its lanes.

    Example::

        warp_max = coop.warp.make_reduce(numba.int64, "max", threads_in_warp=16)
    """
    no_methods(methods)
    vt = element_type(dtype)
    spec = ProviderSpec("warp_reduce", vt, (_warp_size(threads_in_warp), 1, 1), 1, "",
                        combiner(binary_op, vt, "binary_op"))
    return make_primitive("warp.reduce", spec, binary_op if spec.op.kind == "python" else None,
                          entry_table(True, ("ptr", "ptr")), value_in_value_out(True))


def make_sum(dtype: Any, threads_in_warp: int = 32) -> Any:
    """As :func:`make_reduce` with ``+`` (CUB's ``WarpReduce::Sum``). Example::

        warp_sum = coop.warp.make_sum(numba.float32)
    """
    spec = ProviderSpec("warp_reduce", element_type(dtype), (_warp_size(threads_in_warp), 1, 1), 1, "",
                        op_spec(OpKind.PLUS))
    return make_primitive("warp.sum", spec, None, entry_table(True, ("ptr", "ptr")), value_in_value_out(True))


def make_exclusive_sum(dtype: Any, threads_in_warp: int = 32) -> Any:
    """``exclusive_sum(item, temp_storage=None) -> value``: the sum of the items of the
    lanes before this one in its logical warp (0 in the first lane; CUB's
    ``WarpScan::ExclusiveSum``). Example::

        warp_xsum = coop.warp.make_exclusive_sum(numba.int32, threads_in_warp=16)
    """
    spec = ProviderSpec("warp_scan", element_type(dtype), (_warp_size(threads_in_warp), 1, 1), 1, "",
                        op_spec(OpKind.PLUS), mode="exclusive")
    return make_primitive("warp.exclusive_sum", spec, None, entry_table(False, ("ptr", "ptr")),
                          value_in_value_out(False))
