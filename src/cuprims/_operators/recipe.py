"""The recipe of a Python callable: everything that decides the code numba will generate.

The digest covers the bytecode, constants, default arguments, the values of closure
cells and of the globals the code names, recursively for the functions it calls. It
never covers object identities or device pointers, so the same lambda written in two
processes has the same digest and the on-disk cache can serve the second one.

A device array the operator itself captures (closure cell, global, default argument;
see :mod:`.captures`) is runtime state: it contributes its variable name, dtype and
number of dimensions only, and the recipe lists the captured arrays in state order.
A device array reached any other way (captured by a helper function the operator
calls, or inside a container) is compiled in by numba as a constant: its address is in
the recipe, which is then non-persistent.

Values we cannot describe by content (arbitrary objects) make the recipe
"non-persistent": it then contains an object identity, is good for this process only,
and is never used as an on-disk key.

Limits (each refused with an ArgumentError naming the operator's argument, before any
compile; numba could not compile such an operator either):

* values the operator reads nest at most :data:`MAX_VALUE_DEPTH` levels: each list or
  tuple inside another, and each helper function a function reads, is one level (the
  operator's own globals, closure variables and defaults are level 1);
* no list the operator reads contains itself (directly or through other lists/tuples);
* an integer the code reads from a variable (a global it loads, a closure variable, a
  default, or an item of a list or tuple among those) lies in ``[-2**63, 2**64)``, the
  range numba types (int64 or uint64). Other integers of any size (literals in the code,
  which numba's compile reports; a global sharing a name with an attribute the code
  reads) are hashed by their bytes.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
import types
import weakref
from typing import Any, NamedTuple

import numpy as np

from cuprims._operators.captures import CELL, DEFAULT, GLOBAL, Capture, array_kind, global_loads, is_device_array
from cuprims.errors import ArgumentError

_PY = f"py{sys.version_info[0]}.{sys.version_info[1]}"

# Modules whose attributes are library functions, not user state: named, not walked.
_LIBRARY_MODULES = frozenset({"builtins", "math", "cmath", "operator", "numpy", "numba", "cuprims", "cupy",
                              "torch", "cuda"})


MAX_VALUE_DEPTH = 64
"""How many levels the values an operator reads may nest (see the module's "Limits"):
each level is a few Python frames of the walk, so 64 stays well inside Python's
recursion limit."""

_NUMBA_INT_RANGE = (-2 ** 63, 2 ** 64)   # int64 or uint64: what numba can type an int as


class _Refused(Exception):
    """A value the operator reads that no recipe can describe; becomes an ArgumentError
    naming the operator's argument (:func:`_named`)."""

    def __init__(self, expected: str, given: str):
        super().__init__(expected, given)
        self.expected, self.given = expected, given


def _too_deep(where: str) -> _Refused:
    return _Refused(f"an operator whose values nest at most {MAX_VALUE_DEPTH} levels deep (lists and tuples inside "
                    "each other, helper functions reading helper functions)", f"values nested deeper at {where}")


def all_names(co: types.CodeType) -> tuple[str, ...]:
    """Global and attribute names used by ``co`` and the code objects nested in it
    (inner functions, lambdas and comprehensions, which numba compiles too)."""
    names = list(co.co_names)
    for const in co.co_consts:
        if isinstance(const, types.CodeType):
            names.extend(all_names(const))
    return tuple(dict.fromkeys(names))


def _is_library_module(mod: types.ModuleType) -> bool:
    return mod.__name__.split(".")[0] in _LIBRARY_MODULES


class Recipe(NamedTuple):
    """A Python operator's recipe: its digest, whether the digest may key the on-disk
    cache, and the device arrays the operator captures (state order)."""

    digest: str
    persistent: bool
    captures: tuple[Capture, ...] = ()


# The code-object flags that change what numba compiles: how arguments are taken and
# what kind of function it is. The rest are compiler bookkeeping (a nested function, no
# free variables) or ``from __future__`` features that change no bytecode of an operator
# (annotations kept as strings, the Python 2 era's division and print): they must not
# split the key of one operator written in two modules.
_CODE_FLAGS = (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS | inspect.CO_GENERATOR | inspect.CO_COROUTINE
               | inspect.CO_ITERABLE_COROUTINE | inspect.CO_ASYNC_GENERATOR)


class _Walker:
    def __init__(self, bind_captures: bool = True) -> None:
        self.persistent = True
        self.bind_captures = bind_captures
        self.captures: list[Capture] = []
        self._seen: dict[int, int] = {}
        self._path: list[str] = []          # how the value being walked was reached (for messages)
        self._open: dict[int, str] = {}     # lists and tuples being walked -> where they were reached

    def _where(self) -> str:
        return "".join(self._path) or "the operator"

    def _walk(self, label: str, v: Any, read: bool = True) -> tuple:
        """``value(v)`` one level deeper, reached as ``label``."""
        if len(self._path) >= MAX_VALUE_DEPTH:
            raise _too_deep(self._where() + label)
        self._path.append(label)
        try:
            return self.value(v, read)
        finally:
            self._path.pop()

    def _name(self, name: str) -> str:
        """The path label of a variable: the first, or one read by a helper reached so far."""
        return f" -> {name}" if self._path else name

    def _int(self, v: int, read: bool) -> tuple:
        low, high = _NUMBA_INT_RANGE
        if low <= v < high:
            return (type(v).__name__, repr(v))
        if read:
            raise _Refused("integers in [-2**63, 2**64) among the values it reads (numba types an integer as int64 "
                           "or uint64)", f"{self._where()}: an integer of {v.bit_length()} bits")
        # never through str(): Python refuses int -> str beyond 4300 digits
        return (type(v).__name__, "bytes", v.to_bytes(v.bit_length() // 8 + 1, "little", signed=True))

    def _captured(self, where: str, name: str, index: int, value: Any) -> tuple:
        dt, ndim = array_kind(value, name)
        cap = Capture(where, name, index, dt, ndim)
        self.captures.append(cap)
        return ("captured_array", len(self.captures) - 1, where, dt.str, ndim)

    def code(self, co: types.CodeType) -> tuple:
        consts = tuple(self.code(c) if isinstance(c, types.CodeType) else self.const(c) for c in co.co_consts)
        return ("code", co.co_code, consts, co.co_names, co.co_varnames, co.co_freevars, co.co_cellvars,
                co.co_argcount, co.co_posonlyargcount, co.co_kwonlyargcount, co.co_flags & _CODE_FLAGS)

    def const(self, c: Any) -> tuple:
        if isinstance(c, (tuple, frozenset)):
            return (type(c).__name__, tuple(self.const(x) for x in c))
        if type(c) is int:   # a literal beyond 64 bits is numba's to refuse when it compiles the code
            return self._int(c, read=False)
        return (type(c).__name__, repr(c))

    def function(self, fn: types.FunctionType) -> tuple:
        key = id(fn)
        if key in self._seen:  # recursion: refer to the earlier visit
            return ("recursive", self._seen[key])
        # the operator itself (the first function walked) captures arrays as runtime state;
        # the helpers it calls do not (numba compiles their arrays in)
        top = not self._seen and self.bind_captures
        self._seen[key] = len(self._seen)
        co = fn.__code__
        globs = fn.__globals__
        names = all_names(co)
        closure: tuple[Any, ...] = ()
        if fn.__closure__:
            cells = []
            for i, (name, cell) in enumerate(zip(co.co_freevars, fn.__closure__)):
                try:
                    value = cell.cell_contents
                except ValueError:  # empty cell
                    cells.append((name, ("empty",)))
                    continue
                if top and is_device_array(value):
                    cells.append((name, self._captured(CELL, name, i, value)))
                else:
                    cells.append((name, self._walk(self._name(name), value)))
            closure = tuple(cells)
        loaded = global_loads(co)
        captured_globals = {name: self._captured(GLOBAL, name, -1, globs[name]) for name in sorted(loaded)
                            if top and name in globs and is_device_array(globs[name])}
        referenced = []
        for name in names:
            if name in captured_globals:
                referenced.append((name, captured_globals[name]))
            elif name in globs:
                value = globs[name]
                if isinstance(value, types.ModuleType) and not _is_library_module(value):
                    referenced.append((name, self.module(value, names)))
                else:
                    # a name the code only uses as an attribute is hashed, not held to numba's limits
                    referenced.append((name, self._walk(self._name(name), value, read=name in loaded)))
        defaults = fn.__defaults__ or ()
        first = co.co_argcount - len(defaults)
        defaults = tuple(self._captured(DEFAULT, co.co_varnames[first + j], j, d) if top and is_device_array(d)
                         else self._walk(self._name(co.co_varnames[first + j]), d)
                         for j, d in enumerate(defaults))
        return ("function", self.code(co), tuple(referenced), closure, defaults)

    def sequence(self, v: tuple | list, read: bool) -> tuple:
        """A list or tuple, item by item; one that contains itself is refused."""
        first = self._open.get(id(v))
        if first is not None:
            raise _Refused("values without cycles (a list it reads may not contain itself)",
                           f"{self._where()}, which is {first} itself")
        self._open[id(v)] = self._where()
        try:
            return (type(v).__name__, tuple(self._walk(f"[{i}]", x, read) for i, x in enumerate(v)))
        finally:
            del self._open[id(v)]

    def module(self, mod: types.ModuleType, names: tuple[str, ...]) -> tuple:
        """A user module: numba freezes the attributes the code reads, so their values count."""
        label = self._name(mod.__name__)
        attrs = tuple((n, self._walk(f"{label}.{n}", getattr(mod, n))) for n in names if hasattr(mod, n))
        return ("user_module", mod.__name__, attrs)

    def value(self, v: Any, read: bool = True) -> tuple:
        """The description of value ``v``; ``read``: whether the code reads it (an
        integer it reads must be one numba can type)."""
        if isinstance(v, int) and not isinstance(v, bool):
            return self._int(v, read)
        if v is None or isinstance(v, (bool, float, complex, str, bytes)):
            return (type(v).__name__, repr(v))
        if isinstance(v, np.generic):
            return ("np", v.dtype.str, v.tobytes())
        if isinstance(v, np.ndarray):
            return ("ndarray", v.dtype.str, v.shape, hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest())
        if isinstance(v, np.dtype):
            return ("dtype", str(v.descr))
        if isinstance(v, (tuple, list)):
            return self.sequence(v, read)
        if isinstance(v, types.FunctionType):
            return self.function(v)
        if isinstance(v, types.ModuleType):
            return ("module", v.__name__)
        if isinstance(v, (types.BuiltinFunctionType, type)) and getattr(v, "__module__", None) in (
                "builtins", "math", "cmath", "operator"):
            return ("builtin", v.__module__, v.__qualname__)
        struct_dtype = getattr(v, "_cuprims_dtype", None)
        if struct_dtype is not None and isinstance(v, type):
            return ("gpu_struct", str(struct_dtype.descr), v.__name__)
        data = getattr(v, "_cuprims_data", None)
        if struct_dtype is not None and isinstance(data, np.ndarray):  # a gpu_struct value
            return ("gpu_struct_value", str(struct_dtype.descr), data.tobytes())
        py_func = getattr(v, "py_func", None)  # a numba dispatcher: describe the Python it wraps
        if isinstance(py_func, types.FunctionType):
            return ("jitted", type(v).__name__, self.function(py_func))
        if hasattr(v, "__cuda_array_interface__"):
            # numba bakes a captured device array's address into the code, so the code is
            # only good for this array in this process: keyed by pointer, never stored.
            iface = v.__cuda_array_interface__
            self.persistent = False
            return ("device_array", iface.get("typestr"), tuple(iface.get("shape", ())), iface["data"][0])
        mod = getattr(v, "__module__", "") or getattr(type(v), "__module__", "")
        if mod.split(".")[0] in ("numba", "numpy", "math", "cmath") and hasattr(v, "__qualname__"):
            return ("lib", mod, v.__qualname__)
        # Unknown object: its identity goes into the key, and the key stays in this process.
        self.persistent = False
        return ("object", type(v).__module__, type(v).__qualname__, id(v))


def callable_recipe(fn: Any) -> tuple[str, bool]:
    """(hex digest, persistent) of a Python callable's recipe (captured arrays bound)."""
    return op_recipe(fn)[:2]


def _named(argument: str, exc: BaseException) -> ArgumentError:
    """The ArgumentError for a refused recipe, naming the operator's argument."""
    if isinstance(exc, _Refused):
        return ArgumentError(argument, exc.expected, exc.given)
    # the limits keep the walk shallow; a caller already deep in its own recursion may still run out
    return ArgumentError(argument, "an operator whose values Python can walk within its recursion limit",
                         "values nested too deep for the stack left to this call")


def op_recipe(fn: Any, bind_captures: bool = True, argument: str = "op") -> Recipe:
    """The :class:`Recipe` of a Python callable. With ``bind_captures`` False, device
    arrays the callable captures are described as numba compiles them in (by address; the
    recipe is then not persistent), for callers that do not pack operator state.

    Raises ArgumentError naming ``argument`` for values beyond the module's limits."""
    try:
        return _op_recipe(fn, bind_captures)
    except (_Refused, RecursionError) as exc:
        raise _named(argument, exc) from None


def _op_recipe(fn: Any, bind_captures: bool) -> Recipe:
    walker = _Walker(bind_captures)
    if isinstance(fn, types.FunctionType):
        described = walker.function(fn)
    else:
        py_func = getattr(fn, "py_func", None)
        if isinstance(py_func, types.FunctionType):
            described = walker.function(py_func)
        elif isinstance(fn, types.MethodType) or callable(fn):
            walker.persistent = False
            described = ("callable", type(fn).__qualname__, id(fn))
        else:  # pragma: no cover - guarded by the caller
            raise TypeError(fn)
    digest = hashlib.sha256(repr((_PY, described)).encode()).hexdigest()
    return Recipe(digest, walker.persistent, tuple(walker.captures))


def _snapshot(fn: types.FunctionType, out: list, seen: set, depth: int = 0) -> None:
    """Identities of everything the recipe reads, recursively through plain functions.

    Cheap to compute; equal snapshots mean the recipe cannot have changed, unless an
    object the code reads was mutated in place (numba freezes such values at compile time
    too, so this matches how the compiled code behaves). Array-like values add their
    dtype and rank: a captured array's recipe names those, and a new array may reuse a
    freed one's identity. ``depth``: helper functions between the operator and ``fn``
    (limited as the recipe's walk is)."""
    if id(fn) in seen:
        return
    if depth > MAX_VALUE_DEPTH:
        raise _too_deep(f"{fn.__qualname__} (a helper {depth} functions away from the operator)")
    seen.add(id(fn))
    out.append(id(fn.__code__))
    globs = fn.__globals__
    names = all_names(fn.__code__)
    for name in names:
        value = globs.get(name)
        out.append(id(value))
        if isinstance(value, types.FunctionType):
            _snapshot(value, out, seen, depth + 1)
        elif isinstance(value, types.ModuleType) and not _is_library_module(value):
            out.extend(id(getattr(value, n, None)) for n in names)
        elif type(value) not in _NO_DTYPE:
            out.append(getattr(value, "dtype", None))
            out.append(getattr(value, "ndim", None))
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:
            out.append(None)
            continue
        out.append(id(value))
        if isinstance(value, types.FunctionType):
            _snapshot(value, out, seen, depth + 1)
        elif type(value) not in _NO_DTYPE:
            out.append(getattr(value, "dtype", None))
            out.append(getattr(value, "ndim", None))
    for value in fn.__defaults__ or ():
        out.append(id(value))
        if type(value) not in _NO_DTYPE:
            out.append(getattr(value, "dtype", None))
            out.append(getattr(value, "ndim", None))


_NO_DTYPE = frozenset({type(None), bool, int, float, complex, str, bytes, tuple, types.FunctionType,
                       types.ModuleType, types.BuiltinFunctionType, type})


_memo: "weakref.WeakKeyDictionary[Any, tuple]" = weakref.WeakKeyDictionary()


def callable_recipe_cached(fn: Any) -> tuple[str, bool]:
    """:func:`callable_recipe`, remembered per function object while what it reads is unchanged."""
    return op_recipe_cached(fn)[:2]


def op_recipe_cached(fn: Any, bind_captures: bool = True, argument: str = "op") -> Recipe:
    """:func:`op_recipe`, remembered per function object while what it reads is unchanged
    (the memo holds object identities only: it keeps nothing alive). Raises ArgumentError
    naming ``argument`` for values beyond the module's limits."""
    if not isinstance(fn, types.FunctionType):
        return op_recipe(fn, bind_captures, argument)
    snap: list = []
    try:
        _snapshot(fn, snap, set())
    except (_Refused, RecursionError) as exc:
        raise _named(argument, exc) from None
    snapshot = tuple(snap)
    try:
        hit = _memo.get(fn)
    except TypeError:
        hit = None
    if hit is not None and hit[0] == snapshot:
        recipe = hit[1].get(bind_captures)
        if recipe is not None:
            return recipe
        recipes = hit[1]
    else:
        recipes = {}
    recipe = recipes[bind_captures] = op_recipe(fn, bind_captures, argument)
    try:
        _memo[fn] = (snapshot, recipes)
    except TypeError:
        pass
    return recipe
