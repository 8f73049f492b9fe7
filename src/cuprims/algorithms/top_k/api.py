"""Top-k: ``make_top_k``, the object, and ``top_k``.

The ``k`` largest keys of ``d_in_keys`` (``SortOrder.DESCENDING``) or the ``k`` smallest
(``ASCENDING``) are written to ``d_out_keys``, and with ``d_in_values`` the values of the
same items to ``d_out_values``. Keys are compared as numpy orders them: NaNs (of either
sign, bits kept) after +inf, so the largest take NaNs first and the smallest take them
last; -0.0 and +0.0 are different keys to the selection (+0.0 the larger). Without
``sorted`` the k items come in no particular order (it may differ from run to run); with
``sorted=True`` the best comes first. Among keys equal to the k-th, any may be chosen.

Host dispatch (ours; kernels in ``algorithms/top_k/cuprims_top_k.cuh``): a radix select
over the keys' ordered words, 8 bits a pass from the top. An init kernel readies a small
device state; each pass (a grid-stride kernel) builds the digit histogram of the items
still in question and a one-block choose kernel extends the k-th word's prefix; a final
filter writes the items above the k-th word and as many equal to it as needed. Nothing
synchronises: the prefix, the count still needed and the output counters stay on the
device. From the second pass on, the items still in question are also copied to one of two
buffers in temporary storage (up to ``num_items / 32`` items each), which the next pass
reads instead of the input when they all fitted. ``sorted=True`` then sorts the k results
in place: blocks sort tiles of 4096 (CUB's ``BlockRadixSort`` on the words), and merge
passes, between the outputs and two more buffers of temporary storage, join pairs of
sorted runs until one holds all k.
"""

from __future__ import annotations

from typing import Any

from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims.algorithms.arguments import ArgKind, describe, keyword_checked
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.skeleton import Algorithm, Description, Plan, description
from cuprims.algorithms.sort_common import parse_order
from cuprims.algorithms.top_k.source import top_k_source
from cuprims.enums import SortOrder
from cuprims.errors import ArgumentError
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ArrayOrProxy, ComputeCapabilityLike,
                            DeviceArrayLike, SortOrderLike, StreamLike)

__all__ = ["TopK", "make_top_k", "top_k"]

_STATE_BYTES = 2304    # cuprims::top_k::state_t (2 + 3 + 2 + 256 words of 8 bytes), rounded up to 256
_BUFFER_SHARE = 32     # each candidate buffer holds num_items / 32 items
_ALIGN = 256


@description
class TopKDescription(Description):
    """Keys in and out, values in and out (or None: keys alone), the order, and whether the
    k results are sorted."""

    d_in_keys: ArgKind
    d_out_keys: ArgKind
    d_in_values: ArgKind | None
    d_out_values: ArgKind | None
    order: SortOrder
    sorted: bool

    def source(self, arch: int) -> Source:
        return top_k_source(d_in_keys=self.d_in_keys, d_in_values=self.d_in_values,
                            descending=self.order is SortOrder.DESCENDING, arch=arch)

    def _link(self) -> tuple[Any, ...]:
        values = self.d_in_values.linked_ops() if self.d_in_values is not None else ()
        return self.d_in_keys.linked_ops() + values

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        values = self.d_in_values.param if self.d_in_values is not None else "ptr"
        return (
            ("ptr", "i64"),                                          # init: state, k
            # pass: keys, values, out keys, out values, state, read buffer (keys, indices),
            # append buffer (keys, indices), items, buffer capacity, k, pass, passes
            (self.d_in_keys.param, values, "ptr", "ptr", "ptr", "ptr", "ptr", "ptr", "ptr",
             "i64", "i64", "i64", "i32", "i32"),
            ("ptr", "i32"),                                          # choose: state, pass
            ("ptr", "ptr", "i64"),                                   # sort: out keys, out values, k
            ("ptr", "ptr", "ptr", "ptr", "i64", "i64"),              # merge: in keys, values, out keys, values, k, run
        )


class _Plan(Plan):
    """The kernels, the passes' tile and grid, and the sort's shapes."""

    __slots__ = ("init", "pass_", "choose", "sort", "merge", "threads", "tile_items", "max_grid", "passes",
                 "sort_threads", "sort_tile", "merge_threads", "merge_items", "device")
    temp_align = _ALIGN

    def __init__(self, loaded: Loaded):
        self.init, self.pass_, self.choose, self.sort, self.merge = loaded.handles
        meta = loaded.meta
        self.threads = meta["threads"]
        self.tile_items = self.threads * meta["items"]
        self.passes = meta["word_bits"] // 8
        self.sort_threads = meta["sort_threads"]
        self.sort_tile = self.sort_threads * meta["sort_items"]
        self.merge_threads, self.merge_items = meta["merge_threads"], meta["merge_items"]
        occupancy = loaded.module.max_active_blocks(loaded.names[1], self.threads)
        self.max_grid = max(1, occupancy) * driver.sm_count(loaded.device)


def _describe(d_in_keys: Any, d_in_values: Any, d_out_keys: Any, d_out_values: Any, order: Any,
              sorted_: Any) -> TopKDescription:
    order = parse_order(order)
    if not isinstance(sorted_, bool):
        raise ArgumentError("sorted", "True or False", sorted_)
    keys_in = describe(d_in_keys, "d_in_keys", iterators=True)
    key = keys_in.value
    if key.is_struct or key.kind not in "biuf":
        raise ArgumentError("d_in_keys", "keys of a bool, integer or floating-point dtype", key.dtype)
    keys_out = describe(d_out_keys, "d_out_keys", output=True)
    if keys_out.value.dtype != key.dtype:
        raise ArgumentError("d_out_keys", f"an array of the keys' dtype ({key.dtype})", keys_out.value.dtype)
    if (d_in_values is None) != (d_out_values is None):
        name = "d_out_values" if d_out_values is None else "d_in_values"
        raise ArgumentError(name, "an array when the other of d_in_values/d_out_values is given (both or neither)",
                            None if d_out_values is None else d_in_values)
    values_in = values_out = None
    if d_in_values is not None:
        values_in = describe(d_in_values, "d_in_values", iterators=True)
        values_out = describe(d_out_values, "d_out_values", output=True)
        if values_out.value != values_in.value:
            raise ArgumentError("d_out_values", f"an array of the values' type ({values_in.value.dtype})",
                                values_out.value.dtype)
    return TopKDescription(keys_in, keys_out, values_in, values_out, order, sorted_)


def _check_k(k: Any, n: int) -> int:
    k = check_num_items(k, "k")
    if k > n:
        raise ArgumentError("k", f"at most num_items ({n})", k)
    return k


def _layout(n: int, passes: int, key_size: int, pairs: bool) -> tuple[int, int, int]:
    """(candidate buffer capacity, bytes of one key buffer, bytes of one index buffer)."""
    if passes < 2 or not n:
        return 0, 0, 0
    cap = -(-n // _BUFFER_SHARE)
    round_up = lambda b: -(-b // _ALIGN) * _ALIGN  # noqa: E731
    return cap, round_up(cap * key_size), round_up(cap * 8) if pairs else 0


class TopK(Algorithm):
    """The k best keys (and their values); built for fixed types, order and ``sorted`` by
    :func:`make_top_k`. With ``temp_storage=None`` the call returns the temporary bytes it
    needs."""

    desc: TopKDescription

    def _setup(self) -> None:
        self._pairs = self.desc.d_in_values is not None
        self._key_size = self.desc.d_in_keys.value.size

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded)

    # args: (p_keys, p_values, p_out_keys, p_out_values, n, k)
    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        n, k = args[4], args[5]
        if not k:
            return 0
        _, key_bytes, index_bytes = _layout(n, plan.passes, self._key_size, self._pairs)
        return _STATE_BYTES + 2 * (key_bytes + index_bytes) + sum(self._merge_bytes(plan, k))

    def _merge_bytes(self, plan: _Plan, k: int) -> tuple[int, int]:
        """Bytes of the merge passes' key and value buffers (none unless sorting several tiles)."""
        if not self.desc.sorted or k <= plan.sort_tile:
            return 0, 0
        round_up = lambda b: -(-b // _ALIGN) * _ALIGN  # noqa: E731
        out_values = self.desc.d_out_values
        values = round_up(k * out_values.value.size) if out_values is not None else 0
        return round_up(k * self._key_size), values

    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        p_keys, p_values, p_out_keys, p_out_values, n, k = args
        if not k:
            return
        init, pass_, choose, sort, merge = self._packs_of(0)
        cap, key_bytes, index_bytes = _layout(n, plan.passes, self._key_size, self._pairs)
        base = temp + _STATE_BYTES
        buf_keys = (base, base + key_bytes) if cap else (0, 0)
        buf_index = (base + 2 * key_bytes, base + 2 * key_bytes + index_bytes) if cap and self._pairs else (0, 0)
        grid = max(1, min(plan.max_grid, -(-n // plan.tile_items)))
        launch = driver.launch
        launch(plan.init, 1, plan.threads, stream, init.pack(temp, k))
        passes = plan.passes
        for j in range(passes + 1):
            # pass j reads what pass j - 1 appended and appends for pass j + 1
            r, w = (j - 1) & 1, j & 1
            launch(plan.pass_, grid, plan.threads, stream,
                   pass_.pack(p_keys, p_values, p_out_keys, p_out_values, temp, buf_keys[r], buf_index[r],
                              buf_keys[w], buf_index[w], n, cap, k, j, passes))
            if j < passes:
                launch(plan.choose, 1, 256, stream, choose.pack(temp, j))
        if self.desc.sorted and k > 1:
            self._sort(plan, launch, stream, p_out_keys, p_out_values, k,
                       base + 2 * (key_bytes + index_bytes), sort, merge)

    def _sort(self, plan: _Plan, launch: Any, stream: int, p_keys: int, p_values: int, k: int, spare: int,
              sort: Any, merge: Any) -> None:
        """The k outputs sorted: tiles by blocks, then pairs of runs merged, back and forth
        between the outputs and the spare buffers; an odd number of merges ends with a copy
        back (a merge of one run)."""
        tiles = -(-k // plan.sort_tile)
        launch(plan.sort, tiles, plan.sort_threads, stream, sort.pack(p_keys, p_values, k))
        if tiles == 1:
            return
        key_bytes, _ = self._merge_bytes(plan, k)
        here, there = (p_keys, p_values), (spare, spare + key_bytes if self._pairs else 0)
        grid = -(-k // (plan.merge_threads * plan.merge_items))
        run = plan.sort_tile
        while run < k or here[0] != p_keys:
            launch(plan.merge, grid, plan.merge_threads, stream, merge.pack(*here, *there, k, run))
            here, there = there, here
            run *= 2

    def _run(self, temp_storage: Any, d_in_keys: Any, d_in_values: Any, d_out_keys: Any, d_out_values: Any, k: Any,
             num_items: Any, stream: Any, one_shot: bool) -> int | None:
        n = check_num_items(num_items)
        k = _check_k(k, n)
        d = self.desc
        if (d_in_values is None) != (d.d_in_values is None):
            raise ArgumentError("d_in_values", "None (this object selects keys alone)" if d.d_in_values is None
                                else "the values (this object selects pairs)", d_in_values)
        p_keys = d.d_in_keys.bind(d_in_keys, n)
        p_out_keys = d.d_out_keys.bind(d_out_keys, k, "k")
        p_values = p_out_values = 0
        if d.d_in_values is not None and d.d_out_values is not None:
            p_values = d.d_in_values.bind(d_in_values, n)
            p_out_values = d.d_out_values.bind(d_out_values, k, "k")
        plan_args = (p_keys, p_values, p_out_keys, p_out_values, n, k)
        return self._execute(temp_storage, stream, one_shot, plan_args, (None, d_in_keys, d_in_values), 0)

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in_keys: ArrayOrIterator,
                 d_out_keys: DeviceArrayLike, k: int, num_items: int, d_in_values: ArrayOrIterator | None = None,
                 d_out_values: DeviceArrayLike | None = None, stream: StreamLike | None = None) -> int | None:
        """Run (or, with ``temp_storage=None``, return the temporary bytes needed)."""
        return self._run(temp_storage, d_in_keys, d_in_values, d_out_keys, d_out_values, k, num_items, stream, False)


@keyword_checked
def make_top_k(*, d_in_keys: ArrayIteratorOrProxy, d_out_keys: ArrayOrProxy,
               d_in_values: ArrayIteratorOrProxy | None = None, d_out_values: ArrayOrProxy | None = None,
               order: SortOrderLike = SortOrder.DESCENDING, sorted: bool = False,
               compute_capability: ComputeCapabilityLike | None = None) -> TopK:
    """Build (or fetch from cache) a top-k selection; ``k`` is given at each call.

    Args:
        d_in_keys: device array or iterator of keys (bool, integer or floating point).
        d_out_keys: device array of the keys' dtype, room for ``k``: the selected keys.
        d_in_values: device array or iterator of values, or None (keys alone).
        d_out_values: device array of the values' dtype, room for ``k`` (with ``d_in_values``).
        order: ``SortOrder.DESCENDING`` (the k largest; NaNs count as the largest) or
            ``ASCENDING`` (the k smallest; NaNs taken last).
        sorted: the results best first; otherwise in no particular order.
        compute_capability: build ahead of time for these targets (no GPU needed).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray([5, 1, 9, 3, 7], np.int32); y = cp.empty(2, np.int32)
        t = cuprims.make_top_k(d_in_keys=x, d_out_keys=y, sorted=True)
        tmp = cp.empty(t(temp_storage=None, d_in_keys=x, d_out_keys=y, k=2, num_items=5), np.uint8)
        t(temp_storage=tmp, d_in_keys=x, d_out_keys=y, k=2, num_items=5)
        assert y.get().tolist() == [9, 7]
    """
    desc = TopK._described(_describe, d_in_keys, d_in_values, d_out_keys, d_out_values, order, sorted)
    return TopK._make(desc, compute_capability, (None, d_in_keys, d_in_values))


@keyword_checked
def top_k(*, d_in_keys: ArrayOrIterator, d_out_keys: DeviceArrayLike, k: int, num_items: int,
          d_in_values: ArrayOrIterator | None = None, d_out_values: DeviceArrayLike | None = None,
          order: SortOrderLike = SortOrder.DESCENDING, sorted: bool = False,
          stream: StreamLike | None = None) -> None:
    """Top-k in one call (temporary storage taken on ``stream``).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.asarray([0.5, np.nan, -2.0, 4.0], np.float32)
        y = cp.empty(2, np.float32); i = cp.empty(2, np.int32)
        cuprims.top_k(d_in_keys=x, d_in_values=cp.arange(4, dtype=np.int32), d_out_keys=y, d_out_values=i,
                      k=2, num_items=4, order=cuprims.SortOrder.ASCENDING, sorted=True)
        assert y.get().tolist() == [-2.0, 0.5] and i.get().tolist() == [2, 0]
    """
    obj = make_top_k.__wrapped__(d_in_keys=d_in_keys, d_in_values=d_in_values, d_out_keys=d_out_keys,
                                 d_out_values=d_out_values, order=order, sorted=sorted)
    obj._run(None, d_in_keys, d_in_values, d_out_keys, d_out_values, k, num_items, stream, True)
