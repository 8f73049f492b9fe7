"""``coop.ThreadData(n)``: a thread's ``n`` items, whose element type is inferred from use.

numba must type a value where it is created, and ``ThreadData(4)`` names no type. The
front-end rewrite (:mod:`.rewrite`) therefore rewrites the creation before type
inference:

* ``ThreadData(n, dtype=t)`` -> ``_local_array(n, <t>)``;
* ``ThreadData(n)`` -> ``_thread_data_like(n, w)``, where ``w`` is a *witness* of the
  element type defined before the creation: the source array of the first
  ``coop.load`` into it (else the destination of a ``coop.store`` from it, else another
  ``ThreadData`` it is scanned or exchanged with). The witness may be the array itself
  or, when that is made later (``x[base:]``), the array it is indexed or sliced from,
  back to a kernel argument or a global (:func:`witness`);
* no witness: :class:`~cuprims.errors.CoopError` asking for ``dtype=``.

``n`` must be a compile-time constant (a literal, a global, a closure variable).

The items are a local array aligned for the C++ type the provider reads them as
(``cuda::std::complex<float>`` wants 8 bytes where numba's complex64 has 4).

Example::

    items = coop.ThreadData(4)                 # float32, from x below
    coop.load(block, x[base:], items)
    pairs = coop.ThreadData(2, dtype=pair_dtype)
"""

from __future__ import annotations

import copy
from typing import Any

from numba import types
from numba.cuda import cgutils
from numba.cuda.core import ir
from numba.cuda.extending import intrinsic
from numba.cuda.np.numpy_support import as_dtype, from_dtype

from cuprims._value_types import ValueType
from cuprims.coop._numba import emit_trap
from cuprims.coop._spec import element_type
from cuprims.coop._style2 import ir as _ir
from cuprims.coop._style2.nbtypes import StaticType, Stub, ThreadDataType
from cuprims.errors import ArgumentError, CoopError


@Stub
def ThreadData(items_per_thread, /, *, dtype=None):  # noqa: N802  (a type-like name, as in the interface)
    """A thread's ``items_per_thread`` items (a local array; ``items_per_thread`` a
    compile-time constant), of ``dtype`` or, without it, of the element type of the
    array the first ``coop.load`` into it reads (see :mod:`cuprims.coop._style2.thread_data`).

    Example::

        items = coop.ThreadData(4)
        coop.load(block, x[cuda.blockIdx.x * 512:], items)
        items[0] += 1
    """


def vt_of(nbtype: Any, argument: str) -> ValueType:
    """The :class:`ValueType` of a numba scalar or record type."""
    try:
        dtype = as_dtype(types.unliteral(nbtype))
    except Exception:   # numba raises NumbaNotImplementedError for types with no dtype
        raise ArgumentError(argument, "a number, bool, complex or struct (record) element", nbtype) from None
    return element_type(dtype, argument)


def numba_dtype(vt: ValueType) -> Any:
    return from_dtype(vt.dtype)


def _allocate(context: Any, builder: Any, aryty: ThreadDataType) -> Any:
    from numba.cuda.cudadrv import nvvm
    from numba.cuda.cudaimpl import _generic_array

    natural = context.get_abi_alignment(context.get_data_type(aryty.dtype))
    align = max(natural, vt_of(aryty.dtype, "items").alignment)
    return _generic_array(context, builder, (aryty.count,), aryty.dtype, "cuprims_coop_items",
                          nvvm.ADDRSPACE_LOCAL, alignment=1 << (align - 1).bit_length())


def _count(count: Any) -> int | None:
    if isinstance(count, types.IntegerLiteral) and count.literal_value > 0:
        return count.literal_value
    return None


@intrinsic
def _local_array(typingctx: Any, count: Any, static: Any) -> Any:
    n = _count(count)
    if n is None or not isinstance(static, StaticType):
        return None
    aryty = ThreadDataType(numba_dtype(static.value), n)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return _allocate(context, builder, sig.return_type)

    return aryty(count, static), codegen


@intrinsic
def _thread_data_like(typingctx: Any, count: Any, witness: Any) -> Any:
    n = _count(count)
    if n is None:
        return None
    dtype = witness.dtype if isinstance(witness, types.Array) else types.unliteral(witness)
    vt_of(dtype, "coop.ThreadData's element type (inferred)")
    aryty = ThreadDataType(dtype, n)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return _allocate(context, builder, sig.return_type)

    return aryty(count, witness), codegen


@intrinsic
def _zero_fill(typingctx: Any, arr: Any) -> Any:
    """Set every byte of a ThreadData to 0 (a default for any element type, structs too)."""
    if not isinstance(arr, ThreadDataType):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        nbytes = context.get_abi_sizeof(context.get_data_type(sig.args[0].dtype)) * sig.args[0].count
        cgutils.memset(builder, ary.data, context.get_constant(types.intp, nbytes), 0)
        return context.get_dummy_value()

    return types.none(arr), codegen


@intrinsic
def _trap(typingctx: Any) -> Any:
    """``trap;``: the kernel stops with an error (what an out-of-range count calls, rather
    than let CUB read or write past an array)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        emit_trap(builder)
        return context.get_dummy_value()

    return types.none(), codegen


# ---------------------------------------------------------------- dtype inference (IR)

def witness(func_ir: Any, dom: _ir.Dominance, var: Any, block: Any, stmt: Any) -> Any:
    """A variable defined before ``stmt`` (in ``block``) whose type gives ``var``'s
    element type, else None. Follows copies, indexing and slicing back to a value that
    is defined early enough, or to an argument/global/constant, copied before ``stmt``."""
    at = dom.position(stmt)
    for _ in range(32):
        found = _ir.defining_statement(func_ir, var.name)
        if found is None:
            return None
        label, defn, index = found
        if dom.before((label, index), at):
            return var
        value = defn.value
        if isinstance(value, (ir.Arg, ir.Global, ir.FreeVar, ir.Const)):
            return _ir.insert_before(func_ir, block, stmt, copy.copy(value), "$coop_like")
        if isinstance(value, ir.Var):
            var = value
        elif (isinstance(value, ir.Expr) and value.op in ("getitem", "static_getitem")
              and not isinstance(getattr(value, "index", None), str)):   # a record field has its own type
            var = value.value
        else:
            return None
    return None


def rewrite_creation(func_ir: Any, block: Any, stmt: Any, count: int, dtype: Any, witnesses: list,
                     dom: _ir.Dominance) -> None:
    """Rewrite one ``ThreadData(count[, dtype=])`` statement (see the module)."""
    from cuprims.coop._style2.nbtypes import Static

    count_var = _ir.const_var(func_ir, block, stmt, count)
    if dtype is not _ir.MISSING:
        vt = element_type(dtype, "dtype")
        holder = _ir.global_var(func_ir, block, stmt, Static(("dtype", vt.code), vt), "$coop_dtype")
        fn = _ir.global_var(func_ir, block, stmt, _local_array, "_local_array")
        _ir.replace_value(func_ir, stmt, ir.Expr.call(fn, [count_var, holder], (), stmt.loc))
        return
    for candidate in witnesses:
        w = witness(func_ir, dom, candidate, block, stmt)
        if w is not None:
            fn = _ir.global_var(func_ir, block, stmt, _thread_data_like, "_thread_data_like")
            _ir.replace_value(func_ir, stmt, ir.Expr.call(fn, [count_var, w], (), stmt.loc))
            return
    raise CoopError(
        f"coop.ThreadData({count}) at {_ir.where(stmt.loc)}: its element type cannot be inferred (it is "
        "inferred from the source array of a coop.load into it, made before the ThreadData or indexed "
        "from an argument or global): pass dtype=, e.g. coop.ThreadData(4, dtype=numba.float32)")
