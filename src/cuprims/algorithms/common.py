"""Plumbing shared by every algorithm: targets, builds per arch, loaded state per device."""

from __future__ import annotations

import dataclasses
import enum
import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, Sequence

import numpy as np

from cuprims._base import stats
from cuprims._build.results import BuildResult, OpInput
from cuprims._compile.source import Source
from cuprims._compile.targets import parse_compute_capability
from cuprims._runtime import driver
from cuprims._runtime.arrays import array_info
from cuprims.errors import ArgumentError, NoDeviceError
from cuprims.typing import ComputeCapabilityLike


class Loaded:
    """A build result loaded on one device (its own copy of the library and kernel
    handles, made from the compiled payload: nothing is compiled), with per-device launch
    facts (``extra["plan"]``)."""

    __slots__ = ("module", "handles", "names", "meta", "device", "arch", "extra")

    def __init__(self, result: BuildResult, source: Source, device: int):
        self.module = driver.Module(result.cubin, result.kernels, device)
        stats.bump("module_loads")
        self.names = source.name_expressions
        # kernel handles in the order the code generator listed the name expressions
        self.handles = tuple(self.module.kernels[n] for n in self.names)
        self.meta = result.meta
        self.device = device
        self.arch = result.arch
        self.extra: dict[str, Any] = {}


class Builds:
    """Build results per compute capability and loaded state per device for one algorithm object.

    One build serves every device of its capability; each device loads its own copy
    (:class:`Loaded`, shared by every object holding the same build result), the first
    time a call runs there.

    ``make_source(arch)`` gives the translation unit for an arch; ``ops`` the operators
    to link. Operator objects (Python callables, RawOps) are used while building and
    never stored here, so this object keeps no user data alive.
    """

    def __init__(self, make_source: Callable[[int], Source], ops: Sequence[OpInput]):
        self._make_source = make_source
        self._ops = tuple(ops)
        self._by_arch: dict[int, BuildResult] = {}
        self._sources: dict[int, Source] = {}
        self._by_device: dict[int, Loaded] = {}
        self._lock = threading.Lock()

    def build_for(self, archs: Sequence[int], objs: Sequence[Any]) -> None:
        for arch in archs:
            if arch not in self._by_arch:
                from cuprims._build.build import build  # the compiler side, only when something is built

                self._by_arch[arch] = build(self.source(arch), arch, self._ops, objs)

    def source(self, arch: int) -> Source:
        src = self._sources.get(arch)
        if src is None:
            with stats.stage("source", f"sm_{arch}"):
                src = self._sources[arch] = self._make_source(arch)
        return src

    @property
    def archs(self) -> list[int]:
        return sorted(self._by_arch)

    def cubin(self, compute_capability: Any = None) -> bytes:
        """The compiled code for one built architecture (the first if not given)."""
        archs = parse_compute_capability(compute_capability) or self.archs[:1]
        if not archs or archs[0] not in self._by_arch:
            raise ArgumentError("compute_capability", f"one of the built architectures {self.archs}",
                                compute_capability)
        return self._by_arch[archs[0]].cubin

    def result(self, arch: int) -> BuildResult:
        return self._by_arch[arch]

    def _build_missing(self, arch: int, device: int, objs: Sequence[Any] | None) -> None:
        """Build for ``device``'s architecture ``arch``, which this object has no code for."""
        if objs is None or any(o is None for o, op in zip(objs, self._ops) if op.spec.kind != "builtin"):
            raise NoDeviceError(f"this object was built for {self.archs} but device {device} is sm_{arch}; "
                                "pass the operator again or build for that capability")
        self.build_for([arch], objs)

    def loaded(self, device: int, objs: Sequence[Any] | None = None) -> Loaded:
        """Loaded state for ``device`` (building for its capability first if needed)."""
        hit = self._by_device.get(device)
        if hit is not None:
            return hit
        with self._lock:
            hit = self._by_device.get(device)
            if hit is not None:
                return hit
            major, minor = driver.compute_capability(device)
            arch = major * 10 + minor
            if arch not in self._by_arch:
                self._build_missing(arch, device, objs)
            result = self._by_arch[arch]
            with result.load_lock:
                loaded = result.loaded.get(device)
                if loaded is None:
                    with stats.stage("load", f"device {device}"):
                        loaded = Loaded(result, self.source(arch), device)
                    result.loaded[device] = loaded
            self._by_device[device] = loaded
            return loaded


class CompiledAlgorithm:
    """What every algorithm object offers for inspection: its architectures, cubins and a
    repr that says what it computes."""

    def _inspected_builds(self) -> Builds:
        return self._builds  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        """The algorithm, each argument's type and kind, its operators and options, and the
        architectures it holds code for, e.g. ``<cuprims Reduce: d_in=float32 array,
        d_out=float32 array, op=OpKind.PLUS, has_init=True, ...; sm_90>``."""
        desc = getattr(self, "desc", None)
        fields = [] if desc is None else [_shown_field(f.name, getattr(desc, f.name))
                                          for f in dataclasses.fields(desc)]
        archs = ", ".join(f"sm_{a}" for a in self.compute_capabilities) or "nothing built"
        return f"<cuprims {type(self).__name__.lstrip('_')}: {', '.join(fields)}; {archs}>"

    @property
    def compute_capabilities(self) -> list[int]:
        """The architectures this object holds compiled code for (e.g. [90])."""
        return self._inspected_builds().archs

    def cubin(self, compute_capability: ComputeCapabilityLike | None = None) -> bytes:
        """The compiled code for one architecture (the first built if not given)."""
        return self._inspected_builds().cubin(compute_capability)


def _shown_field(name: str, value: Any) -> str:
    """``name=value`` of one description field, for people: an argument by its name, its
    items' type and what it is; an operator by what the user passed."""
    from cuprims.algorithms.arguments import ArgKind
    from cuprims.op import OpSpec, shown_operator
    from cuprims._value_types import ValueType, shown_dtype

    if isinstance(value, ArgKind):
        if value.is_pointer:
            return f"{value.name}={shown_dtype(value.value.dtype)} array"
        return f"{value.name}={value.key.split('(')[0].replace('_', ' ')} iterator of {shown_dtype(value.value.dtype)}"
    if isinstance(value, OpSpec):
        # the keyword the user wrote; a spec made without one (a default comparator) has "op"
        return f"{value.argument if value.argument not in ('', 'op') else name}={shown_operator(value)}"
    if isinstance(value, ValueType):
        return f"{name}={shown_dtype(value.dtype)}"
    if isinstance(value, enum.Enum):
        return f"{name}={type(value).__name__}.{value.name}"
    return f"{name}={value!r}"


_ALL_WRAPPER_CACHES: list["PerThreadCache"] = []


class PerThreadCache:
    """Algorithm objects cached per thread (so concurrent calls never share mutable
    wrapper state), bounded, and all invalidated at once by ``clear_all_caches()``.
    Each algorithm module keeps one at module level."""

    def __init__(self, max_entries: int = 128):
        self.max_entries = max_entries
        self._tls = threading.local()
        self._generation = 0
        # every live thread's mapping (weakly: a finished thread's goes with it), so that
        # invalidation empties them all at once (their objects hold compiled code: it must
        # not wait for each thread's next lookup)
        self._all: list[weakref.ref] = []
        self._all_lock = threading.Lock()
        _ALL_WRAPPER_CACHES.append(self)

    def _cache(self) -> "OrderedDict":
        tls = self._tls
        if getattr(tls, "generation", -1) != self._generation:
            tls.cache = OrderedDict()
            tls.generation = self._generation
            with self._all_lock:
                self._all = [r for r in self._all if r() is not None]
                self._all.append(weakref.ref(tls.cache))
        return tls.cache

    def get(self, key: Any) -> Any:
        cache = self._cache()
        try:
            obj = cache[key]
        except (KeyError, TypeError):
            return None
        cache.move_to_end(key)
        return obj

    def put(self, key: Any, obj: Any) -> None:
        cache = self._cache()
        try:
            cache[key] = obj
        except TypeError:
            return
        if len(cache) > self.max_entries:
            cache.popitem(last=False)

    def invalidate(self) -> None:
        self._generation += 1
        with self._all_lock:
            for ref in self._all:
                cache = ref()
                if cache is not None:
                    cache.clear()
            self._all.clear()


def invalidate_wrapper_caches() -> None:
    """Make every algorithm's per-thread object cache start afresh (all threads)."""
    for cache in _ALL_WRAPPER_CACHES:
        cache.invalidate()


# The widest offset type any kernel counts items in (long long): a count beyond it cannot
# reach a kernel, whatever the algorithm.
MAX_ITEMS = (1 << 63) - 1


def check_num_items(num_items: Any, name: str = "num_items") -> int:
    """``num_items`` (any count argument: ``num_items``, ``num_samples``, ``num_segments``,
    ...) as an int, checked: a non-negative integer (not a bool) the kernels' 64-bit offsets
    can hold; else ArgumentError naming ``name``."""
    if type(num_items) is int and 0 <= num_items <= MAX_ITEMS:
        return num_items
    if isinstance(num_items, (bool, np.bool_)):  # True is an int to Python, never a count here
        raise ArgumentError(name, "a non-negative integer", num_items)
    try:
        import operator

        value = operator.index(num_items)
    except TypeError:
        raise ArgumentError(name, "a non-negative integer", num_items) from None
    if value < 0:
        raise ArgumentError(name, "a non-negative integer", num_items)
    if value > MAX_ITEMS:
        raise ArgumentError(name, f"at most 2**63 - 1 = {MAX_ITEMS} (the kernels' offsets are 64-bit integers)",
                            num_items)
    return value


def temp_storage_info(temp_storage: Any, needed: int = 0) -> tuple[int, int]:
    """(pointer, size in bytes) of a temporary-storage device array holding at least ``needed`` bytes."""
    ptr, dt, size = array_info(temp_storage, "temp_storage")
    nbytes = size * dt.itemsize
    if nbytes < needed:
        raise ArgumentError("temp_storage", f"at least {needed} bytes", f"{nbytes} bytes")
    return ptr, nbytes
