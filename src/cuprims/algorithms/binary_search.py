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
bytes) are prefetched together, see ``kernels/cuprims_binary_search.cuh``. (Reading the
deep levels evict-first, to keep the top of the tree in L2, was measured on the H200 and
lost: 2^24 random int32 queries into 2^28 took 6.13 ms with the top 19 levels cached and
the rest evict-first, 5.37 ms with every level cached; torch.searchsorted took 5.77 ms.
``hot_levels()`` and the override remain for such experiments.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _arrays
from .._jit import driver
from .._jit.build import OpInput
from .._jit.codegen import op_symbol
from .._jit.codegen_binary_search import INDEX_CODES, binary_search_source, check_comparator_builtin
from .._jit.codegen_iterators import iterator_unit
from .._streams import stream_handle
from ..errors import ArgumentError, CudaError
from ..iterators._base import IteratorBase
from ..op import OpKind, OpSpec, RawOp, op_spec
from ..types import value_type
from ._common import (Builds, CompiledAlgorithm, PerThreadCache, check_num_items, parse_compute_capability, targets)

_MAX_GRID = (1 << 31) - 1
# Memory is fetched into L2 in sectors of this many bytes: a probe costs at least one.
_SECTOR = 32
_ALL_LEVELS = 64
# Once the range left spans at most this many bytes, its lines are prefetched together.
_WINDOW_BYTES = 128
_l2_sizes: dict[int, int] = {}


def _l2_bytes(device: int) -> int:
    size = _l2_sizes.get(device)
    if size is None:
        from .._jit.lazy import driver_bindings
        drv = driver_bindings()

        err, size = drv.cuDeviceGetAttribute(drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise CudaError("cuDeviceGetAttribute", err, "L2 cache size")
        _l2_sizes[device] = size
    return size


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


class _Plan:
    __slots__ = ("kernel", "threads", "device", "l2")

    def __init__(self, kernel: Any, threads: int, device: int, l2: int):
        self.kernel, self.threads, self.device, self.l2 = kernel, threads, device, l2


class _BinarySearch(CompiledAlgorithm):
    """A lower- or upper-bound search built for fixed types and comparator; call it to run."""

    _UPPER = 0

    def __init__(self, d_data: Any, d_values: Any, d_out: Any, comp: Any, compute_capability: Any,
                 spec: OpSpec | None = None):
        self._data_dtype = _arrays.array_dtype(d_data, "d_data")
        self._out_dtype = _arrays.array_dtype(d_out, "d_out")
        data_vt = value_type(self._data_dtype, argument="d_data")
        unit = None
        if isinstance(d_values, IteratorBase):
            if d_values.value_type.code != data_vt.code:
                raise ArgumentError("d_values", f"an iterator of d_data's dtype {self._data_dtype}",
                                    f"an iterator of {d_values.dtype}")
            # the source needs the operators' symbols, not the callables (caches keep no user objects)
            unit = iterator_unit(d_values, "cuprims_values_it").without_objects()
            self._values_key: str | None = d_values._key()
        else:
            values_dtype = _arrays.array_dtype(d_values, "d_values")
            if values_dtype != self._data_dtype:
                raise ArgumentError("d_values", f"an array of d_data's dtype {self._data_dtype}",
                                    f"an array of {values_dtype}")
            self._values_key = None
        out_vt = value_type(self._out_dtype, argument="d_out")
        if out_vt.code not in INDEX_CODES:
            raise ArgumentError("d_out", "an array of int32, int64, uint32 or uint64 indices", self._out_dtype)
        if spec is None:
            spec = op_spec(OpKind.LESS if comp is None else comp, argument="comp")
        self._spec = spec
        if spec.kind == "builtin":
            check_comparator_builtin(spec, data_vt)

        def make_source(arch: int):
            return binary_search_source(data=data_vt, out=out_vt, op=spec, arch=arch, values=unit)

        ops = [] if spec.kind == "builtin" else [
            OpInput(op_symbol(spec, "cuprims_op_0"), spec, (data_vt, data_vt), None)]
        self._comp_linked = bool(ops)
        if unit is not None:
            ops += [OpInput(o.symbol, o.spec, o.arg_types, o.result_type) for o in unit.ops]
        self._builds = Builds(make_source, ops)
        self._builds.build_for(targets(compute_capability), self._objects(comp, d_values))
        functor_size = 1
        if spec.state_size:
            functor_size = -(-spec.state_size // spec.state_alignment) * spec.state_alignment
        self._functor_size = functor_size
        self._state = comp.state.ljust(functor_size, b"\0") if isinstance(comp, RawOp) and spec.state_size else b"\0"
        # binary_search_kernel(data, num_items, values, num_values, out, comp, hot_levels, window, upper)
        values_kind = "ptr" if unit is None else unit.state_size
        self._params = driver.ParamPack(("ptr", "i64", values_kind, "i64", "ptr", functor_size, "i32", "i64", "i32"))
        self._plan: _Plan | None = None
        self._mask = data_vt.alignment - 1
        self._value_size = data_vt.size
        self._max_index = int(np.iinfo(self._out_dtype).max)
        # For experiments: a fixed number of cached levels instead of the L2-based choice,
        # and the prefetch window in bytes (0: no prefetch).
        self._hot_levels_override: int | None = None
        self._window_bytes = _WINDOW_BYTES

    def _objects(self, comp: Any, d_values: Any) -> list[Any]:
        """The Python objects behind the linked operators, in OpInput order (needed only
        when a build is missing: they are not kept)."""
        objs = [comp] if self._comp_linked else []
        if isinstance(d_values, IteratorBase):
            objs += [o.obj for o in iterator_unit(d_values, "cuprims_values_it").ops]
        return objs

    def _device_plan(self, device: int, comp: Any, d_values: Any) -> _Plan:
        loaded = self._builds._by_device.get(device)
        if loaded is None:
            loaded = self._builds.loaded(device, self._objects(comp, d_values))
        plan = loaded.extra.get("plan")
        if plan is None:
            plan = loaded.extra["plan"] = _Plan(loaded.handles[0], loaded.meta["threads"], device, _l2_bytes(device))
        self._plan = plan
        return plan

    def _read(self, x: Any, name: str, n: int, dtype: np.dtype, mask: int) -> int:
        return _arrays.checked_pointer(x, name, dtype, n, mask, "num_items" if name == "d_data" else "num_values")

    def _run(self, d_data: Any, num_items: Any, d_values: Any, num_values: Any, d_out: Any, comp: Any,
             stream: Any) -> None:
        n = num_items if type(num_items) is int and num_items >= 0 else check_num_items(num_items)
        if type(num_values) is int and num_values >= 0:
            nv = num_values
        else:
            try:
                nv = check_num_items(num_values)
            except ArgumentError:
                raise ArgumentError("num_values", "a non-negative integer", num_values) from None
        if n > self._max_index:
            raise ArgumentError("num_items", f"at most {self._max_index} items (the largest index d_out's "
                                f"{self._out_dtype} holds)", n)
        p_data = self._read(d_data, "d_data", n, self._data_dtype, self._mask)
        if self._values_key is None:
            if isinstance(d_values, IteratorBase):
                raise ArgumentError("d_values", "a device array (this search was built for one)", d_values)
            p_values: Any = self._read(d_values, "d_values", nv, self._data_dtype, self._mask)
        else:
            if not isinstance(d_values, IteratorBase) or d_values._key() != self._values_key:
                raise ArgumentError("d_values", f"an iterator of the kind this search was built for "
                                    f"({self._values_key})", d_values)
            p_values = d_values._state(nv, "d_values")
        p_out = self._read(d_out, "d_out", nv, self._out_dtype, 0)
        s = stream_handle(stream) if stream is not None else 0
        if nv == 0:
            return
        state = self._state
        if self._spec.state_size and isinstance(comp, RawOp):
            state = comp.state.ljust(self._functor_size, b"\0")
        plan = self._plan or self._device_plan(driver.current_device(), comp, d_values)
        try:
            self._launch(plan, p_data, n, p_values, nv, p_out, state, s)
        except CudaError:
            device = driver.current_device()
            if device == plan.device:
                raise
            self._plan = None
            self._launch(self._device_plan(device, comp, d_values), p_data, n, p_values, nv, p_out, state, s)

    def _launch(self, plan: _Plan, p_data: int, n: int, p_values: Any, nv: int, p_out: int, state: bytes,
                s: int) -> None:
        grid = -(-nv // plan.threads)
        if grid > _MAX_GRID:
            raise ArgumentError("num_values", f"at most {_MAX_GRID * plan.threads} values for one launch", nv)
        hot = self._hot_levels_override
        if hot is None:
            hot = _ALL_LEVELS  # measured best on the H200 (see the module docstring)
        window = self._window_bytes // self._value_size
        params = self._params.pack(p_data, n, p_values, nv, p_out, state, hot, window, self._UPPER)
        driver.launch(plan.kernel, grid, plan.threads, s, params)

    def __call__(self, *, d_data: Any, num_items: int, d_values: Any, num_values: int, d_out: Any,
                 comp: Any = None, stream: Any = None) -> None:
        """Search ``num_values`` values of ``d_values`` in ``d_data[:num_items]``, writing indices to ``d_out``."""
        self._run(d_data, num_items, d_values, num_values, d_out, comp, stream)



class _LowerBound(_BinarySearch):
    """Lower-bound search object: see :func:`make_lower_bound`."""

    _UPPER = 0


class _UpperBound(_BinarySearch):
    """Upper-bound search object: see :func:`make_upper_bound`."""

    _UPPER = 1


# ------------------------------------------------------------------- public functions

wrapper_caches = PerThreadCache()



def _make(cls: type, d_data: Any, d_values: Any, d_out: Any, comp: Any, compute_capability: Any) -> _BinarySearch:
    spec = op_spec(OpKind.LESS if comp is None else comp, argument="comp")
    if not spec.persistent:
        return cls(d_data, d_values, d_out, comp, compute_capability, spec)
    if isinstance(d_values, IteratorBase):
        if not d_values._persistent():
            return cls(d_data, d_values, d_out, comp, compute_capability, spec)
        values_key: Any = d_values._key()
    else:
        values_key = _arrays.array_dtype(d_values, "d_values")
    archs = parse_compute_capability(compute_capability)
    key = (cls.__name__, _arrays.array_dtype(d_data, "d_data"), values_key, _arrays.array_dtype(d_out, "d_out"),
           spec.key, None if archs is None else tuple(archs), spec.state_size, spec.state_alignment)
    obj = wrapper_caches.get(key)
    if obj is None:
        obj = cls(d_data, d_values, d_out, comp, archs, spec)
        wrapper_caches.put(key, obj)
    return obj


def make_lower_bound(*, d_data: Any, d_values: Any, d_out: Any, comp: Any = None,
                     compute_capability: Any = None) -> _LowerBound:
    """Build (or fetch from cache) a lower-bound search: for each value, the index of the
    first element of sorted ``d_data`` that is not less than it (``np.searchsorted(side="left")``).

    Args:
        d_data: device array (or ``ProxyArray``) of the sorted range.
        d_values: device array of the values to look up (same dtype as ``d_data``), or an
            iterator of that value type (e.g. ``cuprims.CountingIterator(np.int32(0))``).
        d_out: device array of int32, int64, uint32 or uint64 receiving the indices.
        comp: None / ``OpKind.LESS`` (ascending), ``OpKind.GREATER`` (descending), a Python
            callable ``comp(a, b) -> bool`` or a ``RawOp``.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        data = cp.asarray([1, 3, 3, 7], dtype=np.int32); values = cp.asarray([3, 8], dtype=np.int32)
        out = cp.empty(2, np.uint64)
        search = cuprims.make_lower_bound(d_data=data, d_values=values, d_out=out)
        search(d_data=data, num_items=4, d_values=values, num_values=2, d_out=out, comp=None)
        assert out.tolist() == [1, 4]
    """
    return _make(_LowerBound, d_data, d_values, d_out, comp, compute_capability)  # type: ignore[return-value]


def make_upper_bound(*, d_data: Any, d_values: Any, d_out: Any, comp: Any = None,
                     compute_capability: Any = None) -> _UpperBound:
    """Build (or fetch from cache) an upper-bound search: for each value, the index of the
    first element of sorted ``d_data`` that is greater than it (``np.searchsorted(side="right")``).

    Arguments as for :func:`make_lower_bound`.

    Example::

        import cupy as cp, numpy as np, cuprims
        data = cp.asarray([1, 3, 3, 7], dtype=np.int32); values = cp.asarray([3, 0], dtype=np.int32)
        out = cp.empty(2, np.int64)
        search = cuprims.make_upper_bound(d_data=data, d_values=values, d_out=out)
        search(d_data=data, num_items=4, d_values=values, num_values=2, d_out=out, comp=None)
        assert out.tolist() == [3, 0]
    """
    return _make(_UpperBound, d_data, d_values, d_out, comp, compute_capability)  # type: ignore[return-value]


def lower_bound(*, d_data: Any, num_items: int, d_values: Any, num_values: int, d_out: Any, comp: Any = None,
                stream: Any = None) -> None:
    """For each of ``num_values`` values, write the index of the first element of the sorted
    ``d_data[:num_items]`` not less than it to ``d_out`` (on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        data = cp.arange(0, 100, 10, dtype=np.float32); values = cp.asarray([15.0, -1.0], np.float32)
        out = cp.empty(2, np.int32)
        cuprims.lower_bound(d_data=data, num_items=10, d_values=values, num_values=2, d_out=out)
        assert out.tolist() == [2, 0]
    """
    obj = make_lower_bound(d_data=d_data, d_values=d_values, d_out=d_out, comp=comp)
    obj._run(d_data, num_items, d_values, num_values, d_out, comp, stream)


def upper_bound(*, d_data: Any, num_items: int, d_values: Any, num_values: int, d_out: Any, comp: Any = None,
                stream: Any = None) -> None:
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
    obj = make_upper_bound(d_data=d_data, d_values=d_values, d_out=d_out, comp=comp)
    obj._run(d_data, num_items, d_values, num_values, d_out, comp, stream)
