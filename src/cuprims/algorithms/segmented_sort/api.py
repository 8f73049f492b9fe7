"""Segmented sort: ``make_segmented_sort``, the sorter object, and ``segmented_sort``.

Segment ``i`` is ``[start_offsets_in[i], end_offsets_in[i])`` of the keys (and values);
each segment is sorted on its own, in ``order``, and lands at the same positions of the
output. Items outside every segment are left as they are in the output. Offsets are
arrays or iterators of one 32- or 64-bit integer type (fixed-size segments, for example,
as ``TransformIterator(CountingIterator(0), lambda i: i * size)``); an end at or below
its start is an empty segment, whatever the two values; a segment's items lie in
``[0, num_items)``.

The offsets' type does not set the kernels' index width: up to 2^31 - 1 items the kernels
compute offsets in 32 bits, reading 64-bit (or unsigned) offsets through a conversion, so
CuPy's default int64 offsets and int64 iterators cost what int32 offsets do. A larger
problem runs on a build variant with 64-bit offsets (made the first time one comes).

Keys of any bool, integer or floating-point dtype are ordered as ``radix_sort`` orders
them, which is numpy's order: floating-point NaNs (either sign) after +inf ascending and
first descending, -0.0 equal to +0.0. The sort is stable (equal keys keep their input
order; CUB's implementation, which its StableSort variants share). A NaN comes out as
the canonical quiet NaN from segments sorted by radix passes, with its own bits from the
short ones (merge-sorted in registers). Values of any dtype travel with their keys.

``DoubleBuffer`` keys (and values) let the sort use both buffers instead of a scratch copy
of the keys in temporary storage; the result is in ``d_in_keys.current()`` afterwards.

Kernels (CUB's where NVRTC compiles them) and the host dispatch, which never
synchronises: see ``dispatch`` and ``algorithms/segmented_sort/cuprims_segmented_sort.cuh``.
"""

from __future__ import annotations

from typing import Any

from cuprims._compile.source import Source
from cuprims.algorithms.arguments import ArgKind, keyword_checked, segment_offsets
from cuprims.algorithms.common import check_num_items
from cuprims.algorithms.segmented_sort.dispatch import SegmentedSortPlan, dispatch, temp_bytes
from cuprims.algorithms.segmented_sort.source import is_int32, segmented_sort_source
from cuprims.algorithms.skeleton import description
from cuprims.algorithms.sort_base import NARROW_MAX_ITEMS, SortAlgorithm, SortCall, SortDescription
from cuprims.algorithms.sort_common import DoubleBuffer, parse_order
from cuprims.algorithms.sort_source import check_radix_key
from cuprims.enums import SortOrder
from cuprims.errors import ArgumentError
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ArrayOrProxy, ComputeCapabilityLike, DeviceArrayLike,
                            SortOrderLike, StreamLike)

__all__ = ["SegmentedSort", "make_segmented_sort", "segmented_sort"]

_MAX_SEGMENTS = (1 << 31) - 1  # segment indices are 32-bit (index_t), and the count is packed as an i32
_DESCENDING = SortOrder.DESCENDING


@description
class SegmentedSortDescription(SortDescription):
    """Keys and values (as the sorts describe them), the start and end offsets' kinds,
    the order, ``mid_items``: the large kernel's middle tier (None: the default of
    ``algorithms/segmented_sort/cuprims_segmented_sort.cuh``; 0: CUB's tiers alone), a tuning knob,
    and ``wide_offsets``: variant 1, the kernels' offsets in the offsets' own width for
    problems past 2^31 - 1 items (variant 0 computes them in 32 bits whatever their type)."""

    begin: ArgKind
    end: ArgKind
    order: SortOrder
    mid_items: int | None = None
    wide_offsets: bool = False

    def __post_init__(self) -> None:
        check_radix_key(self.key)

    def source(self, arch: int) -> Source:
        return segmented_sort_source(key=self.key, value=self.value, descending=self.order is _DESCENDING,
                                     begin=self.begin, end=self.end, arch=arch, mid_items=self.mid_items,
                                     wide_offsets=self.wide_offsets)

    def _link(self) -> tuple:
        return self.begin.linked_ops() + self.end.linked_ops()

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        b, e = self.begin.param, self.end.param
        # keys in/out, keys' double buffer (16 bytes), values in/out and theirs, the offsets
        sort = ("ptr", "ptr", 16, "ptr", "ptr", 16, b, e)
        return (
            sort,                                                       # 0 fallback
            ("ptr",),                                                   # 1 clear: group sizes
            # 2 classify: group sizes, segments, large indices, small indices, medium indices' end, offsets
            ("ptr", "i32", "ptr", "ptr", "ptr", b, e),
            ("ptr", "ptr") + sort,                                      # 3 large: group sizes, indices, ...
            # 4 medium and small: group sizes, segments, small indices, medium indices' end, keys, values, offsets
            ("ptr", "i32", "ptr", "ptr", "ptr", "ptr", "ptr", "ptr", b, e),
            ("ptr", "ptr") + sort,                                      # 5 large, middle tier
        )



def _describe(d_in_keys: Any, d_out_keys: Any, d_in_values: Any, d_out_values: Any, start_offsets_in: Any,
              end_offsets_in: Any, order: Any) -> SegmentedSortDescription:
    """Check the build arguments (before anything is compiled) and describe the sort."""
    order = parse_order(order)
    value_dt = SegmentedSort._dtypes(d_in_keys, d_out_keys, d_in_values, d_out_values)[1]
    kinds = SegmentedSort._kinds(d_in_keys, d_out_keys, d_in_values, d_out_values, value_dt)
    return SegmentedSortDescription(*kinds, *segment_offsets(start_offsets_in, end_offsets_in), order)


class SegmentedSort(SortAlgorithm):
    """Sorts each segment ``[start_offsets_in[s], end_offsets_in[s])`` of the keys on its own;
    from :func:`make_segmented_sort`, for fixed key and value dtypes, offset kinds and order.
    ``temp_storage=None`` gives the temporary bytes; a buffer sorts on ``stream``.
    """

    desc: SegmentedSortDescription
    _plan_class = SegmentedSortPlan
    _double_buffers = True

    def _setup(self) -> None:
        super()._setup()
        # int32 offsets need no wide build: the narrow one is theirs at every size
        self._wide_variant = 0 if is_int32(self.desc.begin) else 1

    def _temp_bytes(self, plan: SegmentedSortPlan, call: SortCall) -> int:
        return temp_bytes(plan, call, self._key_size, self._value_size)

    def _dispatch(self, plan: SegmentedSortPlan, call: SortCall, temp: int, stream: int) -> None:
        dispatch(plan, call, temp, stream)

    def _run(self, temp_storage: Any, d_in_keys: Any, d_out_keys: Any, d_in_values: Any, d_out_values: Any,
             num_items: Any, num_segments: Any, start_offsets_in: Any, end_offsets_in: Any, stream: Any,
             one_shot: bool) -> int | None:
        n = check_num_items(num_items)
        ns = check_num_items(num_segments, "num_segments")
        if ns > _MAX_SEGMENTS:
            raise ArgumentError("num_segments", f"at most {_MAX_SEGMENTS} segments", ns)
        call = self._bind(d_in_keys, d_out_keys, d_in_values, d_out_values, n)
        desc = self.desc
        call.begin = desc.begin.bind(start_offsets_in, ns, "num_segments")
        call.end = desc.end.bind(end_offsets_in, ns, "num_segments")
        call.segments = ns
        if n == 0 or ns == 0:  # nothing to sort (CUB returns before touching any buffer, selector included)
            return 1 if temp_storage is None and not one_shot else None
        # the offset width from the problem's size, not from the offsets' type (the segment
        # indices are 32-bit in every build: num_segments is capped above)
        variant = self._wide_variant if n > NARROW_MAX_ITEMS else 0
        needed = self._execute(temp_storage, stream, one_shot, call, (None, start_offsets_in, end_offsets_in),
                               variant)
        self._follow_flips(call, d_in_keys, d_in_values)
        return needed

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in_keys: DeviceArrayLike | DoubleBuffer,
                 d_out_keys: DeviceArrayLike | None, d_in_values: DeviceArrayLike | DoubleBuffer | None,
                 d_out_values: DeviceArrayLike | None, num_items: int, num_segments: int,
                 start_offsets_in: ArrayOrIterator, end_offsets_in: ArrayOrIterator,
                 stream: StreamLike | None = None) -> int | None:
        """Sort the segments (or, with ``temp_storage=None``, return the temporary bytes
        needed). With a DoubleBuffer as ``d_in_keys`` the sorted keys are in
        ``d_in_keys.current()`` afterwards (and the values in ``d_in_values.current()``)."""
        return self._run(temp_storage, d_in_keys, d_out_keys, d_in_values, d_out_values, num_items, num_segments,
                         start_offsets_in, end_offsets_in, stream, False)


@keyword_checked
def make_segmented_sort(*, d_in_keys: ArrayOrProxy | DoubleBuffer, d_out_keys: ArrayOrProxy | None = None,
                        d_in_values: ArrayOrProxy | DoubleBuffer | None = None,
                        d_out_values: ArrayOrProxy | None = None,
                        start_offsets_in: ArrayIteratorOrProxy, end_offsets_in: ArrayIteratorOrProxy,
                        order: SortOrderLike, compute_capability: ComputeCapabilityLike | None = None) -> SegmentedSort:
    """Build (or fetch from cache) a sort of each segment of keys (and values) in ``order``.

    Args:
        d_in_keys, d_out_keys: keys (bool, integer or floating point) in and out: device
            arrays (``ProxyArray`` to build ahead of time), or a ``DoubleBuffer`` in
            ``d_in_keys`` and None in ``d_out_keys``.
        d_in_values, d_out_values: values of any dtype that travel with their keys, as
            the keys are given; or None for keys alone.
        start_offsets_in, end_offsets_in: device arrays or iterators of int32/int64 (or
            uint32/uint64) offsets, one pair per segment. Their type does not set the
            kernels' offset width: 32 bits up to 2^31 - 1 items, 64 past it.
        order: ``SortOrder.ASCENDING`` or ``SortOrder.DESCENDING``.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray(np.array([3, 1, 2, 9, 7, 8], dtype=np.int32))
        out = cp.empty_like(keys)
        offsets = cp.asarray(np.array([0, 3, 6], dtype=np.int32))
        kw = dict(d_in_keys=keys, d_out_keys=out, d_in_values=None, d_out_values=None,
                  start_offsets_in=offsets[:-1], end_offsets_in=offsets[1:])
        sorter = cuprims.make_segmented_sort(order=cuprims.SortOrder.ASCENDING, **kw)
        tmp = cp.empty(sorter(temp_storage=None, num_items=6, num_segments=2, **kw), np.uint8)
        sorter(temp_storage=tmp, num_items=6, num_segments=2, **kw)
        assert out.get().tolist() == [1, 2, 3, 7, 8, 9]
    """
    desc = SegmentedSort._described(_describe, d_in_keys, d_out_keys, d_in_values, d_out_values, start_offsets_in,
                                    end_offsets_in, order)
    return SegmentedSort._make(desc, compute_capability, (None, start_offsets_in, end_offsets_in))


@keyword_checked
def segmented_sort(*, d_in_keys: DeviceArrayLike | DoubleBuffer, d_out_keys: DeviceArrayLike | None = None,
                   d_in_values: DeviceArrayLike | DoubleBuffer | None = None,
                   d_out_values: DeviceArrayLike | None = None, num_items: int, num_segments: int,
                   start_offsets_in: ArrayOrIterator, end_offsets_in: ArrayOrIterator, order: SortOrderLike,
                   stream: StreamLike | None = None) -> None:
    """Sort ``num_segments`` segments of ``num_items`` keys (and their values), in one call.

    Temporary storage is allocated and freed on ``stream`` (stream-ordered), so the call
    never synchronises. With a ``DoubleBuffer`` as ``d_in_keys`` (``d_out_keys=None``) the
    sort needs no scratch copy of the keys and leaves the result in ``d_in_keys.current()``.

    Example::

        import cupy as cp, numpy as np, cuprims
        from cuprims import CountingIterator, TransformIterator
        keys = cp.asarray(np.random.default_rng(0).random(4 * 100, dtype=np.float32))
        vals = cp.arange(400, dtype=np.int32)
        out_k, out_v = cp.empty_like(keys), cp.empty_like(vals)
        starts = TransformIterator(CountingIterator(np.int32(0)), lambda i: i * 100)
        ends = TransformIterator(CountingIterator(np.int32(1)), lambda i: i * 100)
        cuprims.segmented_sort(d_in_keys=keys, d_out_keys=out_k, d_in_values=vals, d_out_values=out_v,
                               num_items=400, num_segments=4, start_offsets_in=starts, end_offsets_in=ends,
                               order=cuprims.SortOrder.DESCENDING)
        assert (out_k.reshape(4, 100)[:, :-1] >= out_k.reshape(4, 100)[:, 1:]).all()
    """
    desc = SegmentedSort._described(_describe, d_in_keys, d_out_keys, d_in_values, d_out_values, start_offsets_in,
                                    end_offsets_in, order)
    obj = SegmentedSort._make(desc, None, (None, start_offsets_in, end_offsets_in))
    obj._run(None, d_in_keys, d_out_keys, d_in_values, d_out_values, num_items, num_segments, start_offsets_in,
             end_offsets_in, stream, True)
