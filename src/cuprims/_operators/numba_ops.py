"""Python callables -> LTO-IR through numba-cuda. The only module that imports numba.

The user's function is wrapped in a generated ``extern "C"`` device function with a
pointer ABI (``void name(T* a, T* b, R* out)``): values are loaded through pointers,
the user's function is called, and the result is stored through the last pointer.
Passing pointers keeps struct layouts byte-exact (numba's C ABI flattens structs passed
by value) and costs nothing once nvJitLink's LTO has inlined the call.

Plain Python functions the operator calls (by global name or through a closure) are
made device functions too, recursively, so users need not decorate helpers.

An operator that captures device arrays (see :mod:`.captures`) is compiled as a copy of
itself taking those arrays as leading parameters (rebuilt from its source), called by a
wrapper with the stateful pointer ABI ``void name(void* state, A0* a0, ..., R* out)``
that rebuilds each array from the state's pointer and extents.
"""

from __future__ import annotations

import contextlib
import threading
import types as pytypes
from typing import Any, Callable, Sequence

import numpy as np

from cuprims.errors import OperatorCompileError
from cuprims.types import ValueType, numba_type_name

_lock = threading.RLock()
_numba = None


def import_numba():
    global _numba
    if _numba is None:
        from cuprims._base import stats

        with stats.stage("numba import"):
            import numba  # noqa: F401
            import numba.cuda.dispatcher as dispatcher_module
            from numba import cuda, types

            from cuprims._operators import numba_structs  # noqa: F401  (lets device code call gpu_struct classes)

        _numba = (cuda, types, dispatcher_module)
    return _numba


class _TargetDevice:
    """Stands in for the current device while compiling, so no driver is needed."""

    def __init__(self, cc: tuple[int, int]):
        self.compute_capability = cc


@contextlib.contextmanager
def _target_capability(cc: tuple[int, int]):
    """numba-cuda compiles called device functions for ``get_current_device()``'s
    capability, which needs a driver. For ahead-of-time builds (and to make the callee
    match the caller's target) we answer that lookup with the build's target."""
    cuda, _, dispatcher_module = import_numba()
    with _lock:
        original = dispatcher_module.get_current_device
        dispatcher_module.get_current_device = lambda: _TargetDevice(cc)
        try:
            yield
        finally:
            dispatcher_module.get_current_device = original


def _device_function(fn: Callable, memo: dict[int, Any]):
    """A numba device dispatcher for ``fn`` whose plain-Python callees are device functions too."""
    cuda, _, _ = import_numba()
    py_func = getattr(fn, "py_func", None)
    if py_func is not None and isinstance(py_func, pytypes.FunctionType):
        fn = py_func
    if not isinstance(fn, pytypes.FunctionType):
        raise TypeError(f"operator {fn!r} is not a Python function (numba-cuda compiles functions and lambdas; "
                        "call another callable from one, e.g. lambda v: f(v))")
    if id(fn) in memo:
        return memo[id(fn)]
    placeholder = object()
    memo[id(fn)] = placeholder

    globs = fn.__globals__
    replaced: dict[str, Any] = {}
    for name in fn.__code__.co_names:
        value = globs.get(name)
        if _needs_wrapping(value):
            replaced[name] = _device_function(value, memo)
    new_globals = globs if not replaced else {**globs, **replaced}
    closure = fn.__closure__
    if closure:
        cells = []
        for cell in closure:
            try:
                value = cell.cell_contents
            except ValueError:
                cells.append(cell)
                continue
            cells.append(pytypes.CellType(_device_function(value, memo)) if _needs_wrapping(value) else cell)
        closure = tuple(cells)
    clone = pytypes.FunctionType(fn.__code__, new_globals, fn.__name__, fn.__defaults__, closure)
    clone.__kwdefaults__ = fn.__kwdefaults__
    clone.__qualname__ = fn.__qualname__
    dispatcher = cuda.jit(device=True)(clone)
    memo[id(fn)] = dispatcher
    return dispatcher


def _needs_wrapping(value: Any) -> bool:
    if isinstance(value, pytypes.FunctionType):
        return True
    py_func = getattr(value, "py_func", None)
    # A numba CPU-jitted function: recompile its Python for the device.
    return isinstance(py_func, pytypes.FunctionType) and not hasattr(value, "compile_device")


def _loader(vt: ValueType, ptr: str) -> str:
    if vt.is_struct:
        from cuprims._operators.numba_structs import load_expression

        return load_expression(vt, ptr)
    if vt.code == "b1":
        return f"({ptr}[0] != 0)"
    return f"{ptr}[0]"


def _storer(vt: ValueType, ptr: str, value: str) -> str:
    if vt.is_struct:
        from cuprims._operators.numba_structs import store_statement

        return store_statement(vt, ptr, value)
    if vt.code == "b1":
        return f"{ptr}[0] = 1 if {value} else 0"
    return f"{ptr}[0] = {value}"


def _pointer_type(vt: ValueType):
    _, types, _ = import_numba()
    if vt.is_struct:
        return types.voidptr
    if vt.code == "b1":
        return types.CPointer(types.uint8)
    return types.CPointer(getattr(types, numba_type_name(vt)))


# ------------------------------------------------------------------ captured device arrays

def _captures_of(fn: Callable, captures: Any) -> tuple:
    """The device arrays ``fn`` captures as state (as its recipe lists them), unless given
    (an empty tuple: compile captured arrays in as constants)."""
    if captures is not None:
        return tuple(captures)
    if not isinstance(fn, pytypes.FunctionType) and not isinstance(getattr(fn, "py_func", None),
                                                                    pytypes.FunctionType):
        return ()
    from cuprims._operators.recipe import op_recipe_cached

    return op_recipe_cached(fn).captures


def _stateful_target(fn: Callable, captures: tuple, op_name: str, signature_text: str,
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


def _capture_call(captures: tuple, values: list[str], arrays: list[str]) -> str:
    """``__user(...)`` calling the rewritten operator: captured closure variables and
    globals first, then ``values``, then captured defaults by keyword."""
    from cuprims._operators.captures import DEFAULT

    lead = [a for c, a in zip(captures, arrays) if c.where != DEFAULT]
    by_name = [f"{c.name}={a}" for c, a in zip(captures, arrays) if c.where == DEFAULT]
    return f"__user({', '.join(lead + values + by_name)})"


def _array_type(dtype: np.dtype, ndim: int):
    _, types, _ = import_numba()
    from numba.cuda.np.numpy_support import from_dtype

    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C")


_state_arrays: dict[tuple, Any] = {}


def _state_array(word: int, dtype: np.dtype, ndim: int):
    """An intrinsic ``(void* state) -> Array(dtype, ndim, 'C')`` reading, from 64-bit word
    ``word`` of the state, the array's data pointer and then its ``ndim`` extents."""
    key = (word, np.dtype(dtype).str, ndim)
    fn = _state_arrays.get(key)
    if fn is not None:
        return fn
    _, types, _ = import_numba()
    from llvmlite import ir
    from numba.cuda.extending import intrinsic

    array_type = _array_type(dtype, ndim)

    def state_array(typingctx, state):
        def codegen(context, builder, sig, args):
            i64 = ir.IntType(64)
            base = builder.bitcast(args[0], i64.as_pointer())

            def load(k: int):
                return builder.load(builder.gep(base, [i64(word + k)]), align=8)

            ary = context.make_array(array_type)(context, builder)
            itemsize = context.get_abi_sizeof(context.get_data_type(array_type.dtype))
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

        return array_type(types.voidptr), codegen

    state_array.__name__ = f"cuprims_state_array_{word}_{key[1].strip('<>|=')}_{ndim}d"
    fn = _state_arrays[key] = intrinsic(state_array)
    return fn


# ------------------------------------------------------------------ compiling

def compile_python_op(fn: Callable, arg_types: Sequence[ValueType], result_type: ValueType | None,
                      abi_name: str, cc: tuple[int, int], *, op_name: str = "op",
                      captures: Any = None, argument: str | None = None, context: str = "") -> list[bytes]:
    """LTO-IR of ``void abi_name(A0* a0, ..., R* out)`` that stores ``fn(*a)`` in ``*out``,
    followed by the LTO-IR of any support code numba links beside it (float16
    arithmetic, for instance, calls C++ shims that numba compiles with NVRTC).

    ``result_type`` None means the result is stored as a bool flag byte (predicates).
    The result numba types ``fn`` as returning is checked against it
    (:func:`cuprims.op.result_refusal`): a refused one raises OperatorResultError.

    An operator capturing device arrays (``captures``, read from ``fn``'s recipe when not
    given) gets ``void abi_name(void* state, A0* a0, ..., R* out)``: the state holds each
    array's pointer and extents (:mod:`.captures`).

    Errors name ``op_name`` and ``argument``, the argument the operator was given as
    (``context``: where in it the operator sits, for one inside an iterator).
    """
    from cuprims.op import operator_signature

    cuda, types, _ = import_numba()
    args = [f"p{i}" for i in range(len(arg_types))]
    out_vt = result_type
    signature_text = operator_signature(arg_types, out_vt)
    captures = _captures_of(fn, captures)
    values = [_loader(vt, p) for vt, p in zip(arg_types, args)]
    namespace: dict[str, Any] = {}
    if captures:
        target = _stateful_target(fn, captures, op_name, signature_text, argument, context)
        arrays, word = [], 0
        for i, cap in enumerate(captures):
            namespace[f"__cuprims_cap{i}"] = _state_array(word, cap.dtype, cap.ndim)
            arrays.append(f"__cuprims_cap{i}(ps)")
            word += 1 + cap.ndim
        call = _capture_call(captures, values, arrays)
        params = ["ps"] + args + ["pr"]
    else:
        target = fn
        call = f"__user({', '.join(values)})"
        params = args + ["pr"]
    if out_vt is None:
        store = f"pr[0] = 1 if {call} else 0"
    else:
        store = _storer(out_vt, "pr", call)
    src = f"def __cuprims_wrapper({', '.join(params)}):\n    {store}\n"
    try:
        with _target_capability(tuple(cc)):
            namespace["__user"] = _device_function(target, {})
            if any(vt.is_struct for vt in list(arg_types) + ([out_vt] if out_vt else [])):
                from cuprims._operators.numba_structs import wrapper_namespace

                namespace.update(wrapper_namespace())
            exec(compile(src, f"<cuprims wrapper of {op_name}>", "exec"), namespace)
            wrapper = namespace["__cuprims_wrapper"]
            ptr_types = [types.voidptr] if captures else []
            ptr_types += [_pointer_type(vt) for vt in arg_types]
            ptr_types.append(_pointer_type(out_vt) if out_vt is not None else types.CPointer(types.uint8))
            codes, _ = cuda.compile_all(wrapper, types.void(*ptr_types), device=True, abi="c",
                                        abi_info={"abi_name": abi_name}, output="ltoir", cc=tuple(cc))
    except OperatorCompileError:
        raise
    except Exception as exc:  # numba raises many kinds; all mean "your operator did not compile"
        # a result of a refused type explains a store numba could not type better than numba does
        _check_user_result(namespace.get("__user"), arg_types, out_vt, op_name, argument, context)
        raise OperatorCompileError(op_name, signature_text, exc, argument=argument, context=context) from exc
    _check_user_result(namespace["__user"], arg_types, out_vt, op_name, argument, context)
    return [_code_bytes(code) for code in codes]


def _user_result(dispatcher: Any) -> tuple[np.dtype | None, str] | None:
    """The result type numba gave the user's function where the wrapper called it: its
    numpy dtype (None when it is not a number: a string, None, a tuple, a struct) and its
    name; None when numba did not get as far as typing it."""
    overloads = list(getattr(dispatcher, "overloads", {}).values())
    if not overloads:
        return None
    _, types, _ = import_numba()
    from numba.np import numpy_support

    result = types.unliteral(overloads[-1].signature.return_type)
    if isinstance(result, (types.Boolean, types.Integer, types.Float, types.Complex)):
        return np.dtype(numpy_support.as_dtype(result)), str(result)
    if isinstance(result, types.NoneType):
        return None, "None (it returns nothing, or always raises)"
    return None, str(result)


def _check_user_result(dispatcher: Any, arg_types: Sequence[ValueType], out_vt: ValueType | None, op_name: str,
                       argument: str | None, context: str) -> None:
    """Raise OperatorResultError when the result numba typed the user's function as
    returning cannot be stored as ``out_vt`` (None: a truth value)."""
    from cuprims.op import check_result

    typed = _user_result(dispatcher)
    if typed is not None:
        check_result(arg_types, out_vt, *typed, op_name=op_name, argument=argument, context=context)


def compile_state_op(fn: Callable, state_type: ValueType, arg_types: Sequence[ValueType],
                     result_type: ValueType, abi_name: str, cc: tuple[int, int], *,
                     op_name: str = "op") -> list[bytes]:
    """LTO-IR of ``void abi_name(void* view, A0* a0, ..., R* out)`` that stores
    ``fn(state, *a)`` in ``*out``, where ``state`` is a 1-D C-contiguous array of
    ``state_type`` rebuilt from ``view``: its data pointer (64-bit word 0) and length
    (word 1). The caller owns the array; ``fn`` may read and write it (a block scan's
    prefix callback keeps its running total there). Followed, as in
    :func:`compile_python_op`, by any support code numba links beside it.
    """
    cuda, types, _ = import_numba()
    args = [f"p{i}" for i in range(len(arg_types))]
    signature_text = (f"({state_type.dtype}[:], {', '.join(str(vt.dtype) for vt in arg_types)}) -> "
                      f"{result_type.dtype}")
    if _captures_of(fn, None):
        raise OperatorCompileError(op_name, signature_text, TypeError(
            "the function captures device arrays; give it what it needs through its state array instead"))
    call = f"__user(__cuprims_state(ps), {', '.join(_loader(vt, p) for vt, p in zip(arg_types, args))})"
    src = f"def __cuprims_wrapper(ps, {', '.join(args)}, pr):\n    {_storer(result_type, 'pr', call)}\n"
    namespace: dict[str, Any] = {"__cuprims_state": _state_array(0, state_type.dtype, 1)}
    try:
        with _target_capability(tuple(cc)):
            namespace["__user"] = _device_function(fn, {})
            if any(vt.is_struct for vt in (*arg_types, result_type)):
                from cuprims._operators.numba_structs import wrapper_namespace

                namespace.update(wrapper_namespace())
            exec(compile(src, f"<cuprims wrapper of {op_name}>", "exec"), namespace)
            ptr_types = [types.voidptr] + [_pointer_type(vt) for vt in (*arg_types, result_type)]
            codes, _ = cuda.compile_all(namespace["__cuprims_wrapper"], types.void(*ptr_types), device=True,
                                        abi="c", abi_info={"abi_name": abi_name}, output="ltoir", cc=tuple(cc))
    except OperatorCompileError:
        raise
    except Exception as exc:  # numba raises many kinds; all mean "your function did not compile"
        raise OperatorCompileError(op_name, signature_text, exc) from exc
    return [_code_bytes(code) for code in codes]


def forget_compiled_operators() -> None:
    """Drop what numba-cuda's target context still remembers of the operators our builds
    compiled (``cuprims.clear_all_caches``).

    Each build compiles its operator through device dispatchers of its own
    (:func:`_device_function`). numba unregisters a dispatcher's implementations when the
    dispatcher is collected, but the target context's overload selectors memoise every
    lookup by its argument types: the wrapper's global ``__user`` is lowered as a constant
    of its dispatcher's numba type, so one such type per operator ever built stays there as
    a key for the life of the process. Only those memo entries go (numba finds an entry
    again on its next lookup); the implementations registered with the context are left as
    they are.
    A snapshot of each memo is walked, so that a compile running on another thread meanwhile
    (which may add entries) is not disturbed, and no numba lock is taken."""
    if _numba is None:
        return  # numba never compiled an operator in this process
    _, types, _ = _numba
    try:
        from numba.cuda.core.base import OverloadSelector
        from numba.cuda.descriptor import cuda_target

        context = cuda_target.target_context
    except (ImportError, AttributeError):  # another numba-cuda layout: nothing we know to release
        return
    for selector in _overload_selectors(context, OverloadSelector):
        memo = getattr(selector, "_cache", None)
        if not isinstance(memo, dict):
            continue
        for key in list(memo):
            if isinstance(key, tuple) and any(isinstance(t, types.Dispatcher) for t in key):
                memo.pop(key, None)


def _overload_selectors(context: Any, selector_type: type) -> list[Any]:
    """The overload selectors a numba target context holds: as attributes, or as the values
    of its per-function and per-attribute tables."""
    found = []
    for value in list(vars(context).values()):
        if isinstance(value, selector_type):
            found.append(value)
        elif isinstance(value, dict):
            found.extend(v for v in list(value.values()) if isinstance(v, selector_type))
    return found


def _code_bytes(code: Any) -> bytes:
    if isinstance(code, (bytes, bytearray, memoryview)):
        return bytes(code)
    for attr in ("code", "data"):  # cuda.core ObjectCode / numba LinkableCode
        inner = getattr(code, attr, None)
        if isinstance(inner, (bytes, bytearray, memoryview)):
            return bytes(inner)
    raise TypeError(f"unexpected code object from numba: {type(code).__name__}")


def numba_version() -> str:
    # read from its .dist-info name like the compilers' versions (no importlib.metadata on
    # a warm build whose operators numba compiled)
    from cuprims._compile.toolchain import wheel_version

    try:
        return wheel_version("numba-cuda") or "unknown"
    except Exception:  # pragma: no cover - metadata missing in odd installs
        return "unknown"


def infer_result_dtype(fn: Callable, arg_types: Sequence[ValueType], *, op_name: str = "op",
                       captures: Any = None, argument: str | None = None) -> np.dtype:
    """The numpy dtype numba infers for ``fn(*args)`` on scalar ``arg_types`` (no GPU needed).

    Used where an operator's result type is not given (a TransformIterator without
    ``value_type``). Captured device arrays are typed as arrays of their build's dtype
    and rank (``captures``, read from ``fn``'s recipe when not given). Errors name
    ``argument``, the argument ``fn`` was given as."""
    cuda, types, _ = import_numba()
    from numba.np import numpy_support

    signature_text = f"({', '.join(str(vt.dtype) for vt in arg_types)}) -> ?"
    if any(vt.is_struct for vt in arg_types):
        raise OperatorCompileError(op_name, signature_text, TypeError(
            "the result type of an operator on structs cannot be inferred: give value_type="), argument=argument)
    captures = _captures_of(fn, captures)
    scalar_types = tuple(getattr(types, numba_type_name(vt)) for vt in arg_types)
    try:
        with _target_capability((9, 0)):
            if captures:
                # a Python caller taking the arrays first, for compile_device's positional types
                arrays = [f"c{i}" for i in range(len(captures))]
                values = [f"a{i}" for i in range(len(arg_types))]
                namespace: dict[str, Any] = {"__user": _device_function(
                    _stateful_target(fn, captures, op_name, signature_text, argument), {})}
                exec(compile(f"def __cuprims_infer({', '.join(arrays + values)}):\n"
                             f"    return {_capture_call(captures, values, arrays)}\n",
                             f"<cuprims caller of {op_name}>", "exec"), namespace)
                dispatcher = cuda.jit(device=True)(namespace["__cuprims_infer"])
                result = dispatcher.compile_device(
                    tuple(_array_type(c.dtype, c.ndim) for c in captures) + scalar_types)
            else:
                dispatcher = _device_function(fn, {})
                result = dispatcher.compile_device(scalar_types)
        return np.dtype(numpy_support.as_dtype(result.signature.return_type))
    except OperatorCompileError:
        raise
    except Exception as exc:  # noqa: BLE001 - numba raises many kinds
        raise OperatorCompileError(op_name, signature_text, exc, argument=argument) from exc
