"""Style 2 (single-phase calls): each block ranks its tile of (score, id) pairs, highest
score first, in a plain ``@cuda.jit`` kernel; the last tile is partial.

No factory and no ``link=``: ``coop.this_block()`` takes the block shape from the launch,
``coop.ThreadData(4)`` takes its element type from the array loaded into it, and the
providers are built and linked while numba compiles the kernel. ``temp_storage=`` hands
the sort a shared array the kernel owns (sized by the Style 1 twin's
``temp_storage_bytes``); the loads and stores use their own.
"""

import numpy as np
from numba import cuda, uint8

from cuprims import coop

THREADS, ITEMS = 256, 4
TILE = THREADS * ITEMS


def main():
    twin = coop.block.make_radix_sort_pairs_descending(np.float32, np.int32, THREADS, ITEMS)
    nbytes, align = twin.temp_storage_bytes, twin.temp_storage_alignment

    @cuda.jit
    def rank(scores, ids, n):
        block = coop.this_block()
        base = cuda.blockIdx.x * TILE
        valid = min(TILE, n - base)
        temp = cuda.shared.array(nbytes, uint8, alignment=align)
        keys = coop.ThreadData(ITEMS)              # float32, from scores
        values = coop.ThreadData(ITEMS)            # int32, from ids
        # the partial tile's missing keys are -inf: a descending sort leaves them last
        coop.load(block, scores[base:], keys, algorithm="warp_transpose", valid_items=valid, oob_default=-np.inf)
        coop.load(block, ids[base:], values, algorithm="warp_transpose", valid_items=valid)
        coop.radix_sort_pairs(block, keys, values, descending=True, temp_storage=temp)
        coop.store(block, scores[base:], keys, valid_items=valid)
        coop.store(block, ids[base:], values, valid_items=valid)

    blocks = 4
    n = blocks * TILE - 300
    rng = np.random.default_rng(13)
    scores = np.round(rng.normal(0, 3, n)).astype(np.float32)     # many ties: stability shows
    ids = np.arange(n, dtype=np.int32)
    d_scores, d_ids = cuda.to_device(scores), cuda.to_device(ids)
    rank[blocks, THREADS](d_scores, d_ids, n)

    got_scores, got_ids = d_scores.copy_to_host(), d_ids.copy_to_host()
    for start in range(0, n, TILE):
        stop = min(start + TILE, n)
        order = start + np.argsort(-scores[start:stop], kind="stable")   # highest first, ties by id
        assert np.array_equal(got_ids[start:stop], order)
        assert np.array_equal(got_scores[start:stop], scores[order])
    print("single_phase_sort_pairs: ok")


if __name__ == "__main__":
    main()
