"""The numba side of operator state: an operator that captures device arrays (see
:mod:`.captures`) compiled as a copy of itself taking those arrays as leading parameters
(rebuilt from its source), and the intrinsics that rebuild each array, in device code,
from the state's 64-bit words (its data pointer, then its extents).

:mod:`.numba_ops` splices these into its wrappers: the stateful pointer ABI
``void name(void* state, A0* a0, ..., R* out)``, and a block scan's prefix callback, whose
state array the caller owns.
"""

from __future__ import annotations

import types as pytypes
from typing import Any, Callable

import numpy as np

from cuprims._operators.numba_device import import_numba
from cuprims.errors import OperatorCompileError


def captures_of(fn: Callable, captures: Any) -> tuple:
    """The device arrays ``fn`` captures as state (as its recipe lists them), unless given
    (an empty tuple: compile captured arrays in as constants)."""
    if captures is not None:
        return tuple(captures)
    if not isinstance(fn, pytypes.FunctionType) and not isinstance(getattr(fn, "py_func", None),
                                                                    pytypes.FunctionType):
        return ()
    from cuprims._operators.recipe import op_recipe_cached

    return op_recipe_cached(fn).captures


def stateful_target(fn: Callable, captures: tuple, op_name: str, signature_text: str,
                    argument: str | None = None, context: str = "") -> Callable:
    """``fn`` rewritten to take its captured closure variables and globals as leading
    parameters (captured defaults stay parameters, passed by keyword)."""
    from cuprims._operators.captures import DEFAULT, SourceUnavailable, with_leading_parameters

    py_func = getattr(fn, "py_func", None)
    if isinstance(py_func, pytypes.FunctionType):
        fn = py_func
    leading = tuple(c.name for c in captures if c.where != DEFAULT)
    try:
        return with_leading_parameters(fn, leading)
    except SourceUnavailable as exc:
        names = ", ".join(repr(c.name) for c in captures)
        raise OperatorCompileError(op_name, signature_text, TypeError(
            f"the operator captures device arrays ({names}), which cuprims passes to it at each call by "
            f"rewriting it from its source; {exc}. Define the operator in a file (or notebook cell) whose "
            "source Python can read"), argument=argument, context=context) from None


def capture_call(captures: tuple, values: list[str], arrays: list[str]) -> str:
    """``__user(...)`` calling the rewritten operator: captured closure variables and
    globals first, then ``values``, then captured defaults by keyword."""
    from cuprims._operators.captures import DEFAULT

    lead = [a for c, a in zip(captures, arrays) if c.where != DEFAULT]
    by_name = [f"{c.name}={a}" for c, a in zip(captures, arrays) if c.where == DEFAULT]
    return f"__user({', '.join(lead + values + by_name)})"


def array_type(dtype: np.dtype, ndim: int) -> Any:
    """numba's type of a C-contiguous ``ndim``-d array of ``dtype``."""
    _, types, _ = import_numba()
    from numba.cuda.np.numpy_support import from_dtype

    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C")


_state_arrays: dict[tuple, Any] = {}


def state_array(word: int, dtype: np.dtype, ndim: int) -> Any:
    """An intrinsic ``(void* state) -> Array(dtype, ndim, 'C')`` reading, from 64-bit word
    ``word`` of the state, the array's data pointer and then its ``ndim`` extents."""
    key = (word, np.dtype(dtype).str, ndim)
    fn = _state_arrays.get(key)
    if fn is not None:
        return fn
    _, types, _ = import_numba()
    from llvmlite import ir
    from numba.cuda.extending import intrinsic

    result_type = array_type(dtype, ndim)

    def state_array(typingctx, state):
        def codegen(context, builder, sig, args):
            i64 = ir.IntType(64)
            base = builder.bitcast(args[0], i64.as_pointer())

            def load(k: int):
                return builder.load(builder.gep(base, [i64(word + k)]), align=8)

            ary = context.make_array(result_type)(context, builder)
            itemsize = context.get_abi_sizeof(context.get_data_type(result_type.dtype))
            shape = [load(1 + d) for d in range(ndim)]
            strides = [None] * ndim
            step = i64(itemsize)
            for d in reversed(range(ndim)):  # C order
                strides[d] = step
                step = builder.mul(step, shape[d])
            context.populate_array(ary, data=builder.inttoptr(load(0), ary.data.type), shape=shape,
                                   strides=strides, itemsize=context.get_constant(types.intp, itemsize),
                                   meminfo=None, parent=None)
            return ary._getvalue()

        return result_type(types.voidptr), codegen

    state_array.__name__ = f"cuprims_state_array_{word}_{key[1].strip('<>|=')}_{ndim}d"
    fn = _state_arrays[key] = intrinsic(state_array)
    return fn
