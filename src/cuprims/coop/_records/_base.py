"""What a coop primitive is made of: a :class:`Record` per provider kind and the Style 2
calls it serves (:class:`Call`); its entry points are ``_abi.py``'s. Plain data: no
numba, no CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:
    from cuprims.coop._records._abi import Entry
    from cuprims.coop._spec import ProviderSpec

# shared memory the implicit storage of a warp merge sort may take (its slots hold a
# whole tile each, so one per logical warp of a 1024-thread block would pass the 48 KiB
# of static shared memory a kernel may have)
WARP_SORT_STORAGE_BUDGET = 32 * 1024
# a warp load's, store's (transpose) or exchange's: less, so that a kernel's load and store fit together
WARP_MOVE_STORAGE_BUDGET = 16 * 1024

# the roles of a Style 2 call's parameters (after the group): a value of the kernel, an
# option the kernel computes, an option fixed when the kernel compiles
OPERAND, RUNTIME, STATIC = "operand", "runtime", "static"


@dataclass(frozen=True)
class Call:
    """A Style 2 call (``coop.load``...): the roles of its stub's parameters, its planner
    (``planner(record, options, group, *operands) -> Plan``, see ``_style2/plans.py``) and
    which of its operands gives a ``ThreadData`` its element type (``witnesses``:
    (ThreadData, witness) pairs, best first; ``rank``: this call's among other calls)."""

    name: str
    roles: Mapping[str, str]
    planner: Callable[..., Any]
    witnesses: tuple[tuple[str, str], ...] = ()
    rank: int = 2


def roles(operands: tuple[str, ...], static: tuple[str, ...] = (), runtime: tuple[str, ...] = ()
          ) -> Mapping[str, str]:
    """A call's parameter roles (the names after the group); ``temp_storage``, every call's
    last parameter, is runtime."""
    found = {**dict.fromkeys(operands, OPERAND), **dict.fromkeys(static, STATIC),
             **dict.fromkeys(runtime, RUNTIME), "temp_storage": RUNTIME}
    return MappingProxyType(found)


def sort_calls(name: str, planner: Callable[..., Any], static: tuple[str, ...], runtime: tuple[str, ...]
               ) -> tuple[Call, Call]:
    """A sort's Style 2 calls, ``<name>_keys(group, keys, ...)`` and ``<name>_pairs(group,
    keys, values, ...)``, with the same options; ``planner(record, options, group, keys,
    values, *rest)`` plans both (``values`` None for keys only)."""
    def plan_keys(record: Any, o: Any, group: Any, keys: Any, *rest: Any) -> Any:
        return planner(record, o, group, keys, None, *rest[:-1])   # one operand fewer: the last is padding

    return (Call(f"{name}_keys", roles(("keys",), static, runtime), plan_keys),
            Call(f"{name}_pairs", roles(("keys", "values"), static, runtime), planner))


@dataclass(frozen=True, eq=False)
class Record:
    """One provider kind, as the code generator, the build, the Style 1 factories and the
    Style 2 planner and lowering read it.

    ``cub_type``: the CUB specialization, a template of ``t`` (the element's C++ type),
    ``x``, ``y``, ``z`` (block shape, or logical warp size), ``n`` (items per thread), ``bins``, ``v``
    (a sort's value type, ``cub::NullType`` for keys only) and ``algorithm`` (the CUB
    enumerator ``algorithms`` maps ``spec.algorithm`` to); ``entries(spec, symbol)``: its
    entry points; ``style1(spec)``: the Python text of the Style 1 device function
    (``prim``) calling them; ``calls``: the Style 2 calls it serves; ``warp``: a logical warp's primitive
    (else a block's); ``any_lanes``: a warp primitive whose logical warp may have any
    1..32 lanes (CUB then lays logical warps out per hardware warp: 12 lanes are 12 + 12 +
    8 in each warp of 32), else a power of two only; ``tile_budget``: for a warp primitive
    whose TempStorage holds a whole tile, the shared memory its own storage may take (0: one slot per logical warp);
    ``compares``: its operator is a comparator (else a combiner, or none); ``barrier``: a
    barrier before its own storage is reused; ``algorithms``: ``spec.algorithm``'s names
    (Style 2's ``algorithm=``) -> CUB's enumerators (None: CUB has one algorithm);
    ``functor``: ``functor(name, op, vt, symbol) -> (C++ text, extern symbols)`` making
    the operator's functor, where neither a comparator's nor a combiner's serves;
    ``methods``: the Style 1 primitive's methods, each a device function ``prim_<name>``
    of ``style1``'s text (``histo.init(...)`` in a kernel), beside ``prim``;
    ``constructs``: the entry points' bodies make the CUB object themselves from
    ``storage`` (its constructor takes more than the storage), instead of getting ``prim``."""

    kind: str
    header: str
    cub_type: str
    entries: Callable[[ProviderSpec, str], list[Entry]]
    style1: Callable[[ProviderSpec], str]
    calls: tuple[Call, ...] = ()
    warp: bool = False
    any_lanes: bool = False
    tile_budget: int = 0
    compares: bool = False
    barrier: bool = True
    algorithms: Mapping[str, str] | None = None
    functor: Callable[..., tuple[str, tuple[str, ...]]] | None = None
    methods: tuple[str, ...] = ()
    constructs: bool = False
