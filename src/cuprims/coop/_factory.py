"""Shared by the factories: operator and value arguments, and spec -> Primitive.

Each factory describes its primitive as a :class:`ProviderSpec`, builds (or finds) the
provider, declares its entry points to numba-cuda and wraps a generated device function
(its Python text comes from the factory: the calling conventions differ per primitive).
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future
from typing import Any

from cuprims.coop._build import build_unit, build_unit_soon
from cuprims.coop._codegen import entry_points
from cuprims.coop._spec import ProviderSpec
from cuprims.coop._target import current_arch
from cuprims.errors import ArgumentError
from cuprims.op import OpKind, OpSpec, op_spec
from cuprims.types import ValueType, host_bytes

# operator spellings of the established interface
_OPERATOR_NAMES = {"+": OpKind.PLUS, "*": OpKind.MULTIPLIES, "min": OpKind.MINIMUM, "max": OpKind.MAXIMUM,
                   "&": OpKind.BIT_AND, "|": OpKind.BIT_OR, "^": OpKind.BIT_XOR}
_COMPARATOR_NAMES = {"<": OpKind.LESS, ">": OpKind.GREATER}


def combiner(op: Any, vt: ValueType, argument: str) -> OpSpec:
    """A binary operator argument (an OpKind, its name, '+', 'min'..., or a Python callable)."""
    from cuprims._codegen.functors import check_binary_builtin

    if isinstance(op, str) and op in _OPERATOR_NAMES:
        op = _OPERATOR_NAMES[op]
    spec = op_spec(op, argument=argument, bind_captures=True)   # to see (and refuse) captured arrays
    if spec.kind == "raw":
        raise ArgumentError(argument, "an OpKind or a Python callable (RawOp is not supported here yet)", op)
    if spec.kind == "builtin":
        check_binary_builtin(spec, vt, argument)
    if spec.captures:
        raise ArgumentError(argument, "an operator that captures no device arrays", op)
    return _linked(spec)


def comparator(op: Any, vt: ValueType, argument: str) -> OpSpec:
    """A comparator argument (OpKind.LESS / GREATER, their names, '<' / '>', or a Python
    callable ``op(a, b) -> bool``, true when ``a`` goes before ``b``)."""
    from cuprims._codegen.functors import check_comparator_builtin

    if isinstance(op, str) and op in _COMPARATOR_NAMES:
        op = _COMPARATOR_NAMES[op]
    spec = op_spec(op, argument=argument, bind_captures=True)   # to see (and refuse) captured arrays
    if spec.kind == "raw":
        raise ArgumentError(argument, "OpKind.LESS, OpKind.GREATER or a Python callable (RawOp is not supported "
                            "here yet)", op)
    if spec.kind == "builtin":
        check_comparator_builtin(spec, vt, argument)
    if spec.captures:
        raise ArgumentError(argument, "a comparator that captures no device arrays", op)
    return _linked(spec)


def _linked(spec: OpSpec) -> OpSpec:
    """``spec`` compiled by numba and linked, as providers expect (numba is there anyway for
    the kernel calling them): without the C++ translation a small expression has elsewhere."""
    return dataclasses.replace(spec, expr=None) if spec.expr is not None else spec


class PrefixCallback:
    """A block prefix callback whose state array is not of the scan's element type:
    ``coop.block.PrefixCallback(fn, state_dtype)`` as a scan factory's ``prefix_op=``
    (a plain function there means ``PrefixCallback(fn, <the scan's dtype>)``).

    ``fn(state, block_aggregate) -> prefix``: ``state`` is the 1-D array of
    ``state_dtype`` the kernel passes to each scan call (``prefix_state``), which ``fn``
    may read and write; ``block_aggregate`` and the result are of the scan's type.

    Example::

        def prefix(state, aggregate):          # state: int64[:], aggregate: int32
            old = state[0]
            state[0] = old + aggregate
            return old

        scan = coop.block.make_inclusive_sum(numba.int32, 128, 4,
                                             prefix_op=coop.block.PrefixCallback(prefix, numba.int64))
    """

    def __init__(self, fn: Any, state_dtype: Any):
        self.fn = fn
        self.state_dtype = state_dtype

    def __repr__(self) -> str:
        return f"PrefixCallback({getattr(self.fn, '__name__', self.fn)!r}, state_dtype={self.state_dtype!r})"


def prefix_callback(op: Any, vt: ValueType, argument: str, state: ValueType | None = None
                    ) -> tuple[OpSpec, ValueType, Any]:
    """A block prefix callback argument (a Python function ``op(state, block_aggregate)``,
    or a :class:`PrefixCallback`) -> (its OpSpec, its state's element type, the function).
    ``state`` (Style 2: the state array's element type) stands in for a missing state dtype."""
    from cuprims.coop._spec import element_type

    fn, state_dtype = (op.fn, op.state_dtype) if isinstance(op, PrefixCallback) else (op, None)
    if isinstance(fn, (OpKind, str)) or not callable(fn) or isinstance(fn, type):
        raise ArgumentError(argument, "a Python function prefix(state, block_aggregate) -> prefix (or a "
                            "coop.block.PrefixCallback)", op)
    state_vt = (element_type(state_dtype, argument) if state_dtype is not None
                else state if state is not None else vt)
    spec = op_spec(fn, argument=argument, bind_captures=True)
    if spec.kind != "python":
        raise ArgumentError(argument, "a Python function prefix(state, block_aggregate) -> prefix", op)
    if spec.captures:
        raise ArgumentError(argument, "a callback that captures no device arrays (it gets its state array at "
                            "each call)", op)
    return _linked(spec), state_vt, fn


def value_bytes(value: Any, vt: ValueType, argument: str) -> str:
    """``value`` converted to ``vt``, as the comma-separated bytes the provider's C++ holds."""
    return ",".join(str(b) for b in host_bytes(value, vt, argument=argument))


def no_methods(methods: Any) -> None:
    if methods is not None:
        raise NotImplementedError("methods= (user types' construct/assign hooks) is not supported yet: "
                                  "gpu_struct types need none")


def make_primitive(name: str, spec: ProviderSpec, op: Any, entries: dict[str, tuple[str, ...]],
                   source: str, prefix: Any = None) -> Any:
    """Build ``spec``'s provider and return the :class:`Primitive` wrapping ``source``.

    ``op`` is the Python operator (or None), ``prefix`` the Python prefix callback (or None).
    ``entries`` maps a namespace name (``ext``, ``ext_valid``...) to an entry point's
    parameter kinds; ``source`` defines ``prim`` and may use those names, ``T`` (the
    element's numba type), ``V`` (a sort's value type), ``i32``, ``i64``, ``ITEMS`` (items
    per thread), ``TILE`` (the group's items), ``__addr``, ``__span(array, count)`` (the
    address, after a trap unless ``array`` holds ``count`` contiguous elements) and
    ``__state`` (a prefix state's data, checked against the state's element type);
    ``__temp(temp_storage)``, the caller's storage, after a trap unless it holds the
    provider's TempStorage (size and alignment)."""
    from cuprims.coop._numba import Primitive, declare, device_function, numba_type, state_pointer, temp_storage_pointer

    objs = {}
    if spec.op is not None and spec.op.kind == "python":
        objs[spec.op_symbol] = op
    if spec.prefix is not None:
        objs[spec.prefix_symbol] = prefix
    arch = current_arch()
    # providers calling no Python function build on a worker thread, beside numba's compile
    # of the user's kernel (which reads their LTO-IR only when it links); numba compiles
    # Python functions, so those providers build here
    unit = build_unit([spec], arch, objs) if spec.python_ops else build_unit_soon([spec], arch)
    defined = set(entry_points(spec))
    namespace: dict[str, Any] = {"T": numba_type(spec.vt)}
    if spec.values is not None:
        namespace["V"] = numba_type(spec.values)
    if spec.prefix_state is not None:
        namespace["__state"] = state_pointer(numba_type(spec.prefix_state))
    from cuprims._operators.numba_ops import import_numba

    namespace["i32"] = import_numba()[1].int32
    namespace["i64"] = import_numba()[1].int64
    # what a call touches: each thread's items, and the group's tile (a load's or store's
    # array; the count a num_valid is clamped to)
    namespace["ITEMS"], namespace["TILE"] = spec.items, spec.items * spec.threads

    def layout() -> tuple[int, int]:     # (TempStorage bytes, alignment): waits for the build
        from cuprims.coop._build import result_of

        return (result_of(unit) if isinstance(unit, Future) else unit).temp[spec.symbol]

    namespace["__temp"] = temp_storage_pointer(layout)
    for local, params in entries.items():
        symbol = spec.symbol + local[3:]           # "ext_valid_ts" -> SYMBOL_valid_ts
        assert symbol in defined, symbol
        namespace[local] = declare(symbol, params, spec.vt, spec.values)
    device = device_function("prim", source, namespace)
    return Primitive(name, device, unit, spec)


# ---------------------------------------------------------------- device function texts
# A load's or store's first line: ``n``, the elements of its array the call touches (the
# whole tile, or num_valid clamped to it: CUB reads no more, and the int32 it is handed
# cannot wrap)
TOUCHED = "    n = TILE if num_valid < 0 else min(num_valid, TILE)\n"
# Each takes the thread's values, calls the provider through pointers, returns the result.
# ``temp_storage is None`` and ``num_valid < 0`` pick the entry point; numba prunes the
# first at compile time (an omitted argument is typed None).

def dispatch(call: str, args: str, valid: str | None, indent: str = "    ") -> str:
    """Lines calling ``call[_valid][_ts]`` with ``args`` (+ valid) (+ temp storage)."""
    lines = [f"{indent}if temp_storage is None:"]
    if valid is None:
        lines.append(f"{indent}    {call}({args})")
        lines += [f"{indent}else:", f"{indent}    {call}_ts({args}, __temp(temp_storage))"]
        return "\n".join(lines) + "\n"
    lines += [f"{indent}    if num_valid < 0:", f"{indent}        {call}({args})",
              f"{indent}    else:", f"{indent}        {call}_valid({args}, {valid})",
              f"{indent}else:", f"{indent}    if num_valid < 0:",
              f"{indent}        {call}_ts({args}, __temp(temp_storage))",
              f"{indent}    else:", f"{indent}        {call}_valid_ts({args}, {valid}, __temp(temp_storage))"]
    return "\n".join(lines) + "\n"


def value_in_value_out(with_valid: bool) -> str:
    """``prim(item[, num_valid], temp_storage=None) -> value`` (one item per thread)."""
    params = "item, num_valid=-1, temp_storage=None" if with_valid else "item, temp_storage=None"
    return (f"def prim({params}):\n    inp = cuda.local.array(1, T)\n    inp[0] = item\n"
            "    out = cuda.local.array(1, T)\n"
            + dispatch("ext", "__addr(inp), __addr(out)", "i32(min(num_valid, TILE))" if with_valid else None)
            + "    return out[0]\n")


def array_in_value_out() -> str:
    """``prim(items, temp_storage=None) -> value``."""
    return ("def prim(items, temp_storage=None):\n    out = cuda.local.array(1, T)\n"
            + dispatch("ext", "__span(items, ITEMS), __addr(out)", None) + "    return out[0]\n")


def arrays_in_out() -> str:
    """``prim(items_in, items_out, temp_storage=None)`` (the two may be one array)."""
    return "def prim(items_in, items_out, temp_storage=None):\n" + dispatch(
        "ext", "__span(items_in, ITEMS), __span(items_out, ITEMS)", None)


def sort_in_place() -> str:
    """``prim(keys, num_valid=-1, oob_default=None, temp_storage=None)``: ``keys`` sorted
    in place; with ``num_valid >= 0`` only the tile's first ``num_valid`` keys, the rest
    becoming ``oob_default`` (which must then be given)."""
    return ("def prim(keys, num_valid=-1, oob_default=None, temp_storage=None):\n"
            "    __oob_given(num_valid, oob_default)\n"
            "    oob = cuda.local.array(1, T)\n"
            "    if oob_default is not None:\n"
            "        oob[0] = oob_default\n"
            + dispatch("ext", "__span(keys, ITEMS)", "i32(min(num_valid, TILE)), __addr(oob)"))


def sort_pairs_in_place() -> str:
    """As :func:`sort_in_place`, with each thread's ``values`` (a local array as long as
    ``keys``) moved with their keys: ``prim(keys, values, num_valid=-1, oob_default=None,
    temp_storage=None)``."""
    return ("def prim(keys, values, num_valid=-1, oob_default=None, temp_storage=None):\n"
            "    __oob_given(num_valid, oob_default)\n"
            "    oob = cuda.local.array(1, T)\n"
            "    if oob_default is not None:\n"
            "        oob[0] = oob_default\n"
            + dispatch("ext", "__span(keys, ITEMS), __span(values, ITEMS)", "i32(min(num_valid, TILE)), __addr(oob)"))


def entry_table(with_valid: bool, base: tuple[str, ...], valid_extra: tuple[str, ...] = ("int",)
                ) -> dict[str, tuple[str, ...]]:
    table = {"ext": base, "ext_ts": base + ("void*",)}
    if with_valid:
        table["ext_valid"] = base + valid_extra
        table["ext_valid_ts"] = base + valid_extra + ("void*",)
    return table
