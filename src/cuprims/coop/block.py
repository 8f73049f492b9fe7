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

from cuprims.coop._block_data import (
    BlockExchangeType,
    make_exchange,
    make_merge_sort_keys,
    make_merge_sort_pairs,
    make_radix_sort_keys,
    make_radix_sort_keys_descending,
    make_radix_sort_pairs,
    make_radix_sort_pairs_descending,
)
from cuprims.coop._factory import (
    TOUCHED,
    PrefixCallback,
    array_in_value_out,
    arrays_in_out,
    combiner,
    dispatch,
    entry_table,
    make_primitive,
    no_methods,
    prefix_callback,
    value_bytes,
    value_in_value_out,
)
from cuprims.coop._spec import (
    LOAD_ALGORITHMS,
    REDUCE_ALGORITHMS,
    SCAN_ALGORITHMS,
    STORE_ALGORITHMS,
    ProviderSpec,
    algorithm_of,
    block_dims,
    element_type,
    items_count,
)
from cuprims.errors import ArgumentError
from cuprims.op import OpKind, op_spec

__all__ = ["make_load", "make_store", "make_reduce", "make_sum", "make_scan", "make_exclusive_sum",
           "make_inclusive_sum", "make_exclusive_scan", "make_inclusive_scan", "make_exchange", "BlockExchangeType",
           "make_merge_sort_keys", "make_radix_sort_keys", "make_radix_sort_keys_descending", "PrefixCallback"]
__all__ += ["make_merge_sort_pairs", "make_radix_sort_pairs", "make_radix_sort_pairs_descending"]


def __dir__() -> list[str]:
    """The public names only (the module's own imports and helpers are not for users)."""
    return sorted(__all__)


def make_load(dtype: Any, threads_per_block: Any, items_per_thread: int = 1, algorithm: str = "direct") -> Any:
    """``load(src, items, num_valid=-1, oob_default=None, temp_storage=None)``: the block's
    tile from ``src`` (an array starting at the tile; contiguous) into each thread's
    ``items`` (a local array of ``items_per_thread``). With ``num_valid >= 0`` only the
    tile's first ``num_valid`` items are read and the rest are ``oob_default`` (a value of
    the element type, a struct too; all bytes zero when not given). The kernel traps when
    ``src`` holds fewer than the items read (the tile, or ``num_valid`` of it) or is
    strided, or ``items`` is shorter than ``items_per_thread``.

    Example::

        load = coop.block.make_load(numba.float32, 128, 4)
        # in the kernel: load(x[cuda.blockIdx.x * 512:], items)
    """
    spec = ProviderSpec("load", element_type(dtype), block_dims(threads_per_block), items_count(items_per_thread),
                        algorithm_of(LOAD_ALGORITHMS, algorithm))
    # numba zero-fills a local array where it is made: oob_default left out is all zero bytes
    # (0 for numbers, a zeroed struct), and a struct load never types `oob[0] = 0`
    source = ("def prim(src, items, num_valid=-1, oob_default=None, temp_storage=None):\n" + TOUCHED
              + "    oob = cuda.local.array(1, T)\n    if oob_default is not None:\n        oob[0] = oob_default\n"
              + _block_dispatch("__span(src, n), __span(items, ITEMS)", "i32(n), __addr(oob)"))
    return make_primitive("block.load", spec, None, entry_table(True, ("ptr", "ptr"), ("int", "ptr")), source)


def make_store(dtype: Any, threads_per_block: Any, items_per_thread: int = 1, algorithm: str = "direct") -> Any:
    """``store(dst, items, num_valid=-1, temp_storage=None)``: each thread's ``items`` into
    the block's tile at ``dst`` (its first ``num_valid`` items only, when given); traps
    as :func:`make_load` does when ``dst`` cannot take them.

    Example::

        store = coop.block.make_store(numba.float32, 128, 4)
        # in the kernel: store(y[cuda.blockIdx.x * 512:], items)
    """
    spec = ProviderSpec("store", element_type(dtype), block_dims(threads_per_block),
                        items_count(items_per_thread), algorithm_of(STORE_ALGORITHMS, algorithm))
    source = ("def prim(dst, items, num_valid=-1, temp_storage=None):\n"
              + TOUCHED + _block_dispatch("__span(dst, n), __span(items, ITEMS)", "i32(n)"))
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

    ``block_prefix_callback_op`` (CUB's ``BlockPrefixCallbackOp``; ``prefix_op`` of the
    other scan factories) seeds each call with a prefix computed from the block's
    aggregate, to scan a long sequence tile after tile with a running total: a Python
    function ``prefix(state, block_aggregate) -> prefix`` (or a :class:`PrefixCallback`
    for a state of another type). The calls then take the state, a 1-D C-contiguous array
    the kernel owns (of the scan's dtype unless a PrefixCallback says otherwise; usually
    ``cuda.local.array(1, ...)``): ``scan(item, prefix_state, temp_storage=None) -> value``
    and ``scan(items_in, items_out, prefix_state, temp_storage=None)``. In each call:

    * the block's aggregate of this call's items is computed first (by ``scan_op``);
    * threads of the block's first warp call ``prefix(prefix_state, aggregate)``, each
      with its own ``prefix_state`` and the same aggregate; thread 0 always does, some or
      all of lanes 1..31 too (depending on CUB's algorithm), no thread outside warp 0 ever
      does. Only thread 0's result is used; so keep the state thread-local and read it in
      thread 0 (a shared state would be updated once per calling lane);
    * the result ``p`` prefixes the scan: an inclusive scan gives ``op(p, x0), op(p, x0,
      x1)...``, an exclusive one ``p, op(p, x0)...`` (``p`` is thread 0's first output).

    A callback that returns its state before adding the aggregate keeps a running total::

        def running_total(state, aggregate):
            old = state[0]
            state[0] = old + aggregate
            return old

        scan = coop.block.make_scan(numba.int32, 128, 4, mode="inclusive",
                                    block_prefix_callback_op=running_total)

        @cuda.jit(link=scan.files)
        def kernel(x, y, n):                    # one block scans all of x, 512 items at a time
            total = cuda.local.array(1, numba.int32)
            total[0] = 0
            items = cuda.local.array(4, numba.int32)
            for base in range(0, n, 512):       # n a multiple of 512 here
                for i in range(4):
                    items[i] = x[base + 4 * cuda.threadIdx.x + i]
                scan(items, items, total)
                for i in range(4):
                    y[base + 4 * cuda.threadIdx.x + i] = items[i]

    With a prefix callback ``initial_value`` must be left out (the prefix takes its place).

    Example::

        scan = coop.block.make_scan(numba.int32, 128, 8, mode="inclusive")
    """
    if scan_op is None:   # None stands for CUB's Sum only between the sum factories and _scan
        raise ArgumentError("scan_op", "an OpKind, its name ('+', 'max'...) or a Python function", None)
    return _scan(dtype, threads_per_block, items_per_thread, initial_value, mode, scan_op,
                 block_prefix_callback_op, algorithm, methods, "block_prefix_callback_op")


def _scan(dtype: Any, threads_per_block: Any, items_per_thread: int, initial_value: Any, mode: str, scan_op: Any,
          prefix_op: Any, algorithm: str, methods: Any, prefix_argument: str) -> Any:
    no_methods(methods)
    if mode not in ("exclusive", "inclusive"):
        raise ArgumentError("mode", "'exclusive' or 'inclusive'", mode)
    vt = element_type(dtype)
    # scan_op None: the sum factories, CUB's Sum, on every type as make_sum (bool: a logical or)
    op = op_spec(OpKind.PLUS) if scan_op is None else combiner(scan_op, vt, "scan_op")
    init = None if initial_value is None else value_bytes(initial_value, vt, "initial_value")
    prefix = state = fn = None
    if prefix_op is not None:
        if initial_value is not None:
            raise ArgumentError("initial_value", "None with a block prefix callback (its prefix seeds the scan)",
                                initial_value)
        prefix, state, fn = prefix_callback(prefix_op, vt, prefix_argument)
    spec = ProviderSpec("scan", vt, block_dims(threads_per_block), items_count(items_per_thread),
                        algorithm_of(SCAN_ALGORITHMS, algorithm), op, mode=mode, init=init, prefix=prefix,
                        prefix_state=state)
    python_op = scan_op if op.kind == "python" else None
    if prefix is None:
        source = value_in_value_out(False) if spec.items == 1 else arrays_in_out()
        return make_primitive(f"block.{mode}_scan", spec, python_op, entry_table(False, ("ptr", "ptr")), source)
    state_args = "__state(prefix_state), i64(prefix_state.size)"
    if spec.items == 1:
        source = ("def prim(item, prefix_state, temp_storage=None):\n    inp = cuda.local.array(1, T)\n"
                  "    inp[0] = item\n    out = cuda.local.array(1, T)\n"
                  + dispatch("ext", f"__addr(inp), __addr(out), {state_args}", None) + "    return out[0]\n")
    else:
        source = ("def prim(items_in, items_out, prefix_state, temp_storage=None):\n"
                  + dispatch("ext", f"__span(items_in, ITEMS), __span(items_out, ITEMS), {state_args}", None))
    return make_primitive(f"block.{mode}_scan", spec, python_op,
                          entry_table(False, ("ptr", "ptr", "state", "i64")), source, prefix=fn)


def make_exclusive_sum(dtype: Any, threads_per_block: Any, items_per_thread: int, prefix_op: Any = None,
                       algorithm: str = "raking", methods: Any = None) -> Any:
    """Exclusive prefix sum (thread 0's first output is 0, or the prefix ``prefix_op``
    returns: a block prefix callback as :func:`make_scan`'s ``block_prefix_callback_op``,
    the calls then taking its state array after the items). Example::

        xsum = coop.block.make_exclusive_sum(numba.int32, 128, 4)
    """
    return _scan(dtype, threads_per_block, items_per_thread, None, "exclusive", None, prefix_op, algorithm, methods,
                 "prefix_op")


def make_inclusive_sum(dtype: Any, threads_per_block: Any, items_per_thread: int, prefix_op: Any = None,
                       algorithm: str = "raking", methods: Any = None) -> Any:
    """Inclusive prefix sum; ``prefix_op``: a block prefix callback, as :func:`make_scan`'s
    ``block_prefix_callback_op``. Example::

        isum = coop.block.make_inclusive_sum(numba.int32, 128, 8)
    """
    return _scan(dtype, threads_per_block, items_per_thread, None, "inclusive", None, prefix_op, algorithm, methods,
                 "prefix_op")


def make_exclusive_scan(dtype: Any, threads_per_block: Any, scan_op: Any, items_per_thread: int,
                        initial_value: Any = None, prefix_op: Any = None, algorithm: str = "raking",
                        methods: Any = None) -> Any:
    """Exclusive scan by ``scan_op``; ``prefix_op``: a block prefix callback, as
    :func:`make_scan`'s ``block_prefix_callback_op`` (then without ``initial_value``). Example::

        xmax = coop.block.make_exclusive_scan(numba.int32, 128, "max", 4, initial_value=-1)
    """
    return _scan(dtype, threads_per_block, items_per_thread, initial_value, "exclusive", scan_op, prefix_op,
                 algorithm, methods, "prefix_op")


def make_inclusive_scan(dtype: Any, threads_per_block: Any, scan_op: Any, items_per_thread: int,
                        initial_value: Any = None, prefix_op: Any = None, algorithm: str = "raking",
                        methods: Any = None) -> Any:
    """Inclusive scan by ``scan_op``; ``prefix_op``: a block prefix callback, as
    :func:`make_scan`'s ``block_prefix_callback_op`` (then without ``initial_value``). Example::

        imin = coop.block.make_inclusive_scan(numba.float32, 128, "min", 2)
    """
    return _scan(dtype, threads_per_block, items_per_thread, initial_value, "inclusive", scan_op, prefix_op,
                 algorithm, methods, "prefix_op")
