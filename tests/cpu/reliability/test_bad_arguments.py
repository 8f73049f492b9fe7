"""The bad-argument matrix: every algorithm's builder, given one bad argument at a time,
raises an ArgumentError (under CuprimsError) whose ``argument`` is that argument, before
any compiler runs (a build would be visible in cache_info()), and never a bare Python
exception.

An algorithm joins the matrix by one declaration in ``ALGORITHMS``: its builder, good
build-time arguments (placeholders for an ahead-of-time sm_90 build), which of them are
device arrays, which take iterators, and which is its operator or initial value.

``_cases()`` derives the bad values of each: for every device-array argument, things
that are not device arrays (a host array, a ProxyValue, ...) and iterators of the wrong
direction (output-only iterators for an input, read-only ones for an output), or any
iterator, one of the argument's own dtype too, where it takes none; for the operator,
values no recipe or compile can take (a list that contains itself, an integer beyond 64
bits, values nested too deep). ``extra`` adds an algorithm's own rules (dtypes that must
agree, counts and levels out of range, arrays too short).

Bad operators (the operator matrix, ``_operator_cases``): each operator argument is
declared with its role (``operators``: a predicate, comparator or equality returns a
truth value; a combiner or element-wise operator a value of the accumulator's or
output's type), and gets every bad operator of its role: results of a refused type,
a wrong number of parameters, a functools.partial; and, where an input takes one, a
TransformIterator with such an operator. These need numba (or the translation of small
expressions to C++) to type the operator, so they run at build time, on both paths
(``CUPRIMS_DIRECT_OPS`` on and off); the error names the argument the user wrote and the
operator. Operators that can never run (``async def``, generators) are refused before.
"""

from __future__ import annotations

import functools
import signal
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest

import cuprims
from cuprims import (CacheModifiedInputIterator, ConstantIterator, CountingIterator, DiscardIterator, OpKind,
                     ProxyArray, ProxyValue, RawOp, ReverseIterator, SortOrder, TransformIterator,
                     TransformOutputIterator)
from cuprims.errors import ArgumentError, OperatorCompileError, OperatorResultError

from cpu_helpers import FakeDeviceArray

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
    operators: dict[str, str] = field(default_factory=dict)  # operator argument -> its role (ROLES)
    int_values: dict[str, Any] = field(default_factory=dict)  # overrides giving value roles an integer output
    iterator_input: str | None = None             # an input that takes a TransformIterator over its good array
    iterator_output: str | None = None            # an output that takes a TransformOutputIterator over its array


# role -> (the operator's number of parameters, whether it returns a truth value)
ROLES = {"predicate": (1, True), "comparator": (2, True), "equality": (2, True),
         "combiner": (2, False), "unary": (1, False), "binary": (2, False)}


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


_PADDED = np.dtype([("a", np.int32), ("b", np.float64), ("c", np.int8)], align=True)   # a numpy struct, not gpu_struct
# histogram_even's levels against its samples' type: each case one rule of the levels' checks that no
# level type lifts (the levels a wider level type bins right: tests/cpu/algorithms/test_histogram_levels.py)
HISTOGRAM_LEVELS = {
    "float levels count": (dict(h_num_output_levels=np.array([2.5])), "h_num_output_levels"),
    "bool levels count": (dict(h_num_output_levels=True), "h_num_output_levels"),
    "lower equals upper": (dict(h_lower_level=np.array([5], i4), h_upper_level=np.array([5], i4)), "h_lower_level"),
    "level a string": (dict(h_lower_level="zero"), "h_lower_level"),
    "level empty": (dict(h_lower_level=np.zeros(0, i4)), "h_lower_level"),
    "level complex": (dict(h_lower_level=np.complex64(0), h_upper_level=np.complex64(1)), "h_lower_level"),
    "levels of two dtypes, unordered": (dict(h_lower_level=np.array([300], i4), h_upper_level=np.array([256.0])),
                                        "h_lower_level"),
    "nan level": (dict(d_samples=P(f4), h_lower_level=np.array([np.nan], f4), h_upper_level=np.array([1], f4)),
                  "h_lower_level"),
    "infinite level": (dict(d_samples=P(f4), h_lower_level=np.array([0], f4), h_upper_level=np.array([np.inf], f4)),
                       "h_upper_level"),
    "float16 beyond 2048 bins": (dict(d_samples=P(np.float16), h_num_output_levels=np.array([2050], i4),
                                      h_lower_level=np.array([0], np.float16),
                                      h_upper_level=np.array([1000], np.float16)), "h_num_output_levels"),
    "float32 beyond 2^24 bins": (dict(d_samples=P(f4), h_num_output_levels=np.array([(1 << 24) + 2], i4),
                                      h_lower_level=np.array([0], f4), h_upper_level=np.array([1], f4)),
                                 "h_num_output_levels"),
}
# histogram_even's samples and counters: types it cannot count and device arrays too short for 1000
# samples and 256 bins
HISTOGRAM_ARRAYS = {
    "int16 counters": (dict(d_histogram=P(np.int16)), "d_histogram"),
    "counters too short": (dict(d_histogram=FakeDeviceArray(255, "<i4")), "d_histogram"),
    "bool samples": (dict(d_samples=P(np.bool_)), "d_samples"),
    "struct samples": (dict(d_samples=P(cuprims.gpu_struct({"a": i4}))), "d_samples"),
    "samples too short": (dict(d_samples=FakeDeviceArray(999, "|u1")), "d_samples"),
}

ALGORITHMS: dict[str, Algo] = {
    "reduce": Algo(cuprims.make_reduce_into, dict(d_in=P(i4), d_out=P(i4), op=OpKind.PLUS, h_init=V(i4)),
                   ("d_in", "d_out"), op="op", init="h_init", init_type=i4,
                   operators={"op": "combiner"}, iterator_input="d_in", iterator_output="d_out",
                   extra={"complex to real": (dict(d_in=P(np.complex64), d_out=P(f4), h_init=V(f4)), "d_out"),
                          "determinism": (dict(determinism="sometimes"), "determinism")}),
    "segmented_reduce": Algo(cuprims.make_segmented_reduce,
                             dict(d_in=P(i4), d_out=P(i4), start_offsets_in=P(i8), end_offsets_in=P(i8),
                                  op=OpKind.PLUS, h_init=V(i4)),
                             ("d_in", "d_out", "start_offsets_in", "end_offsets_in"), op="op", init="h_init",
                             init_type=i4, operators={"op": "combiner"}, iterator_input="d_in",
                             extra={"float offsets": (dict(start_offsets_in=P(f4)), "start_offsets_in"),
                                    "offsets of two types": (dict(end_offsets_in=P(np.int32)), "end_offsets_in"),
                                    "16-bit offsets": (dict(start_offsets_in=P(np.int16),
                                                            end_offsets_in=P(np.int16)), "start_offsets_in"),
                                    "no init": (dict(h_init=None), "h_init"),
                                    "complex to real": (dict(d_in=P(np.complex64), d_out=P(f4), h_init=V(f4)),
                                                        "d_out"),
                                    "an ordering, not a combiner": (dict(op=OpKind.LESS), "op")}),
    "unique_by_key": Algo(cuprims.make_unique_by_key,
                          dict(d_in_keys=P(i4), d_in_items=P(f4), d_out_keys=P(i4), d_out_items=P(f4),
                               d_out_num_selected=P(i8), op=OpKind.EQUAL_TO),
                          ("d_in_keys", "d_in_items", "d_out_keys", "d_out_items", "d_out_num_selected"),
                          no_iterators=("d_out_num_selected",), op="op", operators={"op": "equality"},
                          iterator_input="d_in_keys",
                          extra={"a float count": (dict(d_out_num_selected=P(f4)), "d_out_num_selected"),
                                 "a 16-bit count": (dict(d_out_num_selected=P(np.int16)), "d_out_num_selected"),
                                 # an output of another dtype is written with the items converted, where numpy's
                                 # same_kind rule casts them (tests/cpu/algorithms/test_output_conversion.py)
                                 "signed keys into unsigned ones": (dict(d_out_keys=P(np.uint32)), "d_out_keys"),
                                 "float items into integers": (dict(d_out_items=P(i4)), "d_out_items"),
                                 "struct keys into int32 keys": (
                                     dict(d_in_keys=P(cuprims.gpu_struct({"q": i4}).dtype)), "d_out_keys"),
                                 "an ordering, not an equality": (dict(op=OpKind.LESS), "op")}),
    "reduce_by_key": Algo(cuprims.make_reduce_by_key,
                          dict(d_in_keys=P(i4), d_in_values=P(f4), d_out_unique_keys=P(i4), d_out_aggregates=P(f4),
                               d_out_num_runs=P(i8), reduction_op=OpKind.PLUS, equality_op=OpKind.EQUAL_TO),
                          ("d_in_keys", "d_in_values", "d_out_unique_keys", "d_out_aggregates", "d_out_num_runs"),
                          no_iterators=("d_out_num_runs",), op="reduction_op",
                          operators={"reduction_op": "combiner", "equality_op": "equality"},
                          iterator_input="d_in_values",
                          extra={"a float count": (dict(d_out_num_runs=P(f4)), "d_out_num_runs"),
                                 "a 16-bit count": (dict(d_out_num_runs=P(np.int16)), "d_out_num_runs"),
                                 "float keys into integer keys": (dict(d_out_unique_keys=P(np.int8),
                                                                       d_in_keys=P(f4)), "d_out_unique_keys"),
                                 "struct keys and ==": (dict(d_in_keys=P(cuprims.gpu_struct({"q": i4}).dtype),
                                                             d_out_unique_keys=P(cuprims.gpu_struct({"q": i4}).dtype)),
                                                        "equality_op"),
                                 "an ordering, not an equality": (dict(equality_op=OpKind.LESS), "equality_op"),
                                 "an ordering, not a combiner": (dict(reduction_op=OpKind.LESS), "reduction_op"),
                                 "no reduction": (dict(reduction_op=None), "reduction_op")}),
    "run_length_encode": Algo(cuprims.make_run_length_encode,
                              dict(d_in=P(i4), d_out_unique=P(i4), d_out_counts=P(i8), d_out_num_runs=P(i8)),
                              ("d_in", "d_out_unique", "d_out_counts", "d_out_num_runs"),
                              no_iterators=("d_out_num_runs",), iterator_input="d_in",
                              extra={"float counts": (dict(d_out_counts=P(f4)), "d_out_counts"),
                                     "a 16-bit run count": (dict(d_out_num_runs=P(np.int16)), "d_out_num_runs"),
                                     "struct items": (dict(d_in=P(cuprims.gpu_struct({"q": i4}).dtype),
                                                           d_out_unique=P(cuprims.gpu_struct({"q": i4}).dtype)),
                                                      "d_in"),
                                     "float items into integers": (dict(d_in=P(f4)), "d_out_unique")}),
    "non_trivial_runs": Algo(cuprims.make_non_trivial_runs,
                             dict(d_in=P(i4), d_out_offsets=P(i8), d_out_lengths=P(i4), d_out_num_runs=P(i8)),
                             ("d_in", "d_out_offsets", "d_out_lengths", "d_out_num_runs"),
                             no_iterators=("d_out_num_runs",), iterator_input="d_in",
                             extra={"float offsets": (dict(d_out_offsets=P(f4)), "d_out_offsets"),
                                    "float lengths": (dict(d_out_lengths=P(f4)), "d_out_lengths"),
                                    "a 16-bit run count": (dict(d_out_num_runs=P(np.int16)), "d_out_num_runs"),
                                    "struct items": (dict(d_in=P(cuprims.gpu_struct({"q": i4}).dtype)), "d_in")}),
    "segmented_exclusive_scan": Algo(cuprims.make_segmented_exclusive_scan,
                                     dict(d_in=P(f4), d_out=P(f4), start_offsets_in=P(i8), end_offsets_in=P(i8),
                                          op=OpKind.PLUS, init_value=f4(0)),
                                     ("d_in", "d_out", "start_offsets_in", "end_offsets_in"), op="op",
                                     operators={"op": "combiner"}, iterator_input="d_in",
                                     extra={"no initial value": (dict(init_value=None), "init_value"),
                                            "float offsets": (dict(start_offsets_in=P(f4)), "start_offsets_in"),
                                            "offsets of two types": (dict(end_offsets_in=P(i4)), "end_offsets_in"),
                                            "an ordering, not a combiner": (dict(op=OpKind.LESS), "op"),
                                            "no operator": (dict(op=None), "op")}),
    "exclusive_scan_by_key": Algo(cuprims.make_exclusive_scan_by_key,
                                  dict(d_in_keys=P(i4), d_in_values=P(f4), d_out=P(f4), scan_op=OpKind.PLUS,
                                       init_value=f4(0), equality_op=OpKind.EQUAL_TO),
                                  ("d_in_keys", "d_in_values", "d_out"), op="scan_op",
                                  operators={"scan_op": "combiner", "equality_op": "equality"},
                                  iterator_input="d_in_values",
                                  extra={"no initial value": (dict(init_value=None), "init_value"),
                                         "a complex initial value": (dict(init_value=np.complex64(1)), "init_value"),
                                         "struct keys and ==": (dict(d_in_keys=P(cuprims.gpu_struct({"q": i4}).dtype)),
                                                                "equality_op"),
                                         "an ordering, not an equality": (dict(equality_op=OpKind.LESS),
                                                                          "equality_op"),
                                         "an ordering, not a combiner": (dict(scan_op=OpKind.LESS), "scan_op"),
                                         "no scan operator": (dict(scan_op=None), "scan_op")}),
    "three_way_partition": Algo(cuprims.make_three_way_partition,
                                dict(d_in=P(i4), d_first_part_out=P(i4), d_second_part_out=P(i4),
                                     d_unselected_out=P(i4), d_num_selected_out=P(i8),
                                     select_first_part_op=_below_three, select_second_part_op=_above_six),
                                ("d_in", "d_first_part_out", "d_second_part_out", "d_unselected_out",
                                 "d_num_selected_out"),
                                no_iterators=("d_num_selected_out",), op="select_first_part_op",
                                operators={"select_first_part_op": "predicate", "select_second_part_op": "predicate"},
                                iterator_input="d_in",
                                extra={"a built-in predicate": (dict(select_second_part_op=OpKind.LESS),
                                                                "select_second_part_op"),
                                       "a built-in first predicate": (dict(select_first_part_op=OpKind.LESS),
                                                                      "select_first_part_op"),
                                       "a second predicate not callable": (dict(select_second_part_op=42),
                                                                           "select_second_part_op"),
                                       "first part unsigned": (dict(d_first_part_out=P(np.uint8)),
                                                               "d_first_part_out"),
                                       "unselected bool": (dict(d_unselected_out=P(np.bool_)), "d_unselected_out"),
                                       "a float count": (dict(d_num_selected_out=P(f4)), "d_num_selected_out")}),
    "find_if": Algo(cuprims.make_find_if, dict(d_in=P(i4), d_out_index=P(i8), cond=_below_three),
                    ("d_in", "d_out_index"), no_iterators=("d_out_index",), op="cond",
                    operators={"cond": "predicate"}, iterator_input="d_in",
                    extra={"a built-in ordering": (dict(cond=OpKind.LESS), "cond"),
                           "no predicate": (dict(cond=None), "cond"),
                           "a float index": (dict(d_out_index=P(f4)), "d_out_index"),
                           "a 16-bit index": (dict(d_out_index=P(np.int16)), "d_out_index")}),
    "for_each": Algo(cuprims.make_for_each, dict(d_in=P(i4), op=_below_three), ("d_in",), op="op",
                     iterator_input="d_in",
                     extra={"a built-in operator": (dict(op=OpKind.NEGATE), "op"),
                            "no operator": (dict(op=None), "op")}),
    "adjacent_difference": Algo(cuprims.make_adjacent_difference, dict(d_in=P(f4), d_out=P(f4), op=OpKind.MINUS),
                                ("d_in", "d_out"), op="op", operators={"op": "binary"},
                                int_values=dict(d_in=P(i4), d_out=P(i4)), iterator_input="d_in",
                                iterator_output="d_out",
                                extra={"a bad direction": (dict(direction="up"), "direction"),
                                       "no operator": (dict(op=None), "op"),
                                       "bool minus bool": (dict(d_in=P(np.bool_), d_out=P(np.bool_)), "op")}),
    "select": Algo(cuprims.make_select, dict(d_in=P(i4), d_out=P(i4), d_num_selected_out=P(i8), cond=_below_three),
                   ("d_in", "d_out", "d_num_selected_out"), no_iterators=("d_num_selected_out",), op="cond",
                   operators={"cond": "predicate"}, iterator_input="d_in", iterator_output="d_out",
                   extra={"a built-in predicate": (dict(cond=OpKind.EQUAL_TO), "cond"),
                          "a built-in ordering": (dict(cond=OpKind.LESS), "cond"),
                          "no predicate": (dict(cond=None), "cond"),
                          "output unsigned": (dict(d_out=P(np.uint32)), "d_out"),
                          "float items into integers": (dict(d_in=P(f4)), "d_out"),
                          "a float count": (dict(d_num_selected_out=P(f4)), "d_num_selected_out")}),
    "inclusive_scan": Algo(cuprims.make_inclusive_scan, dict(d_in=P(i4), d_out=P(i4), op=OpKind.PLUS),
                           ("d_in", "d_out"), op="op", operators={"op": "combiner"}, iterator_input="d_in",
                           iterator_output="d_out"),
    "exclusive_scan": Algo(cuprims.make_exclusive_scan, dict(d_in=P(i4), d_out=P(i4), op=OpKind.PLUS,
                                                             init_value=V(i4)),
                           ("d_in", "d_out"), op="op", init="init_value", init_type=i4,
                           operators={"op": "combiner"}, iterator_input="d_in", iterator_output="d_out",
                           extra={"no init": (dict(init_value=None), "init_value")}),
    "unary_transform": Algo(cuprims.make_unary_transform, dict(d_in=P(f4), d_out=P(f4), op=OpKind.NEGATE),
                            ("d_in", "d_out"), op="op", operators={"op": "unary"},
                            int_values=dict(d_in=P(i4), d_out=P(i4)), iterator_input="d_in", iterator_output="d_out",
                            extra={"binary op": (dict(op=OpKind.PLUS), "op")}),
    "binary_transform": Algo(cuprims.make_binary_transform, dict(d_in1=P(f4), d_in2=P(f4), d_out=P(f4),
                                                                 op=OpKind.PLUS),
                             ("d_in1", "d_in2", "d_out"), op="op", operators={"op": "binary"},
                             int_values=dict(d_in1=P(i4), d_in2=P(i4), d_out=P(i4)), iterator_input="d_in1"),
    "lower_bound": Algo(cuprims.make_lower_bound, dict(d_data=P(i4), d_values=P(i4), d_out=P(np.uint64)),
                        ("d_data", "d_values", "d_out"), no_iterators=("d_data", "d_out"), op="comp",
                        operators={"comp": "comparator"}, iterator_input="d_values",
                        extra={"float indices": (dict(d_out=P(f4)), "d_out"),
                               "values of another dtype": (dict(d_values=P(f4)), "d_values")}),
    "upper_bound": Algo(cuprims.make_upper_bound, dict(d_data=P(i4), d_values=P(i4), d_out=P(np.int64)),
                        ("d_data", "d_values", "d_out"), no_iterators=("d_data", "d_out"), op="comp",
                        operators={"comp": "comparator"}, iterator_input="d_values"),
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
                                  "struct keys": (dict(d_in_keys=P(_PADDED), d_out_keys=P(_PADDED)), "d_in_keys"),
                                  "float offsets": (dict(start_offsets_in=P(f4)), "start_offsets_in"),
                                  "float offsets at both ends": (dict(start_offsets_in=P(f4), end_offsets_in=P(f4)),
                                                                 "start_offsets_in"),
                                  "16-bit offsets": (dict(start_offsets_in=P(np.int16), end_offsets_in=P(np.int16)),
                                                     "start_offsets_in"),
                                  "offsets of two types": (dict(end_offsets_in=P(i4)), "end_offsets_in"),
                                  "values without output": (dict(d_in_values=P(i4), d_out_values=None),
                                                            "d_out_values"),
                                  "values of another dtype": (dict(d_in_values=P(i4), d_out_values=P(f4)),
                                                              "d_out_values")}),
    "segmented_top_k": Algo(cuprims.make_segmented_top_k,
                            dict(d_in_keys=P(f4), d_out_keys=P(f4), d_in_values=P(i4), d_out_values=P(i4),
                                 start_offsets_in=P(i8), end_offsets_in=P(i8)),
                            ("d_in_keys", "d_out_keys", "d_in_values", "d_out_values", "start_offsets_in",
                             "end_offsets_in"),
                            no_iterators=("d_in_keys", "d_out_keys", "d_in_values", "d_out_values"),
                            optional=("d_in_values", "d_out_values"),
                            extra={"order": (dict(order="sideways"), "order"),
                                   "complex keys": (dict(d_in_keys=P(np.complex64), d_out_keys=P(np.complex64)),
                                                    "d_in_keys"),
                                   "float offsets": (dict(start_offsets_in=P(f4), end_offsets_in=P(f4)),
                                                     "start_offsets_in"),
                                   "offsets of two types": (dict(end_offsets_in=P(i4)), "end_offsets_in"),
                                   "values without output": (dict(d_in_values=P(i4), d_out_values=None),
                                                             "d_out_values")}),
    "merge_sort": Algo(cuprims.make_merge_sort, dict(d_in_keys=P(i4), d_out_keys=P(i4), d_in_values=P(i8),
                                                     d_out_values=P(i8), op=OpKind.LESS),
                       ("d_in_keys", "d_out_keys", "d_in_values", "d_out_values"),
                       no_iterators=("d_out_keys", "d_out_values"), optional=("d_in_values", "d_out_values"),
                       op="op", operators={"op": "comparator"}, iterator_input="d_in_keys",
                       extra={"arithmetic comparator": (dict(op=OpKind.PLUS), "op"),
                              # the inputs take iterators of items the outputs' dtype holds (same_kind)
                              "d_in_keys: an iterator of floats": (
                                  dict(d_in_keys=CountingIterator(np.float64(0))), "d_out_keys"),
                              "d_in_values: an iterator of floats": (
                                  dict(d_in_values=CountingIterator(np.float32(0))), "d_out_values"),
                              "d_out_values: an iterator, values from one": (
                                  dict(d_in_values=CountingIterator(np.int64(0)),
                                       d_out_values=CountingIterator(np.int64(0))), "d_out_values")}),
    "merge": Algo(cuprims.make_merge, dict(d_in_keys1=P(i4), d_in_values1=P(i8), d_in_keys2=P(i4), d_in_values2=P(i8),
                                           d_out_keys=P(i4), d_out_values=P(i8), op=OpKind.LESS),
                  ("d_in_keys1", "d_in_values1", "d_in_keys2", "d_in_values2", "d_out_keys", "d_out_values"),
                  optional=("d_in_values1", "d_in_values2", "d_out_values"), op="op",
                  operators={"op": "comparator"}, iterator_input="d_in_keys1",
                  extra={"arithmetic comparator": (dict(op=OpKind.PLUS), "op"),
                         "no comparator": (dict(op=None), "op"),
                         "values on one side only": (dict(d_in_values2=None), "d_in_values2"),
                         "values without output": (dict(d_out_values=None), "d_out_values"),
                         "keys of two dtypes": (dict(d_in_keys2=P(i8)), "d_in_keys2"),
                         "values of two dtypes": (dict(d_in_values1=P(f4)), "d_in_values2"),
                         "output keys of another dtype": (dict(d_out_keys=P(f4)), "d_out_keys"),
                         "struct keys with a built-in": (dict(d_in_keys1=P(cuprims.gpu_struct({"a": i4})),
                                                              d_in_keys2=P(cuprims.gpu_struct({"a": i4})),
                                                              d_out_keys=P(cuprims.gpu_struct({"a": i4}))), "op")}),
    "histogram_even": Algo(cuprims.make_histogram_even,
                           dict(d_samples=P(np.uint8), d_histogram=P(i4), h_num_output_levels=np.array([257], i4),
                                h_lower_level=np.array([0], i4), h_upper_level=np.array([256], i4), num_samples=1000),
                           ("d_samples", "d_histogram"), no_iterators=("d_histogram",), iterator_input="d_samples",
                           extra={"one level": (dict(h_num_output_levels=np.array([1], i4)), "h_num_output_levels"),
                                  "lower above upper": (dict(h_lower_level=np.array([300], i4)), "h_lower_level"),
                                  "float counters": (dict(d_histogram=P(f4)), "d_histogram"),
                                  "complex samples": (dict(d_samples=P(np.complex64)), "d_samples"),
                                  "negative count": (dict(num_samples=-1), "num_samples"),
                                  # the kernels' offsets are 64-bit: a count past them is refused, not wrapped
                                  "count past 64-bit offsets": (dict(num_samples=2 ** 80), "num_samples"),
                                  "count of 2**63": (dict(num_samples=2 ** 63), "num_samples"),
                                  "float count": (dict(num_samples=1.5), "num_samples"),
                                  **HISTOGRAM_LEVELS, **HISTOGRAM_ARRAYS}),
    "top_k": Algo(cuprims.make_top_k, dict(d_in_keys=P(f4), d_out_keys=P(f4), d_in_values=P(i4), d_out_values=P(i4),
                                           order=SortOrder.DESCENDING),
                  ("d_in_keys", "d_out_keys", "d_in_values", "d_out_values"),
                  no_iterators=("d_out_keys", "d_out_values"), optional=("d_in_values", "d_out_values"),
                  iterator_input="d_in_keys",
                  extra={"order": (dict(order="sideways"), "order"),
                         "sorted not a bool": (dict(sorted="yes"), "sorted"),
                         "complex keys": (dict(d_in_keys=P(np.complex64), d_out_keys=P(np.complex64)), "d_in_keys"),
                         "keys out of another dtype": (dict(d_out_keys=P(np.float64)), "d_out_keys"),
                         "values out of another dtype": (dict(d_out_values=P(i8)), "d_out_values"),
                         "values without output": (dict(d_out_values=None), "d_out_values")}),
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
                own = np.zeros(1, good.dtype)[0]
                out.append((name, f"{arg}: an iterator of its dtype", {arg: CountingIterator(own)}, arg))
            else:
                for case, it in _wrong_direction(good, _written(arg)).items():
                    out.append((name, f"{arg}: {case}", {arg: it}, arg))
        if a.op is not None:
            out.append((name, "op: not callable", {a.op: 42}, a.op))
            out.append((name, "op: a label, not an operator", {a.op: OpKind.STATELESS}, a.op))
            out.append((name, "op: reads a list that contains itself", {a.op: _reads_cyclic_list}, a.op))
            out.append((name, "op: reads a 5000-digit integer", {a.op: _reads_huge_int}, a.op))
            out.append((name, "op: reads a list nested 100 deep", {a.op: _reads_deep_list}, a.op))
        for arg in a.operators:   # no value to compute with: refused before anything is compiled
            out.append((name, f"{arg}: async def", {arg: _coroutine}, arg))
            out.append((name, f"{arg}: a generator function", {arg: _generator}, arg))
            out.append((name, f"{arg}: an async generator", {arg: _async_generator}, arg))
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


async def _coroutine(a, b=None):
    return a


def _generator(a, b=None):
    yield a


async def _async_generator(a, b=None):
    yield a


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
    with pytest.raises(ArgumentError) as info:
        a.builder(**kwargs)
    assert info.value.argument == argument, (case, info.value.argument, str(info.value))
    after = cuprims.cache_info()
    for counter in ("numba_compiles", "nvrtc_compiles", "links"):
        assert after[counter] == before[counter], (case, counter)


# ------------------------------------------------------------------ the operator matrix

_One = cuprims.gpu_struct({"v": np.int32})


def _raises_1(v):
    raise ValueError("never a value")


def _raises_2(a, b):
    raise ValueError("never a value")


def _string_1(v):
    return "yes"


def _string_2(a, b):
    return "yes"


def _none_1(v):
    return None


def _none_2(a, b):
    return None


def _tuple_1(v):
    return (v, v)


def _tuple_2(a, b):
    return (a, b)


def _complex_1(v):
    return v * 1j


def _complex_2(a, b):
    return a * 1j


def _struct_1(v):
    return _One(v)


def _struct_2(a, b):
    return _One(a)


def _halve_1(v):
    return v * 0.5


def _divide_2(a, b):
    return a / b


def _sum_2(a, b):
    return a + b


def _sum_3(a, b, c):
    return a + b + c


def _below_k(v, k):
    return v < k


def _before_k(a, b, k):
    return a + k < b


# case -> ((operator of 1 parameter, of 2), error class, text the message must also hold)
TRUTH_CASES = {
    "always raises": ((_raises_1, _raises_2), OperatorResultError, "always raises"),
    "returns a string": ((_string_1, _string_2), OperatorResultError, "unicode"),
    "returns None": ((_none_1, _none_2), OperatorResultError, "None"),
    "returns a tuple": ((_tuple_1, _tuple_2), OperatorResultError, "Tuple"),
    "returns a complex": ((_complex_1, _complex_2), OperatorResultError, "complex128"),
    "returns a struct": ((_struct_1, _struct_2), OperatorResultError, "truth value"),
    "one parameter too many": ((_sum_2, _sum_3), OperatorCompileError, "could not compile"),
    "a functools.partial": ((functools.partial(_below_k, k=3), functools.partial(_before_k, k=0)),
                            OperatorCompileError, "partial(_below_k"),
}
VALUE_CASES = {   # the output (accumulator) is an integer: int_values
    "a float result into an integer": ((_halve_1, _divide_2), OperatorResultError, "//"),
    "returns a complex": ((_complex_1, _complex_2), OperatorResultError, "complex128"),
    "returns a string": ((_string_1, _string_2), OperatorResultError, "unicode"),
    "always raises": ((_raises_1, _raises_2), OperatorResultError, "always raises"),
    "one parameter too many": ((_sum_2, _sum_3), OperatorCompileError, "could not compile"),
    "a functools.partial": ((functools.partial(_below_k, k=3), functools.partial(_before_k, k=0)),
                            OperatorCompileError, "partial(_below_k"),
}


def _operator_cases() -> list[tuple[str, str, dict[str, Any], str, type, str]]:
    """(algorithm, case, overrides, argument the error must name, error class, text the
    message must hold besides the argument and the operator's name)."""
    out = []
    for name, a in ALGORITHMS.items():
        for arg, role in a.operators.items():
            arity, truth = ROLES[role]
            for case, (ops, error, text) in (TRUTH_CASES if truth else VALUE_CASES).items():
                fn = ops[arity - 1]
                if isinstance(fn, functools.partial) and arity == 2:
                    text = "partial(_before_k"
                out.append((name, f"{arg}: {case}", {**({} if truth else a.int_values), arg: fn}, arg, error, text))
        if a.iterator_input is not None:
            arg = a.iterator_input
            dt = np.dtype(a.good[arg].dtype)
            for case, fn, error, text in (("one parameter too many", _sum_2, OperatorCompileError, "could not compile"),
                                          ("returns a string", _string_1, OperatorResultError, "unicode")):
                it = TransformIterator(P(dt), fn, value_type=dt)
                out.append((name, f"{arg}: a TransformIterator whose op {case}", {arg: it}, arg, error, text))
            if dt.kind in "iu":
                it = TransformIterator(P(dt), _halve_1, value_type=dt)
                out.append((name, f"{arg}: a TransformIterator giving a float for its {dt} value_type", {arg: it},
                            arg, OperatorResultError, "//"))
        if a.iterator_output is not None:
            arg = a.iterator_output
            it = TransformOutputIterator(P(i4), _sum_2)
            out.append((name, f"{arg}: a TransformOutputIterator whose op one parameter too many", {arg: it}, arg,
                        OperatorCompileError, "transform_op of a TransformOutputIterator"))
            it = TransformOutputIterator(P(i4), _halve_1)
            out.append((name, f"{arg}: a TransformOutputIterator giving a float into int32", {arg: it}, arg,
                        OperatorResultError, "//"))
    return out


OPERATOR_CASES = _operator_cases()


def test_every_operator_argument_gets_the_operator_cases():
    for name, a in ALGORITHMS.items():
        for arg, role in a.operators.items():
            cases = {c[1] for c in OPERATOR_CASES if c[0] == name and c[3] == arg}
            expected = TRUTH_CASES if ROLES[role][1] else VALUE_CASES
            assert {f"{arg}: {case}" for case in expected} <= cases, (name, arg)
    assert {c[0] for c in OPERATOR_CASES} == {n for n, a in ALGORITHMS.items() if a.operators or a.iterator_input}


# Every case runs both ways with the slow tests. CI takes every ninth case on the direct
# path, and the cases after those through numba for one algorithm of each operator role (a
# combiner, a predicate, a comparator, a search's comparator, an iterator's operator).
NUMBA_PATH_IN_CI = frozenset({"reduce", "select", "merge_sort", "lower_bound", "unary_transform"})


def _both_paths(cases: list, name: Callable[[int, tuple], str], in_ci: Callable[[str, int, tuple], bool]) -> list:
    """Each case built through small expressions translated to C++ ("direct") and through
    numba alone ("numba"); those ``in_ci(path, index, case)`` refuses are slow."""
    return [pytest.param(path, *c, id=f"{path}-{name(i, c)}", marks=() if in_ci(path, i, c) else pytest.mark.slow)
            for i, c in enumerate(cases) for path in ("direct", "numba")]


def _operator_case_in_ci(path: str, i: int, case: tuple) -> bool:
    return i % 9 == 0 if path == "direct" else i % 9 == 1 and case[0] in NUMBA_PATH_IN_CI


@pytest.mark.parametrize("path,algo,case,overrides,argument,error,text",
                         _both_paths(OPERATOR_CASES, lambda i, c: f"{c[0]}-{c[1]}", _operator_case_in_ci))
def test_bad_operator_is_named(request, shared_cache, path, algo, case, overrides, argument, error, text):
    """Built through small expressions translated to C++ ("direct") and through numba
    alone (CUPRIMS_DIRECT_OPS=0): either way the build refuses the operator, naming the
    argument the user wrote (for an operator inside an iterator, the iterator's argument)
    and the operator."""
    if path == "numba":
        request.getfixturevalue("numba_ops")
    a = ALGORITHMS[algo]
    kwargs = {**a.good, "compute_capability": 90, **overrides}
    with pytest.raises(error) as info:
        a.builder(**kwargs)
    err = info.value
    assert err.argument == argument, (case, str(err))
    message = str(err)
    assert message.startswith(f"argument '{argument}': "), message
    assert err.op_name in message and text in message, (err.op_name, text, message)
    if isinstance(err, OperatorResultError):
        assert err.expected in message and err.result in message


def test_an_iterators_operator_is_named_where_its_type_is_inferred():
    with pytest.raises(OperatorCompileError) as info:
        TransformIterator(P(i4), _sum_2)
    assert info.value.argument == "transform_op" and "_sum_2" in str(info.value)


def test_operator_names_are_readable():
    from cuprims.op import operator_name

    assert operator_name(functools.partial(_below_k, k=3)) == "partial(_below_k)"
    assert operator_name(_sum_2) == "_sum_2"
    assert operator_name(lambda v: v) == "<lambda>"
    assert operator_name(_One) == _One.__name__


@pytest.mark.parametrize("path", ["direct", "numba"])
def test_a_float_into_an_integer_is_refused_before_numba_where_translated(request, shared_cache, path):
    """Translated to C++, ``a / b`` is typed without numba: refused before any compiler
    runs; through numba, after numba typed it (nothing linked either way)."""
    if path == "numba":
        request.getfixturevalue("numba_ops")
    before = cuprims.cache_info()
    with pytest.raises(OperatorResultError) as info:
        cuprims.make_reduce_into(d_in=P(i4), d_out=P(i4), op=lambda a, b: a / b, h_init=V(i4), compute_capability=90)
    assert info.value.argument == "op" and info.value.result == "float64" and "//" in str(info.value)
    after = cuprims.cache_info()
    assert after["numba_compiles"] - before["numba_compiles"] == (path == "numba")
    assert after["links"] == before["links"]


# Each rule's line, from both sides: (algorithm, a result it takes, a result it refuses).
# Truth values are bools and real numbers; an integer accumulator takes integers of any
# width or signedness (numba types ``v + 1`` on uint32 as int64) and bools, not floats; a
# float output takes a wider float, not a complex.
RULE_LINES = [
    ("select", dict(cond=lambda v: v % 2), dict(cond=lambda v: v * 1j)),            # an int is a truth value
    ("select", dict(cond=lambda v: v * 0.5), dict(cond=_none_1)),                    # so is a float
    ("merge_sort", dict(op=lambda a, b: a - b < 0), dict(op=_string_2)),
    ("lower_bound", dict(comp=lambda a, b: (b - a) * 1.0), dict(comp=_tuple_2)),
    ("reduce", dict(d_in=P(np.uint32), d_out=P(np.uint32), h_init=V(np.uint32), op=lambda a, b: a + b + 1),
     dict(d_in=P(np.uint32), d_out=P(np.uint32), h_init=V(np.uint32), op=lambda a, b: a + b * 0.5)),
    ("reduce", dict(op=lambda a, b: a // b), dict(op=lambda a, b: a / b)),
    ("reduce", dict(op=lambda a, b: a < b), dict(op=lambda a, b: a * 1j)),           # a bool into int32
    ("unary_transform", dict(op=lambda v: v * 0.5), dict(op=lambda v: v * 1j)),      # float64 into float32
]


# CI draws every other line once: lines 0, 4, 8... on the direct path, 1, 5, 9... through numba
@pytest.mark.parametrize("path,algo,allowed,refused",
                         _both_paths(RULE_LINES, lambda i, r: f"{r[0]}-{i}",
                                     lambda path, i, r: i % 4 == (0 if path == "direct" else 1)))
def test_the_result_rules_draw_the_line(request, shared_cache, path, algo, allowed, refused):
    if path == "numba":
        request.getfixturevalue("numba_ops")
    a = ALGORITHMS[algo]
    obj = a.builder(**{**a.good, "compute_capability": 90, **allowed})
    assert obj.cubin()[:4] == b"\x7fELF"
    with pytest.raises(OperatorResultError) as info:
        a.builder(**{**a.good, "compute_capability": 90, **refused})
    assert info.value.argument == a.op


def test_counts_past_the_64_bit_offsets_are_refused():
    from cuprims.algorithms.common import MAX_ITEMS, check_num_items

    assert check_num_items(MAX_ITEMS) == MAX_ITEMS
    assert check_num_items(np.uint64(MAX_ITEMS)) == MAX_ITEMS
    for count, name in ((MAX_ITEMS + 1, "num_items"), (2 ** 80, "num_segments"), (np.uint64(2 ** 63), "num_values")):
        with pytest.raises(cuprims.errors.ArgumentError) as info:
            check_num_items(count, name)
        assert info.value.argument == name and "2**63 - 1" in str(info.value)


def test_a_built_object_refuses_a_count_past_64_bit_offsets(cache):
    """The fast path of a call checks the count as check_num_items does (it once let any
    non-negative int through)."""
    from fault_helpers import make_sum

    obj = make_sum()
    with pytest.raises(cuprims.errors.ArgumentError) as info:
        obj(temp_storage=None, d_in=FakeDeviceArray(8), d_out=FakeDeviceArray(1), num_items=2 ** 80,
            h_init=np.float32(0))
    assert info.value.argument == "num_items"


@pytest.mark.parametrize("value,dtype", [(2 ** 70, i8), (-1, np.uint8), (np.int64(1 << 40), i4), (1e10, i4),
                                         (3.7, i4), (np.float32(2), i4), (1j, np.float64)])
def test_initial_values_follow_same_kind_and_never_wrap(value, dtype):
    from cuprims._value_types import host_bytes, value_type

    with pytest.raises(cuprims.errors.ArgumentError) as info:
        host_bytes(value, value_type(dtype), argument="h_init")
    assert info.value.argument == "h_init"


def test_struct_and_count_limits():
    from cuprims.algorithms.common import check_num_items

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
