"""Segmented top-k: ``make_segmented_top_k``, the object, and ``segmented_top_k``.

Row ``i`` of the keys is either ``[i * segment_size, (i + 1) * segment_size)`` (fixed
rows) or ``[start_offsets_in[i], end_offsets_in[i])`` (offsets: arrays or iterators of
one 32- or 64-bit integer type; an end at or below its start is an empty row). The ``k``
largest keys of each row (``SortOrder.DESCENDING``; the ``k`` smallest with
``ASCENDING``), and their values, land at ``[i * k, (i + 1) * k)`` of the outputs, sorted
(largest first for DESCENDING, smallest first for ASCENDING), as ``torch.topk(x, k,
dim=-1)`` gives them.

Order: numpy's, floating-point NaNs (either sign) above +inf (the largest keys take the
NaNs first, the smallest take them last) and -0.0 equal to +0.0; keys are written with
their own bits. Ties: of equal keys the ones earlier in the row are taken (and come
first in the output), so each row's output is what a stable sort of the row in
``order`` begins with.

Limits: ``k`` at most 1024 (:data:`MAX_K`); fixed rows of fewer than ``k`` keys are
refused; an offset row of ``n < k`` keys writes its ``n`` keys, sorted, at the start of
its ``k`` slots and leaves the other slots as they were. A row holds at most 2^30 keys
(fixed rows: refused past it; an offset row is cut there).

Host dispatch (ours; kernels in ``algorithms/segmented_top_k/cuprims_segmented_top_k.cuh``):
a warp per short row, a block per longer one, in tiers of row length (``source.TIERS``),
the grids capped at :data:`WAVES` waves of block slots (the groups stride over the rows). Fixed rows launch the one
tier that holds their length; offset rows (lengths unknown to the host, which never
synchronises) launch every tier, each taking the rows of its range of lengths. No
temporary storage.
"""

from __future__ import annotations

from typing import Any

from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims.algorithms.arguments import ArgKind, keyword_checked, segment_offsets
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.segmented_top_k.source import MAX_K, TIERS, segmented_top_k_source
from cuprims.algorithms.skeleton import Description, Plan, description
from cuprims.algorithms.sort_base import SortAlgorithm
from cuprims.algorithms.sort_common import overlaps, parse_order
from cuprims.algorithms.sort_source import check_radix_key
from cuprims.enums import SortOrder
from cuprims.errors import ArgumentError
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ArrayOrProxy, ComputeCapabilityLike,
                            DeviceArrayLike, SortOrderLike, StreamLike)

__all__ = ["SegmentedTopK", "make_segmented_top_k", "segmented_top_k", "MAX_K"]

_MAX_SEGMENTS = (1 << 31) - 1  # a block per row: the grid's x dimension
_MAX_ROW = 1 << 30  # the kernel's row positions are int, a tile past the last one included
_NO_LIMIT = (1 << 63) - 1
# Grids are capped at this many waves of a kernel's block slots; the groups then stride
# over the rows (a batch of their offsets at a time). Rows by offsets launch every tier, so
# without the cap 2^20 short rows would launch 2^20 blocks of each longer tier just to
# read their offsets and leave.
WAVES = 8


@description
class SegmentedTopKDescription(Description):
    """Keys and values (values None: keys alone; values as opaque bytes), the start and end
    offsets' kinds (both None: rows of a fixed size) and the order."""

    d_in_keys: ArgKind
    d_out_keys: ArgKind
    d_in_values: ArgKind | None
    d_out_values: ArgKind | None
    begin: ArgKind | None
    end: ArgKind | None
    order: SortOrder

    def __post_init__(self) -> None:
        check_radix_key(self.d_in_keys.value)

    @property
    def fixed(self) -> bool:
        return self.begin is None

    def source(self, arch: int) -> Source:
        value = None if self.d_out_values is None else self.d_out_values.value
        return segmented_top_k_source(key=self.d_in_keys.value, value=value,
                                      descending=self.order is SortOrder.DESCENDING, begin=self.begin, end=self.end,
                                      arch=arch)

    def _link(self) -> tuple:
        return () if self.begin is None else self.begin.linked_ops() + self.end.linked_ops()  # type: ignore[union-attr]

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        b, e = ("i64", "i64") if self.begin is None else (self.begin.param, self.end.param)  # type: ignore[union-attr]
        # keys in/out, values in/out, row starts and ends (a fixed row's size), k, rows, the tier's (lo, hi]
        return (("ptr", "ptr", "ptr", "ptr", b, e, "i32", "i32", "i64", "i64"),) * len(TIERS)


class _Plan(Plan):
    """The tiers' kernels, blocks and tiles."""

    __slots__ = ("kernels", "threads", "tiles", "rows", "caps", "packs", "device")

    def __init__(self, loaded: Loaded, desc: SegmentedTopKDescription):
        self.kernels = loaded.handles
        self.tiles = tuple(loaded.meta[f"tile_{i}"] for i in range(len(TIERS)))
        self.rows = tuple(loaded.meta[f"rows_{i}"] for i in range(len(TIERS)))   # rows a block takes at once
        self.threads = tuple(t for t, _, _ in TIERS)
        sms = driver.sm_count(loaded.device)
        occupancy = loaded.module.max_active_blocks
        self.caps = tuple(max(1, occupancy(name, threads)) * sms * WAVES
                          for name, threads in zip(loaded.names, self.threads))
        self.packs = tuple(driver.ParamPack(p) for p in desc.kernel_params())


def tier_of(tiles: tuple[int, ...], size: int) -> int:
    """The tier of rows of ``size`` keys: the first whose tile holds them, else the last."""
    return next((i for i, tile in enumerate(tiles[:-1]) if size <= tile), len(tiles) - 1)


def _describe(d_in_keys: Any, d_out_keys: Any, d_in_values: Any, d_out_values: Any, start_offsets_in: Any,
              end_offsets_in: Any, order: Any) -> SegmentedTopKDescription:
    """Check the build arguments (before anything is compiled) and describe the selection."""
    order = parse_order(order)
    value_dt = SegmentedTopK._dtypes(d_in_keys, d_out_keys, d_in_values, d_out_values)[1]
    kinds = SegmentedTopK._kinds(d_in_keys, d_out_keys, d_in_values, d_out_values, value_dt)
    check_radix_key(kinds[0].value)
    if start_offsets_in is None and end_offsets_in is None:
        offsets: tuple = (None, None)
    elif start_offsets_in is None or end_offsets_in is None:
        given, missing = (("end_offsets_in", "start_offsets_in") if start_offsets_in is None
                          else ("start_offsets_in", "end_offsets_in"))
        raise ArgumentError(missing, f"offsets together with {given} (or neither, for rows of a fixed "
                            "segment_size)", None)
    else:
        offsets = segment_offsets(start_offsets_in, end_offsets_in)
    keys_in, keys_out, values_in, values_out = kinds
    begin, end = offsets
    return SegmentedTopKDescription(keys_in, keys_out, values_in, values_out, begin, end, order)


def _check_k(k: Any) -> int:
    k = check_num_items(k, "k")
    if k > MAX_K:
        raise ArgumentError("k", f"at most {MAX_K} (the kernels keep k items a row in shared memory)", k)
    return k


class SegmentedTopK(SortAlgorithm):
    """Selects the top ``k`` keys (and values) of each row; from :func:`make_segmented_top_k`,
    for fixed key and value dtypes, kind of rows and order. It needs no temporary storage:
    ``temp_storage=None`` returns 1 (the least a query reports) and any buffer is accepted.
    """

    # the sorts' argument checks (_dtypes, _kinds) are shared; the description and plan are its own
    desc: SegmentedTopKDescription  # type: ignore[assignment]

    def _setup(self) -> None:
        pass  # nothing per object: the parameter packs are the plan's

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:  # type: ignore[override]
        return _Plan(loaded, self.desc)

    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        return 0

    # args: (k_in, k_out, v_in, v_out, begin, end, k, segments, size or None)
    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        k_in, k_out, v_in, v_out, begin, end, k, segments, size = args
        if not k or not segments:
            return
        ranges: tuple[tuple[int, int, int], ...]
        if size is not None:  # fixed rows: the one tier of their length
            i = tier_of(plan.tiles, size)
            ranges = ((i, -1, _NO_LIMIT),)
        else:
            lows = (-1,) + plan.tiles[:-1]
            ranges = tuple((i, lows[i], plan.tiles[i] if i < len(TIERS) - 1 else _NO_LIMIT) for i in range(len(TIERS)))
        for i, lo, hi in ranges:
            grid = min(-(-segments // plan.rows[i]), plan.caps[i])
            driver.launch(plan.kernels[i], grid, plan.threads[i], stream,
                          plan.packs[i].pack(k_in, k_out, v_in, v_out, begin, end, k, segments, lo, hi))

    def _run(self, temp_storage: Any, d_in_keys: Any, d_out_keys: Any, d_in_values: Any, d_out_values: Any, k: Any,
             num_segments: Any, segment_size: Any, start_offsets_in: Any, end_offsets_in: Any, stream: Any,
             one_shot: bool) -> int | None:
        desc = self.desc
        k = _check_k(k)
        ns = check_num_items(num_segments, "num_segments")
        if ns > _MAX_SEGMENTS:
            raise ArgumentError("num_segments", f"at most {_MAX_SEGMENTS} rows", ns)
        size = _rows(desc, k, ns, segment_size, start_offsets_in, end_offsets_in)
        n_in = 0 if size is None else ns * size
        n_out = ns * k
        key, value = (desc.d_in_keys, desc.d_out_keys), (desc.d_in_values, desc.d_out_values)
        if (d_in_values is None) != (desc.d_in_values is None):
            raise ArgumentError("d_in_values", "None (this object was built for keys only)" if desc.d_in_values is None
                                else "device array of values (this object was built for key-value pairs)",
                                d_in_values)
        if d_in_values is None and d_out_values is not None:
            raise ArgumentError("d_out_values", "None (no d_in_values were given)", d_out_values)
        k_in, k_out = key[0].pointer(d_in_keys, n_in), key[1].pointer(d_out_keys, n_out, "num_segments * k")
        v_in = v_out = 0
        if d_in_values is not None:
            v_in = value[0].pointer(d_in_values, n_in)  # type: ignore[union-attr]
            v_out = value[1].pointer(d_out_values, n_out, "num_segments * k")  # type: ignore[union-attr]
        ks, vs = desc.d_in_keys.value.size, 0 if desc.d_in_values is None else desc.d_in_values.value.size
        for name, p, nbytes in (("d_out_keys", k_out, n_out * ks), ("d_out_values", v_out, n_out * vs)):
            for q, qbytes in ((k_in, n_in * ks), (v_in, n_in * vs)):
                if p and q and overlaps(p, nbytes, q, qbytes):
                    raise ArgumentError(name, "memory apart from the inputs", "an array overlapping one")
        if size is None:
            begin = desc.begin.bind(start_offsets_in, ns, "num_segments")  # type: ignore[union-attr]
            end = desc.end.bind(end_offsets_in, ns, "num_segments")  # type: ignore[union-attr]
            raw: tuple = (None, start_offsets_in, end_offsets_in)
        else:
            begin = end = size
            raw = (None,)
        args = (k_in, k_out, v_in, v_out, begin, end, k, ns, size)
        return self._execute(temp_storage, stream, one_shot, args, raw, 0)

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in_keys: DeviceArrayLike,
                 d_out_keys: DeviceArrayLike, d_in_values: DeviceArrayLike | None = None,
                 d_out_values: DeviceArrayLike | None = None, k: int, num_segments: int,
                 segment_size: int | None = None, start_offsets_in: ArrayOrIterator | None = None,
                 end_offsets_in: ArrayOrIterator | None = None, stream: StreamLike | None = None) -> int | None:
        """Select (or, with ``temp_storage=None``, return the temporary bytes needed: 1).
        Rows as the object was built: ``segment_size`` for fixed rows, the offsets otherwise."""
        return self._run(temp_storage, d_in_keys, d_out_keys, d_in_values, d_out_values, k, num_segments,
                         segment_size, start_offsets_in, end_offsets_in, stream, False)


def _rows(desc: SegmentedTopKDescription, k: int, ns: int, segment_size: Any, start_offsets_in: Any,
          end_offsets_in: Any) -> int | None:
    """A fixed row's size (checked), or None for rows by offsets (which must be given)."""
    if desc.fixed:
        if start_offsets_in is not None or end_offsets_in is not None:
            raise ArgumentError("start_offsets_in", "None (this object was built for rows of a fixed segment_size)",
                                start_offsets_in if start_offsets_in is not None else end_offsets_in)
        if segment_size is None:
            raise ArgumentError("segment_size", "the rows' size (this object was built for fixed rows)", None)
        size = check_num_items(segment_size, "segment_size")
        if size > _MAX_ROW:
            raise ArgumentError("segment_size", f"at most {_MAX_ROW} keys a row", size)
        if k > size:
            raise ArgumentError("k", f"at most segment_size={size} (each row gives k keys)", k)
        check_num_items(ns * size, "num_segments * segment_size")
        return size
    if segment_size is not None:
        raise ArgumentError("segment_size", "None (this object was built for rows given by offsets)", segment_size)
    if start_offsets_in is None or end_offsets_in is None:
        raise ArgumentError("start_offsets_in" if start_offsets_in is None else "end_offsets_in",
                            "offsets (this object was built for rows given by offsets)", None)
    return None


@keyword_checked
def make_segmented_top_k(*, d_in_keys: ArrayOrProxy, d_out_keys: ArrayOrProxy, d_in_values: ArrayOrProxy | None = None,
                         d_out_values: ArrayOrProxy | None = None,
                         start_offsets_in: ArrayIteratorOrProxy | None = None,
                         end_offsets_in: ArrayIteratorOrProxy | None = None,
                         order: SortOrderLike = SortOrder.DESCENDING,
                         compute_capability: ComputeCapabilityLike | None = None) -> SegmentedTopK:
    """Build (or fetch from cache) a selection of the top ``k`` keys (and values) of each row.

    Args:
        d_in_keys, d_out_keys: keys (bool, integer or floating point) in, and an array of the
            same dtype for ``num_segments * k`` keys out (``ProxyArray`` to build ahead of time).
        d_in_values, d_out_values: values of any dtype that travel with their keys (e.g.
            column indices), or None for keys alone.
        start_offsets_in, end_offsets_in: for rows given by offsets, device arrays or
            iterators of int32/int64 (or uint32/uint64) offsets, one pair a row; None for
            rows of a fixed ``segment_size`` (given at each call).
        order: ``SortOrder.DESCENDING`` (the k largest, largest first) or ``ASCENDING``
            (the k smallest, smallest first). Of equal keys the earlier ones are taken.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray([[3, 9, 1, 7], [5, 2, 8, 6]], np.float32)
        cols = cp.tile(cp.arange(4, dtype=np.int32), 2)
        top, idx = cp.empty(4, np.float32), cp.empty(4, np.int32)
        kw = dict(d_in_keys=x, d_out_keys=top, d_in_values=cols, d_out_values=idx)
        topk = cuprims.make_segmented_top_k(**kw)
        tmp = cp.empty(topk(temp_storage=None, k=2, num_segments=2, segment_size=4, **kw), np.uint8)
        topk(temp_storage=tmp, k=2, num_segments=2, segment_size=4, **kw)
        assert top.get().tolist() == [9, 7, 8, 6] and idx.get().tolist() == [1, 3, 2, 3]
    """
    desc = SegmentedTopK._described(_describe, d_in_keys, d_out_keys, d_in_values, d_out_values, start_offsets_in,
                                    end_offsets_in, order)
    raw = (None,) if desc.fixed else (None, start_offsets_in, end_offsets_in)
    return SegmentedTopK._make(desc, compute_capability, raw)


@keyword_checked
def segmented_top_k(*, d_in_keys: DeviceArrayLike, d_out_keys: DeviceArrayLike,
                    d_in_values: DeviceArrayLike | None = None, d_out_values: DeviceArrayLike | None = None, k: int,
                    num_segments: int, segment_size: int | None = None,
                    start_offsets_in: ArrayOrIterator | None = None, end_offsets_in: ArrayOrIterator | None = None,
                    order: SortOrderLike = SortOrder.DESCENDING, stream: StreamLike | None = None) -> None:
    """The top ``k`` keys (and values) of each of ``num_segments`` rows, in one call: rows of
    a fixed ``segment_size``, or given by ``start_offsets_in``/``end_offsets_in`` (exactly
    one of the two). Row ``i``'s keys land sorted at ``[i * k, (i + 1) * k)``.

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray([4, 1, 3, 9, 2, 8, 7], np.int64)
        offsets = cp.asarray([0, 3, 3, 7])          # rows [4 1 3], [], [9 2 8 7]
        out = cp.full(6, -1, np.int64)
        cuprims.segmented_top_k(d_in_keys=x, d_out_keys=out, k=2, num_segments=3,
                                start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:],
                                order=cuprims.SortOrder.ASCENDING)
        assert out.get().tolist() == [1, 3, -1, -1, 2, 7]   # an empty row writes nothing
    """
    if segment_size is not None and (start_offsets_in is not None or end_offsets_in is not None):
        raise ArgumentError("segment_size", "None when start_offsets_in/end_offsets_in give the rows (exactly one "
                            "of the two ways)", segment_size)
    if segment_size is None and start_offsets_in is None and end_offsets_in is None:
        raise ArgumentError("segment_size", "the rows' size, or start_offsets_in and end_offsets_in (exactly one "
                            "of the two ways)", None)
    obj = make_segmented_top_k.__wrapped__(d_in_keys=d_in_keys, d_out_keys=d_out_keys, d_in_values=d_in_values,
                                           d_out_values=d_out_values, start_offsets_in=start_offsets_in,
                                           end_offsets_in=end_offsets_in, order=order)
    obj._run(None, d_in_keys, d_out_keys, d_in_values, d_out_values, k, num_segments, segment_size, start_offsets_in,
             end_offsets_in, stream, True)
