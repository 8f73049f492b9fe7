"""Device-wide merge sort: ``make_merge_sort``, the sorter object, and ``merge_sort``.

Sorts keys (and values that travel with them) by a comparator ``op(a, b) -> bool``
meaning "a goes before b": ``OpKind.LESS`` (ascending), ``OpKind.GREATER``
(descending), a Python callable compiled for the device, or a ``RawOp`` with the
signature ``void name(void* a, void* b, unsigned char* result)``. The sort is stable:
items that compare equal keep their input order. Keys may be structs (with a Python or
raw comparator); values of any dtype are moved as opaque bytes. ``d_out_keys`` may be
``d_in_keys`` itself (and ``d_out_values`` ``d_in_values``) to sort in place.

Host dispatch (ours, mirroring CUB's ``dispatch_merge_sort.cuh``): one block-sort
kernel sorts each tile; then ceil(log2(tiles)) rounds of a partition kernel (merge-path
split points) and a merge kernel double the sorted run length, ping-ponging between the
output and a scratch copy in temporary storage so that the last round lands in the
output. Tile size and CUB's virtual-shared-memory needs (for large types) come from the
compiled code's exported policy; problems of more than 2^31 - 1 items use a second
build with 64-bit offsets.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _arrays
from .._jit import driver
from .._jit.build import OpInput
from .._jit.codegen import op_symbol
from .._jit.codegen_sort import carrier_alignment, check_comparator_builtin, merge_sort_source
from .._streams import stream_handle
from ..errors import ArgumentError
from ..op import OpSpec, RawOp, op_spec
from ..types import value_type
from ._common import (Builds, CompiledAlgorithm, PerThreadCache, check_num_items, parse_compute_capability, targets,
                     temp_storage_info)
from .sort_common import NARROW_MAX_ITEMS, OffsetVariants, align_base, opaque_value_type, overlaps, temp_layout

_TRUE, _FALSE = b"\1", b"\0"

__all__ = ["make_merge_sort", "merge_sort"]


class _Plan:
    """Kernel handles and launch facts for one device and one offset width."""

    __slots__ = ("block_sort", "partition", "merge", "threads", "tile", "vsmem", "partition_threads",
                 "offset_size", "packs")

    def __init__(self, loaded: Any, functor_size: int):
        meta = loaded.meta
        self.block_sort, self.partition, self.merge = loaded.handles
        self.threads = meta["threads"]
        self.tile = meta["threads"] * meta["items"]
        self.vsmem = max(meta["block_sort_vsmem"], meta["merge_vsmem"])
        self.partition_threads = meta["partition_threads"]
        self.offset_size = meta["offset_size"]
        self.packs = tuple(driver.ParamPack(kinds) for kinds in param_kinds(self.offset_size, functor_size))


def param_kinds(offset_size: int, functor_size: int) -> tuple[tuple, ...]:
    """Launch parameter kinds of the three kernels, in codegen order (the CPU tests check
    them against the parameter sizes recorded in the compiled cubin)."""
    off = "i64" if offset_size == 8 else "i32"
    f = functor_size
    return (
        # block sort: ping, keys in, values in, keys out, values out, count, scratch keys,
        # scratch values, comparator, vsmem
        (1, "ptr", "ptr", "ptr", "ptr", off, "ptr", "ptr", f, "ptr"),
        # partition: ping, keys ping, keys pong, count, partitions, partition array,
        # comparator, merged tiles target, tile items
        (1, "ptr", "ptr", off, off, "ptr", f, off, "i32"),
        # merge: ping, keys ping, values ping, count, keys pong, values pong, comparator,
        # partition array, merged tiles target, vsmem
        (1, "ptr", "ptr", off, "ptr", "ptr", f, "ptr", off, "ptr"),
    )


class _MergeSort(CompiledAlgorithm):
    """A merge sort built for fixed key/value dtypes and comparator; call it to run.

    ``sorter(temp_storage=None, ...)`` returns the temporary bytes needed and launches
    nothing; ``sorter(temp_storage=buf, ...)`` sorts on ``stream``.
    """

    def __init__(self, d_in_keys: Any, d_in_values: Any, d_out_keys: Any, d_out_values: Any, op: Any,
                 compute_capability: Any, spec: OpSpec | None = None):
        key_dt, value_dt = _check_build_arguments(d_in_keys, d_in_values, d_out_keys, d_out_values)
        self._key_dtype, self._value_dtype = key_dt, value_dt
        self._key = key = value_type(key_dt, argument="d_in_keys")
        self._value = value = None if value_dt is None else opaque_value_type(value_dt, argument="d_in_values")
        self._spec = spec = spec if spec is not None else op_spec(op)
        if spec.kind == "builtin":
            check_comparator_builtin(spec, key)

        def make_source(arch: int, wide: bool):
            return merge_sort_source(key=key, value=value, op=spec, wide_offsets=wide, arch=arch)

        self._ops = [] if spec.kind == "builtin" else [OpInput(op_symbol(spec, "cuprims_op_0"), spec, (key, key), None)]
        self._variants = OffsetVariants(make_source, self._ops)
        self._variants.builds(False).build_for(targets(compute_capability), [op] if self._ops else [])
        functor_size = 1
        if spec.state_size:
            functor_size = -(-spec.state_size // spec.state_alignment) * spec.state_alignment
        self._functor_size = functor_size
        self._state = op.state.ljust(functor_size, b"\0") if isinstance(op, RawOp) and spec.state_size else b"\0"
        self._plans: dict[tuple[int, bool], _Plan] = {}
        self._key_size = key.size
        self._value_size = 0 if value is None else value.size
        self._key_align = key.alignment
        self._value_align = 1 if value is None else carrier_alignment(value)

    def _plan(self, device: int, wide: bool, op: Any) -> _Plan:
        plan = self._plans.get((device, wide))
        if plan is None:
            loaded = self._variants.builds(wide).loaded(device, [op] if self._ops else [])
            plan = loaded.extra.get("merge_plan")
            if plan is None:
                plan = loaded.extra["merge_plan"] = _Plan(loaded, self._functor_size)
            self._plans[(device, wide)] = plan
        return plan

    def _read(self, x: Any, name: str, dtype: np.dtype, n: int, align: int) -> int:
        return _arrays.checked_pointer(x, name, dtype, n, align - 1)

    def _pointers(self, d_in_keys: Any, d_in_values: Any, d_out_keys: Any, d_out_values: Any,
                  n: int) -> tuple[int, int, int, int]:
        kdt, vdt = self._key_dtype, self._value_dtype
        if (d_in_values is not None) != (vdt is not None):
            if d_in_values is not None:
                raise ArgumentError("d_in_values", "None (this sorter was built for keys only)", d_in_values)
            raise ArgumentError("d_in_values", f"values of {vdt} (this sorter was built for key-value pairs)", None)
        if d_out_keys is None:
            raise ArgumentError("d_out_keys", "a device array for the sorted keys (it may be d_in_keys itself)",
                                None)
        k_in = self._read(d_in_keys, "d_in_keys", kdt, n, self._key_align)
        k_out = self._read(d_out_keys, "d_out_keys", kdt, n, self._key_align)
        ks, vs = self._key_size, self._value_size
        if k_in != k_out and overlaps(k_in, n * ks, k_out, n * ks):
            raise ArgumentError("d_out_keys", "d_in_keys itself (in place) or memory apart from it",
                                "a partly overlapping array")
        v_in = v_out = 0
        if vdt is not None:
            if d_out_values is None:
                raise ArgumentError("d_out_values", "a device array for the sorted values (it may be d_in_values "
                                    "itself)", None)
            v_in = self._read(d_in_values, "d_in_values", vdt, n, self._value_align)
            v_out = self._read(d_out_values, "d_out_values", vdt, n, self._value_align)
            if v_in != v_out and overlaps(v_in, n * vs, v_out, n * vs):
                raise ArgumentError("d_out_values", "d_in_values itself (in place) or memory apart from it",
                                    "a partly overlapping array")
            for a, b in ((k_in, v_out), (k_out, v_in), (k_out, v_out)):
                if overlaps(a, n * ks, b, n * vs):
                    raise ArgumentError("d_out_values", "memory apart from the keys", "an array overlapping them")
        elif d_out_values is not None:
            raise ArgumentError("d_out_values", "None (no d_in_values were given)", d_out_values)
        return k_in, v_in, k_out, v_out

    def _run(self, temp_storage: Any, d_in_keys: Any, d_in_values: Any, d_out_keys: Any, d_out_values: Any,
             num_items: Any, op: Any, stream: Any, one_shot: bool) -> int | None:
        n = num_items if type(num_items) is int and num_items >= 0 else check_num_items(num_items)
        k_in, v_in, k_out, v_out = self._pointers(d_in_keys, d_in_values, d_out_keys, d_out_values, n)
        query = temp_storage is None and not one_shot
        if n == 0:
            return 1 if query else None
        state = self._state
        if self._spec.state_size and isinstance(op, RawOp):
            state = op.state.ljust(self._functor_size, b"\0")
        plan = self._plan(driver.current_device(), n > NARROW_MAX_ITEMS, op)
        tile = plan.tile
        num_tiles = -(-n // tile)
        ks, vs = self._key_size, self._value_size
        offsets, needed = temp_layout(((1 + num_tiles) * plan.offset_size, n * ks, n * vs, num_tiles * plan.vsmem))
        if query:
            return needed
        s = stream_handle(stream) if stream is not None else 0
        owned = 0
        if one_shot and temp_storage is None:
            owned = temp_ptr = driver.alloc_async(needed, s)
        else:
            temp_ptr, _ = temp_storage_info(temp_storage, needed)
        try:
            base = align_base(temp_ptr)
            partitions, keys_tmp, values_tmp, vsmem = (base + o for o in offsets)
            if not vs:
                values_tmp = 0
            if not plan.vsmem:
                vsmem = 0
            num_passes = (num_tiles - 1).bit_length()  # ceil(log2(num_tiles))
            ping = num_passes % 2 == 0
            launch = driver.launch
            p_sort, p_part, p_merge = plan.packs
            launch(plan.block_sort, num_tiles, plan.threads, s,
                   p_sort.pack(_TRUE if ping else _FALSE, k_in, v_in, k_out, v_out, n, keys_tmp, values_tmp, state,
                               vsmem))
            num_partitions = num_tiles + 1
            part_grid = -(-num_partitions // plan.partition_threads)
            for pass_ in range(num_passes):
                target = 2 << pass_
                flag = _TRUE if ping else _FALSE
                launch(plan.partition, part_grid, plan.partition_threads, s,
                       p_part.pack(flag, k_out, keys_tmp, n, num_partitions, partitions, state, target, tile))
                launch(plan.merge, num_tiles, plan.threads, s,
                       p_merge.pack(flag, k_out, v_out, n, keys_tmp, values_tmp, state, partitions, target, vsmem))
                ping = not ping
        finally:
            if owned:
                driver.free_async(owned, s)
        return None

    def __call__(self, *, temp_storage: Any, d_in_keys: Any, d_in_values: Any, d_out_keys: Any, d_out_values: Any,
                 num_items: int, op: Any, stream: Any = None) -> int | None:
        """Sort (or, with ``temp_storage=None``, return the temporary bytes needed)."""
        return self._run(temp_storage, d_in_keys, d_in_values, d_out_keys, d_out_values, num_items, op, stream,
                         False)

    def _inspected_builds(self) -> Builds:
        return self._variants.builds(False)


# ------------------------------------------------------------------- public functions

def _check_build_arguments(d_in_keys: Any, d_in_values: Any, d_out_keys: Any,
                           d_out_values: Any) -> tuple[np.dtype, np.dtype | None]:
    if d_in_keys is None:
        raise ArgumentError("d_in_keys", "a device array of keys", None)
    key_dt = _arrays.array_dtype(d_in_keys, "d_in_keys")
    if d_out_keys is None:
        raise ArgumentError("d_out_keys", "a device array for the sorted keys (it may be d_in_keys itself)", None)
    out_dt = _arrays.array_dtype(d_out_keys, "d_out_keys")
    if out_dt != key_dt:
        raise ArgumentError("d_out_keys", f"an array of the keys' dtype {key_dt}", f"an array of {out_dt}")
    if d_in_values is None:
        if d_out_values is not None:
            raise ArgumentError("d_out_values", "None (no d_in_values were given)", d_out_values)
        return key_dt, None
    value_dt = _arrays.array_dtype(d_in_values, "d_in_values")
    if d_out_values is None:
        raise ArgumentError("d_out_values", "a device array for the sorted values (it may be d_in_values itself)",
                            None)
    out_dt = _arrays.array_dtype(d_out_values, "d_out_values")
    if out_dt != value_dt:
        raise ArgumentError("d_out_values", f"an array of the values' dtype {value_dt}", f"an array of {out_dt}")
    return key_dt, value_dt


wrapper_caches = PerThreadCache()


def make_merge_sort(*, d_in_keys: Any, d_in_values: Any = None, d_out_keys: Any, d_out_values: Any = None,
                    op: Any, compute_capability: Any = None) -> _MergeSort:
    """Build (or fetch from cache) a stable merge sort of keys (and values) by ``op``.

    Args:
        d_in_keys: device array of keys (any dtype, structs too), or a ``ProxyArray``.
        d_in_values: device array of values of any dtype, or None.
        d_out_keys: device array for the sorted keys (``d_in_keys`` itself sorts in place).
        d_out_values: device array for the sorted values, or None.
        op: ``OpKind.LESS``, ``OpKind.GREATER``, a Python callable ``op(a, b) -> bool``
            meaning a comes before b, or a ``RawOp``.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray(np.random.randint(0, 100, 10000).astype(np.int32))
        sorter = cuprims.make_merge_sort(d_in_keys=keys, d_out_keys=keys, op=lambda a, b: a < b)
        nbytes = sorter(temp_storage=None, d_in_keys=keys, d_in_values=None, d_out_keys=keys,
                        d_out_values=None, num_items=keys.size, op=lambda a, b: a < b)
        tmp = cp.empty(nbytes, np.uint8)
        sorter(temp_storage=tmp, d_in_keys=keys, d_in_values=None, d_out_keys=keys,
               d_out_values=None, num_items=keys.size, op=lambda a, b: a < b)
    """
    spec = op_spec(op)
    key_dt, value_dt = _check_build_arguments(d_in_keys, d_in_values, d_out_keys, d_out_values)
    if not spec.persistent:
        return _MergeSort(d_in_keys, d_in_values, d_out_keys, d_out_values, op, compute_capability, spec)
    archs = parse_compute_capability(compute_capability)
    key = (key_dt, value_dt, spec.key, None if archs is None else tuple(archs), spec.state_size,
           spec.state_alignment)
    obj = wrapper_caches.get(key)
    if obj is None:
        obj = _MergeSort(d_in_keys, d_in_values, d_out_keys, d_out_values, op, archs, spec)
        wrapper_caches.put(key, obj)
    return obj


def merge_sort(*, d_in_keys: Any, d_in_values: Any = None, d_out_keys: Any, d_out_values: Any = None,
               num_items: int, op: Any, stream: Any = None) -> None:
    """Stable-sort ``num_items`` keys (and their values) by ``op``, in one call.

    Temporary storage is allocated and freed on ``stream`` (stream-ordered), so the call
    never synchronises.

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray(np.array([3, 1, 2], dtype=np.int32))
        vals = cp.asarray(np.array([30, 10, 20], dtype=np.float32))
        cuprims.merge_sort(d_in_keys=keys, d_in_values=vals, d_out_keys=keys, d_out_values=vals,
                           num_items=3, op=cuprims.OpKind.LESS)
        assert vals.tolist() == [10.0, 20.0, 30.0]
    """
    obj = make_merge_sort(d_in_keys=d_in_keys, d_in_values=d_in_values, d_out_keys=d_out_keys,
                          d_out_values=d_out_values, op=op)
    obj._run(None, d_in_keys, d_in_values, d_out_keys, d_out_values, num_items, op, stream, True)
