"""Generated source for device-wide unary and binary transforms (pure strings, no CUDA).

The kernel is CUB's own ``transform_kernel`` (see ``algorithms/transform/cuprims_transform.cuh``);
this module writes the operator functor, the kernel's name expression and the exported
facts the host dispatch reads back (``cuprims_meta``).

Built-in operators (``OpKind``) are used in their element-wise role (see
:mod:`.builtin_ops`, which checks, in :func:`check_transform_builtin`, that the operator
is defined on the types before any code is generated, and :mod:`.functors`, which writes
the functor):

* unary ones (NEGATE, IDENTITY, BIT_NOT, LOGICAL_NOT) compute in the input's type;
* binary ones compute in the *common type* of the two inputs (numpy's
  ``np.result_type``): both operands are converted to it and the C++ operator is applied
  there (so integer division truncates and integer arithmetic wraps in that type, as
  ``cuda::std::plus<C>`` and friends would), comparisons give ``bool`` and are IEEE
  comparisons (a NaN compares false, as with ``np.less``);
* the result is then converted to the output's type.

Python operators are compiled by numba with the output's type as their result type
(numba converts the returned value); a ``RawOp`` writes a value of the output's type.
"""

from __future__ import annotations

import struct
from typing import Any

from cuprims._codegen.builtin_ops import check_transform_builtin, common_type  # noqa: F401 (used by the host)
from cuprims._codegen.common import iterator_parts, meta_export, op_symbol, unit_head
from cuprims._codegen.functors import transform_functor
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.op import OpSpec

# The host decodes the kernel's algorithm with these numbers (pinned by static_asserts
# in cuprims_transform.cuh).
ALGO_PREFETCH, ALGO_VECTORIZED, ALGO_LDGSTS, ALGO_UBLKCP = 0, 1, 2, 3

# One 16-byte kernel argument per input: {pointer, int head padding, 4 bytes of padding}
# (CUB's kernel_arg union; its layout is pinned by static_asserts in cuprims_transform.cuh).
INPUT_ARG = struct.Struct("<Qi4x")

META_FIELDS = ("algorithm", "threads", "min_ipt", "max_ipt", "ipt_no_input", "vec_ipt", "vec_size",
               "min_bytes_in_flight", "loaded_bytes", "copy_align", "smem_1", "smem_2", "smem_cap",
               "out_size", "in1_size", "in2_size")


def input_arg_size(arg: Any) -> int:
    """Bytes of CUB's kernel_arg<It> union for input ``arg`` (an argument kind): 16 for an
    array, else the iterator's state (at least 16)."""
    if arg.is_pointer:
        return INPUT_ARG.size
    align = max(8, arg.state_alignment)
    return -(-max(INPUT_ARG.size, arg.state_size) // align) * align


def transform_source(*, inputs: tuple[ValueType, ...], out: ValueType, op: OpSpec, arch: int,
                     in_args: tuple[Any, ...] = (), out_arg: Any = None) -> Source:
    """Source for a transform of one or two inputs into ``out`` on ``sm_<arch>``;
    ``in_args``/``out_arg`` (argument kinds) give the C++ types of iterator arguments
    (CUB then picks the algorithm for those iterators: prefetch or vectorized)."""
    if len(inputs) not in (1, 2):
        raise ValueError("a transform has one or two inputs")
    functor, externs = transform_functor("cuprims_op_t", op, inputs, out, op_symbol(op, "cuprims_op_0"))
    iterator_text, iterator_types, iterator_symbols = iterator_parts(tuple(in_args) + (out_arg,))
    externs += iterator_symbols
    in_ptrs = ", ".join(a.cpp() if a is not None and a.unit is not None else f"const {vt.cpp}*"
                        for vt, a in zip(inputs, tuple(in_args) + (None,) * (len(inputs) - len(in_args))))
    out_t = out_arg.cpp() if out_arg is not None and out_arg.unit is not None else f"{out.cpp}*"
    in_types = ", ".join(vt.cpp for vt in inputs)
    selector = ("CUB_NS_QUALIFIER::detail::transform::policy_selector_from_types<false, true, "
                f"::cuda::std::tuple<{in_ptrs}>, {out_t}>")
    text = (
        unit_head(tuple(inputs) + (out,) + iterator_types, arch, ("transform/cuprims_transform.cuh",), iterator_text)
        + functor
        + f"\nusing cuprims_selector_t = {selector};\n"
        + f"using cuprims_facts_t = cuprims::transform::facts<cuprims_selector_t, {arch // 10}, {arch % 10}, "
        + f"{out.cpp}, {in_types}>;\n"
        + "static_assert(cuprims_facts_t::args_ok, \"cuprims: kernel argument layout\");\n"
        + "#if defined(__CUDA_ARCH__)\n"
        + "static_assert(::cuda::compute_capability{__CUDA_ARCH__ / 10} == cuprims_facts_t::cc,\n"
        + "              \"cuprims: the exported policy is not the one the kernel uses\");\n"
        + "#endif\n"
        + meta_export((
            ("algorithm", "cuprims_facts_t::algorithm"),
            ("threads", "cuprims_facts_t::threads"),
            ("min_ipt", "cuprims_facts_t::min_ipt"),
            ("max_ipt", "cuprims_facts_t::max_ipt"),
            ("ipt_no_input", "cuprims_facts_t::ipt_no_input"),
            ("vec_ipt", "cuprims_facts_t::vec_ipt"),
            ("vec_size", "cuprims_facts_t::vec_size"),
            ("min_bytes_in_flight", "cuprims_facts_t::min_bytes_in_flight"),
            ("loaded_bytes", "cuprims_facts_t::loaded_bytes"),
            ("copy_align", "cuprims_facts_t::copy_align"),
            ("smem_1", "cuprims_facts_t::smem_1"),
            ("smem_2", "cuprims_facts_t::smem_2"),
            ("smem_cap", "cuprims_facts_t::smem_cap"),
            ("out_size", f"sizeof({out.cpp})"),
            ("in1_size", f"sizeof({inputs[0].cpp})"),
            ("in2_size", f"sizeof({inputs[1].cpp})" if len(inputs) == 2 else "0"),
        ))
    )
    name = ("CUB_NS_QUALIFIER::detail::transform::transform_kernel<cuprims_selector_t, ::cuda::std::int64_t, "
            f"::cuda::always_true, cuprims_op_t, {out_t}, {in_ptrs}>")
    # CUB's transform kernel defines lambdas inside the kernel body; NVRTC before 13.5
    # treats those as host functions unless unannotated code defaults to device code.
    return Source(text=text, name_expressions=(name,), extern_symbols=externs, meta_fields=META_FIELDS,
                  compile_options=(("device_as_default_execution_space", True),))
