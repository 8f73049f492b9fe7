"""Block factories comparing each item of a tile with its neighbour: discontinuity flags
and adjacent differences (re-exported by :mod:`cuprims.coop.block`).

The tile is held blocked: thread ``t`` holds positions ``t * n .. t * n + n - 1`` of the
block's ``T * n`` items in its local array of ``n = items_per_thread``. An item's left
neighbour is the one at the position before it, across threads; the tile's first item has
none unless the call passes ``tile_predecessor_item`` (its last, ``tile_successor_item``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cuprims.coop._arguments import (BlockAdjacentDifferenceType, BlockDiscontinuityType, difference_operator,
                                     enum_member, flag_operator, python_callable)
from cuprims.coop._spec import ProviderSpec, block_dims, element_type, items_count
from cuprims.coop._style1.factory import make_primitive
from cuprims.coop._user_types import check_methods
from cuprims.errors import ArgumentError


def make_discontinuity(dtype: Any, threads_per_block: Any, items_per_thread: int = 1, flag_op: Any = None,
                       block_discontinuity_type: Any = BlockDiscontinuityType.HEADS, flag_dtype: Any = None,
                       methods: Any = None) -> Any:
    """Flags where the block's tile is discontinuous (CUB's ``BlockDiscontinuity``).

    Called as ``flag(items, head_flags, tile_predecessor_item=None, temp_storage=None)``
    (``HEADS``), ``flag(items, tail_flags, tile_successor_item=None, temp_storage=None)``
    (``TAILS``) or ``flag(items, head_flags, tail_flags, tile_predecessor_item=None,
    tile_successor_item=None, temp_storage=None)`` (``HEADS_AND_TAILS``); the caller's
    storage may also come first. Each flags array is a local array of ``items_per_thread``
    of ``flag_dtype`` (bool unless given: any integer type or bool).

    ``head_flags[i]`` is set where ``flag_op(previous item, item)`` is true, and
    ``tail_flags[i]`` where ``flag_op(item, next item)`` is. The tile's first item is a
    head (its last a tail) unless the call passes the item before (after) the tile, which
    ``flag_op`` then compares with it. ``flag_op``: None or ``OpKind.NOT_EQUAL_TO`` (``!=``:
    a NaN differs from everything), ``OpKind.EQUAL_TO``, or a Python function ``flag_op(a,
    b)`` whose truth is the flag (any item type, structs included).

    Example::

        heads = coop.block.make_discontinuity(numba.int32, 128, 4)

        @cuda.jit(link=heads.files)
        def kernel(x, out):
            items = cuda.local.array(4, numba.int32)
            flags = cuda.local.array(4, numba.boolean)
            for i in range(4):
                items[i] = x[4 * cuda.threadIdx.x + i]
            heads(items, flags)       # flags[i]: items[i] starts a run of equal values
            for i in range(4):
                out[4 * cuda.threadIdx.x + i] = flags[i]
    """
    check_methods(methods)
    kind = enum_member(BlockDiscontinuityType, block_discontinuity_type, "block_discontinuity_type")
    vt = element_type(dtype)
    flags = element_type(np.bool_ if flag_dtype is None else flag_dtype, "flag_dtype")
    if flags.is_struct or flags.dtype.kind not in "biu":
        raise ArgumentError("flag_dtype", "bool or an integer type", flag_dtype)
    op = flag_operator(flag_op, vt)
    spec = ProviderSpec("discontinuity", vt, block_dims(threads_per_block), items_count(items_per_thread), "", op,
                        mode=kind.value, values=flags)
    return make_primitive(f"block.discontinuity.{kind.name}", spec, python_callable(op, flag_op))


def make_adjacent_difference(dtype: Any, threads_per_block: Any, items_per_thread: int = 1,
                             difference_op: Any = None,
                             block_adjacent_difference_type: Any = BlockAdjacentDifferenceType.SubtractLeft,
                             methods: Any = None) -> Any:
    """Each item of the block's tile against its neighbour (CUB's ``BlockAdjacentDifference``).

    Called as ``diff(items_in, items_out, num_valid=-1, tile_predecessor_item=None,
    temp_storage=None)`` (``SubtractLeft``; ``tile_successor_item`` for ``SubtractRight``);
    the two arrays may be one, and the caller's storage may also come first.
    ``SubtractLeft`` writes ``difference_op(item, previous item)``, ``SubtractRight``
    ``difference_op(item, next item)``; the tile's first (last) item, which has no such
    neighbour, is copied unless the call passes the item before (after) the tile. With
    ``num_valid >= 0`` only the tile's first ``num_valid`` items count: the others are
    copied, and the last valid one has no right neighbour (a right difference of a partial
    tile takes no ``tile_successor_item``). ``difference_op``: None (``-``), an OpKind, or a
    Python function ``difference_op(a, b) -> item``.

    Example::

        diff = coop.block.make_adjacent_difference(numba.float32, 128, 4)

        @cuda.jit(link=diff.files)
        def kernel(x):
            items = cuda.local.array(4, numba.float32)
            for i in range(4):
                items[i] = x[4 * cuda.threadIdx.x + i]
            diff(items, items)        # items[i] - the item before it; the tile's first is kept
            for i in range(4):
                x[4 * cuda.threadIdx.x + i] = items[i]
    """
    check_methods(methods)
    kind = enum_member(BlockAdjacentDifferenceType, block_adjacent_difference_type, "block_adjacent_difference_type")
    vt = element_type(dtype)
    op = difference_operator(difference_op, vt)
    spec = ProviderSpec("adjacent_difference", vt, block_dims(threads_per_block), items_count(items_per_thread), "",
                        op, mode=kind.value)
    return make_primitive(f"block.adjacent_difference.{kind.name}", spec, python_callable(op, difference_op))
