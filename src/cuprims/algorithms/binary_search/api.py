"""Vectorised binary search: ``make_lower_bound``, ``make_upper_bound``, ``lower_bound``,
``upper_bound``.

For each of ``num_values`` values of ``d_values``, the index of the first element of the
sorted ``d_data[:num_items]`` that is not less than the value (lower bound) or that is
greater than it (upper bound) is written to ``d_out``, like ``numpy.searchsorted`` with
``side="left"`` / ``side="right"``. The values need not be sorted.

``comp`` is the order ``d_data`` is sorted by: None or ``OpKind.LESS`` (ascending; NaN
last on floating-point data, as numpy sorts), ``OpKind.GREATER`` (descending), a Python
callable ``comp(a, b) -> bool`` ("a goes before b") or a ``RawOp``.

``d_out`` holds the indices: int32, int64, uint32 or uint64 (cuda.compute requires a
pointer-sized unsigned type; cuprims accepts those four and checks at each call that
``num_items`` fits the chosen type). ``d_values`` is a device array of ``d_data``'s dtype
or an iterator (``cuprims.CountingIterator``, ``TransformIterator``, ...) whose value type
is that dtype; an object built for an iterator takes, at each call, any iterator of the
same kind (its state, e.g. a counting start, may differ).

Host dispatch: one thread per value (grid = ceil(num_values / block)); every level of the
search is read through the caching path, and the last levels (a range of at most 128
bytes) are prefetched together, see ``algorithms/binary_search/cuprims_binary_search.cuh``. (Reading the
deep levels evict-first, to keep the top of the tree in L2, was measured on the H200 and
lost: 2^24 random int32 queries into 2^28 took 6.13 ms with the top 19 levels cached and
the rest evict-first, 5.37 ms with every level cached; torch.searchsorted took 5.77 ms.
``hot_levels()`` and the override remain for such experiments.)
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from cuprims._build.results import OpInput
from cuprims._codegen.common import op_symbol
from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims._runtime.streams import stream_handle
from cuprims.algorithms.arguments import ArgKind, describe, keyword_checked
from cuprims.algorithms.binary_search.source import INDEX_CODES, binary_search_source, check_comparator_builtin
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.skeleton import Algorithm, Description, Plan, description, functor_size, functor_state
from cuprims.errors import ArgumentError
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ArrayOrProxy, ComputeCapabilityLike, DeviceArrayLike,
                            OperatorLike, StreamLike)
from cuprims.op import OpKind, OpSpec, op_spec

_MAX_GRID = (1 << 31) - 1
# Memory is fetched into L2 in sectors of this many bytes: a probe costs at least one.
_SECTOR = 32
_ALL_LEVELS = 64
# Once the range left spans at most this many bytes, its lines are prefetched together.
_WINDOW_BYTES = 128


@cache
def _l2_bytes(device: int) -> int:
    return driver.device_attribute(driver.ATTRIBUTE_L2_CACHE_SIZE, device)


def hot_levels(num_items: int, value_size: int, l2_bytes: int) -> int:
    """How many top levels of the search tree to read through the caching path.

    The first k levels probe at most 2^k - 1 distinct elements, whichever values are
    searched; they are kept cached while they fit in half of L2. Deeper levels are read
    evict-first. A range that fits in half of L2 is read entirely through the cache."""
    budget = l2_bytes // 2
    if num_items * value_size <= budget:
        return _ALL_LEVELS
    probe = max(_SECTOR, -(-value_size // _SECTOR) * _SECTOR)
    levels = 0
    while (2 << levels) * probe <= budget:
        levels += 1
    return levels


@description
class SearchDescription(Description):
    """A search: the sorted data, the values looked up (an array, or an iterator kind with
    its C++ in ``values.unit``), the index type written, the comparator."""

    data: ArgKind
    values: ArgKind
    out: ArgKind
    comp: OpSpec

    @property
    def operator(self) -> OpSpec:
        return self.comp

    def source(self, arch: int) -> Source:
        return binary_search_source(data=self.data.value, out=self.out.value, op=self.comp, arch=arch,
                                    values=self.values.unit)

    def _link(self) -> tuple[OpInput, ...]:
        # the comparator, then the values iterator's operators (the order of _objects)
        data = self.data.value
        ops = () if self.comp.kind == "builtin" else (
            OpInput(op_symbol(self.comp, "cuprims_op_0"), self.comp, (data, data), None),)
        return ops + self.values.linked_ops()

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        # binary_search_kernel(data, num_items, values, num_values, out, comp, hot_levels, window, upper);
        # an iterator is passed as its state struct alone (the bound {state, position} keeps it first)
        values = "ptr" if self.values.is_pointer else self.values.unit_state_size
        return ((self.data.param, "i64", values, "i64", self.out.param, functor_size(self.comp), "i32", "i64",
                 "i32"),)


def _describe(d_data: Any, d_values: Any, d_out: Any, comp: Any) -> SearchDescription:
    """Check the build arguments and describe the search."""
    data = describe(d_data, "d_data")
    values = describe(d_values, "d_values", iterators=True)
    dt = data.value.dtype
    what = "an array" if values.is_pointer else "an iterator"
    if (values.value.dtype != dt) if values.is_pointer else (values.value.code != data.value.code):
        raise ArgumentError("d_values", f"{what} of d_data's dtype {dt}", f"{what} of {values.value.dtype}")
    out = describe(d_out, "d_out", output=True)
    if out.value.code not in INDEX_CODES:
        raise ArgumentError("d_out", "an array of int32, int64, uint32 or uint64 indices", out.value.dtype)
    spec = op_spec(OpKind.LESS if comp is None else comp, argument="comp", bind_captures=True)
    if spec.kind == "builtin":
        check_comparator_builtin(spec, data.value)
    return SearchDescription(data, values, out, spec)


class _Plan(Plan):
    __slots__ = ("kernel", "threads", "device")

    def __init__(self, loaded: Loaded):
        self.kernel, self.threads = loaded.handles[0], loaded.meta["threads"]


class _BinarySearch(Algorithm):
    """A lower- or upper-bound search built for fixed types and comparator; call it to run."""

    desc: SearchDescription
    _UPPER = 0

    def _setup(self) -> None:
        desc = self.desc
        (self._params,) = self._packs
        self._value_size = desc.data.value.size
        self._max_index = int(np.iinfo(desc.out.value.dtype).max)
        # For experiments: a fixed number of cached levels (None: all), the prefetch window in bytes (0: none).
        self._hot_levels_override: int | None = None
        self._window_bytes = _WINDOW_BYTES

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded)

    # args: (p_data, num_items, values parameter, num_values, p_out, comparator state)
    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        p_data, n, p_values, nv, p_out, state = args
        grid = -(-nv // plan.threads)
        if grid > _MAX_GRID:
            raise ArgumentError("num_values", f"at most {_MAX_GRID * plan.threads} values for one launch", nv)
        hot = self._hot_levels_override
        if hot is None:
            hot = _ALL_LEVELS  # measured best on the H200 (see the module docstring)
        window = self._window_bytes // self._value_size
        params = self._params.pack(p_data, n, p_values, nv, p_out, state, hot, window, self._UPPER)
        driver.launch(plan.kernel, grid, plan.threads, stream, params)

    def _run(self, d_data: Any, num_items: Any, d_values: Any, num_values: Any, d_out: Any, comp: Any,
             stream: Any) -> None:
        n = check_num_items(num_items)
        nv = check_num_items(num_values, "num_values")
        if n > self._max_index:
            raise ArgumentError("num_items", f"at most {self._max_index} items (the largest index d_out's "
                                f"{self.desc.out.value.dtype} holds)", n)
        desc = self.desc
        p_data = desc.data.bind(d_data, n)
        p_values = desc.values.bind(d_values, nv, "num_values")
        p_out = desc.out.bind(d_out, nv, "num_values")
        s = stream_handle(stream) if stream is not None else 0  # checked before any device is asked for
        if nv == 0:
            return
        state = functor_state(desc.comp, comp, "comp") if desc.comp.state_size else self._state
        self._execute(None, s, True, (p_data, n, p_values, nv, p_out, state), (comp, d_values))

    def __call__(self, *, d_data: DeviceArrayLike, num_items: int, d_values: ArrayOrIterator, num_values: int,
                 d_out: DeviceArrayLike, comp: OperatorLike | None = None, stream: StreamLike | None = None) -> None:
        """Search ``num_values`` values of ``d_values`` in ``d_data[:num_items]``, writing indices to ``d_out``."""
        self._run(d_data, num_items, d_values, num_values, d_out, comp, stream)


class LowerBound(_BinarySearch):
    """Lower-bound search object: see :func:`make_lower_bound`."""

    _UPPER = 0


class UpperBound(_BinarySearch):
    """Upper-bound search object: see :func:`make_upper_bound`."""

    _UPPER = 1


# ------------------------------------------------------------------- public functions

@keyword_checked
def make_lower_bound(*, d_data: ArrayOrProxy, d_values: ArrayIteratorOrProxy, d_out: ArrayOrProxy,
                     comp: OperatorLike | None = None,
                     compute_capability: ComputeCapabilityLike | None = None) -> LowerBound:
    """Build (or fetch from cache) a lower-bound search: for each value, the index of the
    first element of sorted ``d_data`` that is not less than it (``np.searchsorted(side="left")``).

    Args:
        d_data: device array (or ``ProxyArray``) of the sorted range.
        d_values: device array of the values to look up (same dtype as ``d_data``), or an
            iterator of that value type (e.g. ``cuprims.CountingIterator(np.int32(0))``).
        d_out: device array of int32, int64, uint32 or uint64 receiving the indices.
        comp: None / ``OpKind.LESS`` (ascending), ``OpKind.GREATER`` (descending), a Python
            callable ``comp(a, b) -> bool`` or a ``RawOp``. Device arrays a Python ``comp``
            captures (a global, closure variable or default argument) are read at each call,
            never compiled in: pass ``comp=`` to every call of the object.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        data = cp.asarray([1, 3, 3, 7], dtype=np.int32); values = cp.asarray([3, 8], dtype=np.int32)
        out = cp.empty(2, np.uint64)
        search = cuprims.make_lower_bound(d_data=data, d_values=values, d_out=out)
        search(d_data=data, num_items=4, d_values=values, num_values=2, d_out=out, comp=None)
        assert out.tolist() == [1, 4]
    """
    desc = LowerBound._described(_describe, d_data, d_values, d_out, comp)
    return LowerBound._make(desc, compute_capability, (comp, d_values))


@keyword_checked
def make_upper_bound(*, d_data: ArrayOrProxy, d_values: ArrayIteratorOrProxy, d_out: ArrayOrProxy,
                     comp: OperatorLike | None = None,
                     compute_capability: ComputeCapabilityLike | None = None) -> UpperBound:
    """Build (or fetch from cache) an upper-bound search: for each value, the index of the
    first element of sorted ``d_data`` that is greater than it (``np.searchsorted(side="right")``).

    Arguments as for :func:`make_lower_bound` (device arrays a Python ``comp`` captures are
    read at each call).

    Example::

        import cupy as cp, numpy as np, cuprims
        data = cp.asarray([1, 3, 3, 7], dtype=np.int32); values = cp.asarray([3, 0], dtype=np.int32)
        out = cp.empty(2, np.int64)
        search = cuprims.make_upper_bound(d_data=data, d_values=values, d_out=out)
        search(d_data=data, num_items=4, d_values=values, num_values=2, d_out=out, comp=None)
        assert out.tolist() == [3, 0]
    """
    desc = UpperBound._described(_describe, d_data, d_values, d_out, comp)
    return UpperBound._make(desc, compute_capability, (comp, d_values))


@keyword_checked
def lower_bound(*, d_data: DeviceArrayLike, num_items: int, d_values: ArrayOrIterator, num_values: int,
                d_out: DeviceArrayLike, comp: OperatorLike | None = None, stream: StreamLike | None = None) -> None:
    """For each of ``num_values`` values, write the index of the first element of the sorted
    ``d_data[:num_items]`` not less than it to ``d_out`` (on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        data = cp.arange(0, 100, 10, dtype=np.float32); values = cp.asarray([15.0, -1.0], np.float32)
        out = cp.empty(2, np.int32)
        cuprims.lower_bound(d_data=data, num_items=10, d_values=values, num_values=2, d_out=out)
        assert out.tolist() == [2, 0]
    """
    obj = make_lower_bound.__wrapped__(d_data=d_data, d_values=d_values, d_out=d_out, comp=comp)
    obj._run(d_data, num_items, d_values, num_values, d_out, comp, stream)


@keyword_checked
def upper_bound(*, d_data: DeviceArrayLike, num_items: int, d_values: ArrayOrIterator, num_values: int,
                d_out: DeviceArrayLike, comp: OperatorLike | None = None, stream: StreamLike | None = None) -> None:
    """For each of ``num_values`` values, write the index of the first element of the sorted
    ``d_data[:num_items]`` greater than it to ``d_out`` (on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        data = cp.asarray([5, 4, 4, 1], dtype=np.int64); values = cp.asarray([4], np.int64)
        out = cp.empty(1, np.uint64)
        cuprims.upper_bound(d_data=data, num_items=4, d_values=values, num_values=1, d_out=out,
                            comp=cuprims.OpKind.GREATER)
        assert out.tolist() == [3]
    """
    obj = make_upper_bound.__wrapped__(d_data=d_data, d_values=d_values, d_out=d_out, comp=comp)
    obj._run(d_data, num_items, d_values, num_values, d_out, comp, stream)
