"""Source for for_each: cuprims' kernel (``algorithms/for_each/cuprims_for_each.cuh``) for one
input type and operator. The tile is 256 threads of 32 bytes of items each (at most 8
items); the shape is exported through ``cuprims_meta``."""

from __future__ import annotations

from typing import Any

from cuprims._codegen.common import arg_param, iterator_parts, meta_export, op_symbol, unit_head
from cuprims._codegen.functors import extern_op_call
from cuprims._compile.source import Source
from cuprims._value_types import ValueType
from cuprims.op import OpSpec

FOR_EACH_META = ("threads", "items")
THREADS = 256
_NS = "cuprims::for_each"


def items_per_thread(item: ValueType) -> int:
    """Items each thread takes: 32 bytes of them, 1 to 8."""
    return max(1, min(8, 32 // max(item.size, 1)))


def _each_functor(name: str, op: OpSpec, item: ValueType, symbol: str) -> str:
    """``void operator()(const T&)`` calling linked operator ``symbol`` through the pointer
    ABI; the result pointer it takes is given a byte that nothing reads."""
    decl, state, call = extern_op_call(op, symbol, ["&arg", "&ignored"])
    return (f"{decl}\nstruct {name}\n{{\n{state}"
            f"  __device__ __forceinline__ void operator()(const {item.cpp}& a) const\n  {{\n"
            f"    {item.cpp} arg = a;\n    unsigned char ignored;\n    {call}\n  }}\n}};\n")


def for_each_source(*, d_in: Any, op: OpSpec, arch: int) -> Source:
    """Source calling ``op`` on every item of ``d_in``."""
    item = d_in.value
    symbol = op_symbol(op, "cuprims_op_0")
    iterator_text, iterator_types, iterator_symbols = iterator_parts((d_in,))
    items = items_per_thread(item)
    text = (
        unit_head((item,) + iterator_types, arch, ("for_each/cuprims_for_each.cuh",), iterator_text)
        + _each_functor("cuprims_each_op_t", op, item, symbol)
        + meta_export((("threads", str(THREADS)), ("items", str(items))))
    )
    names = (f"{_NS}::for_each_kernel<{THREADS}, {items}, {arg_param(d_in)}, {item.cpp}, cuprims_each_op_t>",)
    return Source(text=text, name_expressions=names, extern_symbols=(symbol,) + iterator_symbols,
                  meta_fields=FOR_EACH_META)
