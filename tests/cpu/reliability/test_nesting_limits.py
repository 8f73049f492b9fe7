"""What the bad-argument matrix cannot declare: iterators refused where they are made
(an iterator inside another, a cache modifier over anything but an array), and the
documented nesting limits of iterators and of the values an operator reads, at the
limit and one past it. Every refusal is an ArgumentError naming the argument, never a
RecursionError or ValueError from deep inside."""

from __future__ import annotations

import numpy as np
import pytest

import cuprims
from cuprims import (CacheModifiedInputIterator, ConstantIterator, CountingIterator, DiscardIterator, OpKind,
                     PermutationIterator, ProxyArray, ProxyValue, ReverseIterator, TransformIterator,
                     TransformOutputIterator, ZipIterator)
from cuprims._operators.recipe import MAX_VALUE_DEPTH, op_recipe, op_recipe_cached
from cuprims.errors import ArgumentError
from cuprims.iterators.base import MAX_ITERATOR_DEPTH

P, V = ProxyArray, ProxyValue
i4 = np.int32


def _tower(levels: int):
    """An iterator tree of ``levels`` levels: TransformIterators over one array."""
    it = P(i4)
    for _ in range(levels - 1):
        it = TransformIterator(it, OpKind.NEGATE)
    return it


def _refused(make, argument: str) -> ArgumentError:
    with pytest.raises(ArgumentError) as info:
        make()
    assert info.value.argument == argument, str(info.value)
    return info.value


# -- iterators ---------------------------------------------------------------------------

@pytest.mark.parametrize("wrapped", [CountingIterator(np.int32(0)), ConstantIterator(np.int32(1)),
                                     DiscardIterator(P(i4)), TransformIterator(P(i4), OpKind.NEGATE),
                                     V(i4), np.int32(0)],
                         ids=["counting", "constant", "discard", "transform", "ProxyValue", "numpy scalar"])
def test_cache_modified_iterator_wraps_device_arrays_only(wrapped):
    _refused(lambda: CacheModifiedInputIterator(wrapped), "array")


def test_iterators_over_output_only_iterators_are_refused_where_they_are_read():
    discard = DiscardIterator(P(i4))
    _refused(lambda: TransformIterator(discard, OpKind.NEGATE), "underlying")
    # scattering through indices that read as zeros would write every item to values[0]
    _refused(lambda: PermutationIterator(P(i4), DiscardIterator(P(np.int64))), "indices")
    assert PermutationIterator(DiscardIterator(P(i4)), P(np.int64))._writable()   # a write-only scatter is fine


def test_iterators_nest_to_the_limit_and_the_deepest_builds():
    deepest = _tower(MAX_ITERATOR_DEPTH)
    assert deepest._depth() == MAX_ITERATOR_DEPTH
    before = cuprims.cache_info()["nvrtc_compiles"]
    cuprims.make_reduce_into(d_in=deepest, d_out=P(i4), op=OpKind.PLUS, h_init=V(i4), compute_capability=90)
    assert cuprims.cache_info()["nvrtc_compiles"] == before + 1
    err = _refused(lambda: TransformIterator(deepest, OpKind.NEGATE), "underlying")
    assert str(MAX_ITERATOR_DEPTH) in err.expected


def _reversals(levels: int, dtype=i4):
    """An iterator tree of ``levels`` levels, readable and writable: ReverseIterators over one array."""
    it = P(dtype)
    for _ in range(levels - 1):
        it = ReverseIterator(it)
    return it


@pytest.mark.parametrize("compose,argument", [
    (lambda t: TransformIterator(t, OpKind.NEGATE), "underlying"),
    (lambda t: TransformOutputIterator(t, OpKind.NEGATE), "underlying"),
    (ReverseIterator, "underlying"),
    (lambda t: PermutationIterator(t, P(np.int64)), "values"),
    (lambda t: PermutationIterator(P(i4), t), "indices"),
    (lambda t: ZipIterator(P(i4), t), "args[1]"),
], ids=["transform", "transform_output", "reverse", "permutation values", "permutation indices", "zip"])
def test_every_composition_is_held_to_the_depth_limit(compose, argument):
    dtype = np.int64 if argument == "indices" else i4
    compose(_reversals(MAX_ITERATOR_DEPTH - 1, dtype))          # one level below the limit: the limit
    _refused(lambda: compose(_reversals(MAX_ITERATOR_DEPTH, dtype)), argument)


def test_five_hundred_nested_transform_iterators_are_refused_not_a_recursion_error():
    def build():
        it = P(i4)
        for _ in range(500):
            it = TransformIterator(it, OpKind.NEGATE)
        return cuprims.make_reduce_into(d_in=it, d_out=P(i4), op=OpKind.PLUS, h_init=V(i4), compute_capability=90)

    _refused(build, "underlying")


# -- values an operator reads --------------------------------------------------------------

def _nested_tuple(levels: int):
    x = 1
    for _ in range(levels):
        x = (x,)
    return x


def _reading(value):
    """An operator whose global NESTED is ``value``."""
    namespace = {"NESTED": value}
    exec("def op(a, b):\n    return a + b + len(NESTED)\n", namespace)
    return namespace["op"]


def _helper_chain(helpers: int):
    """An operator calling a chain of ``helpers`` plain functions, each calling the next."""
    namespace: dict = {}
    source = "def h0(x):\n    return x\n" + "".join(f"def h{k}(x):\n    return h{k - 1}(x)\n"
                                                   for k in range(1, helpers))
    exec(source + f"def op(a, b):\n    return h{helpers - 1}(a) + b\n", namespace)
    return namespace["op"]


def test_values_an_operator_reads_nest_to_the_limit():
    # the operator's global is level 1; the innermost item of a tuple of n levels is level n + 1
    assert op_recipe(_reading(_nested_tuple(MAX_VALUE_DEPTH - 1))).persistent
    err = _refused(lambda: op_recipe(_reading(_nested_tuple(MAX_VALUE_DEPTH))), "op")
    assert str(MAX_VALUE_DEPTH) in err.expected and "NESTED[0][0]" in str(err.given)


def test_helper_functions_nest_to_the_limit():
    assert op_recipe_cached(_helper_chain(MAX_VALUE_DEPTH)).persistent
    _refused(lambda: op_recipe_cached(_helper_chain(MAX_VALUE_DEPTH + 1)), "op")
    _refused(lambda: op_recipe_cached(_helper_chain(500), argument="cond"), "cond")


def test_a_list_that_contains_itself_is_refused_and_shared_items_are_not():
    cyclic: list = [1]
    cyclic.append([cyclic])
    err = _refused(lambda: op_recipe(_reading(cyclic)), "op")
    assert "NESTED[1][0]" in err.given and "itself" in err.given
    shared = [1, 2]
    assert op_recipe(_reading([shared, shared, (shared,)])).persistent     # the same list twice is no cycle


def test_transform_op_reading_a_cyclic_list_names_transform_op():
    cyclic: list = []
    cyclic.append(cyclic)
    _refused(lambda: TransformIterator(P(i4), _reading(cyclic)), "transform_op")


@pytest.mark.parametrize("refused,accepted", [(2 ** 64, 2 ** 64 - 1), (-2 ** 63 - 1, -2 ** 63),
                                              (10 ** 5000, 10 ** 18), (-10 ** 5000, -10 ** 18)],
                         ids=["2**64", "-2**63-1", "5000 digits", "-5000 digits"])
def test_integers_the_operator_reads_are_held_to_numbas_64_bits(refused, accepted):
    assert op_recipe(_reading(accepted)).persistent
    err = _refused(lambda: op_recipe(_reading(refused)), "op")
    assert "NESTED" in err.given and f"{refused.bit_length()} bits" in err.given


def test_a_huge_literal_is_hashed_by_its_bytes_and_left_to_numba():
    # hexadecimal: Python's 4300-digit limit is for decimal text only, so this compiles
    def op_adding(digits: str):
        namespace: dict = {}
        exec(f"def op(a, b):\n    return a + b + 0x{digits}\n", namespace)
        return namespace["op"]

    first, second = op_recipe(op_adding("f" * 5000)), op_recipe(op_adding("f" * 4999 + "e"))
    assert first.persistent and first.digest != second.digest
    assert op_recipe(op_adding("f" * 5000)).digest == first.digest


def test_a_huge_integer_the_code_only_names_is_hashed_by_its_bytes():
    # `real` is an attribute the code reads; a global of that name is hashed (as every
    # name the code uses is) but not read, so its size is no reason to refuse the operator
    def op_with(value):
        namespace = {"real": value}
        exec("def op(a, b):\n    return a.real + b\n", namespace)
        return namespace["op"]

    first, second = op_recipe(op_with(10 ** 5000)), op_recipe(op_with(10 ** 5000 + 1))
    assert first.persistent and second.persistent
    assert first.digest != second.digest
    assert op_recipe(op_with(10 ** 5000)).digest == first.digest
