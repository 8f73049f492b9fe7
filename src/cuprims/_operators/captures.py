"""Device arrays captured by a Python operator: found at build time, bound at each call.

An operator may read device arrays it captures: a closure cell, a global it names, or a
default argument holding a device array (or a :class:`~cuprims.ProxyArray` when
building ahead of time). Such an array is runtime state of the operator, not part of its
code:

* its recipe (and so every cache key) holds the array's variable name, dtype and number
  of dimensions only: no pointer, no shape, so a new array of the same kind reuses the
  build, on disk too;
* the operator's state (the functor's ``state`` member, passed to the linked code by
  address, as for a stateful :class:`~cuprims.RawOp`) is, for each captured array in
  order, its data pointer then its extents, all as 64-bit integers
  (``8 * (1 + ndim)`` bytes each, alignment 8);
* at each call :func:`captured_state` reads the function's *current* cells, globals and
  defaults and packs that state; nothing keeps a reference to any array.

Order of the captured arrays: closure cells in ``co_freevars`` order, then globals in
sorted name order, then default arguments in parameter order.

Only the operator's own captures are runtime state. A device array captured by a plain
helper function the operator calls is still compiled in as a constant by numba (its
address is then in the recipe, which is not persistent, and each new array builds anew);
so is an array inside a container (a tuple or list) the operator captures.

No numba here: the compile side lives in :mod:`.numba_ops`.
"""

from __future__ import annotations

import ast
import copy
import dis
import inspect
import struct as _struct
import types
from typing import Any, NamedTuple

import numpy as np

from cuprims._runtime import arrays as _arrays
from cuprims._runtime.proxy import ProxyArray
from cuprims.errors import ArgumentError

CELL, GLOBAL, DEFAULT = "cell", "global", "default"


class Capture(NamedTuple):
    """One captured device array of an operator (hashable; no user object).

    ``where`` is ``"cell"``, ``"global"`` or ``"default"``; ``index`` the closure cell's
    or the default's position (-1 for a global); ``name`` the variable (the parameter,
    for a default); ``dtype`` and ``ndim`` what the build was made for."""

    where: str
    name: str
    index: int
    dtype: np.dtype
    ndim: int

    def describe(self) -> str:
        where = {CELL: "closure variable", GLOBAL: "global", DEFAULT: "default argument"}[self.where]
        return f"the operator's captured {where} {self.name}"


def is_device_array(v: Any) -> bool:
    """Whether ``v`` is captured as a device array: a ProxyArray or an object (not a class)
    speaking the CUDA Array Interface."""
    if isinstance(v, ProxyArray):
        return True
    if isinstance(v, (type, np.ndarray, np.generic, int, float, complex, str, bytes, type(None))):
        return False
    try:
        return hasattr(v, "__cuda_array_interface__")
    except Exception:  # noqa: BLE001 - a property that raises means "not a device array"
        return False


def _shape(x: Any) -> tuple:
    shape = getattr(x, "shape", None)
    if isinstance(shape, tuple):  # cupy, numba, torch.Size
        return shape
    return tuple(x.__cuda_array_interface__.get("shape", ()))


def array_kind(v: Any, name: str) -> tuple[np.dtype, int]:
    """(dtype, ndim) of a captured device array or ProxyArray; ``name`` labels errors."""
    from cuprims._value_types import value_type

    if isinstance(v, ProxyArray):
        dt, ndim = v.dtype, v.ndim
    else:
        dt = _arrays.array_dtype(v, name)
        ndim = len(_shape(v))
    vt = value_type(dt, argument=name)
    if vt.is_struct:
        raise ArgumentError(name, "a device array of a scalar dtype (captured arrays of structs are not "
                            "supported)", f"an array of {dt}")
    return vt.dtype, ndim


def global_loads(co: types.CodeType) -> set[str]:
    """Names ``co`` (and the code nested in it) loads as globals."""
    names = set()
    if any(type(c) is int and c.bit_length() > 64 for c in co.co_consts):
        # dis writes each constant with repr(), which Python refuses for an int of over 4300
        # digits; the names loaded do not depend on the constants' values
        co = co.replace(co_consts=tuple(0 if type(c) is int and c.bit_length() > 64 else c for c in co.co_consts))
    for ins in dis.get_instructions(co):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            names.add(ins.argval)
    for const in co.co_consts:
        if isinstance(const, types.CodeType):
            names |= global_loads(const)
    return names


def state_layout(captures: tuple[Capture, ...]) -> tuple[int, int]:
    """(bytes, alignment) of the state of an operator with ``captures``."""
    return sum(8 * (1 + c.ndim) for c in captures), 8


_packers: dict[tuple[Capture, ...], _struct.Struct] = {}
_MISSING = object()


def _packer(captures: tuple[Capture, ...]) -> _struct.Struct:
    packer = _packers.get(captures)
    if packer is None:
        packer = _packers[captures] = _struct.Struct("<" + "".join("Q" + "q" * c.ndim for c in captures))
    return packer


def _wrong_op(argument: str, op: Any) -> ArgumentError:
    return ArgumentError(argument, "the operator this object was built with (it captures device arrays, "
                         "which are bound at each call)", op)


def captured_state(op: Any, spec: Any, argument: str = "op") -> bytes:
    """The state bytes of Python operator ``op`` (described by OpSpec ``spec``): each
    captured array's data pointer and extents, read from ``op``'s current closure cells,
    globals and defaults. Raises :class:`ArgumentError` naming the captured variable if
    one is no longer a contiguous device array of the dtype and rank the build saw."""
    fn = op if type(op) is types.FunctionType else getattr(op, "py_func", None)
    if type(fn) is not types.FunctionType:
        raise _wrong_op(argument, op)
    values: list[int] = []
    closure = fn.__closure__
    for cap in spec.captures:
        where = cap.where
        try:
            if where == CELL:
                x = closure[cap.index].cell_contents
            elif where == GLOBAL:
                x = fn.__globals__.get(cap.name, _MISSING)
            else:
                x = fn.__defaults__[cap.index]
        except (TypeError, IndexError):
            raise _wrong_op(argument, op) from None
        except ValueError:  # an empty cell
            x = _MISSING
        if x is _MISSING:
            raise ArgumentError(argument, f"{cap.describe()} to be a device array", "an unbound variable")
        ptr, dt, size = _arrays.array_info(x, f"{argument} ({cap.describe()})")
        if dt != cap.dtype:
            raise ArgumentError(argument, f"{cap.describe()} to be a device array of {cap.dtype}, as at build "
                                "time (an array of another dtype needs a new build)", f"an array of {dt}")
        shape = _shape(x)
        if len(shape) != cap.ndim:
            raise ArgumentError(argument, f"{cap.describe()} to be a {cap.ndim}-d device array, as at build time",
                                f"an array of shape {shape}")
        values.append(ptr)
        values += shape
    return _packer(spec.captures).pack(*values)


# ------------------------------------------------------------------ the compile side

class SourceUnavailable(Exception):
    """The operator's source could not be found or matched to its code."""


_SCOPE = "__cuprims_scope"


def _first_line(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", ())
    return min([node.lineno] + [d.lineno for d in decorators])


def _in_scope(node: ast.AST, cells: tuple[str, ...], filename: str) -> types.CodeType:
    """The code object of function ``node`` compiled inside a function defining ``cells``,
    so that those names are the function's free variables, as in the original."""
    node = copy.deepcopy(node)
    if isinstance(node, ast.Lambda):
        body: list[ast.stmt] = [ast.Return(value=node)]
        name = "<lambda>"
    else:
        # renamed, so that the scope does not bind the function's own name (which the
        # body, if it names itself, reads as a global or a cell, as in the original)
        node.decorator_list = []
        node.name = name = "__cuprims_fn"
        body = [node]
    assign = [ast.Assign(targets=[ast.Name(id=c, ctx=ast.Store())], value=ast.Constant(None)) for c in cells]
    scope = ast.FunctionDef(name=_SCOPE, args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                                            kw_defaults=[], kwarg=None, defaults=[]),
                            body=assign + body, decorator_list=[], returns=None, type_comment=None)
    module = ast.Module(body=[scope], type_ignores=[])
    ast.fix_missing_locations(module)
    module_code = compile(module, filename, "exec", dont_inherit=True)
    scope_code = next(c for c in module_code.co_consts if isinstance(c, types.CodeType) and c.co_name == _SCOPE)
    return next(c for c in scope_code.co_consts if isinstance(c, types.CodeType) and c.co_name == name)


def _same_code(a: types.CodeType, b: types.CodeType) -> bool:
    return (a.co_code == b.co_code and a.co_varnames == b.co_varnames and a.co_names == b.co_names
            and a.co_freevars == b.co_freevars and a.co_argcount == b.co_argcount)


def _function_node(fn: types.FunctionType) -> ast.AST:
    """The ``def`` or ``lambda`` node of ``fn`` in its source file, checked against its code."""
    co = fn.__code__
    try:
        lines, _ = inspect.findsource(fn)
    except (OSError, TypeError) as exc:
        raise SourceUnavailable(f"its source is not available ({exc})") from None
    try:
        tree = ast.parse("".join(lines))
    except SyntaxError as exc:
        raise SourceUnavailable(f"its source file does not parse ({exc})") from None
    lam = co.co_name == "<lambda>"
    candidates = [node for node in ast.walk(tree)
                  if (isinstance(node, ast.Lambda) if lam else
                      isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == co.co_name)
                  and _first_line(node) == co.co_firstlineno]
    for node in candidates:
        try:
            if _same_code(_in_scope(node, co.co_freevars, co.co_filename), co):
                return node
        except (SyntaxError, StopIteration):
            continue
    if not lam and len(candidates) == 1:  # e.g. compiled by another Python; names and lines agree
        return candidates[0]
    raise SourceUnavailable(f"no {'lambda' if lam else 'definition'} at line {co.co_firstlineno} of "
                            f"{co.co_filename} compiles to its code (was the file changed?)")


def with_leading_parameters(fn: types.FunctionType, names: tuple[str, ...]) -> types.FunctionType:
    """A copy of ``fn`` taking ``names`` (closure variables or globals it reads) as its first
    parameters, rebuilt from ``fn``'s source. It keeps ``fn``'s globals dictionary and its
    other closure cells; device arrays among its defaults are replaced by None (they are
    passed explicitly), so the copy references no captured array.

    Raises :class:`SourceUnavailable` when the source cannot be found."""
    co = fn.__code__
    if names:
        node = copy.deepcopy(_function_node(fn))
        params = [ast.arg(arg=n, annotation=None) for n in names]
        if node.args.posonlyargs:
            node.args.posonlyargs = params + node.args.posonlyargs
        else:
            node.args.args = params + node.args.args
        kept = tuple(c for c in co.co_freevars if c not in names)
        code = _in_scope(node, kept, co.co_filename)
        rename = {"co_name": co.co_name}
        if hasattr(co, "co_qualname"):  # Python 3.11+
            rename["co_qualname"] = co.co_qualname
        code = code.replace(**rename)
        cells = dict(zip(co.co_freevars, fn.__closure__ or ()))
        closure = tuple(cells[c] for c in code.co_freevars) or None
    else:
        code, closure = co, fn.__closure__
    defaults = fn.__defaults__
    if defaults:
        defaults = tuple(None if is_device_array(d) else d for d in defaults)
    clone = types.FunctionType(code, fn.__globals__, fn.__name__, defaults, closure)
    clone.__kwdefaults__ = fn.__kwdefaults__
    clone.__qualname__ = fn.__qualname__
    return clone


__all__ = ["Capture", "is_device_array", "array_kind", "global_loads", "state_layout", "captured_state",
           "SourceUnavailable", "with_leading_parameters"]
