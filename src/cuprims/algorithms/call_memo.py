"""The memo of an algorithm object's last call: what :class:`CallMemo` adds to
:class:`~cuprims.algorithms.skeleton.Algorithm`.

A call that passes the very array objects of the object's previous successful call, with
the same counts, reuses what that call bound (pointers checked for dtype, length,
alignment and device memory) instead of reading and checking the arrays again. Only
arrays whose pointer, dtype and size cannot change for their life are remembered
(:data:`cuprims._runtime.arrays.fixed_types`: CuPy's ndarray), through weak references (a
user's array is never kept alive; a dead one's successor at the same address is another
object); anything else (iterators, torch tensors, any other producer) is read every call,
as is everything a call may change with the same objects: host values (``h_init``), an
operator's state, the stream. In a process that sees several devices nothing is
remembered: each call checks its arrays' device.
"""

from __future__ import annotations

import weakref
from typing import Any

from cuprims._runtime import arrays as _arrays
from cuprims._runtime import devices as _devices


def _none_ref() -> None:
    """The memo's stand-in for an argument given as None (a dead weak reference also gives
    None: only this function marks a None argument)."""
    return None


def weak(x: Any) -> Any:
    """What a call memo holds of argument ``x``: :func:`_none_ref` for None, a weak reference
    to an array whose pointer, dtype and size are fixed for its life (CuPy's ndarray:
    read-only attributes), else None (the call is not remembered)."""
    if x is None:
        return _none_ref
    if type(x) not in _arrays.fixed_types:
        return None
    try:
        return weakref.ref(x)
    except TypeError:
        return None


class CallMemo:
    """The last call's bound arrays and temporary storage of one algorithm object. Each
    memo is one tuple, replaced whole: a thread reads either the old or the new one."""

    _last: tuple | None = None       # (weak references, counts, bound values)
    _last_temp: tuple | None = None  # (weak reference, pointer, bytes) of temp_storage

    def _recall(self, arrays: tuple, counts: tuple) -> Any:
        """What :meth:`_remember` stored for these very ``arrays`` (objects, or None) and
        ``counts`` (ints or None), or None."""
        last = self._last
        if last is None or last[1] != counts or _devices._several is not False:
            return None
        for ref, x in zip(last[0], arrays):
            if ref() is not x or (x is None and ref is not _none_ref):
                return None
        for c in counts:  # True == 1 and 1024.0 == 1024: only the very types remembered
            if type(c) is not int and c is not None:
                return None
        return last[2]

    def _remember(self, arrays: tuple, counts: tuple, bound: Any) -> None:
        """Remember a successful call's ``bound`` values (plain ints and bytes: no user
        object) for :meth:`_recall`, when every array in it may be remembered."""
        if _devices._several is not False:
            return
        refs = tuple(map(weak, arrays))
        if any(r is None for r in refs) or any(type(c) is not int and c is not None for c in counts):
            return
        self._last = (refs, counts, bound)
