"""Device-wide merge: ``make_merge``, the merger object, and ``merge``.

Merges two sequences, each sorted by the comparator ``op(a, b) -> bool`` ("a goes before
b"), into one sorted sequence: ``OpKind.LESS`` (ascending), ``OpKind.GREATER``
(descending), a Python callable compiled for the device (it may capture device arrays,
read at each call), or a ``RawOp`` with the signature
``void name(void* a, void* b, unsigned char* result)``. The merge is stable: among equal
keys the items of the first sequence come first, each sequence in its own order, so the
result is ``np.concatenate`` then a stable sort (``kind="stable"``) of two sorted inputs.

``OpKind.LESS`` on floating-point keys is numpy's order, NaN after every number (``np.sort``
puts NaNs last; the inputs must be sorted so), ``OpKind.GREATER`` its reverse (NaN first);
-0.0 and +0.0 are equal (their order is their sequences'). A Python comparator ``a < b`` is
no strict weak order once a NaN comes (a NaN is neither before nor after anything), so
where NaNs land is not defined, as for ``merge_sort``.

Keys alone (the three values arguments None) or key-value pairs (all three given). The
inputs may be arrays or iterators (``CountingIterator``, ``TransformIterator``, ...), the
outputs arrays or output iterators. Both inputs' keys are of one dtype, that of
``d_out_keys`` (the values likewise); structs with a Python or raw comparator. The outputs
must not overlap the inputs (there is no merge in place).

Host dispatch (ours, mirroring CUB's ``dispatch_merge.cuh``; kernels in
``algorithms/merge/cuprims_merge.cuh`` over CUB's merge agent): a partition kernel finds,
for every tile's first output item (a diagonal of the merge path) and for the end, how many
items of the first sequence go before it (``num_tiles + 1`` offsets in temporary storage);
then one merge kernel block per tile merges the two ranges those bound. Problems of more
than 2^31 - 1 items in all run on a second build with 64-bit offsets.
"""

from __future__ import annotations

from typing import Any

from cuprims._build.results import OpInput
from cuprims._codegen.builtin_ops import check_comparator_builtin
from cuprims._codegen.common import op_symbol
from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims.algorithms.arguments import ArgKind, describe, keyword_checked
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.merge.source import merge_source
from cuprims.algorithms.skeleton import Algorithm, Description, Plan, description, functor_size, functor_state
from cuprims.algorithms.sort_base import NARROW_MAX_ITEMS
from cuprims.algorithms.sort_common import align_base, overlaps, temp_layout
from cuprims.errors import ArgumentError
from cuprims.op import OpSpec, op_spec
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ComputeCapabilityLike, DeviceArrayLike,
                            OperatorLike, StreamLike)

__all__ = ["Merge", "make_merge", "merge"]

_VALUES = ("d_in_values1", "d_in_values2", "d_out_values")


@description
class MergeDescription(Description):
    """The kinds of both inputs' keys (and values, or None) and of the outputs, the
    comparator, and the offset width (64-bit: build variant 1)."""

    d_in_keys1: ArgKind
    d_in_values1: ArgKind | None
    d_in_keys2: ArgKind
    d_in_values2: ArgKind | None
    d_out_keys: ArgKind
    d_out_values: ArgKind | None
    op: OpSpec
    wide_offsets: bool = False

    @property
    def key(self) -> Any:
        return self.d_in_keys1.value

    @property
    def args(self) -> tuple[ArgKind | None, ...]:
        """The six arguments, in the order of the call (and of the linked iterator operators)."""
        return (self.d_in_keys1, self.d_in_values1, self.d_in_keys2, self.d_in_values2, self.d_out_keys,
                self.d_out_values)

    def source(self, arch: int) -> Source:
        return merge_source(keys1=self.d_in_keys1, values1=self.d_in_values1, keys2=self.d_in_keys2,
                            values2=self.d_in_values2, keys_out=self.d_out_keys, values_out=self.d_out_values,
                            op=self.op, wide_offsets=self.wide_offsets, arch=arch)

    def _link(self) -> tuple[OpInput, ...]:
        own = () if self.op.kind == "builtin" else (
            OpInput(op_symbol(self.op, "cuprims_op_0"), self.op, (self.key, self.key), None),)
        return own + tuple(o for a in self.args if a is not None for o in a.linked_ops())

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        off, f = ("i64" if self.wide_offsets else "i32"), functor_size(self.op)
        k1, v1, k2, v2, ko, vo = ("ptr" if a is None else a.param for a in self.args)
        return (
            # partition: keys1, count1, keys2, count2, diagonals, first-sequence offsets, comparator
            (k1, off, k2, off, off, "ptr", f),
            # merge: keys1, values1, count1, keys2, values2, count2, keys out, values out,
            # comparator, first-sequence offsets, virtual shared memory
            (k1, v1, off, k2, v2, off, ko, vo, f, "ptr", "ptr"),
        )


class _Plan(Plan):
    """The two kernels, the tile shape and the virtual shared memory per tile."""

    __slots__ = ("partition", "merge", "threads", "tile", "vsmem", "offset_size", "partition_threads", "device")

    def __init__(self, loaded: Loaded):
        meta = loaded.meta
        self.partition, self.merge = loaded.handles
        self.threads = meta["threads"]
        self.tile = meta["threads"] * meta["items"]
        self.vsmem = meta["vsmem"]
        self.offset_size = meta["offset_size"]
        self.partition_threads = meta["partition_threads"]


def _describe(d_in_keys1: Any, d_in_values1: Any, d_in_keys2: Any, d_in_values2: Any, d_out_keys: Any,
              d_out_values: Any, op: Any) -> MergeDescription:
    """Check the build arguments and describe the merge (captured arrays are comparator state)."""
    k1 = describe(d_in_keys1, "d_in_keys1", iterators=True)
    k2 = describe(d_in_keys2, "d_in_keys2", iterators=True)
    ko = describe(d_out_keys, "d_out_keys", iterators=True, output=True)
    _same_items(k1, k2, "keys")
    _same_items(k1, ko, "keys")
    given = [x is not None for x in (d_in_values1, d_in_values2, d_out_values)]
    if any(given) and not all(given):
        missing = _VALUES[given.index(False)]
        raise ArgumentError(missing, "values (as " + " and ".join(n for n, g in zip(_VALUES, given) if g)
                            + " are given; or None for all three, to merge keys alone)", None)
    v1 = v2 = vo = None
    if all(given):
        v1 = describe(d_in_values1, "d_in_values1", iterators=True)
        v2 = describe(d_in_values2, "d_in_values2", iterators=True)
        vo = describe(d_out_values, "d_out_values", iterators=True, output=True)
        _same_items(v1, v2, "values")
        _same_items(v1, vo, "values")
    if op is None:
        raise ArgumentError("op", "OpKind.LESS, OpKind.GREATER, a Python callable f(a, b) -> bool or a RawOp", None)
    spec = op_spec(op, bind_captures=True)
    if spec.kind == "builtin":
        check_comparator_builtin(spec, k1.value, "op")
    return MergeDescription(k1, v1, k2, v2, ko, vo, spec)


def _same_items(first: ArgKind, other: ArgKind, what: str) -> None:
    if first.value.code != other.value.code:
        raise ArgumentError(other.name, f"{what} of {first.name}'s dtype {first.value.dtype} (the two sequences and the "
                            "output hold items of one dtype)", f"{what} of {other.value.dtype}")


class Merge(Algorithm):
    """A stable merge of two sequences sorted by one comparator, for fixed types (what
    :func:`make_merge` returns): ``temp_storage=None`` yields the scratch size, a buffer
    merges ``num_items1`` and ``num_items2`` items on ``stream``."""

    desc: MergeDescription

    def _setup(self) -> None:
        self._stateful = bool(self.desc.op.state_size)
        self._pairs = self.desc.d_out_values is not None

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded)

    # args: (k1, v1, n1, k2, v2, n2, ko, vo, state)
    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        n = args[2] + args[5]
        if not n:
            return 0
        tiles = -(-n // plan.tile)
        return temp_layout(((1 + tiles) * plan.offset_size, tiles * plan.vsmem))[1]

    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        k1, v1, n1, k2, v2, n2, ko, vo, state = args
        n = n1 + n2
        if not n:
            return
        tiles = -(-n // plan.tile)
        offsets = temp_layout(((1 + tiles) * plan.offset_size, tiles * plan.vsmem))[0]
        base = align_base(temp)
        key1_beg, vsmem = base + offsets[0], (base + offsets[1] if plan.vsmem else 0)
        variant = 1 if plan.offset_size == 8 else 0
        p_part, p_merge = self._packs_of(variant)
        diagonals = tiles + 1
        driver.launch(plan.partition, -(-diagonals // plan.partition_threads), plan.partition_threads, stream,
                      p_part.pack(k1, n1, k2, n2, diagonals, key1_beg, state))
        driver.launch(plan.merge, tiles, plan.threads, stream,
                      p_merge.pack(k1, v1, n1, k2, v2, n2, ko, vo, state, key1_beg, vsmem))

    def _bind(self, d_in_keys1: Any, d_in_values1: Any, d_in_keys2: Any, d_in_values2: Any, d_out_keys: Any,
              d_out_values: Any, n1: int, n2: int) -> tuple:
        d = self.desc
        given = (d_in_values1 is not None, d_in_values2 is not None, d_out_values is not None)
        for name, g in zip(_VALUES, given):
            if g != self._pairs:
                what = getattr(d, name) if self._pairs else None
                raise ArgumentError(name, f"values of {what.value.dtype} (this merger was built for key-value pairs)"
                                    if what is not None else "None (this merger was built for keys alone)",
                                    None if not g else "values")
        n = n1 + n2
        k1 = d.d_in_keys1.bind(d_in_keys1, n1, "num_items1")
        k2 = d.d_in_keys2.bind(d_in_keys2, n2, "num_items2")
        ko = d.d_out_keys.bind(d_out_keys, n, "num_items1 + num_items2")
        inputs = [(k1, n1 * d.key.size), (k2, n2 * d.key.size)]
        outputs = [(ko, n * d.key.size, "d_out_keys")]
        v1 = v2 = vo = 0
        if self._pairs:
            vsize = d.d_out_values.value.size  # type: ignore[union-attr]  # pairs
            v1 = d.d_in_values1.bind(d_in_values1, n1, "num_items1")  # type: ignore[union-attr]
            v2 = d.d_in_values2.bind(d_in_values2, n2, "num_items2")  # type: ignore[union-attr]
            vo = d.d_out_values.bind(d_out_values, n, "num_items1 + num_items2")  # type: ignore[union-attr]
            inputs += [(v1, n1 * vsize), (v2, n2 * vsize)]
            outputs.append((vo, n * vsize, "d_out_values"))
        for i, (p, size, name) in enumerate(outputs):
            # (an iterator's state is no memory range)
            if type(p) is not int:
                continue
            for q, qsize in inputs + [(o[0], o[1]) for o in outputs[:i]]:
                if type(q) is int and overlaps(p, size, q, qsize):
                    raise ArgumentError(name, "memory apart from the inputs and the other output (a merge is not "
                                        "taken in place)", "an overlapping array")
        return k1, v1, n1, k2, v2, n2, ko, vo

    def _run(self, temp_storage: Any, d_in_keys1: Any, d_in_values1: Any, d_in_keys2: Any, d_in_values2: Any,
             d_out_keys: Any, d_out_values: Any, num_items1: Any, num_items2: Any, op: Any, stream: Any,
             one_shot: bool) -> int | None:
        n1, n2 = check_num_items(num_items1, "num_items1"), check_num_items(num_items2, "num_items2")
        bound = self._bind(d_in_keys1, d_in_values1, d_in_keys2, d_in_values2, d_out_keys, d_out_values, n1, n2)
        state = functor_state(self.desc.op, op) if self._stateful else self._state
        raw = (op, d_in_keys1, d_in_values1, d_in_keys2, d_in_values2, d_out_keys, d_out_values)
        return self._execute(temp_storage, stream, one_shot, bound + (state,), raw,
                             1 if n1 + n2 > NARROW_MAX_ITEMS else 0)

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in_keys1: ArrayOrIterator,
                 d_in_values1: ArrayOrIterator | None, d_in_keys2: ArrayOrIterator,
                 d_in_values2: ArrayOrIterator | None, d_out_keys: ArrayOrIterator,
                 d_out_values: ArrayOrIterator | None, num_items1: int, num_items2: int,
                 op: OperatorLike | None = None, stream: StreamLike | None = None) -> int | None:
        """Merge (or, with ``temp_storage=None``, return the temporary bytes needed). A
        comparator that captures device arrays must be passed again, with this call's arrays."""
        return self._run(temp_storage, d_in_keys1, d_in_values1, d_in_keys2, d_in_values2, d_out_keys, d_out_values,
                         num_items1, num_items2, op, stream, False)


@keyword_checked
def make_merge(*, d_in_keys1: ArrayIteratorOrProxy, d_in_values1: ArrayIteratorOrProxy | None,
               d_in_keys2: ArrayIteratorOrProxy, d_in_values2: ArrayIteratorOrProxy | None,
               d_out_keys: ArrayIteratorOrProxy, d_out_values: ArrayIteratorOrProxy | None, op: OperatorLike,
               compute_capability: ComputeCapabilityLike | None = None) -> Merge:
    """Build (or fetch from cache) a stable merge of two sorted sequences by ``op``.

    Args:
        d_in_keys1: device array or iterator of the first sequence's keys, sorted by ``op``.
        d_in_values1: its values (array or iterator), or None to merge keys alone.
        d_in_keys2: the second sequence's keys, of ``d_in_keys1``'s dtype, sorted by ``op``.
        d_in_values2: its values, of ``d_in_values1``'s dtype, or None.
        d_out_keys: device array (room for ``num_items1 + num_items2``) or output iterator
            for the merged keys, of the keys' dtype; apart from the inputs.
        d_out_values: the same for the values, or None.
        op: ``OpKind.LESS`` (ascending; floats in numpy's order, NaN last),
            ``OpKind.GREATER``, a Python callable ``op(a, b) -> bool`` meaning a goes before b
            (device arrays it captures are read at each call), or a ``RawOp``.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        a = cp.asarray([1, 3, 5], np.int32); b = cp.asarray([2, 3, 4, 6], np.int32)
        out = cp.empty(7, np.int32)
        m = cuprims.make_merge(d_in_keys1=a, d_in_values1=None, d_in_keys2=b, d_in_values2=None,
                               d_out_keys=out, d_out_values=None, op=cuprims.OpKind.LESS)
        kw = dict(d_in_keys1=a, d_in_values1=None, d_in_keys2=b, d_in_values2=None, d_out_keys=out,
                  d_out_values=None, num_items1=3, num_items2=4)
        tmp = cp.empty(m(temp_storage=None, **kw), np.uint8)
        m(temp_storage=tmp, **kw)
        assert out.get().tolist() == [1, 2, 3, 3, 4, 5, 6]
    """
    desc = Merge._described(_describe, d_in_keys1, d_in_values1, d_in_keys2, d_in_values2, d_out_keys,
                            d_out_values, op)
    return Merge._make(desc, compute_capability,
                       (op, d_in_keys1, d_in_values1, d_in_keys2, d_in_values2, d_out_keys, d_out_values))


@keyword_checked
def merge(*, d_in_keys1: ArrayOrIterator, d_in_values1: ArrayOrIterator | None, d_in_keys2: ArrayOrIterator,
          d_in_values2: ArrayOrIterator | None, d_out_keys: ArrayOrIterator, d_out_values: ArrayOrIterator | None,
          num_items1: int, num_items2: int, op: OperatorLike, stream: StreamLike | None = None) -> None:
    """Merge two sorted sequences (and their values) by ``op``, stably, in one call.

    Temporary storage is taken and given back on ``stream`` (stream-ordered), so the call
    never synchronises.

    Example::

        import cupy as cp, numpy as np, cuprims
        a = cp.asarray([1.0, 2.0, np.nan], np.float32); b = cp.asarray([2.0, 9.0], np.float32)
        va = cp.asarray([0, 1, 2], np.int32); vb = cp.asarray([10, 11], np.int32)
        keys, vals = cp.empty(5, np.float32), cp.empty(5, np.int32)
        cuprims.merge(d_in_keys1=a, d_in_values1=va, d_in_keys2=b, d_in_values2=vb, d_out_keys=keys,
                      d_out_values=vals, num_items1=3, num_items2=2, op=cuprims.OpKind.LESS)
        assert vals.get().tolist() == [0, 1, 10, 11, 2]        # equal keys: the first sequence's first
    """
    raw = (op, d_in_keys1, d_in_values1, d_in_keys2, d_in_values2, d_out_keys, d_out_values)
    obj = Merge._make(Merge._described(_describe, *raw[1:], op), None, raw)
    obj._run(None, d_in_keys1, d_in_values1, d_in_keys2, d_in_values2, d_out_keys, d_out_values, num_items1,
             num_items2, op, stream, True)
