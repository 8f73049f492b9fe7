"""What a reduce-by-key, a run-length encoding and a search for runs of more than one item
are built for (their descriptions, checked from the build-time arguments), and the plan and
temporary-storage layout the three share: reduce-by-key's init kernel and a single-pass sweep
over CUB's by-key tile states."""

from __future__ import annotations

from typing import Any

from cuprims._build.results import OpInput
from cuprims._codegen.builtin_ops import check_equality_builtin
from cuprims._codegen.common import op_symbol
from cuprims._compile.source import Source
from cuprims.algorithms.arguments import ArgKind, describe
from cuprims.algorithms.common import Loaded
from cuprims.algorithms.lookback import count_output, output_like
from cuprims.algorithms.operators import combined_input, combiner_spec
from cuprims.algorithms.reduce_by_key.source import non_trivial_runs_source, reduce_by_key_source, run_length_source
from cuprims.algorithms.skeleton import Description, Plan, description, functor_size
from cuprims.errors import ArgumentError
from cuprims.op import OpKind, OpSpec, op_spec




@description
class ReduceByKeyDescription(Description):
    """Keys and values in, unique keys and aggregates out (the aggregates' type is the one
    the values are reduced in), the run count's type, and the two operators."""

    keys_in: ArgKind
    values_in: ArgKind
    unique_out: ArgKind
    aggregates_out: ArgKind
    num_runs: ArgKind
    equality: OpSpec
    reduction: OpSpec
    wide_offsets: bool = False

    @property
    def operator(self) -> None:
        return None  # two operators, both listed by _link (see ReduceByKey._objects)

    def source(self, arch: int) -> Source:
        return reduce_by_key_source(keys_in=self.keys_in, values_in=self.values_in, unique_out=self.unique_out,
                                    aggregates_out=self.aggregates_out, num_runs=self.num_runs,
                                    equality=self.equality, reduction=self.reduction,
                                    accum=self.aggregates_out.value, arch=arch, wide_offsets=self.wide_offsets)

    def _link(self) -> tuple[OpInput, ...]:
        key, accum = self.keys_in.value, self.aggregates_out.value
        own = []
        if self.equality.kind != "builtin":
            own.append(OpInput(op_symbol(self.equality, "cuprims_op_0"), self.equality, (key, key), None))
        if self.reduction.kind != "builtin":
            own.append(OpInput(op_symbol(self.reduction, "cuprims_op_1"), self.reduction, (accum, accum), accum))
        return tuple(own) + tuple(op for a in (self.keys_in, self.values_in, self.unique_out, self.aggregates_out)
                                  for op in a.linked_ops())

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        return (
            # init: tile storage, tiles, run count
            ("ptr", "i32", "ptr"),
            # sweep: keys in, unique out, values in, aggregates out, run count, tile storage, equality,
            #        reduction, items, tiles
            (self.keys_in.param, self.unique_out.param, self.values_in.param, self.aggregates_out.param, "ptr",
             "ptr", functor_size(self.equality), functor_size(self.reduction), "i64" if self.wide_offsets else "i32",
             "i32"),
        )


class _Plan(Plan):
    """The init and sweep kernels, the tile shape and the tile states' bytes."""

    __slots__ = ("init", "sweep", "threads", "tile_items", "init_threads", "padding", "bytes_per_tile",
                 "fixed_bytes", "device")

    def __init__(self, loaded: Loaded):
        meta = loaded.meta
        self.init, self.sweep = loaded.handles
        self.threads = meta["threads"]
        self.tile_items = self.threads * meta["items"]
        self.init_threads = meta["init_threads"]
        self.padding, self.bytes_per_tile, self.fixed_bytes = (meta["tile_padding"], meta["tile_bytes_per_tile"],
                                                               meta["tile_fixed_bytes"])


def storage_layout(plan: Any, num_items: int) -> tuple[int, int]:
    """(tiles, bytes of the tile states) for ``num_items`` items (at least one tile state
    is readied: the init kernel zeroes the run count of an empty input too)."""
    tiles = -(-num_items // plan.tile_items)
    return tiles, max(tiles, 1) * plan.bytes_per_tile + plan.fixed_bytes


def _describe(d_in_keys: Any, d_in_values: Any, d_out_unique_keys: Any, d_out_aggregates: Any, d_out_num_runs: Any,
              equality_op: Any, reduction_op: Any) -> ReduceByKeyDescription:
    keys_in = describe(d_in_keys, "d_in_keys", iterators=True)
    values_in = describe(d_in_values, "d_in_values", iterators=True)
    unique_out = output_like(d_out_unique_keys, "d_out_unique_keys", keys_in)
    aggregates_out = describe(d_out_aggregates, "d_out_aggregates", iterators=True, output=True)
    values_in = combined_input(values_in, aggregates_out, "d_in_values", "d_out_aggregates")
    num_runs = count_output(d_out_num_runs, "d_out_num_runs")
    if reduction_op is None:
        raise ArgumentError("reduction_op", "an OpKind, a Python callable f(a, b) -> value or a RawOp", None)
    equality = op_spec(OpKind.EQUAL_TO if equality_op is None else equality_op, argument="equality_op",
                       bind_captures=True)
    if equality.kind == "builtin":
        check_equality_builtin(equality, keys_in.value, "equality_op")
    reduction = combiner_spec(reduction_op, aggregates_out.value, "reduction_op")
    return ReduceByKeyDescription(keys_in, values_in, unique_out, aggregates_out, num_runs, equality, reduction)


class _RunSweepDescription(Description):
    """What the run-length encoding and the search for runs of more than one item share:
    items in, two outputs (:attr:`outputs`), the run count's type and the equality, swept by
    one kernel after reduce-by-key's init kernel (subclasses are made with ``description``)."""

    items_in: ArgKind
    num_runs: ArgKind
    equality: OpSpec
    wide_offsets: bool

    @property
    def operator(self) -> None:
        return None

    @property
    def outputs(self) -> tuple[ArgKind, ArgKind]:
        """The two outputs, in the sweep kernel's order."""
        raise NotImplementedError

    def _link(self) -> tuple[OpInput, ...]:
        return tuple(op for a in (self.items_in, *self.outputs) for op in a.linked_ops())

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        out_a, out_b = self.outputs
        return (
            # init: tile storage, tiles, run count
            ("ptr", "i32", "ptr"),
            # sweep: items in, the two outputs, run count, tile storage, equality, items, tiles
            (self.items_in.param, out_a.param, out_b.param, "ptr", "ptr", functor_size(self.equality),
             "i64" if self.wide_offsets else "i32", "i32"),
        )


@description
class RunLengthEncodeDescription(_RunSweepDescription):
    """Items in; each run's first item and its length out (the lengths' type is the one
    they are counted in); the run count's type; the equality."""

    items_in: ArgKind
    unique_out: ArgKind
    counts_out: ArgKind
    num_runs: ArgKind
    equality: OpSpec
    wide_offsets: bool = False

    @property
    def outputs(self) -> tuple[ArgKind, ArgKind]:
        return self.unique_out, self.counts_out

    def source(self, arch: int) -> Source:
        return run_length_source(items_in=self.items_in, unique_out=self.unique_out, counts_out=self.counts_out,
                                 num_runs=self.num_runs, equality=self.equality, arch=arch,
                                 wide_offsets=self.wide_offsets)


def _describe_encoding(d_in: Any, d_out_unique: Any, d_out_counts: Any,
                       d_out_num_runs: Any) -> RunLengthEncodeDescription:
    items_in = describe(d_in, "d_in", iterators=True)
    unique_out = output_like(d_out_unique, "d_out_unique", items_in)
    counts = _integer_output(d_out_counts, "d_out_counts", "the runs' lengths")
    num_runs = count_output(d_out_num_runs, "d_out_num_runs")
    equality = op_spec(OpKind.EQUAL_TO, argument="d_in")
    check_equality_builtin(equality, items_in.value, "d_in")
    return RunLengthEncodeDescription(items_in, unique_out, counts, num_runs, equality)


@description
class NonTrivialRunsDescription(_RunSweepDescription):
    """Items in; the offsets and lengths of their runs of more than one item out (the
    lengths' type is the one they are counted in); the run count's type; the equality."""

    items_in: ArgKind
    offsets_out: ArgKind
    lengths_out: ArgKind
    num_runs: ArgKind
    equality: OpSpec
    wide_offsets: bool = False

    @property
    def outputs(self) -> tuple[ArgKind, ArgKind]:
        return self.offsets_out, self.lengths_out

    def source(self, arch: int) -> Source:
        return non_trivial_runs_source(items_in=self.items_in, offsets_out=self.offsets_out,
                                       lengths_out=self.lengths_out, num_runs=self.num_runs, equality=self.equality,
                                       arch=arch, wide_offsets=self.wide_offsets)


def _integer_output(x: Any, name: str, what: str) -> ArgKind:
    arg = describe(x, name, iterators=True, output=True)
    if arg.value.kind not in "iu":
        raise ArgumentError(name, f"an array or output iterator of an integer type ({what})", arg.value.dtype)
    return arg


def _describe_non_trivial(d_in: Any, d_out_offsets: Any, d_out_lengths: Any,
                          d_out_num_runs: Any) -> NonTrivialRunsDescription:
    items_in = describe(d_in, "d_in", iterators=True)
    offsets_out = _integer_output(d_out_offsets, "d_out_offsets", "each run's offset")
    lengths_out = _integer_output(d_out_lengths, "d_out_lengths", "each run's length")
    num_runs = count_output(d_out_num_runs, "d_out_num_runs")
    equality = op_spec(OpKind.EQUAL_TO, argument="d_in")
    check_equality_builtin(equality, items_in.value, "d_in")
    return NonTrivialRunsDescription(items_in, offsets_out, lengths_out, num_runs, equality)
