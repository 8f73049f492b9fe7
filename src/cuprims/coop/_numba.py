"""What numba-cuda sees: a device function per primitive that calls the provider.

numba-cuda 0.30.4 offers ``cuda.declare_device(name, sig, abi="c")``: it registers a
typing template and a lowering that emits a call of an external function ``name``
under the C ABI. We declare each provider entry point with pointer arguments (and an
``int32`` count), then generate a small Python device function (exec'd from text, as
:mod:`cuprims._operators.numba_ops` builds its wrappers) that puts the thread's values in
local arrays, passes their addresses and reads the result back. numba inlines that
function into the user's kernel; nvJitLink's LTO then inlines the provider itself.

The link inputs are *not* given to ``declare_device``: they travel as the primitive's
``files`` for ``@cuda.jit(link=...)``. numba keeps a kernel's link inputs in a set, so
equal primitives hand out the *same* ``LTOIR`` objects (:func:`link_files`) and each is
linked once: a Python operator's LTO-IR (a strong symbol numba defines) linked twice
would be "multiply defined". The provider's own definitions are weak besides.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable, Sequence

from cuprims._operators.numba_ops import import_numba
from cuprims.types import ValueType

_addr_fn = None
_oob_fn = None
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


_pending: dict[int, list] = {}


def pending_files(symbol: str, unit: Future) -> list:
    """The link input of a unit still being built: a ``numba.cuda.LTOIR`` whose bytes are
    the unit's LTO-IR, waited for when numba reads them (at the kernel's link). The same
    object for the same build, as :func:`link_files` gives."""
    files = _pending.get(id(unit))
    if files is None:
        cuda, _, _ = import_numba()

        class PendingLTOIR(cuda.LTOIR):
            @property
            def data(self) -> bytes:
                from cuprims.coop._build import result_of

                return result_of(unit).ltoir

        if len(_pending) >= 4096:
            _pending.clear()
        files = _pending[id(unit)] = [PendingLTOIR(b"", name=f"{symbol}_0.ltoir")]
    return list(files)


def _addr():
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


def _short_or_strided(context, builder, aryty, ary, need):
    """``i1``: ``ary`` (of numba type ``aryty``) holds fewer than ``need`` elements, or not
    in C order. A C- or F-layout array has no stride check (numba knows it is contiguous);
    a dimension of one element may have any stride."""
    _, types, _ = import_numba()
    from numba.cuda import cgutils

    intp = context.get_value_type(types.intp)
    bad = builder.icmp_signed("<", ary.nitems, need)
    if aryty.layout not in ("C", "F") and aryty.ndim:
        shape = cgutils.unpack_tuple(builder, ary.shape, aryty.ndim)
        strides = cgutils.unpack_tuple(builder, ary.strides, aryty.ndim)
        expected = ary.itemsize
        for dim in reversed(range(aryty.ndim)):
            off = builder.and_(builder.icmp_signed("!=", strides[dim], expected),
                               builder.icmp_signed(">", shape[dim], intp(1)))
            bad = builder.or_(bad, off)
            expected = builder.mul(expected, shape[dim])
    return bad


_span_fn = None


def _span():
    """An intrinsic ``(array, count) -> pointer to its first element`` that traps (``trap;``)
    unless the array holds at least ``count`` elements in C order: a Style 1 call hands CUB
    a bare pointer, so a tile longer than ``src``, a thread array shorter than the
    primitive's items or a strided view would otherwise be read or written past its end.
    With constant shapes (local arrays) the whole check folds away."""
    global _span_fn
    if _span_fn is None:
        _, types, _ = import_numba()
        from numba.cuda.extending import intrinsic

        @intrinsic
        def cuprims_coop_span(typingctx, arr, count):
            if not isinstance(arr, types.Array) or not isinstance(count, types.Integer):
                return None

            def codegen(context, builder, sig, args):
                ary = context.make_array(sig.args[0])(context, builder, args[0])
                need = context.cast(builder, args[1], sig.args[1], types.intp)
                trap_if(builder, _short_or_strided(context, builder, sig.args[0], ary, need))
                return ary.data

            return types.CPointer(arr.dtype)(arr, count), codegen

        _span_fn = cuprims_coop_span
    return _span_fn


def temp_storage_pointer(layout: Callable[[], tuple[int, int]]):
    """An intrinsic ``(temp_storage) -> uint8 pointer`` that traps unless the caller's
    storage (a uint8 array) holds the provider's TempStorage: ``layout()`` gives its bytes
    and alignment. ``layout`` is asked when a call that passes ``temp_storage`` is typed
    (it waits for a build still running: a call without storage never asks, so its
    provider still builds beside numba's compile of the kernel)."""
    _, types, _ = import_numba()
    from numba.cuda.extending import intrinsic

    @intrinsic
    def cuprims_coop_temp(typingctx, arr):
        if not (isinstance(arr, types.Array) and arr.dtype == types.uint8):
            return None
        nbytes, align = layout()

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            intp = context.get_value_type(types.intp)
            bad = _short_or_strided(context, builder, sig.args[0], ary, intp(nbytes))
            address = builder.ptrtoint(ary.data, intp)
            bad = builder.or_(bad, builder.icmp_unsigned("!=", builder.urem(address, intp(align)), intp(0)))
            trap_if(builder, bad)
            return ary.data

        return types.CPointer(types.uint8)(arr), codegen

    return cuprims_coop_temp


def _oob_check():
    """An intrinsic ``(num_valid, oob_default) -> None`` that fails typing when a partial
    sort is asked for without ``oob_default``: CUB's merge sort pads the tile past
    ``num_valid`` with that key, which must be ordered after every valid key, and only the
    caller knows one. ``num_valid`` left out is typed as the literal -1 (the full tile)."""
    global _oob_fn
    if _oob_fn is None:
        _, types, _ = import_numba()
        from numba.core.errors import TypingError
        from numba.cuda.extending import intrinsic

        @intrinsic
        def cuprims_coop_oob_given(typingctx, num_valid, oob_default):
            left_out = getattr(num_valid, "literal_value", None)
            if isinstance(oob_default, types.NoneType) and not (isinstance(left_out, int) and left_out < 0):
                raise TypingError("a sort given num_valid needs oob_default too: a key ordered after every "
                                  "valid key (CUB's merge sort pads the tile past num_valid with it)")

            def codegen(context, builder, sig, args):
                return context.get_dummy_value()

            return types.none(num_valid, oob_default), codegen

        _oob_fn = cuprims_coop_oob_given
    return _oob_fn


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
    _, types, _ = import_numba()
    from numba.cuda.np.numpy_support import from_dtype

    return from_dtype(vt.dtype)


def declare(symbol: str, params: Sequence[str], vt: ValueType, values: ValueType | None = None):
    """``cuda.declare_device`` of ``void symbol(...)``; ``params`` are "ptr" (to ``vt``),
    "vptr" (to ``values``, a sort's value type), "int" (int32), "i64", "void*" (a uint8
    array's data: temporary storage) or "state" (``voidptr``: a prefix callback's state)."""
    cuda, types, _ = import_numba()
    t = numba_type(vt)
    kinds = {"ptr": types.CPointer(t), "int": types.int32, "i64": types.int64,
             "void*": types.CPointer(types.uint8), "state": types.voidptr}
    if values is not None:
        kinds["vptr"] = types.CPointer(numba_type(values))
    return cuda.declare_device(symbol, types.void(*[kinds[p] for p in params]), abi="c")


def device_function(name: str, source: str, namespace: dict[str, Any]):
    """Exec ``source`` (defining ``name``) and make it a numba device function."""
    cuda, _, _ = import_numba()
    ns = {"cuda": cuda, "__addr": _addr(), "__span": _span(), "__oob_given": _oob_check(), "__state": state_pointer(),
          **namespace}
    exec(compile(source, f"<cuprims coop {name}>", "exec"), ns)
    from numba import types

    if isinstance(namespace.get("T"), types.Record):
        # a record is returned as a pointer to its bytes, which would live in this function's
        # local array: once LLVM inlines the function that slot is dead after the call and is
        # reused by the next one. Inlined at numba's IR level instead, the array is the
        # caller's own, alive as long as the caller's frame.
        return cuda.jit(device=True, inline="always")(ns[name])
    return cuda.jit(device=True, forceinline=True)(ns[name])


class Primitive:
    """A cooperative primitive, called inside a ``@cuda.jit`` kernel.

    ``files`` are its link inputs (``@cuda.jit(link=prim.files)``); ``temp_storage_bytes``
    and ``temp_storage_alignment`` (CUB's alignment, at least 8 as numba requires) describe
    the TempStorage a caller may pass instead of the primitive's own shared memory:
    ``temp_storage=cuda.shared.array(nbytes, numba.uint8, alignment=align)``.
    """

    def __init__(self, name: str, device: Any, unit: Any, spec: Any):
        self.name = name
        self.spec = spec
        self._device = device
        self._unit = unit          # a coop._build.UnitBuild, or a Future of one (build_unit_soon)

    def _built(self) -> Any:
        unit = self._unit
        if isinstance(unit, Future):
            from cuprims.coop._build import result_of

            unit = self._unit = result_of(unit)    # a failed build raises its error here
        return unit

    @property
    def files(self) -> list:
        unit = self._unit
        if isinstance(unit, Future) and not unit.done():
            # one LTO-IR (the providers: no Python functions), read when numba links
            return pending_files(self.spec.symbol, unit)
        return link_files(self.spec.symbol, self._built().codes)

    @property
    def temp_storage_bytes(self) -> int:
        return self._built().temp[self.spec.symbol][0]

    @property
    def temp_storage_alignment(self) -> int:
        # numba's shared arrays take alignments that are multiples of the pointer size only
        return max(8, self._built().temp[self.spec.symbol][1])

    @property
    def _numba_type_(self):
        # numba types a global by this attribute: the kernel then calls our device function
        return self._device._numba_type_

    # numba's IR inliner takes any global with these two (a dispatcher's) for a function to
    # inline; only the record-typed primitives' device functions ask for it (device_function)
    @property
    def targetoptions(self) -> dict:
        if self._device.targetoptions.get("inline") != "always":
            raise AttributeError("targetoptions")
        return self._device.targetoptions

    @property
    def py_func(self) -> Any:
        if self._device.targetoptions.get("inline") != "always":
            raise AttributeError("py_func")
        return self._device.py_func

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{self.name} is a cooperative primitive: call it inside a @cuda.jit kernel "
                        "linked with its .files")

    def __repr__(self) -> str:
        """The primitive, its item type, block or warp shape, items per thread and choices:
        ``<cuprims.coop block.sum: float32, block (128, 1, 1), 1 item per thread,
        algorithm=warp_reductions, op=OpKind.PLUS>``."""
        from cuprims.op import shown_operator
        from cuprims.types import shown_dtype

        spec = self.spec
        shape = f"warp of {spec.dims[0]}" if self.name.startswith("warp.") else f"block {spec.dims}"
        parts = [shown_dtype(spec.vt.dtype), shape, f"{spec.items} item{'s' if spec.items != 1 else ''} per thread"]
        if spec.values is not None:
            parts.append(f"values {shown_dtype(spec.values.dtype)}")
        parts += [f"{label}={value}" for label, value in (("algorithm", spec.algorithm), ("mode", spec.mode))
                  if value]
        for label, op in (("op", spec.op), ("prefix_op", spec.prefix)):
            if op is not None:
                parts.append(f"{label}={shown_operator(op)}")
        return f"<cuprims.coop {self.name}: {', '.join(parts)}>"
