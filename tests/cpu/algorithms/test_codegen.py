"""Generated source: golden snapshots, and which built-in operators a reduction accepts.

Regenerate the snapshots after an intended codegen change with::

    CUPRIMS_UPDATE_GOLDENS=1 python -m pytest tests/cpu/algorithms/test_codegen.py
"""

from __future__ import annotations


import numpy as np
import pytest

from cuprims import OpKind
from cuprims._codegen.builtin_ops import check_binary_builtin
from cuprims._value_types import value_type
from cuprims.algorithms.reduce.source import reduce_source
from cuprims.errors import ArgumentError
from cuprims.op import OpSpec, op_spec
from cpu_helpers import check_golden, render_source


# A Python operator reaches codegen only as an external symbol; its recipe key must not
# show in the text (one kernel LTO-IR serves every Python operator over the same types).
PY_SPEC = OpSpec("python", "0" * 64, name="my_op")

# A struct of 40 int8 fields: held by the kernel in its word form, the operator called
# (cuprims._codegen.accumulators); the init value, result and partials stay the struct.
BYTES40 = np.dtype([(f"f{i}", np.int8) for i in range(40)], align=True)

SPECS = {
    "reduce_struct_words_python_init_sm90": dict(in_type=BYTES40, accum=BYTES40, op=PY_SPEC, has_init=True,
                                                 deterministic_across_gpus=False, arch=90),
    "reduce_f4_plus_init_sm90": dict(in_type="f4", accum="f4", op=op_spec(OpKind.PLUS), has_init=True,
                                     deterministic_across_gpus=False, arch=90),
    "reduce_i8_maximum_noinit_sm90": dict(in_type="i8", accum="i8", op=op_spec(OpKind.MAXIMUM), has_init=False,
                                          deterministic_across_gpus=False, arch=90),
    "reduce_f4_python_init_sm90": dict(in_type="f4", accum="f4", op=PY_SPEC, has_init=True,
                                       deterministic_across_gpus=False, arch=90),
    "reduce_f4_plus_init_gpu_to_gpu_sm90": dict(in_type="f4", accum="f4", op=op_spec(OpKind.PLUS), has_init=True,
                                                deterministic_across_gpus=True, arch=90),
    "reduce_c8_plus_init_sm90": dict(in_type="c8", accum="c8", op=op_spec(OpKind.PLUS), has_init=True,
                                     deterministic_across_gpus=False, arch=90),
    "reduce_f2_maximum_init_sm90": dict(in_type="f2", accum="f2", op=op_spec(OpKind.MAXIMUM), has_init=True,
                                        deterministic_across_gpus=False, arch=90),
    "reduce_f4_raw_init_sm90": dict(in_type="f4", accum="f4", op=OpSpec("raw", "1" * 64, name="my_raw_add"),
                                    has_init=True, deterministic_across_gpus=False, arch=90),
    "reduce_f8_to_f4_minimum_init_sm80": dict(in_type="f8", accum="f4", op=op_spec(OpKind.MINIMUM), has_init=True,
                                              deterministic_across_gpus=False, arch=80),
}


def _generate(spec: dict):
    args = dict(spec)
    args["in_type"] = value_type(np.dtype(args["in_type"]))
    args["accum"] = value_type(np.dtype(args["accum"]))
    return reduce_source(**args)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_generation_is_deterministic(name):
    assert _generate(SPECS[name]) == _generate(SPECS[name])


def test_source_shape():
    src = _generate(SPECS["reduce_f4_python_init_sm90"])
    assert src.extern_symbols == ("cuprims_op_0",)
    assert 'extern "C" __device__ void cuprims_op_0(void*, void*, void*);' in src.text
    assert "sm_90" in src.text and "__CUDA_ARCH__ != 900" in src.text
    # one kernel template serves both passes: over the input and over the partials
    assert len(src.name_expressions) == 2
    assert src.name_expressions[0] == src.name_expressions[1]  # float32 in, float32 accumulator
    assert src.meta_fields == ("threads", "items", "accum_size", "accum_align")
    assert "cuprims_meta[4]" in src.text
    builtin = _generate(SPECS["reduce_f4_plus_init_sm90"])
    assert builtin.extern_symbols == ()
    # a built-in sum is CUB's own cuda::std::plus (its thread reduction sums a tree of items)
    assert "using cuprims_op_t = ::cuda::std::plus<>;" in builtin.text
    assert "struct cuprims_op_t" in _generate(SPECS["reduce_i8_maximum_noinit_sm90"]).text   # other built-ins
    noinit = _generate(SPECS["reduce_i8_maximum_noinit_sm90"])
    assert all("no_init" in n for n in noinit.name_expressions)
    assert "long long" in noinit.text
    portable = _generate(SPECS["reduce_f4_plus_init_gpu_to_gpu_sm90"])
    assert "__gpu_to_gpu" in portable.text and "fixed_arch_selector" in portable.text


def test_headers_only_where_types_need_them():
    plain = _generate(SPECS["reduce_f4_plus_init_sm90"]).text
    assert "cuda_fp16.h" not in plain and "complex" not in plain
    assert "#include <cuda/std/complex>" in _generate(SPECS["reduce_c8_plus_init_sm90"]).text
    assert "#include <cuda_fp16.h>" in _generate(SPECS["reduce_f2_maximum_init_sm90"]).text


def test_raw_op_is_called_by_its_own_symbol():
    src = _generate(SPECS["reduce_f4_raw_init_sm90"])
    assert src.extern_symbols == ("my_raw_add",)
    assert 'extern "C" __device__ void my_raw_add(void*, void*, void*);' in src.text
    assert "cuprims_op_0" not in src.text


def test_python_op_key_is_not_in_the_source():
    a = _generate(SPECS["reduce_f4_python_init_sm90"])
    other = dict(SPECS["reduce_f4_python_init_sm90"], op=OpSpec("python", "f" * 64, name="other"))
    assert _generate(other) == a
    assert op_spec(lambda x, y: x * y).key not in a.text


# ------------------------------------------------------------------ check_binary_builtin

ACCEPTED = [
    (OpKind.PLUS, "f4"), (OpKind.PLUS, "f8"), (OpKind.PLUS, "f2"), (OpKind.PLUS, "i4"), (OpKind.PLUS, "u8"),
    (OpKind.PLUS, "c8"), (OpKind.MULTIPLIES, "c16"), (OpKind.MULTIPLIES, "i2"),
    (OpKind.MINIMUM, "f4"), (OpKind.MAXIMUM, "i8"), (OpKind.MAXIMUM, "u1"),
    (OpKind.BIT_XOR, "i4"), (OpKind.BIT_AND, "u2"), (OpKind.BIT_OR, "i8"),
    (OpKind.BIT_XOR, "b1"), (OpKind.BIT_AND, "b1"), (OpKind.LOGICAL_AND, "b1"), (OpKind.LOGICAL_OR, "b1"),
    (OpKind.MINIMUM, "b1"),
]

REJECTED = [
    (OpKind.MODULUS, "f4"), (OpKind.MODULUS, "f8"),
    # not associative: a reduction's result would depend on the order
    (OpKind.MODULUS, "i4"), (OpKind.MINUS, "i4"), (OpKind.MINUS, "f4"), (OpKind.DIVIDES, "f8"),
    (OpKind.LESS, "f4"), (OpKind.GREATER, "i4"), (OpKind.LESS_EQUAL, "i8"),
    (OpKind.IDENTITY, "f4"), (OpKind.NEGATE, "i4"), (OpKind.BIT_NOT, "u4"), (OpKind.LOGICAL_NOT, "b1"),
    (OpKind.PLUS, "b1"), (OpKind.MULTIPLIES, "b1"),
    (OpKind.BIT_XOR, "f4"), (OpKind.BIT_AND, "f8"), (OpKind.BIT_OR, "c8"),
    (OpKind.MINIMUM, "c8"), (OpKind.MAXIMUM, "c16"),
]

STRUCT = np.dtype([("x", np.float32), ("y", np.int32)], align=True)


@pytest.mark.parametrize("kind,code", ACCEPTED, ids=lambda v: getattr(v, "name", v))
def test_builtin_accepted(kind, code):
    check_binary_builtin(op_spec(kind), value_type(np.dtype(code)))


@pytest.mark.parametrize("kind,code", REJECTED, ids=lambda v: getattr(v, "name", v))
def test_builtin_rejected(kind, code):
    with pytest.raises(ArgumentError) as info:
        check_binary_builtin(op_spec(kind), value_type(np.dtype(code)))
    assert info.value.argument == "op"
    assert "'op'" in str(info.value)
    assert kind.name in str(info.value) or kind.name in repr(info.value.given)


def test_comparison_rejection_explains_itself():
    with pytest.raises(ArgumentError, match="comparator"):
        check_binary_builtin(op_spec(OpKind.LESS), value_type(np.float32))


def test_unary_rejection_explains_itself():
    with pytest.raises(ArgumentError, match="binary"):
        check_binary_builtin(op_spec(OpKind.IDENTITY), value_type(np.float32))


@pytest.mark.parametrize("kind", [OpKind.PLUS, OpKind.MAXIMUM, OpKind.BIT_XOR])
def test_builtin_on_struct_rejected(kind):
    vt = value_type(STRUCT)
    assert vt.is_struct
    with pytest.raises(ArgumentError) as info:
        check_binary_builtin(op_spec(kind), vt)
    assert info.value.argument == "op"
    assert "Python callable" in str(info.value)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_golden_source(name):
    src = _generate(SPECS[name])
    assert _generate(SPECS[name]) == src  # deterministic
    check_golden(name, render_source(src))


def test_metadata_exported_out_of_the_hosts_order_is_refused():
    # the host reads cuprims_meta by position: a swapped pair would be silent wrong launch facts
    from cuprims._compile.source import Source
    from cuprims._codegen.common import meta_export

    text = meta_export((("threads", "256"), ("items", "16")))
    assert Source(text=text, name_expressions=(), extern_symbols=(), meta_fields=("threads", "items")).text
    with pytest.raises(ValueError, match="exports"):
        Source(text=text, name_expressions=(), extern_symbols=(), meta_fields=("items", "threads"))
