"""The parts of an entry point: :class:`Param` (the provider ABI: C++ type, and how
numba passes it) and :class:`Entry`, and the C++ pieces the records' bodies share.
Plain data and strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuprims.coop._spec import ProviderSpec


@dataclass(frozen=True)
class Param:
    """One parameter of an entry point: C++ type and name, and how numba passes it
    (``abi``: "ptr" to the element type, "vptr" to a sort's value type, "int" (int32),
    "i64", "state": a prefix callback's state). ``thread``: it points at the calling
    thread's values (copied into aligned locals when numba may under-align them); ``one``:
    at one value rather than the thread's items; ``inout``: read as well as written."""

    ctype: str
    name: str
    abi: str
    thread: bool = False
    one: bool = False
    inout: bool = False

    @property
    def text(self) -> str:
        return f"{self.ctype} {self.name}"

    @property
    def const(self) -> bool:
        return self.ctype.startswith("const ")


def thread_in(t: str, name: str, one: bool = False) -> Param:
    return Param(f"const {t}*", name, "ptr", thread=True, one=one)


def thread_out(t: str, name: str, one: bool = False) -> Param:
    return Param(f"{t}*", name, "ptr", thread=True, one=one)


def keys_param(t: str) -> Param:
    """A sort's keys: the thread's items, sorted in place."""
    return Param(f"{t}*", "keys", "ptr", thread=True, inout=True)


def values_params(spec: ProviderSpec) -> tuple[Param, ...]:
    """A sort of pairs' values (after the keys), moved with them; none for keys only."""
    if spec.values is None:
        return ()
    return (Param(f"{spec.values.cpp}*", "values", "vptr", thread=True, inout=True),)


def count(name: str) -> Param:
    return Param("int", name, "int")


@dataclass(frozen=True)
class Entry:
    """An ``extern "C"`` function of the provider, ``SYM<suffix>`` (and its ``_ts`` twin,
    which takes the caller's storage last); ``body`` uses ``prim``, the CUB object."""

    suffix: str
    params: tuple[Param, ...]
    body: str

    @property
    def abi(self) -> tuple[str, ...]:
        return tuple(p.abi for p in self.params)


def items_ref(spec: ProviderSpec) -> str:
    """C++ type of a reference to the thread's items, as CUB takes them."""
    return f"{spec.vt.cpp} (&)[{spec.items}]"


def values_arg(spec: ProviderSpec) -> str:
    """A sort of pairs' values as CUB's argument after the keys (nothing for keys only)."""
    if spec.values is None:
        return ""
    return f", reinterpret_cast<{spec.values.cpp} (&)[{spec.items}]>(*values)"


def copied(spec: ProviderSpec, name: str) -> str:
    """Statements copying the thread's items at ``name`` into ``tmp`` (registers, after LTO)."""
    t, n = spec.vt.cpp, spec.items
    return f"{t} tmp[{n}];\n  for (int i = 0; i < {n}; ++i) tmp[i] = {name}[i];\n  "


def is_plus(spec: ProviderSpec) -> bool:
    return spec.op is not None and spec.op.kind == "builtin" and spec.op.builtin.name == "PLUS"


def is_sum(spec: ProviderSpec) -> bool:
    """Whether CUB's Sum entry points serve ``spec``. Not for bool: CUB's warp scans derive a
    sum's exclusive prefix as ``inclusive - input``, which a saturating bool sum (a logical
    or) breaks, so bool sums go through the functor, ``bool(a + b)``. Nor for a warp scan
    over logical warps whose size is not a power of two: there CUB's shared-memory scan
    pads with ``cuda::std::plus``'s identity written by the lanes present only, so the
    partial logical warp that ends each hardware warp would read unset padding; through
    the functor (no identity element) CUB guards each read by the lane instead."""
    if spec.kind == "warp_scan" and spec.dims[0] & (spec.dims[0] - 1):
        return False
    return is_plus(spec) and spec.vt.cpp != "bool"
