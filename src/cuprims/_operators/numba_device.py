"""numba-cuda made ready to compile operators: its one import (:func:`import_numba`), a
target capability answered without a driver (:func:`target_capability`), user functions
made device functions with their plain-Python callees (:func:`device_function`), and
what numba keeps of them afterwards, released by :func:`forget_compiled_operators`.

Plain Python functions an operator calls (by global name or through a closure) are made
device functions too, recursively, so users need not decorate helpers.
"""

from __future__ import annotations

import contextlib
import threading
import types as pytypes
from typing import Any, Callable, Iterator

_lock = threading.RLock()
_numba = None


def import_numba() -> tuple[Any, Any, Any]:
    """(``numba.cuda``, ``numba.types``, ``numba.cuda.dispatcher``), imported once (the
    trace stage ``numba import``), with cuprims' struct support registered."""
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
def target_capability(cc: tuple[int, int]) -> Iterator[None]:
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


def device_function(fn: Callable, memo: dict[int, Any]) -> Any:
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
            replaced[name] = device_function(value, memo)
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
            cells.append(pytypes.CellType(device_function(value, memo)) if _needs_wrapping(value) else cell)
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


def forget_compiled_operators() -> None:
    """Drop what numba-cuda's target context still remembers of the operators our builds
    compiled (``cuprims.clear_all_caches``).

    Each build compiles its operator through device dispatchers of its own
    (:func:`device_function`). numba unregisters a dispatcher's implementations when the
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
