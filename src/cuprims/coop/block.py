"""Block-wide cooperative primitives (``cuprims.coop.block``): two-phase factories.

Each factory builds its CUB provider on the host (for :func:`cuprims.coop.target`'s
architecture, else the current device's) and returns a :class:`~._numba.Primitive` to
call inside a ``@cuda.jit(link=prim.files)`` kernel launched with ``threads_per_block``
threads. Every thread of the block must call it. A reduction's result is valid in
thread 0 only (as in CUB). ``temp_storage=`` (a ``uint8`` shared array of at least
``prim.temp_storage_bytes``) replaces the primitive's own shared memory; without it, the
provider's storage is reused by later calls of the same primitive, after a barrier the
provider issues itself.

Example::

    block_sum = coop.block.make_sum(numba.int32, 128)

    @cuda.jit(link=block_sum.files)
    def kernel(x, out):
        s = block_sum(x[cuda.threadIdx.x])
        if cuda.threadIdx.x == 0:
            out[0] = s
"""

from __future__ import annotations

from typing import Any

from ..errors import ArgumentError
from ..op import OpKind, op_spec
from ._block_data import (BlockExchangeType, make_exchange, make_merge_sort_keys, make_radix_sort_keys,
                          make_radix_sort_keys_descending)
from ._block_data import make_merge_sort_pairs, make_radix_sort_pairs, make_radix_sort_pairs_descending
from ._factory import (array_in_value_out, arrays_in_out, combiner, dispatch, entry_table, make_primitive,
                       no_methods, value_bytes, value_in_value_out)
from ._spec import (LOAD_ALGORITHMS, REDUCE_ALGORITHMS, SCAN_ALGORITHMS, STORE_ALGORITHMS, ProviderSpec,
                    algorithm_of, block_dims, element_type, items_count)

__all__ = ["make_load", "make_store", "make_reduce", "make_sum", "make_scan", "make_exclusive_sum",
           "make_inclusive_sum", "make_exclusive_scan", "make_inclusive_scan", "make_exchange", "BlockExchangeType",
           "make_merge_sort_keys", "make_radix_sort_keys", "make_radix_sort_keys_descending"]
__all__ += ["make_merge_sort_pairs", "make_radix_sort_pairs", "make_radix_sort_pairs_descending"]


def make_load(dtype: Any, threads_per_block: Any, items_per_thread: int = 1, algorithm: str = "direct") -> Any:
    """``load(src, items, num_valid=-1, oob_default=0, temp_storage=None)``: the block's
    tile from ``src`` (an array starting at the tile; contiguous) into each thread's
    ``items`` (a local array of ``items_per_thread``). With ``num_valid >= 0`` only the
    tile's first ``num_valid`` items are read and the rest are ``oob_default``.

    Example::

        load = coop.block.make_load(numba.float32, 128, 4)
        # in the kernel: load(x[cuda.blockIdx.x * 512:], items)
    """
    spec = ProviderSpec("load", element_type(dtype), block_dims(threads_per_block), items_count(items_per_thread),
                        algorithm_of(LOAD_ALGORITHMS, algorithm))
    source = ("def prim(src, items, num_valid=-1, oob_default=0, temp_storage=None):\n"
              "    oob = cuda.local.array(1, T)\n    oob[0] = oob_default\n"
              + _block_dispatch("__addr(src), __addr(items)", "i32(num_valid), __addr(oob)"))
    return make_primitive("block.load", spec, None, entry_table(True, ("ptr", "ptr"), ("int", "ptr")), source)


def make_store(dtype: Any, threads_per_block: Any, items_per_thread: int = 1, algorithm: str = "direct") -> Any:
    """``store(dst, items, num_valid=-1, temp_storage=None)``: each thread's ``items`` into
    the block's tile at ``dst`` (its first ``num_valid`` items only, when given).

    Example::

        store = coop.block.make_store(numba.float32, 128, 4)
        # in the kernel: store(y[cuda.blockIdx.x * 512:], items)
    """
    spec = ProviderSpec("store", element_type(dtype), block_dims(threads_per_block),
                        items_count(items_per_thread), algorithm_of(STORE_ALGORITHMS, algorithm))
    source = ("def prim(dst, items, num_valid=-1, temp_storage=None):\n"
              + _block_dispatch("__addr(dst), __addr(items)", "i32(num_valid)"))
    return make_primitive("block.store", spec, None, entry_table(True, ("ptr", "ptr")), source)


def _block_dispatch(args: str, valid: str) -> str:
    return dispatch("ext", args, valid)


def make_reduce(dtype: Any, threads_per_block: Any, binary_op: Any, items_per_thread: int = 1,
                algorithm: str = "warp_reductions", methods: Any = None) -> Any:
    """``reduce(item, num_valid=-1, temp_storage=None)`` (one item per thread) or
    ``reduce(items, temp_storage=None)`` (a local array): the block's reduction by
    ``binary_op`` (an OpKind, '+', 'min', 'max'..., or a Python function), valid in thread 0.

    Example::

        block_max = coop.block.make_reduce(numba.float32, 128, lambda a, b: max(a, b))
    """
    no_methods(methods)
    vt = element_type(dtype)
    spec = ProviderSpec("reduce", vt, block_dims(threads_per_block), items_count(items_per_thread),
                        algorithm_of(REDUCE_ALGORITHMS, algorithm), combiner(binary_op, vt, "binary_op"))
    return _reduction("block.reduce", spec, binary_op)


def make_sum(dtype: Any, threads_per_block: Any, items_per_thread: int = 1, algorithm: str = "warp_reductions",
             methods: Any = None) -> Any:
    """As :func:`make_reduce` with ``+`` (CUB's ``Sum``).

    Example::

        block_sum = coop.block.make_sum(numba.int32, (32, 4), items_per_thread=4)
    """
    no_methods(methods)
    spec = ProviderSpec("reduce", element_type(dtype), block_dims(threads_per_block),
                        items_count(items_per_thread), algorithm_of(REDUCE_ALGORITHMS, algorithm),
                        op_spec(OpKind.PLUS))
    return _reduction("block.sum", spec, None)


def _reduction(name: str, spec: ProviderSpec, op: Any) -> Any:
    one = spec.items == 1
    source = value_in_value_out(True) if one else array_in_value_out()
    return make_primitive(name, spec, op, entry_table(one, ("ptr", "ptr")), source)


def make_scan(dtype: Any, threads_per_block: Any, items_per_thread: int, initial_value: Any = None,
              mode: str = "exclusive", scan_op: Any = "+", block_prefix_callback_op: Any = None,
              algorithm: str = "raking", methods: Any = None) -> Any:
    """A block-wide scan. One item per thread: ``scan(item, temp_storage=None) -> value``;
    more: ``scan(items_in, items_out, temp_storage=None)`` (the same array may be both).

    ``mode`` is "exclusive" or "inclusive"; ``scan_op`` an OpKind, '+', 'min'... or a
    Python function; ``initial_value`` seeds the scan (an exclusive scan by another
    operator than '+' without one leaves thread 0's first output undefined, as in CUB).

    Example::

        scan = coop.block.make_scan(numba.int32, 128, 8, mode="inclusive")
    """
    no_methods(methods)
    if block_prefix_callback_op is not None:
        raise NotImplementedError("block_prefix_callback_op is not supported yet")
    if mode not in ("exclusive", "inclusive"):
        raise ArgumentError("mode", "'exclusive' or 'inclusive'", mode)
    vt = element_type(dtype)
    op = combiner(scan_op, vt, "scan_op")
    init = None if initial_value is None else value_bytes(initial_value, vt, "initial_value")
    spec = ProviderSpec("scan", vt, block_dims(threads_per_block), items_count(items_per_thread),
                        algorithm_of(SCAN_ALGORITHMS, algorithm), op, mode=mode, init=init)
    source = value_in_value_out(False) if spec.items == 1 else arrays_in_out()
    return make_primitive(f"block.{mode}_scan", spec, scan_op if op.kind == "python" else None,
                          entry_table(False, ("ptr", "ptr")), source)


def make_exclusive_sum(dtype: Any, threads_per_block: Any, items_per_thread: int, prefix_op: Any = None,
                       algorithm: str = "raking", methods: Any = None) -> Any:
    """Exclusive prefix sum (thread 0's first output is 0). Example::

        xsum = coop.block.make_exclusive_sum(numba.int32, 128, 4)
    """
    return make_scan(dtype, threads_per_block, items_per_thread, None, "exclusive", "+",
                     prefix_op, algorithm, methods)


def make_inclusive_sum(dtype: Any, threads_per_block: Any, items_per_thread: int, prefix_op: Any = None,
                       algorithm: str = "raking", methods: Any = None) -> Any:
    """Inclusive prefix sum. Example::

        isum = coop.block.make_inclusive_sum(numba.int32, 128, 8)
    """
    return make_scan(dtype, threads_per_block, items_per_thread, None, "inclusive", "+",
                     prefix_op, algorithm, methods)


def make_exclusive_scan(dtype: Any, threads_per_block: Any, scan_op: Any, items_per_thread: int,
                        initial_value: Any = None, prefix_op: Any = None, algorithm: str = "raking",
                        methods: Any = None) -> Any:
    """Exclusive scan by ``scan_op``. Example::

        xmax = coop.block.make_exclusive_scan(numba.int32, 128, "max", 4, initial_value=-1)
    """
    return make_scan(dtype, threads_per_block, items_per_thread, initial_value, "exclusive", scan_op,
                     prefix_op, algorithm, methods)


def make_inclusive_scan(dtype: Any, threads_per_block: Any, scan_op: Any, items_per_thread: int,
                        initial_value: Any = None, prefix_op: Any = None, algorithm: str = "raking",
                        methods: Any = None) -> Any:
    """Inclusive scan by ``scan_op``. Example::

        imin = coop.block.make_inclusive_scan(numba.float32, 128, "min", 2)
    """
    return make_scan(dtype, threads_per_block, items_per_thread, initial_value, "inclusive", scan_op,
                     prefix_op, algorithm, methods)
