"""What a record's Style 2 planner works with: the call's :class:`CallOptions`, the
:class:`Plan` it returns, and the checks of its operands' numba types.

A planner is ``planner(record, options, group, *operands) -> Plan`` (a record's
:class:`~cuprims.coop._records.Call`): the operands and runtime options in its stub's
order, ``none`` where left out, ``temp_storage`` taken off (:mod:`.plans` handles it for
every call).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import types

from cuprims.coop._spec import ProviderSpec, algorithm_of
from cuprims.coop._style2.nbtypes import ThreadDataType, WarpGroupType
from cuprims.coop._style2.thread_data import numba_dtype, vt_of
from cuprims.errors import ArgumentError, CoopError

NONE = types.none


class CallOptions:
    """A call's primitive, compile-time options (name -> value) and source position."""

    def __init__(self, primitive: str, options: dict[str, Any], where: str):
        self.primitive, self.options, self.where = primitive, options, where

    def key(self) -> Any:
        def value_key(v: Any) -> Any:
            if isinstance(v, float):
                return ("float", repr(v))      # 0.0 and -0.0 are different initial values
            if v is None or isinstance(v, (str, int, bool)):
                return (type(v).__name__, v)
            return (type(v).__qualname__, id(v))   # held by the options' type, so the id stays unique
        return ("call", self.primitive, tuple(sorted((k, value_key(v)) for k, v in self.options.items())),
                self.where)


@dataclass(frozen=True)
class Plan:
    """``spec``: the provider. ``op``: its Python operator (for build_unit), or None.
    ``variant``: which device helper calls it (:mod:`.helpers`); ``slots``: the helper's
    arguments, each an operand index (0..4) or ``("const", type, value)`` / ``("null",
    type)`` standing for an option left out, the last one the caller's temporary storage
    (``("none",)`` without it); ``limit``: the largest valid count. ``temp``: the call
    passes ``temp_storage=`` (checked by the lowering: size, alignment, stride)."""

    spec: ProviderSpec
    op: Any
    return_type: Any
    variant: str
    slots: tuple
    limit: int = 0
    check_stride: bool = False
    temp: bool = False
    prefix_op: Any = None     # a scan's block prefix callback (the Python function), for build_unit


def absent(t: Any) -> bool:
    return t is None or isinstance(t, types.NoneType)


def fail(o: CallOptions, message: str) -> CoopError:
    return CoopError(f"coop.{o.primitive}() at {o.where}: {message}")


def dims(group: Any) -> tuple[int, int, int]:
    """A provider's shape: the block's, or (lanes, 1, 1) for a warp."""
    return (group.threads, 1, 1) if isinstance(group, WarpGroupType) else group.dims


def algorithm(record: Any, o: CallOptions, default: str) -> str:
    """``algorithm=``, checked against the record's names; a primitive with one algorithm
    (a warp's) takes only the default."""
    if record.algorithms is None:
        if o.options["algorithm"] != default:
            raise fail(o, "algorithm= is a block option; warps have one algorithm")
        return ""
    return algorithm_of(record.algorithms, o.options["algorithm"])


def items_of(t: Any, argument: str) -> tuple[Any, int]:
    if not isinstance(t, ThreadDataType):
        raise ArgumentError(argument, "a coop.ThreadData (its length must be known when the kernel compiles)", t)
    return vt_of(t.dtype, argument), t.count


def array_of(t: Any, items: ThreadDataType, argument: str, writable: bool) -> None:
    if not (isinstance(t, types.Array) and t.ndim == 1 and t.dtype == items.dtype
            and (t.mutable or not writable)):
        what = "a writable" if writable else "a"
        raise ArgumentError(argument, f"{what} 1-D array of {items.dtype} (the items' element type)", t)


def integer(t: Any, argument: str) -> None:
    if not isinstance(types.unliteral(t), types.Integer):
        raise ArgumentError(argument, "an integer", t)


def value_of(t: Any, argument: str) -> tuple[Any, int, bool]:
    """(value type, items, is a ThreadData) of an operand that may be either."""
    if isinstance(t, ThreadDataType):
        return vt_of(t.dtype, argument), t.count, True
    if isinstance(types.unliteral(t), (types.Number, types.Boolean, types.Record)):
        return vt_of(t, argument), 1, False
    raise ArgumentError(argument, "a coop.ThreadData or a scalar (number, bool, complex, struct)", t)


def values_of(keys: ThreadDataType, values: Any) -> Any:
    """The value type of a sort of pairs (``values`` as long as ``keys``)."""
    vvt, count = items_of(values, "values")
    if count != keys.count:
        raise ArgumentError("values", f"a coop.ThreadData of {keys.count} items (as many as keys)", values)
    return vvt


def fill_value(oob: Any, items: ThreadDataType) -> None:
    """``oob_default`` must convert to the items' element type."""
    if not (isinstance(types.unliteral(oob), (types.Number, types.Boolean)) or oob == items.dtype):
        raise ArgumentError("oob_default", f"a value convertible to {items.dtype}", oob)


def in_place_or_into(spec: ProviderSpec, obj: Any, items: Any, out: Any) -> Plan:
    if absent(out):
        return Plan(spec, obj, NONE, "in_place", (0,))
    if out != items:
        raise ArgumentError("out", f"a coop.ThreadData like items ({items})", out)
    return Plan(spec, obj, NONE, "into", (0, 1))


def result_type(vt: Any) -> Any:
    """The numba type of a call returning one value of ``vt``."""
    return numba_dtype(vt)


def block_array(t: Any) -> bool:
    """Whether ``t`` is a 1-D C-contiguous array (a block prefix callback's state)."""
    return isinstance(t, types.Array) and t.ndim == 1 and t.layout == "C"


def state_type(t: Any) -> Any:
    return vt_of(t.dtype, "prefix_state")


def int32_constant(value: int) -> tuple:
    """A slot standing for a left-out int option: the helper gets ``value``."""
    return ("const", types.int32, value)
