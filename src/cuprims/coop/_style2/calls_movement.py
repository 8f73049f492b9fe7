"""Style 2's calls that move values between a group's threads or expand and count them:
the warp's and the block's shuffles, the block's histogram and run-length decode (the
conventions are :mod:`.calls`'s, which gathers these with the others).
"""

from __future__ import annotations

from cuprims.coop._style2.nbtypes import Stub

# pylint: disable=unused-argument  (the bodies are documentation only)


@Stub
def histogram(group, items, histogram, /, *, bins, algorithm="sort", accumulate=False, temp_storage=None):
    """Block only: count the block's tile (each item a bin index in ``[0, bins)``; one
    outside traps) into ``histogram``, an array of at least ``bins`` counters (int32,
    uint32, uint64, float32 or float64; usually ``cuda.shared.array``), zeroed first unless
    ``accumulate=True`` (then the tile's counts are added: a kernel counting many tiles
    zeroes with its first call). ``algorithm``: "sort" (CUB's default) or "atomic". Wait
    (``cuda.syncthreads()``) before reading the counters.

    Example::

        counts = cuda.shared.array(256, numba.int32)
        coop.histogram(block, items, counts, bins=256)
        coop.histogram(block, more_items, counts, bins=256, accumulate=True)
        cuda.syncthreads()
    """


@Stub
def run_length_decode(group, run_values, run_lengths, decoded_items, relative_offsets=None, /, *, window_offset=None,
                      temp_storage=None):
    """Block only: decode the block's runs (each thread's ``run_values`` and
    ``run_lengths``, ``ThreadData`` of as many items, blocked) into ``decoded_items`` (a
    ``ThreadData`` of the values' type: the block's window of the expanded sequence from
    ``window_offset``, 0 unless given, blocked), and each item's offset within its run into
    ``relative_offsets`` when given (of the lengths' type). Returns the total decoded size
    (int64); items past it repeat the last run's value, and a window offset outside
    ``[0, total]`` traps. Call it once per window. Runs are at least one item long but for
    empty ones after all the others (CUB's decode gives unspecified items for an empty run
    between two others).

    Example::

        total = coop.run_length_decode(block, values, lengths, decoded)
    """


@Stub
def shuffle(group, items, out=None, /, *, block_shuffle_type, distance=None, temp_storage=None):
    """Block only (CUB's ``BlockShuffle``; ``block_shuffle_type`` a
    ``coop.block.BlockShuffleType`` or its name in lower case):

    * ``"offset"``: returns the value (``items``: one a thread) of the thread ``distance``
      (1 unless given; negative: before) after this one; a thread with none gets its own;
    * ``"rotate"``: the same around the block (``distance`` modulo its threads);
    * ``"up"``: moves the blocked tile (``items``, a ``ThreadData``) up one item, into
      ``out`` or in place: each item becomes the one before it (the tile's first keeps
      its own); returns the tile's last item;
    * ``"down"``: down one item (the tile's last keeps its own); returns the tile's first.

    Example::

        left = coop.shuffle(block, x, block_shuffle_type="offset", distance=-1)
        last = coop.shuffle(block, items, block_shuffle_type="up")
    """


@Stub
def shuffle_index(group, value, src_lane, /, *, temp_storage=None):
    """Warp only: the ``value`` of lane ``src_lane`` of this lane's logical warp (taken
    modulo the warp's size), in every lane (CUB's ``ShuffleIndex``; any type).

    Example::

        first = coop.shuffle_index(warp, x, 0)          # lane 0's value, everywhere
    """


@Stub
def shuffle_up(group, value, delta, /, *, temp_storage=None):
    """Warp only: the ``value`` of the lane ``delta`` below this one in its logical warp; a
    lane with none that far below keeps its own (CUB's ``ShuffleUp``).

    Example::

        before = coop.shuffle_up(warp, x, 1)
    """


@Stub
def shuffle_down(group, value, delta, /, *, temp_storage=None):
    """Warp only: the ``value`` of the lane ``delta`` above this one in its logical warp; a
    lane with none that far above keeps its own (CUB's ``ShuffleDown``).

    Example::

        after = coop.shuffle_down(warp, x, 1)
    """


@Stub
def shuffle_xor(group, value, lane_mask, /, *, temp_storage=None):
    """Warp only: the ``value`` of lane ``lane ^ lane_mask`` of this lane's logical warp
    (a butterfly exchange).

    Example::

        partner = coop.shuffle_xor(warp, x, 1)          # lanes 0 and 1 swap, 2 and 3...
    """


# this module's calls: name -> stub
STUBS = {name: stub for name, stub in list(globals().items()) if isinstance(stub, Stub)}
