"""Items written to an output array of another dtype, without a GPU: where numpy's
``same_kind`` rule casts the items' type to the array's (an int32 TransformIterator whose
operator gives int64, selected into an int32 array), select, three-way partition and
unique-by-key write through ``cuprims::converting_output`` (each store a static_cast), and
merge sort reads iterator keys and values converted to the output arrays' types. The
generated source shows the conversion, the sm_90 builds succeed with the kernels'
parameters as the host packs them, the output's type is part of the description (so of
the build), and the rest is refused naming the output argument."""

from __future__ import annotations

import numpy as np
import pytest

import cuprims
from cpu_helpers import check_kernel_params, kernel_param_sizes, pack_sizes
from cuprims import CountingIterator, OpKind, ProxyArray as P, ProxyValue as V, TransformIterator
from cuprims.errors import ArgumentError, CuprimsError

i4, i8, u4, f2, f4, f8 = np.int32, np.int64, np.uint32, np.float16, np.float32, np.float64


def squares():
    """What a cuda.compute user writes: numba types ``x * x`` of int32 as int64."""
    return TransformIterator(P(i4), lambda x: x * x)


def _even(v):
    return v % 2 == 0


def _small(v):
    return v < 100


def _large(v):
    return v > 10_000


def test_the_iterator_gives_int64():
    assert squares().value_type.dtype == np.dtype(i8)


def select(d_in, d_out, cond=_even):
    return cuprims.make_select(d_in=d_in, d_out=d_out, d_num_selected_out=P(i8), cond=cond, compute_capability=90)


def test_select_converts_at_the_store(shared_cache):
    obj = select(squares(), P(i4))
    source = obj._builds.source(90)
    assert "cuprims::converting_output<int>" in source.name_expressions[1]
    assert "#include <cuprims_iterator.cuh>" in source.text
    assert obj.cubin()[:4] == b"\x7fELF"
    check_kernel_params(obj, 90)   # the wrapper is passed as the array's address
    same = select(squares(), P(i8))
    assert same.desc != obj.desc and "converting_output" not in same._builds.source(90).text
    assert obj.desc.d_out.value.dtype == np.dtype(i4) and obj.desc.d_out.is_pointer


@pytest.mark.parametrize("items, out", [(i8, f2), (np.complex128, np.complex64), (np.bool_, i4), (f8, f4)])
def test_select_of_arrays_into_other_types_builds(shared_cache, items, out):
    obj = select(P(items), P(out), OpKind.IDENTITY)
    text = obj._builds.source(90).text
    assert obj.cubin()[:4] == b"\x7fELF"
    assert f"cuprims::converting_output<{obj.desc.d_out.value.cpp}>" in text
    if out == f2:
        assert "#include <cuda_fp16.h>" in text  # the output's type brings its header


def test_select_partitioned_variant_converts_too(shared_cache):
    obj = select(P(i8), P(i4))
    builds = obj._builds_of(1)
    builds.build_for([90], [_even])
    source, result = builds.source(90), builds.result(90)
    assert "select_partition_kernel<" in source.name_expressions[1] and "converting_output<int>" in \
        source.name_expressions[1]
    for expr, kinds in zip(source.name_expressions, obj.desc.variant(1).kernel_params()):
        assert kernel_param_sizes(result.cubin, result.kernels[expr]) == pack_sizes(kinds), expr


def test_three_way_partition_converts_each_output(shared_cache):
    obj = cuprims.make_three_way_partition(d_in=squares(), d_first_part_out=P(i4), d_second_part_out=P(i8),
                                           d_unselected_out=P(f8), d_num_selected_out=P(i8),
                                           select_first_part_op=_small, select_second_part_op=_large,
                                           compute_capability=90)
    kernel = obj._builds.source(90).name_expressions[1]
    assert "converting_output<int>, long long*, cuprims::converting_output<double>" in kernel
    assert obj.cubin()[:4] == b"\x7fELF"
    check_kernel_params(obj, 90)


@pytest.mark.slow       # two whole builds; CI checks the conversion at the store through select
def test_unique_by_key_converts_keys_and_items_in_both_builds(shared_cache):
    obj = cuprims.make_unique_by_key(d_in_keys=P(i8), d_in_items=P(f4), d_out_keys=P(i4), d_out_items=P(f8),
                                     d_out_num_selected=P(i8), op=OpKind.EQUAL_TO, compute_capability=90)
    assert obj.cubin()[:4] == b"\x7fELF"
    check_kernel_params(obj, 90)
    wide = obj._builds_of(1)   # CUB's own sweep kernel, past 2^31 - 1 items
    wide.build_for([90], [])
    for source in (obj._builds.source(90), wide.source(90)):
        assert "cuprims::converting_output<int>, cuprims::converting_output<double>" in source.name_expressions[1]
    assert wide.result(90).cubin[:4] == b"\x7fELF"


def test_unique_by_key_of_an_iterator(shared_cache):
    obj = cuprims.make_unique_by_key(d_in_keys=squares(), d_in_items=CountingIterator(i8(0)), d_out_keys=P(i4),
                                     d_out_items=P(i4), d_out_num_selected=P(i8), op=OpKind.EQUAL_TO,
                                     compute_capability=90)
    assert obj.cubin()[:4] == b"\x7fELF"
    assert obj._builds.source(90).name_expressions[1].count("converting_output<int>") == 2


def test_merge_sort_reads_iterators_converted(shared_cache):
    obj = cuprims.make_merge_sort(d_in_keys=squares(), d_out_keys=P(i4), d_in_values=CountingIterator(i8(0)),
                                  d_out_values=P(i4), op=OpKind.LESS, compute_capability=90)
    text = obj._builds.source(90).text
    assert obj.desc.key.dtype == np.dtype(i4)      # keys are compared as the output's int32
    assert "cuprims::input_iterator<cuprims_in_keys_it_2, int>" in text   # converted as they are read
    assert "const int v = static_cast<int>(inner[i]);" in text            # values converted, then moved
    assert obj.cubin()[:4] == b"\x7fELF"
    check_kernel_params(obj, 90)


@pytest.mark.slow       # reduce, scan, transform: builds CI makes elsewhere with other output types
def test_algorithms_that_combine_in_the_output_type_take_the_iterator(shared_cache):
    """reduce, scan and transform compute in (or convert to) the output's type already."""
    for obj in (cuprims.make_reduce_into(d_in=squares(), d_out=P(i4), op=OpKind.PLUS, h_init=V(i4),
                                         compute_capability=90),
                cuprims.make_inclusive_scan(d_in=squares(), d_out=P(i4), op=OpKind.PLUS, compute_capability=90),
                cuprims.make_unary_transform(d_in=squares(), d_out=P(i4), op=lambda v: v + 1,
                                             compute_capability=90)):
        assert obj.cubin()[:4] == b"\x7fELF"


@pytest.mark.parametrize("build, argument", [
    (lambda: select(P(f4), P(i4)), "d_out"),                        # float into integer: not same_kind
    (lambda: select(squares(), P(u4)), "d_out"),                    # signed into unsigned
    (lambda: select(P(np.complex64), P(f8)), "d_out"),
    (lambda: cuprims.make_three_way_partition(d_in=P(f8), d_first_part_out=P(f8), d_second_part_out=P(i8),
                                              d_unselected_out=P(f8), d_num_selected_out=P(i8),
                                              select_first_part_op=_small, select_second_part_op=_large,
                                              compute_capability=90), "d_second_part_out"),
    (lambda: cuprims.make_unique_by_key(d_in_keys=P(i8), d_in_items=P(f4), d_out_keys=P(i8), d_out_items=P(i4),
                                        d_out_num_selected=P(i8), op=OpKind.EQUAL_TO, compute_capability=90),
     "d_out_items"),
    (lambda: cuprims.make_merge_sort(d_in_keys=TransformIterator(P(f4), lambda x: x * 2), d_out_keys=P(i4),
                                     op=OpKind.LESS, compute_capability=90), "d_out_keys"),
])
def test_what_same_kind_does_not_cast_is_refused(build, argument):
    before = cuprims.cache_info()
    with pytest.raises(ArgumentError) as info:
        build()
    assert info.value.argument == argument
    assert isinstance(info.value, ValueError) and isinstance(info.value, CuprimsError)
    assert "same_kind" in str(info.value)
    after = cuprims.cache_info()
    assert all(after[k] == before[k] for k in ("nvrtc_compiles", "links"))


def test_a_converting_build_serializes(shared_cache):
    obj = select(squares(), P(i4))
    again = cuprims.deserialize(obj.serialize())
    assert again.desc == obj.desc and again.cubin(90) == obj.cubin(90)
