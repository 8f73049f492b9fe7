"""Python callables -> LTO-IR through numba-cuda (the only stage that imports numba, with
:mod:`.numba_device`, :mod:`.numba_state` and :mod:`.numba_structs`).

The user's function is wrapped in a generated ``extern "C"`` device function with a
pointer ABI (``void name(T* a, T* b, R* out)``): values are loaded through pointers,
the user's function is called, and the result is stored through the last pointer.
Passing pointers keeps struct layouts byte-exact (numba's C ABI flattens structs passed
by value) and costs nothing once nvJitLink's LTO has inlined the call. The callee is
made a device function by :func:`.numba_device.device_function`; an operator that
captures device arrays gets the stateful pointer ABI of :mod:`.numba_state`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from cuprims._operators.numba_device import device_function, import_numba, target_capability
from cuprims._operators.numba_shims import recording_cu_compiles, mergeable_shims
from cuprims._operators.numba_state import array_type, capture_call, captures_of, state_array, stateful_target
from cuprims._value_types import ValueType, numba_type_name
from cuprims.errors import OperatorCompileError

# import_numba stays importable from here for coop/
__all__ = ["compile_python_op", "compile_state_op", "infer_result_dtype", "import_numba", "numba_version"]


def _loader(vt: ValueType, ptr: str) -> str:
    if vt.numba is not None:          # a numba extension type: its pointer loads it
        return f"{ptr}[0]"
    if vt.is_struct:
        from cuprims._operators.numba_structs import load_expression

        return load_expression(vt, ptr)
    if vt.code == "b1":
        return f"({ptr}[0] != 0)"
    return f"{ptr}[0]"


def _storer(vt: ValueType, ptr: str, value: str) -> str:
    if vt.numba is not None:
        return f"{ptr}[0] = {value}"
    if vt.is_struct:
        from cuprims._operators.numba_structs import store_statement

        return store_statement(vt, ptr, value)
    if vt.code == "b1":
        return f"{ptr}[0] = 1 if {value} else 0"
    return f"{ptr}[0] = {value}"


def _pointer_type(vt: ValueType):
    _, types, _ = import_numba()
    if vt.numba is not None:
        return types.CPointer(vt.numba)
    if vt.is_struct:
        return types.voidptr
    if vt.code == "b1":
        return types.CPointer(types.uint8)
    return types.CPointer(getattr(types, numba_type_name(vt)))


# ------------------------------------------------------------------ compiling

def compile_python_op(fn: Callable, arg_types: Sequence[ValueType], result_type: ValueType | None,
                      abi_name: str, cc: tuple[int, int], *, ignores_result: bool = False, op_name: str = "op",
                      captures: Any = None, argument: str | None = None, context: str = "") -> list[bytes]:
    """LTO-IR of ``void abi_name(A0* a0, ..., R* out)`` that stores ``fn(*a)`` in ``*out``,
    followed by the LTO-IR of any support code numba links beside it (float16
    arithmetic, for instance, calls C++ shims that numba compiles with NVRTC).

    ``result_type`` None means the result is stored as a bool flag byte (predicates);
    ``ignores_result``: ``fn`` is called for its side effects and its result (None, or any
    value) is dropped; ``out`` is still a parameter, never written.
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
    signature_text = operator_signature(arg_types, out_vt, result_dropped=ignores_result)
    captures = captures_of(fn, captures)
    values = [_loader(vt, p) for vt, p in zip(arg_types, args)]
    namespace: dict[str, Any] = {}
    if captures:
        target = stateful_target(fn, captures, op_name, signature_text, argument, context)
        arrays, word = [], 0
        for i, cap in enumerate(captures):
            namespace[f"__cuprims_cap{i}"] = state_array(word, cap.dtype, cap.ndim)
            arrays.append(f"__cuprims_cap{i}(ps)")
            word += 1 + cap.ndim
        call = capture_call(captures, values, arrays)
        params = ["ps"] + args + ["pr"]
    else:
        target = fn
        call = f"__user({', '.join(values)})"
        params = args + ["pr"]
    if out_vt is not None and out_vt.numba is not None and _takes_result_pointer(fn, len(args)):
        # the established interface's operators of extension types: op(result_ptr, a_ptr, b_ptr)
        store = f"__user(pr, {', '.join(args)})"
    elif ignores_result:
        store = call
    elif out_vt is None:
        store = f"pr[0] = 1 if {call} else 0"
    else:
        store = _storer(out_vt, "pr", call)
    src = f"def __cuprims_wrapper({', '.join(params)}):\n    {store}\n"
    try:
        with target_capability(tuple(cc)):
            namespace["__user"] = device_function(target, {})
            if any(vt.is_struct for vt in list(arg_types) + ([out_vt] if out_vt else [])):
                from cuprims._operators.numba_structs import wrapper_namespace

                namespace.update(wrapper_namespace())
            exec(compile(src, f"<cuprims wrapper of {op_name}>", "exec"), namespace)
            wrapper = namespace["__cuprims_wrapper"]
            ptr_types = [types.voidptr] if captures else []
            ptr_types += [_pointer_type(vt) for vt in arg_types]
            ptr_types.append(_pointer_type(out_vt) if out_vt is not None else types.CPointer(types.uint8))
            with recording_cu_compiles() as compiled:
                codes, _ = cuda.compile_all(wrapper, types.void(*ptr_types), device=True, abi="c",
                                            abi_info={"abi_name": abi_name}, output="ltoir", cc=tuple(cc))
    except OperatorCompileError:
        raise
    except Exception as exc:  # numba raises many kinds; all mean "your operator did not compile"
        # a result of a refused type explains a store numba could not type better than numba does
        if not ignores_result:
            _check_user_result(namespace.get("__user"), arg_types, out_vt, op_name, argument, context)
        raise OperatorCompileError(op_name, signature_text, exc, argument=argument, context=context) from exc
    if not ignores_result:
        _check_user_result(namespace["__user"], arg_types, out_vt, op_name, argument, context)
    return mergeable_shims(codes, tuple(cc), _code_bytes, compiled)


def _takes_result_pointer(fn: Callable, operands: int) -> bool:
    """Whether ``fn`` takes a pointer to its result before its ``operands`` (as operators of
    numba extension types do in the established cooperative interface)."""
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) == operands + 1


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

    if out_vt is not None and out_vt.numba is not None:
        return                        # numba types the store into an extension type's pointer itself
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
    if captures_of(fn, None):
        raise OperatorCompileError(op_name, signature_text, TypeError(
            "the function captures device arrays; give it what it needs through its state array instead"))
    call = f"__user(__cuprims_state(ps), {', '.join(_loader(vt, p) for vt, p in zip(arg_types, args))})"
    src = f"def __cuprims_wrapper(ps, {', '.join(args)}, pr):\n    {_storer(result_type, 'pr', call)}\n"
    namespace: dict[str, Any] = {"__cuprims_state": state_array(0, state_type.dtype, 1)}
    try:
        with target_capability(tuple(cc)):
            namespace["__user"] = device_function(fn, {})
            if any(vt.is_struct for vt in (*arg_types, result_type)):
                from cuprims._operators.numba_structs import wrapper_namespace

                namespace.update(wrapper_namespace())
            exec(compile(src, f"<cuprims wrapper of {op_name}>", "exec"), namespace)
            ptr_types = [types.voidptr] + [_pointer_type(vt) for vt in (*arg_types, result_type)]
            with recording_cu_compiles() as compiled:
                codes, _ = cuda.compile_all(namespace["__cuprims_wrapper"], types.void(*ptr_types), device=True,
                                            abi="c", abi_info={"abi_name": abi_name}, output="ltoir",
                                            cc=tuple(cc))
    except OperatorCompileError:
        raise
    except Exception as exc:  # numba raises many kinds; all mean "your function did not compile"
        raise OperatorCompileError(op_name, signature_text, exc) from exc
    return mergeable_shims(codes, tuple(cc), _code_bytes, compiled)


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
    if any(vt.numba is not None for vt in arg_types):
        raise OperatorCompileError(op_name, signature_text, TypeError(
            "the result type of an operator on a numba extension type cannot be inferred: give value_type="),
            argument=argument)
    captures = captures_of(fn, captures)
    scalar_types = tuple(_argument_type(vt) for vt in arg_types)
    try:
        with target_capability((9, 0)):
            if captures:
                # a Python caller taking the arrays first, for compile_device's positional types
                arrays = [f"c{i}" for i in range(len(captures))]
                values = [f"a{i}" for i in range(len(arg_types))]
                namespace: dict[str, Any] = {"__user": device_function(
                    stateful_target(fn, captures, op_name, signature_text, argument), {})}
                exec(compile(f"def __cuprims_infer({', '.join(arrays + values)}):\n"
                             f"    return {capture_call(captures, values, arrays)}\n",
                             f"<cuprims caller of {op_name}>", "exec"), namespace)
                dispatcher = cuda.jit(device=True)(namespace["__cuprims_infer"])
                result = dispatcher.compile_device(
                    tuple(array_type(c.dtype, c.ndim) for c in captures) + scalar_types)
            else:
                dispatcher = device_function(fn, {})
                result = dispatcher.compile_device(scalar_types)
        return _result_dtype(result.signature.return_type, numpy_support)
    except OperatorCompileError:
        raise
    except Exception as exc:  # noqa: BLE001 - numba raises many kinds
        raise OperatorCompileError(op_name, signature_text, exc, argument=argument) from exc


def _argument_type(vt: ValueType) -> Any:
    """The numba type an operator's argument of ``vt`` has: a struct arrives as a record."""
    _, types, _ = import_numba()
    if vt.is_struct:
        from numba.cuda.np.numpy_support import from_dtype

        return from_dtype(vt.dtype)
    return getattr(types, numba_type_name(vt))


def _result_dtype(result: Any, numpy_support: Any) -> np.dtype:
    """The dtype of a value of numba type ``result``: a value built by calling a gpu_struct
    class (a named tuple numba knows as the struct's) is of the struct's dtype."""
    struct_dtype = getattr(getattr(result, "instance_class", None), "_cuprims_dtype", None)
    if isinstance(struct_dtype, np.dtype):
        return struct_dtype
    return np.dtype(numpy_support.as_dtype(result))
