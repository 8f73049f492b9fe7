"""The bad-argument matrix: every algorithm's builder, given one bad argument at a time,
raises an exception under CuprimsError that names that argument, before any compiler
runs (a build would be visible in cache_info()), and never a bare Python exception.

An algorithm joins the matrix by one declaration in ``ALGORITHMS``: its builder, good
build-time arguments (placeholders for an ahead-of-time sm_90 build), which of them are
device arrays, which take iterators, and which is its operator or initial value.
``_cases()`` derives the bad values of each: for every device-array argument, things
that are not device arrays (a host array, a ProxyValue, ...) and iterators of the wrong
direction (output-only iterators for an input, read-only ones for an output); for the
operator, values no recipe or compile can take (a list that contains itself, an integer
beyond 64 bits, values nested too deep).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest

import cuprims
from cuprims import (CacheModifiedInputIterator, ConstantIterator, CountingIterator, DiscardIterator, OpKind,
                     ProxyArray, ProxyValue, RawOp, ReverseIterator, SortOrder, TransformIterator,
                     TransformOutputIterator)
from cuprims.errors import CuprimsError

P, V = ProxyArray, ProxyValue
f4, i4, i8 = np.float32, np.int32, np.int64


@dataclass(frozen=True)
class Algo:
    builder: Callable[..., Any]
    good: dict[str, Any]
    arrays: tuple[str, ...]                       # device-array arguments
    no_iterators: tuple[str, ...] = ()            # arrays that must not be iterators
    optional: tuple[str, ...] = ()                # arrays that may be None (sort values)
    op: str | None = None                         # the operator argument
    init: str | None = None                       # the host initial value argument (of output type `init_type`)
    init_type: Any = None
    extra: dict[str, tuple[Any, str]] = field(default_factory=dict)  # case name -> (overrides, argument)


def _below_three(v):
    return v < 3


def _nested_list(levels):
    x = 1
    for _ in range(levels):
        x = [x]
    return x


_CYCLIC = []
_CYCLIC.append(_CYCLIC)          # a list that contains itself
_HUGE = 10 ** 5000               # beyond Python's int -> str limit (4300 digits) and numba's 64 bits
_DEEP = _nested_list(100)        # deeper than recipe.MAX_VALUE_DEPTH


def _reads_cyclic_list(a, b=None):
    return a if _CYCLIC[0] else b


def _reads_huge_int(a, b=None):
    return a + _HUGE


def _reads_deep_list(a, b=None):
    return a + _DEEP[0]


def _above_six(v):
    return v > 6


ALGORITHMS: dict[str, Algo] = {
    "reduce": Algo(cuprims.make_reduce_into, dict(d_in=P(i4), d_out=P(i4), op=OpKind.PLUS, h_init=V(i4)),
                   ("d_in", "d_out"), op="op", init="h_init", init_type=i4,
                   extra={"complex to real": (dict(d_in=P(np.complex64), d_out=P(f4), h_init=V(f4)), "d_out"),
                          "determinism": (dict(determinism="sometimes"), "determinism")}),
    "segmented_reduce": Algo(cuprims.make_segmented_reduce,
                             dict(d_in=P(i4), d_out=P(i4), start_offsets_in=P(i8), end_offsets_in=P(i8),
                                  op=OpKind.PLUS, h_init=V(i4)),
                             ("d_in", "d_out", "start_offsets_in", "end_offsets_in"), op="op", init="h_init",
                             init_type=i4,
                             extra={"float offsets": (dict(start_offsets_in=P(f4)), "start_offsets_in"),
                                    "offsets of two types": (dict(end_offsets_in=P(np.int32)), "end_offsets_in"),
                                    "no init": (dict(h_init=None), "h_init")}),
    "unique_by_key": Algo(cuprims.make_unique_by_key,
                          dict(d_in_keys=P(i4), d_in_items=P(f4), d_out_keys=P(i4), d_out_items=P(f4),
                               d_out_num_selected=P(i8), op=OpKind.EQUAL_TO),
                          ("d_in_keys", "d_in_items", "d_out_keys", "d_out_items", "d_out_num_selected"),
                          no_iterators=("d_out_num_selected",), op="op",
                          extra={"a float count": (dict(d_out_num_selected=P(f4)), "d_out_num_selected"),
                                 "an ordering, not an equality": (dict(op=OpKind.LESS), "op")}),
    "three_way_partition": Algo(cuprims.make_three_way_partition,
                                dict(d_in=P(i4), d_first_part_out=P(i4), d_second_part_out=P(i4),
                                     d_unselected_out=P(i4), d_num_selected_out=P(i8),
                                     select_first_part_op=_below_three, select_second_part_op=_above_six),
                                ("d_in", "d_first_part_out", "d_second_part_out", "d_unselected_out",
                                 "d_num_selected_out"),
                                no_iterators=("d_num_selected_out",), op="select_first_part_op",
                                extra={"a built-in predicate": (dict(select_second_part_op=OpKind.LESS),
                                                                "select_second_part_op")}),
    "select": Algo(cuprims.make_select, dict(d_in=P(i4), d_out=P(i4), d_num_selected_out=P(i8), cond=_below_three),
                   ("d_in", "d_out", "d_num_selected_out"), no_iterators=("d_num_selected_out",), op="cond",
                   extra={"a built-in predicate": (dict(cond=OpKind.EQUAL_TO), "cond")}),
    "inclusive_scan": Algo(cuprims.make_inclusive_scan, dict(d_in=P(i4), d_out=P(i4), op=OpKind.PLUS),
                           ("d_in", "d_out"), op="op"),
    "exclusive_scan": Algo(cuprims.make_exclusive_scan, dict(d_in=P(i4), d_out=P(i4), op=OpKind.PLUS,
                                                             init_value=V(i4)),
                           ("d_in", "d_out"), op="op", init="init_value", init_type=i4,
                           extra={"no init": (dict(init_value=None), "init_value")}),
    "unary_transform": Algo(cuprims.make_unary_transform, dict(d_in=P(f4), d_out=P(f4), op=OpKind.NEGATE),
                            ("d_in", "d_out"), op="op",
                            extra={"binary op": (dict(op=OpKind.PLUS), "op")}),
    "binary_transform": Algo(cuprims.make_binary_transform, dict(d_in1=P(f4), d_in2=P(f4), d_out=P(f4),
                                                                 op=OpKind.PLUS),
                             ("d_in1", "d_in2", "d_out"), op="op"),
    "lower_bound": Algo(cuprims.make_lower_bound, dict(d_data=P(i4), d_values=P(i4), d_out=P(np.uint64)),
                        ("d_data", "d_values", "d_out"), no_iterators=("d_data", "d_out"), op="comp",
                        extra={"float indices": (dict(d_out=P(f4)), "d_out"),
                               "values of another dtype": (dict(d_values=P(f4)), "d_values")}),
    "upper_bound": Algo(cuprims.make_upper_bound, dict(d_data=P(i4), d_values=P(i4), d_out=P(np.int64)),
                        ("d_data", "d_values", "d_out"), no_iterators=("d_data", "d_out"), op="comp"),
    "radix_sort": Algo(cuprims.make_radix_sort, dict(d_in_keys=P(np.uint32), d_out_keys=P(np.uint32),
                                                     d_in_values=P(i4), d_out_values=P(i4),
                                                     order=SortOrder.ASCENDING),
                       ("d_in_keys", "d_out_keys", "d_in_values", "d_out_values"),
                       no_iterators=("d_in_keys", "d_out_keys", "d_in_values", "d_out_values"),
                       optional=("d_in_values", "d_out_values"),
                       extra={"order": (dict(order="sideways"), "order"),
                              "struct keys": (dict(d_in_keys=P(cuprims.gpu_struct({"a": i4})),
                                                   d_out_keys=P(cuprims.gpu_struct({"a": i4}))), "d_in_keys"),
                              "values without output": (dict(d_in_values=P(i4), d_out_values=None), "d_out_values")}),
    "segmented_sort": Algo(cuprims.make_segmented_sort,
                           dict(d_in_keys=P(i4), d_out_keys=P(i4), d_in_values=P(f4), d_out_values=P(f4),
                                start_offsets_in=P(i8), end_offsets_in=P(i8), order=SortOrder.ASCENDING),
                           ("d_in_keys", "d_out_keys", "d_in_values", "d_out_values", "start_offsets_in",
                            "end_offsets_in"),
                           no_iterators=("d_in_keys", "d_out_keys", "d_in_values", "d_out_values"),
                           optional=("d_in_values", "d_out_values"),
                           extra={"order": (dict(order="sideways"), "order"),
                                  "complex keys": (dict(d_in_keys=P(np.complex64), d_out_keys=P(np.complex64)),
                                                   "d_in_keys"),
                                  "float offsets": (dict(start_offsets_in=P(f4)), "start_offsets_in"),
                                  "16-bit offsets": (dict(start_offsets_in=P(np.int16), end_offsets_in=P(np.int16)),
                                                     "start_offsets_in"),
                                  "offsets of two types": (dict(end_offsets_in=P(i4)), "end_offsets_in"),
                                  "values without output": (dict(d_in_values=P(i4), d_out_values=None),
                                                            "d_out_values"),
                                  "values of another dtype": (dict(d_in_values=P(i4), d_out_values=P(f4)),
                                                              "d_out_values")}),
    "merge_sort": Algo(cuprims.make_merge_sort, dict(d_in_keys=P(i4), d_out_keys=P(i4), d_in_values=P(i8),
                                                     d_out_values=P(i8), op=OpKind.LESS),
                       ("d_in_keys", "d_out_keys", "d_in_values", "d_out_values"),
                       no_iterators=("d_out_keys", "d_out_values"), optional=("d_in_values", "d_out_values"),
                       op="op",
                       extra={"arithmetic comparator": (dict(op=OpKind.PLUS), "op"),
                              # the inputs take iterators, but only ones of the outputs' dtype
                              "d_in_keys: an iterator of another dtype": (
                                  dict(d_in_keys=CountingIterator(np.int64(0))), "d_out_keys"),
                              "d_out_values: an iterator, values from one": (
                                  dict(d_in_values=CountingIterator(np.int64(0)),
                                       d_out_values=CountingIterator(np.int64(0))), "d_out_values")}),
    "histogram_even": Algo(cuprims.make_histogram_even,
                           dict(d_samples=P(np.uint8), d_histogram=P(i4), h_num_output_levels=np.array([257], i4),
                                h_lower_level=np.array([0], i4), h_upper_level=np.array([256], i4), num_samples=1000),
                           ("d_samples", "d_histogram"), no_iterators=("d_histogram",),
                           extra={"one level": (dict(h_num_output_levels=np.array([1], i4)), "h_num_output_levels"),
                                  "lower above upper": (dict(h_lower_level=np.array([300], i4)), "h_lower_level"),
                                  "level dtypes differ": (dict(h_upper_level=np.array([256.0])), "h_upper_level"),
                                  "float counters": (dict(d_histogram=P(f4)), "d_histogram"),
                                  "complex samples": (dict(d_samples=P(np.complex64)), "d_samples"),
                                  "negative count": (dict(num_samples=-1), "num_samples")}),
}


def _written(arg: str) -> bool:
    """Whether the algorithm writes array argument ``arg`` (d_out..., ..._out, d_histogram)."""
    return "out" in arg.split("_") or arg == "d_histogram"


def _wrong_direction(good: Any, output: bool) -> dict[str, Any]:
    """Iterators over (or of the dtype of) the good array ``good`` that an argument of the
    other direction must refuse: read-only ones for an output, write-only ones for an input."""
    if output:
        item = np.zeros(1, good.dtype)[0]
        return {"a CountingIterator": CountingIterator(item), "a ConstantIterator": ConstantIterator(item),
                "a TransformIterator": TransformIterator(good, OpKind.IDENTITY),
                "a CacheModifiedInputIterator": CacheModifiedInputIterator(good)}
    return {"a DiscardIterator": DiscardIterator(good),
            "a TransformOutputIterator": TransformOutputIterator(good, OpKind.IDENTITY),
            "a ReverseIterator over a DiscardIterator": ReverseIterator(DiscardIterator(good))}


def _cases() -> list[tuple[str, str, dict[str, Any], str]]:
    """(algorithm, case, overrides, argument the error must name)."""
    out = []
    for name, a in ALGORITHMS.items():
        for arg in a.arrays:
            good = a.good[arg]
            out.append((name, f"{arg}: host numpy array", {arg: np.zeros(4, good.dtype)}, arg))
            out.append((name, f"{arg}: a list", {arg: [1, 2, 3]}, arg))
            out.append((name, f"{arg}: an object dtype", {arg: _ObjectArray()}, arg))
            if arg not in a.optional:
                out.append((name, f"{arg}: None", {arg: None}, arg))
            out.append((name, f"{arg}: a ProxyValue", {arg: V(good.dtype)}, arg))
            out.append((name, f"{arg}: a numpy scalar", {arg: np.zeros(1, good.dtype)[0]}, arg))
            if arg in a.no_iterators:
                out.append((name, f"{arg}: an iterator", {arg: CountingIterator(np.int32(0))}, arg))
            else:
                for case, it in _wrong_direction(good, _written(arg)).items():
                    out.append((name, f"{arg}: {case}", {arg: it}, arg))
        if a.op is not None:
            out.append((name, "op: not callable", {a.op: 42}, a.op))
            out.append((name, "op: a label, not an operator", {a.op: OpKind.STATELESS}, a.op))
            out.append((name, "op: reads a list that contains itself", {a.op: _reads_cyclic_list}, a.op))
            out.append((name, "op: reads a 5000-digit integer", {a.op: _reads_huge_int}, a.op))
            out.append((name, "op: reads a list nested 100 deep", {a.op: _reads_deep_list}, a.op))
        if a.init is not None:
            it = np.dtype(a.init_type)
            out.append((name, "init: float for an int output", {a.init: 3.7}, a.init))
            out.append((name, "init: 1e10 for int32", {a.init: 1e10}, a.init))
            out.append((name, "init: a struct", {a.init: cuprims.gpu_struct({"q": it})(1)}, a.init))
            out.append((name, "init: complex for a real output", {a.init: np.complex64(1)}, a.init))
            out.append((name, "init: a string", {a.init: "zero"}, a.init))
        for cc in (51, 55, 199, "nine", [], True):
            out.append((name, f"compute_capability={cc!r}", {"compute_capability": cc}, "compute_capability"))
        out.append((name, "unknown keyword", {"bogus": 1}, "bogus"))
        for case, (over, arg) in a.extra.items():
            out.append((name, case, over, arg))
    return out


class _ObjectArray:
    """A device-array look-alike of dtype object (nothing cuprims can compute with)."""

    dtype = np.dtype(object)
    __cuda_array_interface__ = {"shape": (4,), "typestr": "|O", "data": (0x1000, False), "version": 3}


CASES = _cases()


@pytest.fixture(autouse=True)
def time_limit():
    """No case may hang: each gets 60 s."""
    def expired(signum, frame):
        raise TimeoutError("a bad-argument case ran for more than 60 s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_the_matrix_is_large_enough():
    assert len(CASES) >= 60
    assert {c[0] for c in CASES} == set(ALGORITHMS)


@pytest.mark.parametrize("algo,case,overrides,argument", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_bad_argument_is_named_before_any_compile(algo, case, overrides, argument):
    a = ALGORITHMS[algo]
    kwargs = {**a.good, "compute_capability": 90, **overrides}
    before = cuprims.cache_info()
    with pytest.raises(CuprimsError) as info:
        a.builder(**kwargs)
    err = info.value
    named = getattr(err, "argument", None)
    assert named == argument or (named is None and argument in str(err)), (case, named, str(err))
    after = cuprims.cache_info()
    for counter in ("numba_compiles", "nvrtc_compiles", "links"):
        assert after[counter] == before[counter], (case, counter)


@pytest.mark.parametrize("value,dtype", [(2 ** 70, i8), (-1, np.uint8), (np.int64(1 << 40), i4), (1e10, i4),
                                         (3.7, i4), (np.float32(2), i4), (1j, np.float64)])
def test_initial_values_follow_same_kind_and_never_wrap(value, dtype):
    from cuprims.types import host_bytes, value_type

    with pytest.raises(cuprims.errors.ArgumentError) as info:
        host_bytes(value, value_type(dtype), argument="h_init")
    assert info.value.argument == "h_init"


def test_struct_and_count_limits():
    from cuprims.algorithms._common import check_num_items

    with pytest.raises(cuprims.errors.ArgumentError) as info:
        check_num_items(True)
    assert info.value.argument == "num_items"
    with pytest.raises(cuprims.errors.ArgumentError) as info:
        cuprims.gpu_struct({"big": (np.uint8, 4096)})
    assert info.value.argument == "field_dict"
    s = cuprims.gpu_struct({"x": np.int32})
    with pytest.raises(cuprims.errors.ArgumentError) as info:
        for _ in range(600):
            s = cuprims.gpu_struct({"x": s})
    assert info.value.argument == "field_dict"
    with pytest.raises(cuprims.errors.ArgumentError):
        cuprims.gpu_struct({"empty": (np.float32, 0), "y": np.int32})
    with pytest.raises(cuprims.errors.ArgumentError) as info:
        cuprims.ProxyArray(None)
    assert info.value.argument == "dtype"
    for name in ("int", "__x", "_Op", "cuprims_op_0"):
        with pytest.raises(cuprims.errors.ArgumentError) as info:
            RawOp(ltoir=b"x", name=name)
        assert info.value.argument == "name"
    with pytest.raises(cuprims.errors.ArgumentError) as info:
        RawOp(ltoir=b"\xedCN\x7f", name="f", state=bytes(1 << 16))
    assert info.value.argument == "state"
    with pytest.raises(cuprims.errors.ArgumentError) as info:  # not LTO-IR: refused before any link
        RawOp(ltoir=b"not lto-ir at all", name="f")
    assert info.value.argument == "ltoir"
