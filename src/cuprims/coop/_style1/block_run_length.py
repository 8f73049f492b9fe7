"""The block run-length decode factory (re-exported by :mod:`cuprims.coop.block`): CUB's
``BlockRunLengthDecode``, expanding each thread's runs into a window of the decoded
sequence."""

from __future__ import annotations

from typing import Any

import numpy as np

from cuprims.coop._spec import ProviderSpec, block_dims, element_type, items_count
from cuprims.coop._style1.factory import make_primitive
from cuprims.coop._user_types import check_methods
from cuprims.errors import ArgumentError


def make_run_length_decode(dtype: Any, threads_per_block: Any, runs_per_thread: int, decoded_items_per_thread: int,
                           decoded_offset_dtype: Any = np.uint32, run_length_dtype: Any = np.uint32,
                           methods: Any = None) -> Any:
    """Decode the block's runs (CUB's ``BlockRunLengthDecode``).

    Called as ``total = rld(run_values, run_lengths, decoded_items, window_offset=0,
    relative_offsets=None, temp_storage=None)`` (the caller's storage may also come first):
    each thread holds ``runs_per_thread`` runs, a value (``dtype``, any type) and a length
    (``run_length_dtype``, an integer type) each, in the blocked arrangement; the call
    writes the block's window of the expanded sequence that starts at ``window_offset``
    into each thread's ``decoded_items`` (``decoded_items_per_thread``, blocked), each
    item's offset within its run into ``relative_offsets`` when given (of the lengths'
    type), and returns the total decoded size (an int64, the same for every window).
    Items past the total repeat the last run's value; a window offset outside ``[0,
    total]`` traps. Every run is at least one item long, but for runs of length 0 after
    all the others (padding): CUB's decode gives unspecified items for an empty run
    between two others. A sequence longer than one window is decoded by calling again with the
    next window's offset. ``decoded_offset_dtype``: uint32 (CUB's, which the whole sequence
    fits).

    Example::

        rld = coop.block.make_run_length_decode(numba.int32, 128, 2, 4)

        @cuda.jit(link=rld.files)
        def kernel(values, lengths, out):
            v = cuda.local.array(2, numba.int32)
            n = cuda.local.array(2, numba.uint32)
            decoded = cuda.local.array(4, numba.int32)
            for i in range(2):
                v[i], n[i] = values[2 * cuda.threadIdx.x + i], lengths[2 * cuda.threadIdx.x + i]
            total = rld(v, n, decoded)
            for i in range(4):
                if 4 * cuda.threadIdx.x + i < total:
                    out[4 * cuda.threadIdx.x + i] = decoded[i]
    """
    check_methods(methods)
    vt = element_type(dtype)
    lengths = element_type(run_length_dtype, "run_length_dtype")
    if lengths.is_struct or lengths.dtype.kind not in "iu":
        raise ArgumentError("run_length_dtype", "an integer type", run_length_dtype)
    offsets = element_type(decoded_offset_dtype, "decoded_offset_dtype")
    if offsets.is_struct or offsets.dtype != np.uint32:
        raise ArgumentError("decoded_offset_dtype", "uint32 (CUB's decoded offsets)", decoded_offset_dtype)
    spec = ProviderSpec("run_length_decode", vt, block_dims(threads_per_block),
                        items_count(decoded_items_per_thread, "decoded_items_per_thread"), "", values=lengths,
                        runs=items_count(runs_per_thread, "runs_per_thread"))
    return make_primitive("block.run_length_decode", spec)
