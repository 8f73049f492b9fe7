"""Segmented top-k: the k largest keys of each row with their column indices (what
torch.topk(x, k, dim=-1) gives), the k smallest of rows given by offsets, and the object
API on a stream."""

import cupy as cp
import numpy as np

import cuprims
from cuprims import SortOrder


def main():
    rows, cols, k = 100, 1000, 5
    a = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    x = cp.asarray(a.reshape(-1))

    # fixed rows: the 5 largest of each row, largest first, with their column indices
    top = cp.empty(rows * k, np.float32)
    idx = cp.empty(rows * k, np.int32)
    cols_index = cp.tile(cp.arange(cols, dtype=np.int32), rows)
    cuprims.segmented_top_k(d_in_keys=x, d_out_keys=top, d_in_values=cols_index, d_out_values=idx, k=k,
                            num_segments=rows, segment_size=cols)
    want = -np.sort(-a, axis=1)[:, :k]
    assert (top.get().reshape(rows, k) == want).all()
    assert (np.take_along_axis(a, idx.get().reshape(rows, k), 1) == want).all()

    # rows by offsets (CuPy's int64): the 3 smallest of each; a row shorter than k writes
    # its own keys only and leaves the rest of its slots as they were
    offsets = cp.asarray([0, 10, 12, 12, 500], np.int64)
    small = cp.full(4 * 3, np.nan, np.float32)
    cuprims.segmented_top_k(d_in_keys=x, d_out_keys=small, k=3, num_segments=4, start_offsets_in=offsets[:-1],
                            end_offsets_in=offsets[1:], order=SortOrder.ASCENDING)
    got = small.get().reshape(4, 3)
    flat = a.reshape(-1)
    assert (got[0] == np.sort(flat[0:10])[:3]).all() and (got[3] == np.sort(flat[12:500])[:3]).all()
    assert (got[1, :2] == np.sort(flat[10:12])).all() and np.isnan(got[1, 2]) and np.isnan(got[2]).all()

    # the object: built once, called on a stream (it needs no temporary storage)
    topk = cuprims.make_segmented_top_k(d_in_keys=x, d_out_keys=top)
    stream = cp.cuda.Stream(non_blocking=True)
    # a non-blocking stream does not wait for the default stream, where x was made
    stream.wait_event(cp.cuda.get_current_stream().record())
    tmp = cp.empty(topk(temp_storage=None, d_in_keys=x, d_out_keys=top, k=k, num_segments=rows, segment_size=cols),
                   np.uint8)
    topk(temp_storage=tmp, d_in_keys=x, d_out_keys=top, k=k, num_segments=rows, segment_size=cols, stream=stream)
    stream.synchronize()
    assert (top.get().reshape(rows, k) == want).all()
    print("segmented_top_k: ok")


if __name__ == "__main__":
    main()
