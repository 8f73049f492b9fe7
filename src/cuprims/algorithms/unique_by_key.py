"""Unique-by-key: ``make_unique_by_key``, the object, and ``unique_by_key``.

Of each run of consecutive equal keys (equal by ``op``), the first key and its item are
written to ``d_out_keys`` and ``d_out_items``; the number of runs goes to
``d_out_num_selected[0]``, on the device (nothing synchronises). ``OpKind.EQUAL_TO`` is
C++'s ``==`` on scalar keys (NaN equals nothing); struct keys take a Python callable
``f(a, b) -> bool`` or a RawOp. Inputs may be iterators; an output you do not want can be
a ``DiscardIterator`` (given the array it stands for, so that it has that type).

Host dispatch (ours, mirroring CUB's): an init kernel readies the tile states (CUB's
``ScanTileState<long long>``) and zeroes the count; CUB's sweep kernel then handles one
tile per block with decoupled look-back. Temporary storage holds the tile states and,
where CUB's agent needs more shared memory than a block has, its virtual shared memory.
"""

from __future__ import annotations

from typing import Any

from .._jit import driver
from .._jit.build import OpInput
from .._jit.codegen import Source, op_symbol
from .._jit.codegen_unique import unique_by_key_source
from .._jit.functors import check_equality_builtin
from ..op import OpSpec, op_spec
from ._arguments import ArgKind, describe, keyword_checked
from ._common import Loaded, check_num_items
from ._lookback import REGION_ALIGN, LookbackPlan, count_output, output_like, ready_tiles, tile_storage
from ._skeleton import Algorithm, Description, description, functor_size, functor_state

__all__ = ["make_unique_by_key", "unique_by_key"]

_INIT_THREADS = 128          # the init kernel's block (one thread per tile state), as CUB launches it


@description
class UniqueByKeyDescription(Description):
    """Keys and items in and out, the count's type, and the equality operator."""

    keys_in: ArgKind
    items_in: ArgKind
    keys_out: ArgKind
    items_out: ArgKind
    num_selected: ArgKind
    op: OpSpec

    def source(self, arch: int) -> Source:
        return unique_by_key_source(keys_in=self.keys_in, values_in=self.items_in, keys_out=self.keys_out,
                                    values_out=self.items_out, num_selected=self.num_selected, op=self.op, arch=arch)

    def _link(self) -> tuple[OpInput, ...]:
        own = () if self.op.kind == "builtin" else (
            OpInput(op_symbol(self.op, "cuprims_op_0"), self.op, (self.keys_in.value, self.keys_in.value), None),)
        return own + tuple(op for a in (self.keys_in, self.items_in, self.keys_out, self.items_out)
                           for op in a.linked_ops())

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        return (
            ("ptr", "i32", "ptr"),     # init: tile state, tiles, count
            # sweep: keys in, items in, keys out, items out, count, tile state, op, items, tiles, vsmem
            (self.keys_in.param, self.items_in.param, self.keys_out.param, self.items_out.param, "ptr", "ptr",
             functor_size(self.op), "i64", "i32", "ptr"),
        )


class _Plan(LookbackPlan):
    """The look-back plan, and the virtual shared memory CUB's agent needs per block."""

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


class _UniqueByKey(Algorithm):
    """A unique-by-key built for fixed types and operator; call it to run.

    ``obj(temp_storage=None, ...)`` returns the temporary bytes needed and launches
    nothing; ``obj(temp_storage=buf, ...)`` runs on ``stream``.
    """

    desc: UniqueByKeyDescription

    def _setup(self) -> None:
        self._init_params, self._sweep_params = self._packs
        self._stateful = bool(self.desc.op.state_size)

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded)

    # args: (p_kin, p_vin, p_kout, p_vout, p_count, state, n)
    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        return storage_layout(plan, args[6])[2]

    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        p_kin, p_vin, p_kout, p_vout, p_count, state, n = args
        tiles, vsmem_at, _ = storage_layout(plan, n)
        tile_state = ready_tiles(plan, self._init_params, temp, tiles, p_count, stream, _INIT_THREADS)
        if n:
            driver.launch(plan.sweep, tiles, plan.threads, stream,
                          self._sweep_params.pack(p_kin, p_vin, p_kout, p_vout, p_count, tile_state, state, n, tiles,
                                                  temp + vsmem_at if plan.vsmem_per_block else 0))

    def _run(self, temp_storage: Any, d_in_keys: Any, d_in_items: Any, d_out_keys: Any, d_out_items: Any,
             d_out_num_selected: Any, op: Any, num_items: Any, stream: Any, one_shot: bool) -> int | None:
        n = num_items if type(num_items) is int and num_items >= 0 else check_num_items(num_items)
        d = self.desc
        args = (d.keys_in.bind(d_in_keys, n), d.items_in.bind(d_in_items, n), d.keys_out.bind(d_out_keys, n),
                d.items_out.bind(d_out_items, n), d.num_selected.bind(d_out_num_selected, 1, None),
                functor_state(d.op, op) if self._stateful else self._state, n)
        return self._execute(temp_storage, stream, one_shot, args,
                             (op, d_in_keys, d_in_items, d_out_keys, d_out_items))

    def __call__(self, *, temp_storage: Any, d_in_keys: Any, d_in_items: Any, d_out_keys: Any, d_out_items: Any,
                 d_out_num_selected: Any, op: Any = None, num_items: int, stream: Any = None) -> int | None:
        """Run (or, with ``temp_storage=None``, return the temporary bytes needed)."""
        return self._run(temp_storage, d_in_keys, d_in_items, d_out_keys, d_out_items, d_out_num_selected, op,
                         num_items, stream, False)


@keyword_checked
def make_unique_by_key(*, d_in_keys: Any, d_in_items: Any, d_out_keys: Any, d_out_items: Any,
                       d_out_num_selected: Any, op: Any, compute_capability: Any = None) -> _UniqueByKey:
    """Build (or fetch from cache) a unique-by-key.

    Args:
        d_in_keys, d_in_items: device arrays or iterators of keys and their items.
        d_out_keys, d_out_items: device arrays (room for ``num_items``) or output
            iterators, of the inputs' types.
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
    desc = _UniqueByKey._described(_describe, d_in_keys, d_in_items, d_out_keys, d_out_items, d_out_num_selected, op)
    return _UniqueByKey._make(desc, compute_capability, (op, d_in_keys, d_in_items, d_out_keys, d_out_items))


def unique_by_key(*, d_in_keys: Any, d_in_items: Any, d_out_keys: Any, d_out_items: Any, d_out_num_selected: Any,
                  op: Any, num_items: int, stream: Any = None) -> None:
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
