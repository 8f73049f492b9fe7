"""Select on the CPU: ahead-of-time sm_90 builds (arrays, iterators, an output iterator, a
captured array), a golden, and the kernels' parameters against the cubin (bad arguments:
tests/cpu/reliability/test_bad_arguments.py)."""

from __future__ import annotations

import numpy as np
import pytest

import cuprims
from cpu_helpers import check_golden, check_kernel_params, kernel_param_sizes, pack_sizes, render_source
from cuprims import CountingIterator, ProxyArray as P, TransformOutputIterator
from cuprims.errors import ArgumentError
from twins import _even

i4, i8, f4 = np.int32, np.int64, np.float32


def _make(**over):
    kw = dict(d_in=P(i4), d_out=P(i4), d_num_selected_out=P(i8), cond=_even, compute_capability=90)
    kw.update(over)
    return cuprims.make_select(**kw)


def test_golden_and_parameters(shared_cache, numba_ops):
    obj = _make()
    check_golden("select_i4_python_even_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    assert meta["threads"] * meta["items"] >= 128 and meta["tile_word_bytes"] in (8, 16)


def test_partitioned_variant_builds_with_its_context_parameter(shared_cache):
    obj = _make()
    builds = obj._builds_of(1)
    builds.build_for([90], [_even])
    result, source = builds.result(90), builds.source(90)
    assert "select_partition_kernel<" in source.name_expressions[1]
    kinds = obj.desc.variant(1).kernel_params()
    assert kinds[1][-1] == 32 and kinds[1][:-1] == obj.desc.kernel_params()[1]
    for expr, k in zip(source.name_expressions, kinds):
        assert kernel_param_sizes(result.cubin, result.kernels[expr]) == pack_sizes(k), expr
    assert result.meta == obj._builds.result(90).meta   # the same tiles and tile states


def test_iterator_input_output_iterator_and_a_captured_array(shared_cache):
    hits = P(i8)

    def counted(v):
        return v < hits[0]

    obj = _make(d_in=CountingIterator(i8(0)), d_out=TransformOutputIterator(P(i8), lambda v: v * 2),
                d_num_selected_out=P(np.uint32), cond=counted)
    check_kernel_params(obj, 90)
    assert obj.desc.op.state_size > 0



@pytest.mark.ci_sample(every=3)
@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.float64, np.complex64, np.bool_])
def test_identity_selects_items_by_their_truth_value(shared_cache, dtype):
    obj = _make(d_in=P(dtype), d_out=P(dtype), cond=cuprims.OpKind.IDENTITY)
    source = obj._builds.source(90).text
    assert "cuprims_predicate_t" in source and obj.cubin(90)[:4] == b"\x7fELF"
    assert not obj._builds.source(90).extern_symbols          # computed in the unit: nothing linked


def test_identity_three_way_partition_builds(shared_cache):
    obj = cuprims.make_three_way_partition(d_in=P(i4), d_first_part_out=P(i4), d_second_part_out=P(i4),
                                           d_unselected_out=P(i4), d_num_selected_out=P(i8),
                                           select_first_part_op=cuprims.OpKind.IDENTITY,
                                           select_second_part_op=lambda v: v > 5, compute_capability=90)
    assert obj.cubin(90)[:4] == b"\x7fELF"


def test_other_builtins_and_structs_without_truth_values_are_refused_naming_the_argument():
    with pytest.raises(ArgumentError, match="argument 'cond'.*OpKind.IDENTITY"):
        _make(cond=cuprims.OpKind.PLUS)
    pair = cuprims.gpu_struct({"a": np.int32, "b": np.float32})
    with pytest.raises(ArgumentError, match="argument 'cond'.*truth value"):
        _make(d_in=P(pair.dtype), d_out=P(pair.dtype), cond=cuprims.OpKind.IDENTITY)
