"""Style 2's calls: ``coop.load(block, src, items)``, ``coop.sum(block, items)``...

The group (``coop.this_block()`` or ``coop.this_warp()``) comes first, then the data
operands, positional-only; options are keyword-only. These functions are the
documentation and the signatures the front-end rewrite binds a kernel's call against
(:mod:`.rewrite`): their bodies never run. The primitive's record (``_records/``) says
what each parameter is (its call's ``roles``):

* ``operand``: a value of the kernel (an array, a ``ThreadData``, a scalar);
* ``runtime``: an option the kernel computes (``valid_items``, ``oob_default``, bits);
* ``static``: an option fixed when the kernel compiles (``algorithm``, operators,
  ``initial_value``...): a literal, a global or a closure variable.

A block-wide call must be made by every thread of the block, a warp-wide one by every
lane of the warp. Items are blocked (thread ``t`` holds tile positions ``t*n .. t*n+n-1``)
unless an exchange says otherwise. A reduction's result is valid in thread (lane) 0.
Every call takes care of its own shared memory, with the barrier its reuse needs.

``temp_storage=`` (every call): a ``uint8`` array the caller owns, normally
``cuda.shared.array(nbytes, numba.uint8, alignment=align)``, used instead of the call's
own shared memory. ``nbytes`` and ``align`` are the ``temp_storage_bytes`` and
``temp_storage_alignment`` of the Style 1 factory with the same arguments (e.g.
``coop.block.make_radix_sort_pairs(k, v, (32, 4), 4)``), which leave room to round the
array's address up to the alignment; an array too small for that traps. With it no
barrier is issued: between two calls that share the storage, the kernel syncs
(``cuda.syncthreads()``, ``cuda.syncwarp()`` for warps), as in CUB. Each warp of a
warp-wide call passes its own.

Example::

    @cuda.jit
    def kernel(x, y, totals, n):
        block = coop.this_block()
        items = coop.ThreadData(4)                     # float32, from x
        base = cuda.blockIdx.x * 4 * cuda.blockDim.x
        valid = min(4 * cuda.blockDim.x, n - base)
        coop.load(block, x[base:], items, valid_items=valid, oob_default=0)
        total = coop.sum(block, items)
        coop.inclusive_sum(block, items)               # in place
        coop.store(block, y[base:], items, valid_items=valid)
        if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
            totals[cuda.blockIdx.x] = total
"""

from __future__ import annotations

from cuprims.coop._style2 import calls_movement
from cuprims.coop._style2.nbtypes import Stub

# pylint: disable=unused-argument  (the bodies are documentation only)


@Stub
def load(group, src, items, /, *, algorithm="direct", valid_items=None, oob_default=None, temp_storage=None):
    """The group's tile from ``src`` (a 1-D array starting at the tile) into each
    thread's ``items`` (a ``ThreadData``); ``algorithm`` is one of CUB's BlockLoad
    algorithms ('direct', 'striped', 'vectorize', 'transpose', 'warp_transpose',
    'warp_transpose_timesliced') or, for ``coop.this_warp()``, of its WarpLoad ones
    ('direct', 'striped', 'vectorize', 'transpose'; each warp passes its own tile). With
    ``valid_items`` only the tile's first ``valid_items`` are read, the rest are
    ``oob_default`` (0 when not given). A count outside ``0..tile`` or past
    ``len(src)``, or a full tile longer than ``src``, traps.

    Example::

        coop.load(block, x[tile_start:], items, valid_items=n - tile_start)
        coop.load(coop.this_warp(), x[warp_start:], items, algorithm="transpose")
    """


@Stub
def store(group, dst, items, /, *, algorithm="direct", valid_items=None, temp_storage=None):
    """Each thread's ``items`` into the group's tile at ``dst`` (its first
    ``valid_items`` only, when given; the algorithms and traps as :func:`load`'s).

    Example::

        coop.store(block, y[tile_start:], items)
    """


@Stub
def exchange(group, items, out=None, /, *, block_exchange_type, warp_time_slicing=False, temp_storage=None):
    """The tile held in ``items`` rearranged (``coop.block.BlockExchangeType`` or its
    name: 'StripedToBlocked', 'BlockedToStriped', 'WarpStripedToBlocked',
    'BlockedToWarpStriped') into ``out`` (in place without it). For a warp
    (``coop.this_warp()``): 'StripedToBlocked' or 'BlockedToStriped' over the warp's tile
    (CUB's WarpExchange).

    Example::

        coop.exchange(block, items, block_exchange_type="StripedToBlocked")
    """


@Stub
def sum(group, value, /, *, algorithm="warp_reductions", valid_items=None, temp_storage=None):  # noqa: A001
    """The group's sum of ``value`` (a scalar, or a thread's ``ThreadData``), valid in its
    first thread. ``valid_items`` (scalar values only): the first threads that count.

    Example::

        total = coop.sum(block, items)
    """


@Stub
def reduce(group, value, /, *, binary_op, algorithm="warp_reductions", valid_items=None, temp_storage=None):
    """As :func:`sum`, by ``binary_op`` (an OpKind, '+', '*', 'min', 'max', '&', '|', '^',
    or a Python function, structs included).

    Example::

        biggest = coop.reduce(block, items, binary_op="max")
    """


@Stub
def inclusive_sum(group, items, out=None, /, *, algorithm="raking", prefix_op=None, prefix_state=None,
                  temp_storage=None):
    """Inclusive prefix sum over the group: of a scalar (returned), or of the tile held in
    ``items`` (written to ``out``, in place without it).

    ``prefix_op`` and ``prefix_state`` (block scans): a block prefix callback, CUB's
    ``BlockPrefixCallbackOp``, to scan a long sequence tile after tile with a running
    total. ``prefix_op`` is a Python function ``prefix(state, block_aggregate) -> prefix``
    (a compile-time constant, as ``scan_op``), ``prefix_state`` the array it gets as
    ``state`` (1-D, C-contiguous, any element type; usually ``cuda.local.array(1, ...)``,
    owned by the kernel across calls). In each call the block's aggregate of the call's
    items is computed, threads of the block's first warp call ``prefix_op(prefix_state,
    aggregate)`` (thread 0 always, some or all of lanes 1..31 too, depending on CUB's
    algorithm; no other thread), and thread 0's result ``p`` prefixes the scan: inclusive
    ``op(p, x0), op(p, x0, x1)...``, exclusive ``p, op(p, x0)...``. Keep the state
    thread-local and read it in thread 0.

    Example::

        coop.inclusive_sum(block, items)
        coop.inclusive_sum(block, items, prefix_op=running_total, prefix_state=total)
    """


@Stub
def exclusive_sum(group, items, out=None, /, *, algorithm="raking", prefix_op=None, prefix_state=None,
                  temp_storage=None):
    """Exclusive prefix sum (0 first, or the prefix ``prefix_op`` returns), as
    :func:`inclusive_sum`.

    Example::

        offset = coop.exclusive_sum(block, count)
    """


@Stub
def inclusive_scan(group, items, out=None, /, *, scan_op, initial_value=None, algorithm="raking", prefix_op=None,
                   prefix_state=None, temp_storage=None):
    """Inclusive scan by ``scan_op`` (as :func:`reduce`'s ``binary_op``), seeded by
    ``initial_value`` when given (a compile-time constant) or by a block prefix callback
    (``prefix_op``, ``prefix_state``: see :func:`inclusive_sum`), as :func:`inclusive_sum`.

    Example::

        coop.inclusive_scan(block, items, scan_op="max")
    """


@Stub
def exclusive_scan(group, items, out=None, /, *, scan_op, initial_value=None, algorithm="raking", prefix_op=None,
                   prefix_state=None, temp_storage=None):
    """Exclusive scan by ``scan_op``; without ``initial_value`` or a block prefix callback
    (``prefix_op``, ``prefix_state``: see :func:`inclusive_sum`) the first output is
    undefined (as in CUB).

    Example::

        coop.exclusive_scan(block, items, scan_op="min", initial_value=2**31 - 1)
    """


@Stub
def radix_sort_keys(group, keys, /, *, descending=False, blocked_to_striped=False, begin_bit=None, end_bit=None,
                    temp_storage=None):
    """The block's tile of ``keys`` (a ``ThreadData`` of ints or floats) sorted in place,
    blocked (striped with ``blocked_to_striped=True``: thread ``t`` holds ranks ``t``,
    ``t + threads``...); only bits ``[begin_bit, end_bit)`` are compared when given
    (stable).

    Example::

        coop.radix_sort_keys(block, keys, descending=True)
    """


@Stub
def merge_sort_keys(group, keys, /, *, compare_op, valid_items=None, oob_default=None, temp_storage=None):
    """The group's tile of ``keys`` (a ``ThreadData``; any element type, structs too)
    sorted in place by ``compare_op`` (``'<'``, ``'>'``, ``OpKind.LESS``/``GREATER`` or a
    Python function ``(a, b) -> bool``, true when ``a`` goes first), stably, blocked. A
    block's threads must be a power of two. With ``valid_items`` only the tile's first
    ``valid_items`` keys are sorted and every later position becomes ``oob_default``
    (required then, ordered after every valid key); a count outside ``0..tile`` traps.

    Example::

        coop.merge_sort_keys(block, keys, compare_op=lambda a, b: a > b)
    """


@Stub
def radix_sort_pairs(group, keys, values, /, *, descending=False, blocked_to_striped=False, begin_bit=None,
                     end_bit=None, temp_storage=None):
    """As :func:`radix_sort_keys`, each key carrying the value at the same place in
    ``values`` (a ``ThreadData`` as long as ``keys``, of any element type, structs too).
    Stable: the values of equal keys keep their order, ascending or descending.

    Example::

        coop.radix_sort_pairs(block, keys, indices, descending=True)
    """


@Stub
def merge_sort_pairs(group, keys, values, /, *, compare_op, valid_items=None, oob_default=None,
                     temp_storage=None):
    """As :func:`merge_sort_keys` (block or warp), each key carrying the value at the
    same place in ``values`` (a ``ThreadData`` as long as ``keys``, any element type);
    stable. With ``valid_items`` the values past the first ``valid_items`` pairs are
    unspecified (their keys become ``oob_default``).

    Example::

        coop.merge_sort_pairs(block, keys, values, compare_op="<", valid_items=n, oob_default=2**31 - 1)
    """


@Stub
def flag_heads(group, items, head_flags, /, *, flag_op=None, tile_predecessor_item=None, temp_storage=None):
    """Block only: ``head_flags[i]`` (a ``ThreadData`` of bools or integers, as long as
    ``items``) set where ``flag_op(previous item, item)`` is true (``!=`` unless given: a
    Python function, ``OpKind.NOT_EQUAL_TO`` or ``OpKind.EQUAL_TO``), across the block's
    blocked tile. The tile's first item is a head unless ``tile_predecessor_item`` (the
    item before the tile) is given.

    Example::

        flags = coop.ThreadData(4, dtype=numba.int32)
        coop.flag_heads(block, items, flags, tile_predecessor_item=prev)
    """


@Stub
def flag_tails(group, items, tail_flags, /, *, flag_op=None, tile_successor_item=None, temp_storage=None):
    """As :func:`flag_heads`, ``tail_flags[i]`` set where ``flag_op(item, next item)`` is
    true; the tile's last item is a tail unless ``tile_successor_item`` is given.

    Example::

        coop.flag_tails(block, items, flags, tile_successor_item=following)
    """


@Stub
def flag_heads_and_tails(group, items, head_flags, tail_flags, /, *, flag_op=None, tile_predecessor_item=None,
                         tile_successor_item=None, temp_storage=None):
    """:func:`flag_heads` and :func:`flag_tails` in one call (two flag arrays of one type).

    Example::

        coop.flag_heads_and_tails(block, items, heads, tails)
    """


@Stub
def subtract_left(group, items, out=None, /, *, difference_op=None, tile_predecessor_item=None, valid_items=None,
                  temp_storage=None):
    """Block only: ``difference_op(item, previous item)`` (``-`` unless given) of each item
    of the blocked tile, into ``out`` or in place. The tile's first item is kept unless
    ``tile_predecessor_item`` is given; with ``valid_items`` only the tile's first items
    are differenced (the others are kept).

    Example::

        coop.subtract_left(block, items, deltas, tile_predecessor_item=prev)
    """


@Stub
def subtract_right(group, items, out=None, /, *, difference_op=None, tile_successor_item=None, valid_items=None,
                   temp_storage=None):
    """As :func:`subtract_left` with the next item: ``difference_op(item, next item)``; the
    tile's last item (the last valid one with ``valid_items``, which excludes
    ``tile_successor_item``) is kept unless ``tile_successor_item`` is given.

    Example::

        coop.subtract_right(block, items, valid_items=n)
    """


# every Style 2 call: name -> stub (each served by a record's Call of that name), those of
# calls_movement too
STUBS = {name: stub for name, stub in list(globals().items()) if isinstance(stub, Stub)}
STUBS.update(calls_movement.STUBS)
