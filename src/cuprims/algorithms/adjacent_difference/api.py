"""Adjacent difference: ``make_adjacent_difference``, the object, and ``adjacent_difference``.

Each item is combined with its neighbour by ``op``: with ``direction="left"``,
``d_out[i] = op(d_in[i], d_in[i - 1])`` and ``d_out[0] = d_in[0]``; with
``direction="right"``, ``d_out[i] = op(d_in[i], d_in[i + 1])`` and the last item copied.
``OpKind.MINUS`` gives numpy's ``diff`` (left: ``d_out[1:] == np.diff(x)``). The output may
be the input itself (the same array): the difference is then taken in place.

Host dispatch (ours; kernels in ``algorithms/adjacent_difference/cuprims_adjacent_difference.cuh``):
one tile per block on CUB's ``BlockAdjacentDifference``. Each tile is read whole before it
is written, so only the neighbours across the tiles' edges need care in place: a first
kernel copies them to the temporary storage (a neighbour per tile), which an out-of-place
call does not use.
"""

from __future__ import annotations

from typing import Any

from cuprims._build.results import OpInput
from cuprims._codegen.builtin_ops import check_transform_builtin
from cuprims._codegen.common import op_symbol
from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims.algorithms.adjacent_difference.source import adjacent_difference_source
from cuprims.algorithms.arguments import ArgKind, describe, keyword_checked
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.skeleton import Algorithm, Description, Plan, description, functor_size, functor_state
from cuprims.algorithms.sort_common import overlaps
from cuprims.errors import ArgumentError
from cuprims.op import OpSpec, op_spec
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ComputeCapabilityLike, DeviceArrayLike,
                            OperatorLike, StreamLike)

__all__ = ["AdjacentDifference", "make_adjacent_difference", "adjacent_difference"]

_DIRECTIONS = {"left": True, "right": False}


@description
class AdjacentDifferenceDescription(Description):
    """The input and output, the operator, and the direction (``left``: each item with the
    one before it)."""

    d_in: ArgKind
    d_out: ArgKind
    op: OpSpec
    left: bool

    def source(self, arch: int) -> Source:
        return adjacent_difference_source(d_in=self.d_in, d_out=self.d_out, op=self.op, left=self.left, arch=arch)

    def _link(self) -> tuple[OpInput, ...]:
        own = () if self.op.kind == "builtin" else (
            OpInput(op_symbol(self.op, "cuprims_op_0"), self.op, (self.d_in.value, self.d_in.value),
                    self.d_out.value),)
        return own + self.d_in.linked_ops() + self.d_out.linked_ops()

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        return (
            # save: input, saved neighbours, items, tiles
            (self.d_in.param, "ptr", "i64", "i32"),
            # difference: input, output, saved neighbours (or null), operator, items, tiles
            (self.d_in.param, self.d_out.param, "ptr", functor_size(self.op), "i64", "i32"),
        )


class _Plan(Plan):
    """The two kernels and the tile shape."""

    __slots__ = ("save", "difference", "threads", "tile_items", "device")

    def __init__(self, loaded: Loaded):
        self.save, self.difference = loaded.handles
        self.threads = loaded.meta["threads"]
        self.tile_items = self.threads * loaded.meta["items"]


def _describe(d_in: Any, d_out: Any, op: Any, direction: Any) -> AdjacentDifferenceDescription:
    if not isinstance(direction, str) or direction not in _DIRECTIONS:
        raise ArgumentError("direction", "'left' or 'right'", direction)
    d_in_kind = describe(d_in, "d_in", iterators=True)
    d_out_kind = describe(d_out, "d_out", iterators=True, output=True)
    if op is None:
        raise ArgumentError("op", "an OpKind, a Python callable f(a, b) -> value or a RawOp", None)
    spec = op_spec(op, bind_captures=True)
    if spec.kind == "builtin":
        check_transform_builtin(spec, (d_in_kind.value, d_in_kind.value), d_out_kind.value)
    return AdjacentDifferenceDescription(d_in_kind, d_out_kind, spec, _DIRECTIONS[direction])


def _in_place(desc: AdjacentDifferenceDescription, p_in: Any, p_out: Any, n: int) -> bool:
    """Whether the output is the input itself; an output that overlaps it otherwise is refused."""
    if not (desc.d_in.is_pointer and desc.d_out.is_pointer) or not n:
        return False
    if p_in == p_out and desc.d_in.value.dtype == desc.d_out.value.dtype:
        return True
    if overlaps(p_in, n * desc.d_in.value.size, p_out, n * desc.d_out.value.size):
        raise ArgumentError("d_out", "the array d_in itself (a difference in place) or one that does not overlap it",
                            "an array overlapping d_in at another address or of another dtype")
    return False


class AdjacentDifference(Algorithm):
    """Combines each item with its neighbour; built for fixed types, operator and direction by
    :func:`make_adjacent_difference`. With ``temp_storage=None`` the call returns the bytes
    it needs (1, the least any query reports, unless ``d_out`` is ``d_in``)."""

    desc: AdjacentDifferenceDescription

    def _setup(self) -> None:
        self._stateful = bool(self.desc.op.state_size)

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded)

    # args: (p_in, p_out, op state, n, in_place)
    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        n, in_place = args[3], args[4]
        return -(-n // plan.tile_items) * self.desc.d_in.value.size if in_place else 0

    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        p_in, p_out, state, n, in_place = args
        if not n:
            return
        tiles = -(-n // plan.tile_items)
        save_params, difference_params = self._packs_of(0)
        saved = temp if in_place and tiles > 1 else 0
        if saved:
            driver.launch(plan.save, -(-tiles // plan.threads), plan.threads, stream,
                          save_params.pack(p_in, saved, n, tiles))
        driver.launch(plan.difference, tiles, plan.threads, stream,
                      difference_params.pack(p_in, p_out, saved, state, n, tiles))

    def _run(self, temp_storage: Any, d_in: Any, d_out: Any, op: Any, num_items: Any, stream: Any,
             one_shot: bool) -> int | None:
        n = check_num_items(num_items)
        d = self.desc
        p_in, p_out = d.d_in.bind(d_in, n), d.d_out.bind(d_out, n)
        args = (p_in, p_out, functor_state(d.op, op) if self._stateful else self._state, n,
                _in_place(d, p_in, p_out, n))
        return self._execute(temp_storage, stream, one_shot, args, (op, d_in, d_out), 0)

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in: ArrayOrIterator, d_out: ArrayOrIterator,
                 num_items: int, op: OperatorLike | None = None, stream: StreamLike | None = None) -> int | None:
        """Run (or, with ``temp_storage=None``, return the temporary bytes needed). An operator
        that captures device arrays must be passed again, with the arrays of this call."""
        return self._run(temp_storage, d_in, d_out, op, num_items, stream, False)


@keyword_checked
def make_adjacent_difference(*, d_in: ArrayIteratorOrProxy, d_out: ArrayIteratorOrProxy, op: OperatorLike,
                             direction: str = "left",
                             compute_capability: ComputeCapabilityLike | None = None) -> AdjacentDifference:
    """Build (or fetch from cache) an adjacent difference.

    Args:
        d_in: device array or iterator of items.
        d_out: device array (room for ``num_items``) or output iterator: ``op``'s results,
            converted to its dtype; the item without a neighbour is copied. It may be
            ``d_in`` itself (the difference is then taken in place).
        op: a binary ``OpKind`` (``MINUS`` for differences), a Python callable
            ``f(item, neighbour) -> value`` or a RawOp.
        direction: ``"left"`` (each item with the one before it; the first copied) or
            ``"right"`` (with the one after it; the last copied).
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray([1, 4, 9, 16, 25], np.int32); y = cp.empty_like(x)
        d = cuprims.make_adjacent_difference(d_in=x, d_out=y, op=cuprims.OpKind.MINUS)
        tmp = cp.empty(d(temp_storage=None, d_in=x, d_out=y, num_items=5), np.uint8)
        d(temp_storage=tmp, d_in=x, d_out=y, num_items=5)
        assert y.get().tolist() == [1, 3, 5, 7, 9]
    """
    desc = AdjacentDifference._described(_describe, d_in, d_out, op, direction)
    return AdjacentDifference._make(desc, compute_capability, (op, d_in, d_out))


@keyword_checked
def adjacent_difference(*, d_in: ArrayOrIterator, d_out: ArrayOrIterator, op: OperatorLike, num_items: int,
                        direction: str = "left", stream: StreamLike | None = None) -> None:
    """Adjacent difference in one call (temporary storage taken on ``stream`` when in place).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray([1.0, 2.5, 2.0], np.float64)
        cuprims.adjacent_difference(d_in=x, d_out=x, op=cuprims.OpKind.MINUS, num_items=3, direction="right")
        assert x.get().tolist() == [-1.5, 0.5, 2.0]
    """
    obj = make_adjacent_difference.__wrapped__(d_in=d_in, d_out=d_out, op=op, direction=direction)
    obj._run(None, d_in, d_out, op, num_items, stream, True)
