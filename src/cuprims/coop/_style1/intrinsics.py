"""Style 1's bounds: intrinsics a device function calls before it hands CUB a pointer.

A Style 1 call hands CUB bare pointers, so each array is checked first (a trap, not a
read or write past its end): :func:`span` (a tile, a thread's items),
:func:`temp_storage_pointer` (the caller's storage against the provider's TempStorage, in
shared memory) and, at typing time,
:func:`oob_check` (a partial sort needs its ``oob_default``).
"""

from __future__ import annotations

from typing import Callable

from cuprims._operators.numba_ops import import_numba
from cuprims.coop._numba import trap_if

_oob_fn = None


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


def span():
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
    """An intrinsic ``(temp_storage) -> uint8 pointer``: the caller's storage, its address
    rounded up to the provider's TempStorage alignment. It traps unless the storage lies
    in shared memory and holds the TempStorage from there (``layout()`` gives its bytes
    and alignment; :func:`storage_bytes` is what a caller allocates), and typing fails,
    saying so, on anything but a 1-D uint8 array. ``layout`` is asked when a call that
    passes storage is typed (it waits for a build still running: a call without storage
    never asks, so its provider still builds beside numba's compile of the kernel)."""
    _, types, _ = import_numba()
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    @intrinsic
    def cuprims_coop_temp(typingctx, arr):
        if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.uint8):
            raise TypingError("temp_storage must be a 1-D uint8 array in shared memory "
                              f"(cuda.shared.array(prim.temp_storage_bytes, numba.uint8)), got {arr}")
        nbytes, align = layout()

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            intp = context.get_value_type(types.intp)
            address = builder.ptrtoint(ary.data, intp)
            # a shared uint8 array is only byte-aligned unless its declaration says more
            skip = builder.and_(builder.sub(intp(0), address), intp(align - 1))
            bad = _short_or_strided(context, builder, sig.args[0], ary, builder.add(intp(nbytes), skip))
            bad = builder.or_(bad, builder.not_(_in_shared(builder, ary.data)))
            trap_if(builder, bad)
            return builder.gep(ary.data, [skip])

        return types.CPointer(types.uint8)(arr), codegen

    return cuprims_coop_temp


def storage_bytes(nbytes: int, align: int) -> int:
    """The bytes a caller's storage needs for a TempStorage of ``nbytes`` aligned to
    ``align``, whatever its own alignment: room to round its address up."""
    return nbytes + align - 1


def _in_shared(builder, pointer):
    """``i1``: the generic ``pointer`` addresses shared memory (PTX ``isspacep.shared``)."""
    from llvmlite import ir as llvm
    from numba.cuda import cgutils

    i8p = llvm.IntType(8).as_pointer()
    fn = cgutils.get_or_insert_function(builder.module, llvm.FunctionType(llvm.IntType(1), [i8p]),
                                        "llvm.nvvm.isspacep.shared")
    return builder.call(fn, [builder.bitcast(pointer, i8p)])


_storage_first_fn = None


def storage_first():
    """An intrinsic ``(a, b) -> bool``: array ``a`` lies in shared memory and array ``b``
    does not. It settles, at run time, a call that types both as ``prim(a, b, ...)`` and as
    ``prim(b, ..., temp_storage=a)`` (see :mod:`.call_forms`): the storage is shared
    memory, a thread's items are not."""
    global _storage_first_fn
    if _storage_first_fn is None:
        _, types, _ = import_numba()
        from numba.cuda.extending import intrinsic

        @intrinsic
        def cuprims_coop_storage_first(typingctx, a, b):
            if not (isinstance(a, types.Array) and isinstance(b, types.Array)):
                return None

            def codegen(context, builder, sig, args):
                first = context.make_array(sig.args[0])(context, builder, args[0]).data
                second = context.make_array(sig.args[1])(context, builder, args[1]).data
                return builder.and_(_in_shared(builder, first), builder.not_(_in_shared(builder, second)))

            return types.boolean(a, b), codegen

        _storage_first_fn = cuprims_coop_storage_first
    return _storage_first_fn


def oob_check():
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


_full_tile_fn = None


def full_tile_only():
    """An intrinsic ``(num_valid) -> None`` that fails typing unless ``num_valid`` was left
    out (typed as the literal -1): CUB's right difference of a partial tile takes no
    successor item, so a call giving both cannot be served."""
    global _full_tile_fn
    if _full_tile_fn is None:
        _, types, _ = import_numba()
        from numba.core.errors import TypingError
        from numba.cuda.extending import intrinsic

        @intrinsic
        def cuprims_coop_full_tile_only(typingctx, num_valid):
            left_out = getattr(num_valid, "literal_value", None)
            if not (isinstance(left_out, int) and left_out < 0):
                raise TypingError("tile_successor_item and num_valid exclude each other: CUB's right difference "
                                  "of a partial tile ends at its last valid item, with no successor")

            def codegen(context, builder, sig, args):
                return context.get_dummy_value()

            return types.none(num_valid), codegen

        _full_tile_fn = cuprims_coop_full_tile_only
    return _full_tile_fn
