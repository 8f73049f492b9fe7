"""The block shuffle factory (re-exported by :mod:`cuprims.coop.block`): CUB's
``BlockShuffle`` moving values between a block's threads."""

from __future__ import annotations

from typing import Any

from cuprims.coop._arguments import BlockShuffleType, enum_member
from cuprims.coop._spec import ProviderSpec, block_dims, element_type, items_count
from cuprims.coop._style1.factory import make_primitive
from cuprims.coop._user_types import check_methods
from cuprims.errors import ArgumentError


def make_shuffle(dtype: Any, threads_per_block: Any, items_per_thread: int = 1,
                 block_shuffle_type: Any = BlockShuffleType.Up, methods: Any = None) -> Any:
    """Move values between the block's threads (CUB's ``BlockShuffle``).

    * ``Offset``: ``shuffle(item, distance=1) -> value``, the item of the thread
      ``distance`` after this one (before it for a negative distance); a thread with none
      gets its own item back. ``items_per_thread`` is 1.
    * ``Rotate``: the same around the block (``distance`` modulo the block's threads).
    * ``Up``: ``shuffle(items_in, items_out) -> value``: the blocked tile moved up one item
      (``items_out[i]`` is the item before ``items_in[i]``; the tile's first item, which has
      none, is copied); returns the tile's last item, in every thread.
    * ``Down``: moved down one item (the tile's last item is copied); returns the tile's
      first item.

    The two arrays may be one; the caller's storage may come first or as
    ``temp_storage=``. ``block_shuffle_type``: a ``BlockShuffleType`` or its name.

    Example::

        prev = coop.block.make_shuffle(numba.float32, 128, 4, coop.block.BlockShuffleType.Up)

        @cuda.jit(link=prev.files)
        def kernel(x):
            items = cuda.local.array(4, numba.float32)
            before = cuda.local.array(4, numba.float32)
            for i in range(4):
                items[i] = x[4 * cuda.threadIdx.x + i]
            prev(items, before)          # before[i]: the item in front of items[i]
            for i in range(4):
                x[4 * cuda.threadIdx.x + i] = items[i] - before[i]
    """
    check_methods(methods)
    kind = enum_member(BlockShuffleType, block_shuffle_type, "block_shuffle_type")
    n = items_count(items_per_thread)
    if kind in (BlockShuffleType.Offset, BlockShuffleType.Rotate) and n != 1:
        raise ArgumentError("items_per_thread", f"1 (a {kind.name} shuffle moves one value a thread)",
                            items_per_thread)
    spec = ProviderSpec("block_shuffle", element_type(dtype), block_dims(threads_per_block), n, "", mode=kind.value)
    return make_primitive(f"block.shuffle.{kind.name}", spec)
