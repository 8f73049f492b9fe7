"""Segmented scans: ``make_segmented_inclusive_scan`` / ``segmented_inclusive_scan``,
``make_segmented_exclusive_scan`` / ``segmented_exclusive_scan`` and their object.

Segment ``s`` is ``[start_offsets_in[s], end_offsets_in[s])`` of ``d_in``; its scan with
``op`` (in the type of ``d_out``) is written to the same positions of ``d_out``: inclusive,
``d_out[i] = init ⊕ d_in[b] ⊕ ... ⊕ d_in[i]`` (``init`` only when given), or exclusive,
``d_out[b] = init`` and ``d_out[i] = init ⊕ d_in[b] ⊕ ... ⊕ d_in[i-1]``, where ``b`` is the
segment's start. Positions in no segment are not written; an empty segment writes nothing.
``op`` must be associative. Offsets are arrays or iterators of a 32- or 64-bit integer type.

Host dispatch (ours; kernels in ``algorithms/segmented_scan/cuprims_segmented_scan.cuh``):
an init kernel readies the tile states and checks, on the device, that the segments come in
order without overlapping and lie within the arrays (the *extent*: the shorter of ``d_in``
and ``d_out`` where they are arrays). Then one scan kernel takes, without a round trip to
the host, the single pass for such segments (tiles of positions with decoupled look-back:
one long segment over every SM, many short ones per tile, no hint needed) or, for any
others, whole segments per block. Ordered segments take positions below 2^31 - 1 - a tile;
others go as far as the offsets do.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from cuprims._build.results import OpInput
from cuprims._compile.source import Source
from cuprims._runtime import arrays as _arrays
from cuprims._runtime import driver
from cuprims.algorithms.arguments import ArgKind, describe, keyword_checked, segment_offsets
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.lookback import REGION_ALIGN
from cuprims.algorithms.operators import combined_input, combiner_ops, combiner_spec
from cuprims.algorithms.segmented_scan.source import segmented_scan_source
from cuprims.algorithms.skeleton import Algorithm, Description, Plan, description, functor_size, functor_state
from cuprims.algorithms.values import described_init, init_argument, init_param, scalar_init_type
from cuprims.errors import ArgumentError
from cuprims.op import OpSpec
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ComputeCapabilityLike, DeviceArrayLike, InitValue,
                            OperatorLike, StreamLike)

__all__ = ["SegmentedScan", "make_segmented_inclusive_scan", "make_segmented_exclusive_scan",
           "segmented_inclusive_scan", "segmented_exclusive_scan"]

#: The most segments one call takes (segment indices are ints in the kernels).
MAX_SEGMENTS = (1 << 31) - 1
#: Blocks of the whole-segment way per SM slot (they stride over the segments).
_WAVES = 4

# Each call's mark for the order check (see cuprims_segmented_scan.cuh): distinct from the
# last calls', whatever an earlier call left in the temporary storage.
_epochs = itertools.count(random.getrandbits(31))


@description
class SegmentedScanDescription(Description):
    """Input and output, the offsets, the operator, what the initial value is ("none",
    "value": passed at launch, "device": read from a one-element device array) and the
    direction."""

    d_in: ArgKind
    d_out: ArgKind
    begin: ArgKind
    end: ArgKind
    op: OpSpec
    init_kind: str
    inclusive: bool

    def source(self, arch: int) -> Source:
        return segmented_scan_source(d_in=self.d_in, d_out=self.d_out, begin=self.begin, end=self.end, op=self.op,
                                     accum=self.d_out.value, init_kind=self.init_kind, inclusive=self.inclusive,
                                     arch=arch)

    def _link(self) -> tuple[OpInput, ...]:
        return combiner_ops(self.op, self.d_out.value) + tuple(
            op for a in (self.d_in, self.d_out, self.begin, self.end) for op in a.linked_ops())

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        return (
            # init: tile storage, tiles, begin, end, segments, extent, order flag, epoch
            ("ptr", "i32", self.begin.param, self.end.param, "i32", "i64", "ptr", "i32"),
            # scan: in, out, begin, end, segments, extent, tile storage, tiles, order flag, epoch, op, init
            (self.d_in.param, self.d_out.param, self.begin.param, self.end.param, "i32", "i32", "ptr", "i32", "ptr",
             "i32", functor_size(self.op), init_param(self.init_kind, self.d_out.value)),
        )


class _Plan(Plan):
    """The two kernels, the tile, the tile states' bytes and the whole-segment grid."""

    __slots__ = ("init", "scan", "threads", "tile_items", "init_threads", "bytes_per_tile", "fixed_bytes",
                 "max_extent", "segment_grid", "device")

    def __init__(self, loaded: Loaded):
        meta = loaded.meta
        self.init, self.scan = loaded.handles
        self.threads = meta["threads"]
        self.tile_items = self.threads * meta["items"]
        self.init_threads = meta["init_threads"]
        self.bytes_per_tile, self.fixed_bytes = meta["tile_bytes_per_tile"], meta["tile_fixed_bytes"]
        # positions are ints in the single pass: its last tile must end below 2^31
        self.max_extent = (1 << 31) - 1 - self.tile_items
        occupancy = loaded.module.max_active_blocks(loaded.names[1], self.threads)
        self.segment_grid = max(1, occupancy) * driver.sm_count(loaded.device) * _WAVES


def storage_layout(plan: Any, extent: int) -> tuple[int, int]:
    """(tiles of the single pass over ``extent`` positions, temporary bytes): the order flag
    in the first 256 bytes, then the tile states (none for a single tile)."""
    tiles = -(-extent // plan.tile_items)
    states = tiles * plan.bytes_per_tile + plan.fixed_bytes if tiles > 1 else 0
    return tiles, REGION_ALIGN + REGION_ALIGN + states


def _extent(x: Any, kind: ArgKind) -> int | None:
    """The number of items of array argument ``x`` (None for an iterator)."""
    return _arrays.array_info(x, kind.name)[2] if kind.is_pointer else None


def _describe(d_in: Any, d_out: Any, start_offsets_in: Any, end_offsets_in: Any, op: Any, init_value: Any,
              inclusive: bool) -> SegmentedScanDescription:
    in_arg = describe(d_in, "d_in", iterators=True)
    out_arg = describe(d_out, "d_out", iterators=True, output=True)
    in_arg = combined_input(in_arg, out_arg)
    begin, end = segment_offsets(start_offsets_in, end_offsets_in)
    if op is None:
        raise ArgumentError("op", "an OpKind, a Python callable f(a, b) -> value or a RawOp", None)
    init_kind = described_init(init_value, out_arg.value, inclusive)
    return SegmentedScanDescription(in_arg, out_arg, begin, end, combiner_spec(op, out_arg.value), init_kind,
                                    inclusive)


class SegmentedScan(Algorithm):
    """A segmented scan built for fixed types, operator, init kind and direction (what
    :func:`make_segmented_inclusive_scan` and :func:`make_segmented_exclusive_scan` return).
    With ``temp_storage=None`` the call returns the bytes it needs."""

    desc: SegmentedScanDescription

    def _setup(self) -> None:
        desc = self.desc
        self._init_params, self._scan_params = self._packs
        self._init_scalar_type = scalar_init_type(desc.d_out.value, desc.init_kind == "value")

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded)

    # args: (p_in, p_out, p_begin, p_end, segments, extent, op_state, init)
    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        return storage_layout(plan, min(args[5], plan.max_extent))[1]

    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        p_in, p_out, p_begin, p_end, segments, extent, op_state, init = args
        if segments == 0:
            return
        extent = extent if extent <= plan.max_extent else 0   # past it: whole segments only
        tiles = storage_layout(plan, extent)[0]
        flag = -(-temp // REGION_ALIGN) * REGION_ALIGN
        states = flag + REGION_ALIGN
        epoch = next(_epochs) & 0x7FFFFFFF
        init_blocks = max(-(-tiles // plan.init_threads), min(-(-segments // plan.init_threads), plan.segment_grid))
        driver.launch(plan.init, init_blocks, plan.init_threads, stream,
                      self._init_params.pack(states, tiles, p_begin, p_end, segments, extent, flag, epoch))
        driver.launch(plan.scan, max(tiles, min(segments, plan.segment_grid)), plan.threads, stream,
                      self._scan_params.pack(p_in, p_out, p_begin, p_end, segments, extent, states, tiles, flag,
                                             epoch, op_state, init))

    def _run(self, temp_storage: Any, d_in: Any, d_out: Any, start_offsets_in: Any, end_offsets_in: Any, op: Any,
             init_value: Any, num_segments: Any, stream: Any, one_shot: bool) -> int | None:
        d = self.desc
        ns = check_num_items(num_segments, "num_segments")
        if ns > MAX_SEGMENTS:
            raise ArgumentError("num_segments", f"at most {MAX_SEGMENTS} segments", ns)
        sizes = [size for size in (_extent(d_in, d.d_in), _extent(d_out, d.d_out)) if size is not None]
        args = (d.d_in.bind(d_in, 0), d.d_out.bind(d_out, 0), d.begin.bind(start_offsets_in, ns, "num_segments"),
                d.end.bind(end_offsets_in, ns, "num_segments"), ns, min(sizes) if sizes else 0,
                functor_state(d.op, op) if d.op.state_size else b"\0",
                init_argument(d.init_kind, d.d_out.value, self._init_scalar_type, init_value))
        return self._execute(temp_storage, stream, one_shot, args, (op, d_in, d_out, start_offsets_in, end_offsets_in))

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in: ArrayOrIterator, d_out: ArrayOrIterator,
                 start_offsets_in: ArrayOrIterator, end_offsets_in: ArrayOrIterator, num_segments: int,
                 op: OperatorLike | None = None, init_value: InitValue | None = None,
                 stream: StreamLike | None = None) -> int | None:
        """Run (or, with ``temp_storage=None``, return the temporary bytes needed).
        ``init_value`` must be of the kind given at build time. An operator that captures
        device arrays must be passed again, with the arrays of this call."""
        return self._run(temp_storage, d_in, d_out, start_offsets_in, end_offsets_in, op, init_value, num_segments,
                         stream, False)


# ------------------------------------------------------------------- public functions

def _make(d_in: Any, d_out: Any, start_offsets_in: Any, end_offsets_in: Any, op: Any, init_value: Any,
          inclusive: bool, compute_capability: Any) -> SegmentedScan:
    desc = SegmentedScan._described(_describe, d_in, d_out, start_offsets_in, end_offsets_in, op, init_value,
                                    inclusive)
    return SegmentedScan._make(desc, compute_capability, (op, d_in, d_out, start_offsets_in, end_offsets_in))


@keyword_checked
def make_segmented_inclusive_scan(*, d_in: ArrayIteratorOrProxy, d_out: ArrayIteratorOrProxy,
                                  start_offsets_in: ArrayIteratorOrProxy, end_offsets_in: ArrayIteratorOrProxy,
                                  op: OperatorLike, init_value: InitValue | None = None,
                                  compute_capability: ComputeCapabilityLike | None = None) -> SegmentedScan:
    """Build (or fetch from cache) a segmented inclusive scan: each segment's running
    combination of its items, written where they are.

    Args:
        d_in: device array or iterator of items.
        d_out: device array or output iterator of results; its dtype is the type the scan
            computes in. May be ``d_in``.
        start_offsets_in, end_offsets_in: device arrays or iterators of a 32- or 64-bit
            integer type: segment ``s`` is ``[start_offsets_in[s], end_offsets_in[s])``.
        op: an associative ``OpKind``, Python callable ``f(a, b) -> value`` or RawOp.
        init_value: None, a host value or a one-element device array: combined in front of
            every segment.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.ones(10, np.int32); y = cp.zeros(10, np.int32)
        offsets = cp.asarray([0, 3, 3, 10], np.int64)      # segments of 3, 0 and 7 items
        s = cuprims.make_segmented_inclusive_scan(d_in=x, d_out=y, start_offsets_in=offsets[:-1],
                                                  end_offsets_in=offsets[1:], op=cuprims.OpKind.PLUS)
        call = dict(d_in=x, d_out=y, start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:], num_segments=3)
        tmp = cp.empty(s(temp_storage=None, **call), np.uint8)
        s(temp_storage=tmp, **call)          # y == [1, 2, 3, 1, 2, 3, 4, 5, 6, 7]
    """
    return _make(d_in, d_out, start_offsets_in, end_offsets_in, op, init_value, True, compute_capability)


@keyword_checked
def make_segmented_exclusive_scan(*, d_in: ArrayIteratorOrProxy, d_out: ArrayIteratorOrProxy,
                                  start_offsets_in: ArrayIteratorOrProxy, end_offsets_in: ArrayIteratorOrProxy,
                                  op: OperatorLike, init_value: InitValue,
                                  compute_capability: ComputeCapabilityLike | None = None) -> SegmentedScan:
    """Build (or fetch from cache) a segmented exclusive scan: each segment's first output is
    ``init_value``, each later one ``init_value`` combined with the segment's items before it.

    Args:
        d_in: device array or iterator of items.
        d_out: device array or output iterator of results; its dtype is the type the scan
            computes in. May be ``d_in``.
        start_offsets_in, end_offsets_in: device arrays or iterators of a 32- or 64-bit
            integer type: segment ``s`` is ``[start_offsets_in[s], end_offsets_in[s])``.
        op: an associative ``OpKind``, Python callable ``f(a, b) -> value`` or RawOp.
        init_value: a host value (numpy scalar or one-element array, gpu_struct value) or a
            one-element device array read when the kernel runs. Required.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(6, dtype=np.float32); y = cp.empty(6, np.float32)
        starts, ends = cp.asarray([0, 2], np.int32), cp.asarray([2, 6], np.int32)
        s = cuprims.make_segmented_exclusive_scan(d_in=x, d_out=y, start_offsets_in=starts, end_offsets_in=ends,
                                                  op=cuprims.OpKind.PLUS, init_value=np.float32(0))
        call = dict(d_in=x, d_out=y, start_offsets_in=starts, end_offsets_in=ends, num_segments=2,
                    init_value=np.float32(0))
        tmp = cp.empty(s(temp_storage=None, **call), np.uint8)
        s(temp_storage=tmp, **call)          # y == [0, 0, 0, 2, 5, 9]
    """
    return _make(d_in, d_out, start_offsets_in, end_offsets_in, op, init_value, False, compute_capability)


@keyword_checked
def segmented_inclusive_scan(*, d_in: ArrayOrIterator, d_out: ArrayOrIterator, start_offsets_in: ArrayOrIterator,
                             end_offsets_in: ArrayOrIterator, op: OperatorLike, num_segments: int,
                             init_value: InitValue | None = None, stream: StreamLike | None = None) -> None:
    """Segmented inclusive scan in one call (temporary storage taken on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray([1, 2, 3, 4, 5], np.int64); y = cp.empty_like(x)
        offsets = cp.asarray([0, 2, 5], np.int64)
        cuprims.segmented_inclusive_scan(d_in=x, d_out=y, start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:],
                                         op=cuprims.OpKind.PLUS, num_segments=2)
        assert y.get().tolist() == [1, 3, 3, 7, 12]
    """
    obj = _make(d_in, d_out, start_offsets_in, end_offsets_in, op, init_value, True, None)
    obj._run(None, d_in, d_out, start_offsets_in, end_offsets_in, op, init_value, num_segments, stream, True)


@keyword_checked
def segmented_exclusive_scan(*, d_in: ArrayOrIterator, d_out: ArrayOrIterator, start_offsets_in: ArrayOrIterator,
                             end_offsets_in: ArrayOrIterator, op: OperatorLike, init_value: InitValue,
                             num_segments: int, stream: StreamLike | None = None) -> None:
    """Segmented exclusive scan in one call (temporary storage taken on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray([1, 2, 3, 4, 5], np.int32); y = cp.empty_like(x)
        offsets = cp.asarray([0, 3, 5], np.int32)
        cuprims.segmented_exclusive_scan(d_in=x, d_out=y, start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:],
                                         op=cuprims.OpKind.PLUS, init_value=np.int32(0), num_segments=2)
        assert y.get().tolist() == [0, 1, 3, 0, 4]
    """
    obj = _make(d_in, d_out, start_offsets_in, end_offsets_in, op, init_value, False, None)
    obj._run(None, d_in, d_out, start_offsets_in, end_offsets_in, op, init_value, num_segments, stream, True)
