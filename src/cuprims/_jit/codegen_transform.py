"""Generated source for device-wide unary and binary transforms (pure strings, no CUDA).

The kernel is CUB's own ``transform_kernel`` (see ``kernels/cuprims_transform.cuh``);
this module writes the operator functor, the kernel's name expression and the exported
facts the host dispatch reads back (``cuprims_meta``).

Built-in operators (``OpKind``) follow these rules, checked by
:func:`check_transform_builtin` before any code is generated:

* unary ones (NEGATE, IDENTITY, BIT_NOT, LOGICAL_NOT) compute in the input's type;
* binary ones compute in the *common type* of the two inputs (numpy's
  ``np.result_type``): both operands are converted to it and the C++ operator is applied
  there (so integer division truncates and integer arithmetic wraps in that type, as
  ``cuda::std::plus<C>`` and friends would), comparisons give ``bool``;
* the result is then converted to the output's type.

Python operators are compiled by numba with the output's type as their result type
(numba converts the returned value); a ``RawOp`` writes a value of the output's type.
"""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from ..op import COMPARISON_KINDS, UNARY_KINDS, OpKind, OpSpec
from ..types import ValueType, value_type
from .codegen import Source, extern_op_call, meta_export, op_symbol, preamble

# The host decodes the kernel's algorithm with these numbers (pinned by static_asserts
# in cuprims_transform.cuh).
ALGO_PREFETCH, ALGO_VECTORIZED, ALGO_LDGSTS, ALGO_UBLKCP = 0, 1, 2, 3

META_FIELDS = ("algorithm", "threads", "min_ipt", "max_ipt", "ipt_no_input", "vec_ipt", "vec_size",
               "min_bytes_in_flight", "loaded_bytes", "copy_align", "smem_1", "smem_2", "smem_cap",
               "out_size", "in1_size", "in2_size")

_ARITH = {OpKind.PLUS: "+", OpKind.MINUS: "-", OpKind.MULTIPLIES: "*", OpKind.DIVIDES: "/",
          OpKind.MODULUS: "%"}
_COMPARE = {OpKind.EQUAL_TO: "==", OpKind.NOT_EQUAL_TO: "!=", OpKind.GREATER: ">", OpKind.LESS: "<",
            OpKind.GREATER_EQUAL: ">=", OpKind.LESS_EQUAL: "<="}
_BITWISE = {OpKind.BIT_AND: "&", OpKind.BIT_OR: "|", OpKind.BIT_XOR: "^"}
_LOGICAL = {OpKind.LOGICAL_AND: "&&", OpKind.LOGICAL_OR: "||"}


def common_type(a: ValueType, b: ValueType) -> ValueType:
    """The type a binary built-in computes in: numpy's promotion of the two input types."""
    if a.is_struct or b.is_struct:
        raise ValueError("structs have no common type")
    return value_type(np.result_type(a.dtype, b.dtype))


def _converts(src: ValueType, dst: ValueType) -> bool:
    """Whether a value of ``src`` may be converted to ``dst`` (static_cast in C++)."""
    if src.is_struct or dst.is_struct:
        return src.is_struct and dst.is_struct and src.code == dst.code
    if src.kind == "c":
        return dst.kind == "c"  # a complex number has no real-valued conversion
    return True


def check_transform_builtin(op: OpSpec, inputs: tuple[ValueType, ...], out: ValueType,
                            argument: str = "op") -> None:
    """Raise ArgumentError unless built-in ``op`` is defined on ``inputs`` giving ``out``."""
    kind = op.builtin
    arity = len(inputs)
    if arity == 1 and kind not in UNARY_KINDS:
        raise ArgumentError(argument, "a unary operator (NEGATE, IDENTITY, BIT_NOT, LOGICAL_NOT), a Python "
                            "callable or a RawOp", kind)
    if arity == 2 and kind in UNARY_KINDS:
        raise ArgumentError(argument, "a binary operator (PLUS, MINUS, ..., comparisons, MINIMUM, MAXIMUM, bit "
                            "and logical operators), a Python callable or a RawOp", kind)
    if any(vt.is_struct for vt in inputs) or out.is_struct:
        if kind is OpKind.IDENTITY and inputs[0].code == out.code:
            return
        raise ArgumentError(argument, "a Python callable or RawOp for struct values (built-in operators work on "
                            "scalars; IDENTITY copies a struct to the same struct type)", kind)
    if arity == 1:
        t = inputs[0]
        if kind is OpKind.NEGATE:
            ok = t.kind in "iufc"
        elif kind is OpKind.BIT_NOT:
            ok = t.kind in "iub"
        elif kind is OpKind.LOGICAL_NOT:
            ok = t.kind in "iufb"
        else:  # IDENTITY
            ok = True
        result = value_type(np.bool_) if kind is OpKind.LOGICAL_NOT else t
    else:
        c = common_type(*inputs)
        k = c.kind
        if kind in (OpKind.PLUS, OpKind.MULTIPLIES):
            ok = k in "biufc"
        elif kind in (OpKind.MINUS, OpKind.DIVIDES):
            ok = k in "iufc"
        elif kind is OpKind.MODULUS:
            ok = k in "iu"
        elif kind in (OpKind.EQUAL_TO, OpKind.NOT_EQUAL_TO):
            ok = True
        elif kind in COMPARISON_KINDS or kind in (OpKind.MINIMUM, OpKind.MAXIMUM):
            ok = k in "biuf"
        elif kind in _BITWISE:
            ok = k in "biu"
        else:  # logical
            ok = k in "biuf"
        result = value_type(np.bool_) if kind in COMPARISON_KINDS or kind in _LOGICAL else c
        if not ok:
            raise ArgumentError(argument, f"an operator defined on {inputs[0].dtype} and {inputs[1].dtype} values "
                                f"(they combine as {c.dtype})", kind)
    if not ok:
        raise ArgumentError(argument, f"an operator defined on {inputs[0].dtype} values", kind)
    if not _converts(result, out):
        raise ArgumentError("d_out", f"an output type that {kind.name} on {', '.join(str(v.dtype) for v in inputs)} "
                            f"(giving {result.dtype}) converts to", out.dtype)


def _builtin_body(op: OpSpec, inputs: tuple[ValueType, ...], out: ValueType) -> str:
    kind = op.builtin
    o = out.cpp
    if len(inputs) == 1:
        t = inputs[0].cpp
        if inputs[0].is_struct:  # IDENTITY on a struct (checked)
            return "return a;"
        if kind is OpKind.IDENTITY:
            expr = "a"
        elif kind is OpKind.NEGATE:
            expr = f"static_cast<{t}>(-a)"
        elif kind is OpKind.BIT_NOT:
            expr = "!a" if inputs[0].kind == "b" else f"static_cast<{t}>(~a)"
        else:  # LOGICAL_NOT
            expr = "!static_cast<bool>(a)"
        return f"return static_cast<{o}>({expr});"
    c = common_type(*inputs).cpp
    lines = f"const {c} x = static_cast<{c}>(a);\n    const {c} y = static_cast<{c}>(b);\n    "
    if kind in _ARITH:
        expr = f"static_cast<{c}>(x {_ARITH[kind]} y)"
    elif kind in _COMPARE:
        expr = f"(x {_COMPARE[kind]} y)"
    elif kind is OpKind.MINIMUM:
        expr = "((y < x) ? y : x)"
    elif kind is OpKind.MAXIMUM:
        expr = "((x < y) ? y : x)"
    elif kind in _BITWISE:
        expr = f"static_cast<{c}>(x {_BITWISE[kind]} y)"
    else:
        expr = f"(static_cast<bool>(x) {_LOGICAL[kind]} static_cast<bool>(y))"
    return lines + f"return static_cast<{o}>({expr});"


def transform_functor(name: str, op: OpSpec, inputs: tuple[ValueType, ...], out: ValueType,
                      symbol: str) -> tuple[str, tuple[str, ...]]:
    """C++ functor ``name`` computing ``Out op(const In&...)`` for one or two inputs;
    returns (text, extern symbols). Python ops and RawOps are called through the pointer
    ABI ``void symbol([state,] In0* a, [In1* b,] Out* result)``."""
    params = ", ".join(f"const {vt.cpp}& {p}" for vt, p in zip(inputs, "ab"))
    o = out.cpp
    head = f"struct {name}\n{{\n"
    sig = f"  __device__ __forceinline__ {o} operator()({params}) const\n  {{\n    "
    if op.kind == "builtin":
        return head + sig + _builtin_body(op, inputs, out) + "\n  }\n};\n", ()
    n = len(inputs)
    copies = "".join(f"{vt.cpp} {p}_copy = {p};\n    " for vt, p in zip(inputs, "ab"))
    decl, state, call = extern_op_call(op, symbol, [f"&{p}_copy" for p in "ab"[:n]] + ["&result"])
    body = f"{copies}{o} result;\n    {call}\n    return result;"
    return f"{decl}\n{head}{state}{sig}{body}\n  }}\n}};\n", (symbol,)


def transform_source(*, inputs: tuple[ValueType, ...], out: ValueType, op: OpSpec, arch: int) -> Source:
    """Source for a transform of one or two input arrays into ``out`` on ``sm_<arch>``."""
    if len(inputs) not in (1, 2):
        raise ValueError("a transform has one or two inputs")
    functor, externs = transform_functor("cuprims_op_t", op, inputs, out, op_symbol(op, "cuprims_op_0"))
    in_ptrs = ", ".join(f"const {vt.cpp}*" for vt in inputs)
    in_types = ", ".join(vt.cpp for vt in inputs)
    selector = ("CUB_NS_QUALIFIER::detail::transform::policy_selector_from_types<false, true, "
                f"::cuda::std::tuple<{in_ptrs}>, {out.cpp}*>")
    text = (
        preamble(tuple(inputs) + (out,), arch)
        + "#include <cuprims_transform.cuh>\n\n"
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
            f"::cuda::always_true, cuprims_op_t, {out.cpp}*, {in_ptrs}>")
    # CUB's transform kernel defines lambdas inside the kernel body; NVRTC before 13.5
    # treats those as host functions unless unannotated code defaults to device code.
    return Source(text=text, name_expressions=(name,), extern_symbols=externs, meta_fields=META_FIELDS,
                  compile_options=(("device_as_default_execution_space", True),))
