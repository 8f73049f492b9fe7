"""Device-wide reduction: ``make_reduce_into``, the reducer object, and ``reduce_into``.

The result has the type of ``d_out``: items are converted to it and combined with
``op``; ``h_init`` (converted to that type too) is combined with the result, and is the
result for an empty input. Without ``h_init`` an empty input leaves ``d_out`` untouched.

Host dispatch (ours, mirroring CUB's): a problem that fits one tile of the single-tile
policy runs one kernel and needs no temporary storage; larger problems run CUB's
AgentReduce over an even share of tiles per block (grid = occupancy x SMs x 5, capped by
the tile count) into per-block partials, then CUB's single-tile kernel combines those
with ``h_init``. Tile sizes come from the compiled code's exported policy.
"""

from __future__ import annotations

from typing import Any

from cuprims._compile.source import Source
from cuprims._runtime import driver
from cuprims._value_types import host_bytes
from cuprims.algorithms.arguments import describe, keyword_checked
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.operators import combined_input
from cuprims.algorithms.reduce.source import reduce_source
from cuprims.algorithms.skeleton import (Algorithm, CombinerDescription, Plan, combiner_spec, description, functor_size,
                                         functor_state)
from cuprims.algorithms.values import checked_host_value, scalar_init_type
from cuprims.enums import Determinism
from cuprims.errors import ArgumentError
from cuprims.typing import (ArrayIteratorOrProxy, ArrayOrIterator, ComputeCapabilityLike, DeterminismLike,
                            DeviceArrayLike, HostValue, HostValueOrProxy, OperatorLike, StreamLike)

# CUB launches this many blocks per SM-occupancy slot for reductions.
_SUBSCRIPTION_FACTOR = 5
# Grid cap for Determinism.GPU_TO_GPU: a constant, so that the partition into partial
# sums (and with it the rounding) is the same on every GPU.
_PORTABLE_GRID = 2048


@description
class ReduceDescription(CombinerDescription):
    """A reduction: what it reads, what it writes (the type it computes in), the operator,
    whether an initial value is combined in, and the determinism asked for."""

    has_init: bool
    determinism: Determinism

    def source(self, arch: int) -> Source:
        return reduce_source(in_type=self.d_in.value, accum=self.d_out.value, op=self.op, has_init=self.has_init,
                             deterministic_across_gpus=self.determinism is Determinism.GPU_TO_GPU, arch=arch,
                             d_in=self.d_in, d_out=self.d_out)

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        # reduce_kernel(d_in, d_out, d_partials, num_items, op, init, finalize), over the input
        # then over the partials
        init_size = self.d_out.value.size if self.has_init else 1
        kinds = (self.d_in.param, self.d_out.param, "ptr", "i64", functor_size(self.op), init_size, "i32")
        return (kinds, ("ptr",) + kinds[1:])


class _Plan(Plan):
    """Kernel handles (over the input, over the partials), block size, items per tile,
    grid cap and the partials' size."""

    __slots__ = ("first", "second", "threads", "tile_items", "max_grid", "accum_size", "temp_align", "device")

    def __init__(self, loaded: Loaded, portable: bool):
        meta = loaded.meta
        self.first, self.second = loaded.handles  # codegen order: over the input, over the partials
        self.threads = meta["threads"]
        self.tile_items = self.threads * meta["items"]
        if portable:
            self.max_grid = _PORTABLE_GRID
        else:
            occupancy = loaded.module.max_active_blocks(loaded.names[0], self.threads)
            self.max_grid = max(1, occupancy) * driver.sm_count(loaded.device) * _SUBSCRIPTION_FACTOR
        self.accum_size, self.temp_align = meta["accum_size"], meta["accum_align"]


def _parse_determinism(determinism: Any) -> Determinism:
    if isinstance(determinism, Determinism):
        return determinism
    try:
        if isinstance(determinism, str):
            return Determinism[determinism.upper()]
        return Determinism(determinism)
    except (KeyError, ValueError):
        raise ArgumentError("determinism", "a cuprims.Determinism value", determinism) from None


def _describe(d_in: Any, d_out: Any, op: Any, h_init: Any, determinism: Any) -> ReduceDescription:
    """Check the build arguments and describe the reduction."""
    det = _parse_determinism(determinism)
    in_arg = describe(d_in, "d_in", iterators=True)
    out_arg = describe(d_out, "d_out", iterators=True, output=True)
    accum = out_arg.value
    init_dt = checked_host_value(h_init, accum, "h_init")
    in_arg = combined_input(in_arg, out_arg)
    spec = combiner_spec(op, accum)
    return ReduceDescription(in_arg, out_arg, spec, init_dt is not None, det)


class Reduce(Algorithm):
    """A reduction built for fixed types and operator (what :func:`make_reduce_into`
    returns). ``reducer(temp_storage=None, ...)`` only sizes the temporary storage;
    given a buffer, it writes ``op``'s fold of ``d_in`` and ``h_init`` to ``d_out[0]``.
    """

    desc: ReduceDescription

    def _setup(self) -> None:
        desc = self.desc
        # one pack per pass (the skeleton's _packs), so the two launches of a large problem
        # never share a parameter block
        self._first_params, self._second_params = self._packs
        self._accum = desc.d_out.value
        self._init_scalar_type = scalar_init_type(self._accum, desc.has_init)
        self._stateful = bool(desc.op.state_size)

    def _make_plan(self, loaded: Loaded, variant: int) -> _Plan:
        return _Plan(loaded, self.desc.determinism is Determinism.GPU_TO_GPU)

    def _init_bytes(self, h_init: Any) -> bytes:
        if type(h_init) is self._init_scalar_type:  # the common case: a numpy scalar of the output type
            return h_init.tobytes()
        if not self.desc.has_init:
            if h_init is not None:
                raise ArgumentError("h_init", "None (this reducer was built without an initial value)", h_init)
            return b"\0"
        if h_init is None:
            raise ArgumentError("h_init", f"a {self._accum.dtype} value (this reducer was built with one)", None)
        return host_bytes(h_init, self._accum, argument="h_init")

    # args: (p_in, p_out, n, state, init)
    def _temp_bytes(self, plan: _Plan, args: tuple) -> int:
        n = args[2]
        if n <= plan.tile_items:  # one tile: a single block does it all, no temporary storage
            return 0
        return min(-(-n // plan.tile_items), plan.max_grid) * plan.accum_size

    def _dispatch(self, plan: _Plan, args: tuple, temp: int, stream: int) -> None:
        p_in, p_out, n, state, init = args
        if n <= plan.tile_items:
            driver.launch(plan.first, 1, plan.threads, stream,
                          self._first_params.pack(p_in, p_out, 0, n, state, init, 1))
            return
        grid = min(-(-n // plan.tile_items), plan.max_grid)
        driver.launch(plan.first, grid, plan.threads, stream, self._first_params.pack(p_in, p_out, temp, n, state, init, 0))
        driver.launch(plan.second, 1, plan.threads, stream,
                      self._second_params.pack(temp, p_out, 0, grid, state, init, 1))

    def _run(self, temp_storage: Any, d_in: Any, d_out: Any, num_items: Any, op: Any, h_init: Any,
             stream: Any, one_shot: bool) -> int | None:
        desc = self.desc
        arrays, counts = (d_in, d_out), (num_items,)
        bound = self._recall(arrays, counts)
        memo = None
        if bound is None:
            n = check_num_items(num_items)
            bound = (desc.d_in.bind(d_in, n), desc.d_out.bind(d_out, 1, None), n)
            memo = (arrays, counts, bound)
        # read every call: h_init (a mutable host array) and the operator's state
        args = (*bound, functor_state(desc.op, op) if self._stateful else self._state, self._init_bytes(h_init))
        return self._execute(temp_storage, stream, one_shot, args, (op, d_in, d_out), memo=memo)

    def __call__(self, *, temp_storage: DeviceArrayLike | None, d_in: ArrayOrIterator, d_out: ArrayOrIterator,
                 num_items: int, op: OperatorLike | None = None, h_init: HostValue | None = None,
                 stream: StreamLike | None = None) -> int | None:
        """Run the reduction (or, with ``temp_storage=None``, return the temporary bytes needed)."""
        return self._run(temp_storage, d_in, d_out, num_items, op, h_init, stream, False)


# ------------------------------------------------------------------- public functions


@keyword_checked
def make_reduce_into(*, d_in: ArrayIteratorOrProxy, d_out: ArrayIteratorOrProxy, op: OperatorLike,
                     h_init: HostValueOrProxy | None = None, compute_capability: ComputeCapabilityLike | None = None,
                     determinism: DeterminismLike = Determinism.RUN_TO_RUN) -> Reduce:
    """Build (or fetch from cache) a reduction of ``d_in`` into ``d_out[0]``.

    Args:
        d_in: device array (or ``ProxyArray`` when building ahead of time) of input items.
        d_out: device array whose first element receives the result; its dtype is the
            type the reduction computes in.
        op: an ``OpKind``, a Python callable ``f(a, b) -> value`` or a ``RawOp``.
        h_init: initial value (numpy scalar/array, gpu_struct value or its field values as a
            dict or tuple, or ``ProxyValue``), or None.
        compute_capability: build ahead of time for these targets (no GPU needed).
        determinism: a :class:`Determinism` value (default RUN_TO_RUN).

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(1000, dtype=np.float32); out = cp.empty(1, np.float32)
        reducer = cuprims.make_reduce_into(d_in=x, d_out=out, op=lambda a, b: a + b,
                                           h_init=np.float32(0))
        tmp = cp.empty(reducer(temp_storage=None, d_in=x, d_out=out, num_items=x.size,
                               h_init=np.float32(0)), np.uint8)
        reducer(temp_storage=tmp, d_in=x, d_out=out, num_items=x.size, h_init=np.float32(0))
    """
    desc = Reduce._described(_describe, d_in, d_out, op, h_init, determinism)
    return Reduce._make(desc, compute_capability, (op, d_in, d_out))


@keyword_checked
def reduce_into(*, d_in: ArrayOrIterator, d_out: ArrayOrIterator, num_items: int, op: OperatorLike,
                h_init: HostValue | None = None, stream: StreamLike | None = None,
                determinism: DeterminismLike = Determinism.RUN_TO_RUN) -> None:
    """Reduce ``num_items`` items of ``d_in`` with ``op`` into ``d_out[0]``, in one call.

    Temporary storage is allocated and freed on ``stream`` (stream-ordered), so the
    call never synchronises.

    Example::

        import cupy as cp, numpy as np, cuprims
        x = cp.arange(10, dtype=np.int32); out = cp.empty(1, np.int32)
        cuprims.reduce_into(d_in=x, d_out=out, num_items=10, op=cuprims.OpKind.PLUS,
                            h_init=np.int32(0))
        assert int(out[0]) == 45
    """
    obj = make_reduce_into.__wrapped__(d_in=d_in, d_out=d_out, op=op, h_init=h_init, determinism=determinism)
    obj._run(None, d_in, d_out, num_items, op, h_init, stream, True)
