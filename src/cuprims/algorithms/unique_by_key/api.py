"""Unique-by-key: ``make_unique_by_key``, the object, and ``unique_by_key``.

Of each run of consecutive equal keys (equal by ``op``), the first key and its item are
written to ``d_out_keys`` and ``d_out_items``; the number of runs goes to
``d_out_num_selected[0]``, on the device (nothing synchronises). ``OpKind.EQUAL_TO`` is
C++'s ``==`` on scalar keys (NaN equals nothing); struct keys take a Python callable
``f(a, b) -> bool`` or a RawOp. Inputs may be iterators; an output you do not want can be
a ``DiscardIterator`` (given the array it stands for, so that it has that type).

Host dispatch (ours): an init kernel (CUB's) readies the tile states and zeroes the count;
a sweep kernel then handles one tile per block with decoupled look-back. Two builds, the
one a call needs made when it first comes (build variants, as the sorts have them):

* up to 2^31 - 1 items, cuprims' unique kernel (``algorithms/unique_by_key/cuprims_unique.cuh``): the run
  heads come from the keys alone and only the heads' items are read (CUB's agent loads
  every item: twice the traffic for int32 keys with float32 items), 32-bit offsets;
* beyond, CUB's DeviceUniqueByKeySweepKernel with 64-bit offsets; its temporary storage
  adds CUB's virtual shared memory where a block's shared memory is too small.
"""

from __future__ import annotations

from typing import Any

from cuprims._build.results import OpInput
from cuprims._codegen.builtin_ops import check_equality_builtin
from cuprims._codegen.common import op_symbol
from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims.algorithms.arguments import ArgKind, describe, keyword_checked
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.lookback import REGION_ALIGN, LookbackPlan, count_output, output_like, ready_tiles, tile_storage
from cuprims.algorithms.skeleton import Algorithm, Description, description, functor_size, functor_state
from cuprims.algorithms.unique_by_key.source import unique_by_key_source
from cuprims.op import OpSpec, op_spec
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ArrayOrProxy, ComputeCapabilityLike, DeviceArrayLike,
                            OperatorLike, StreamLike)

__all__ = ["UniqueByKey", "make_unique_by_key", "unique_by_key"]

_INIT_THREADS = 128          # the init kernel's block (one thread per tile state), as CUB launches it
# The most items cuprims' kernel (variant 0, 32-bit offsets) takes; more go to CUB's (variant 1).
NARROW_MAX_ITEMS = (1 << 31) - 1


@description
class UniqueByKeyDescription(Description):
    """Keys and items in and out, the count's type, the equality operator, and whether this
    is the 64-bit-offset build (variant 1)."""

    keys_in: ArgKind
    items_in: ArgKind
    keys_out: ArgKind
    items_out: ArgKind
    num_selected: ArgKind
    op: OpSpec
    wide_offsets: bool = False

    def source(self, arch: int) -> Source:
        return unique_by_key_source(keys_in=self.keys_in, values_in=self.items_in, keys_out=self.keys_out,
                                    values_out=self.items_out, num_selected=self.num_selected, op=self.op, arch=arch,
                                    wide_offsets=self.wide_offsets)

    def _link(self) -> tuple[OpInput, ...]:
        own = () if self.op.kind == "builtin" else (
            OpInput(op_symbol(self.op, "cuprims_op_0"), self.op, (self.keys_in.value, self.keys_in.value), None),)
        return own + tuple(op for a in (self.keys_in, self.items_in, self.keys_out, self.items_out)
                           for op in a.linked_ops())

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        # sweep: keys in, items in, keys out, items out, count, tile state, op, items, tiles (, vsmem)
        sweep = (self.keys_in.param, self.items_in.param, self.keys_out.param, self.items_out.param, "ptr", "ptr",
                 functor_size(self.op))
        return (
            ("ptr", "i32", "ptr"),     # init: tile state, tiles, count
            sweep + (("i64", "i32", "ptr") if self.wide_offsets else ("i32", "i32")),
        )


class _Plan(LookbackPlan):
    """The look-back plan, and the virtual shared memory CUB's agent needs per block (0 for
    cuprims' kernel)."""

    __slots__ = ("vsmem_per_block", "temp_align")

    def __init__(self, loaded: Loaded):
        super().__init__(loaded)
        self.vsmem_per_block = loaded.meta["vsmem_per_block"]
        # CUB's agent finds its virtual shared memory at 128-byte steps from the region's start
        self.temp_align = REGION_ALIGN if self.vsmem_per_block else 1


def storage_layout(plan: Any, num_items: int) -> tuple[int, int, int]:
    """(tiles, offset of the virtual shared memory, total bytes) for ``num_items`` items:
    the tile states (see :func:`._lookback.tile_storage`), then CUB's virtual shared memory."""
    tiles, tile_bytes = tile_storage(plan, num_items)
    vsmem_at = -(-tile_bytes // REGION_ALIGN) * REGION_ALIGN
    return tiles, vsmem_at, vsmem_at + tiles * plan.vsmem_per_block


def _describe(d_in_keys: Any, d_in_items: Any, d_out_keys: Any, d_out_items: Any, d_out_num_selected: Any,
              op: Any) -> UniqueByKeyDescription:
    keys_in = describe(d_in_keys, "d_in_keys", iterators=True)
    items_in = describe(d_in_items, "d_in_items", iterators=True)
    keys_out = output_like(d_out_keys, "d_out_keys", keys_in)
    items_out = output_like(d_out_items, "d_out_items", items_in)
    count = count_output(d_out_num_selected, "d_out_num_selected")
    spec = op_spec(op, bind_captures=True)
    if spec.kind == "builtin":
        check_equality_builtin(spec, keys_in.value)
    return UniqueByKeyDescription(keys_in, items_in, keys_out, items_out, count, spec)


class UniqueByKey(Algorithm):
    """Keeps the first key (and its item) of each run of equal keys; built for fixed
    types and operator by :func:`make_unique_by_key`. With ``temp_storage=None`` the
    call returns the bytes it needs, with a buffer it writes the kept pairs and their
    count (``d_out_num_selected[0]``) on ``stream``.
    """

    desc: UniqueByKeyDescription

    def _setup(self) -> None:
        self._stateful = bool(self.desc.op.state_size)

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded)

    # args: (p_kin, p_vin, p_kout, p_vout, p_count, state, n, variant)
    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        return storage_layout(plan, args[6])[2]

    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        p_kin, p_vin, p_kout, p_vout, p_count, state, n, variant = args
        tiles, vsmem_at, _ = storage_layout(plan, n)
        init_params, sweep_params = self._packs_of(variant)
        tile_state = ready_tiles(plan, init_params, temp, tiles, p_count, stream, _INIT_THREADS)
        if n:
            # CUB's kernel (variant 1) also takes its virtual shared memory
            vsmem = (temp + vsmem_at if plan.vsmem_per_block else 0,) if variant else ()
            driver.launch(plan.sweep, tiles, plan.threads, stream,
                          sweep_params.pack(p_kin, p_vin, p_kout, p_vout, p_count, tile_state, state, n, tiles, *vsmem))

    def _run(self, temp_storage: Any, d_in_keys: Any, d_in_items: Any, d_out_keys: Any, d_out_items: Any,
             d_out_num_selected: Any, op: Any, num_items: Any, stream: Any, one_shot: bool) -> int | None:
        n = check_num_items(num_items)
        variant = 0 if n <= NARROW_MAX_ITEMS else 1
        d = self.desc
        args = (d.keys_in.bind(d_in_keys, n), d.items_in.bind(d_in_items, n), d.keys_out.bind(d_out_keys, n),
                d.items_out.bind(d_out_items, n), d.num_selected.bind(d_out_num_selected, 1, None),
                functor_state(d.op, op) if self._stateful else self._state, n, variant)
        return self._execute(temp_storage, stream, one_shot, args,
                             (op, d_in_keys, d_in_items, d_out_keys, d_out_items), variant)

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in_keys: ArrayOrIterator,
                 d_in_items: ArrayOrIterator, d_out_keys: ArrayOrIterator, d_out_items: ArrayOrIterator,
                 d_out_num_selected: DeviceArrayLike, op: OperatorLike | None = None, num_items: int,
                 stream: StreamLike | None = None) -> int | None:
        """Run (or, with ``temp_storage=None``, return the temporary bytes needed)."""
        return self._run(temp_storage, d_in_keys, d_in_items, d_out_keys, d_out_items, d_out_num_selected, op,
                         num_items, stream, False)


@keyword_checked
def make_unique_by_key(*, d_in_keys: ArrayIteratorOrProxy, d_in_items: ArrayIteratorOrProxy,
                       d_out_keys: ArrayIteratorOrProxy, d_out_items: ArrayIteratorOrProxy, op: OperatorLike,
                       d_out_num_selected: ArrayOrProxy,
                       compute_capability: ComputeCapabilityLike | None = None) -> UniqueByKey:
    """Build (or fetch from cache) a unique-by-key.

    Args:
        d_in_keys, d_in_items: device arrays or iterators of keys and their items.
        d_out_keys, d_out_items: device arrays (room for ``num_items``) or output
            iterators, of the inputs' types or of types numpy's ``same_kind`` rule casts them
            to (converted at the store, as C++ converts).
        d_out_num_selected: a one-element device array of int32/int64 (or unsigned) that
            receives the number of runs.
        op: ``OpKind.EQUAL_TO``, a Python callable ``f(a, b) -> bool`` or a RawOp.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray([1, 1, 2, 3, 3, 3], np.int32); items = cp.arange(6, dtype=np.float32)
        ko, io, count = cp.empty(6, np.int32), cp.empty(6, np.float32), cp.empty(1, np.int64)
        u = cuprims.make_unique_by_key(d_in_keys=keys, d_in_items=items, d_out_keys=ko, d_out_items=io,
                                       d_out_num_selected=count, op=cuprims.OpKind.EQUAL_TO)
        tmp = cp.empty(u(temp_storage=None, d_in_keys=keys, d_in_items=items, d_out_keys=ko, d_out_items=io,
                         d_out_num_selected=count, num_items=6), np.uint8)
        u(temp_storage=tmp, d_in_keys=keys, d_in_items=items, d_out_keys=ko, d_out_items=io,
          d_out_num_selected=count, num_items=6)     # count == [3], ko[:3] == [1, 2, 3], io[:3] == [0, 2, 3]
    """
    desc = UniqueByKey._described(_describe, d_in_keys, d_in_items, d_out_keys, d_out_items, d_out_num_selected, op)
    return UniqueByKey._make(desc, compute_capability, (op, d_in_keys, d_in_items, d_out_keys, d_out_items))


@keyword_checked
def unique_by_key(*, d_in_keys: ArrayOrIterator, d_in_items: ArrayOrIterator, d_out_keys: ArrayOrIterator,
                  d_out_items: ArrayOrIterator, d_out_num_selected: DeviceArrayLike, op: OperatorLike, num_items: int,
                  stream: StreamLike | None = None) -> None:
    """Unique-by-key in one call (temporary storage allocated and freed on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        keys = cp.asarray([5, 5, 7], np.int64); items = cp.asarray([1.0, 2.0, 3.0])
        ko, io, count = cp.empty(3, np.int64), cp.empty(3), cp.empty(1, np.int32)
        cuprims.unique_by_key(d_in_keys=keys, d_in_items=items, d_out_keys=ko, d_out_items=io,
                              d_out_num_selected=count, op=cuprims.OpKind.EQUAL_TO, num_items=3)
        assert int(count[0]) == 2
    """
    obj = make_unique_by_key.__wrapped__(d_in_keys=d_in_keys, d_in_items=d_in_items, d_out_keys=d_out_keys,
                                         d_out_items=d_out_items, d_out_num_selected=d_out_num_selected, op=op)
    obj._run(None, d_in_keys, d_in_items, d_out_keys, d_out_items, d_out_num_selected, op, num_items, stream, True)
