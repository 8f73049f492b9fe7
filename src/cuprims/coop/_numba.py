"""numba-cuda pieces both styles use: link inputs, entry point declarations, and the
intrinsics that hand a provider its pointers.

numba-cuda 0.30.4 offers ``cuda.declare_device(name, sig, abi="c")``: it registers a
typing template and a lowering that emits a call of an external function ``name``
under the C ABI. Each provider entry point is declared with pointer arguments (and
``int32`` counts); the caller (a Style 1 device function, a Style 2 helper) puts the
thread's values in local arrays and passes their addresses. nvJitLink's LTO inlines the
provider.

numba keeps a kernel's link inputs in a set, so equal units hand out the *same*
``LTOIR`` objects (:func:`link_files`) and each is linked once: a Python operator's
LTO-IR (a strong symbol numba defines) linked twice would be "multiply defined". The
provider's own definitions are inline (linkonce_odr) besides: linked twice, one is kept.
"""

from __future__ import annotations

from typing import Any, Sequence

from cuprims._operators.numba_ops import import_numba
from cuprims._value_types import ValueType

_addr_fn = None
_files: dict[tuple[str, ...], list] = {}


def link_files(symbol: str, codes: Sequence[bytes]) -> list:
    """``numba.cuda.LTOIR`` objects for ``codes``: the same objects for the same codes."""
    import hashlib

    key = (symbol,) + tuple(hashlib.sha256(c).hexdigest() for c in codes)
    files = _files.get(key)
    if files is None:
        cuda, _, _ = import_numba()
        if len(_files) >= 4096:
            _files.clear()
        files = _files[key] = [cuda.LTOIR(code, name=f"{symbol}_{i}.ltoir") for i, code in enumerate(codes)]
    return list(files)


def addr():
    """An intrinsic ``(array) -> pointer to its first element`` (numba has ``ffi.from_buffer``
    only with cffi installed, and the pointer must be typed for the C ABI)."""
    global _addr_fn
    if _addr_fn is None:
        _, types, _ = import_numba()
        from numba.cuda.extending import intrinsic

        @intrinsic
        def cuprims_coop_addr(typingctx, arr):
            if not isinstance(arr, types.Array):
                return None

            def codegen(context, builder, sig, args):
                return context.make_array(sig.args[0])(context, builder, args[0]).data

            return types.CPointer(arr.dtype)(arr), codegen

        _addr_fn = cuprims_coop_addr
    return _addr_fn


def emit_trap(builder) -> None:
    """``llvm.trap`` at the builder's position: the kernel stops with an error."""
    from llvmlite import ir as llvm
    from numba.cuda import cgutils

    fn = cgutils.get_or_insert_function(builder.module, llvm.FunctionType(llvm.VoidType(), []), "llvm.trap")
    builder.call(fn, [])


def trap_if(builder, bad) -> None:
    """A trap when the ``i1`` value ``bad`` is true (an unlikely branch)."""
    from numba.cuda import cgutils

    with cgutils.if_unlikely(builder, bad):
        emit_trap(builder)


_state_fns: dict[Any, Any] = {}


def state_pointer(nbtype: Any = None):
    """An intrinsic ``(array) -> void*`` of the data of a block prefix callback's state: a
    1-D C-contiguous array (of ``nbtype`` when given; typing fails otherwise, saying so)."""
    fn = _state_fns.get(nbtype)
    if fn is not None:
        return fn
    _, types, _ = import_numba()
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    def cuprims_coop_state(typingctx, arr):
        if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.layout == "C"
                and (nbtype is None or arr.dtype == nbtype)):
            of = f" of {nbtype}" if nbtype is not None else ""
            raise TypingError(f"prefix_state must be a 1-D C-contiguous array{of} (the block prefix callback's "
                              f"state, e.g. cuda.local.array(1, ...)), got {arr}")

        def codegen(context, builder, sig, args):
            data = context.make_array(sig.args[0])(context, builder, args[0]).data
            return builder.bitcast(data, context.get_value_type(types.voidptr))

        return types.voidptr(arr), codegen

    fn = _state_fns[nbtype] = intrinsic(cuprims_coop_state)
    return fn


def numba_type(vt: ValueType):
    """The numba type of ``vt``'s values: a numba extension type's own, else its dtype's."""
    if vt.numba is not None:
        return vt.numba
    _, types, _ = import_numba()
    from numba.cuda.np.numpy_support import from_dtype

    return from_dtype(vt.dtype)


def declare(symbol: str, params: Sequence[str], vt: ValueType, values: ValueType | None = None):
    """``cuda.declare_device`` of ``void symbol(...)``; ``params`` are "ptr" (to ``vt``),
    "vptr" (to ``values``, a sort's value type), "int" (int32), "i64", "i64ptr" (to an
    int64), "void*" (a uint8 array's data: temporary storage) or "state" (``voidptr``: a
    prefix callback's state)."""
    cuda, types, _ = import_numba()
    t = numba_type(vt)
    kinds = {"ptr": types.CPointer(t), "int": types.int32, "i64": types.int64, "i64ptr": types.CPointer(types.int64),
             "void*": types.CPointer(types.uint8), "state": types.voidptr}
    if values is not None:
        kinds["vptr"] = types.CPointer(numba_type(values))
    return cuda.declare_device(symbol, types.void(*[kinds[p] for p in params]), abi="c")
