"""The algorithm skeleton: a frozen description per build and one base class that runs it.

An algorithm's home writes a :class:`Description` subclass (a frozen dataclass made with
:func:`description`: its types, argument kinds, operator specs and options; the object-cache
key, the code generator's input, the operators to link, the kernels' parameter layout and
the record a serialized object stores; no user object), a :class:`Plan` (launch facts read
from the build's exported metadata once per device), the dispatch (``_temp_bytes`` and
``_dispatch``) and its public functions (docs/design/adding-an-algorithm.md).

:class:`Algorithm` owns the rest: the per-thread object cache, builds per compute capability
and variant, per-device plans, the retry on another device after a failed launch, temporary
storage (the size query, a caller's buffer checked, one-shot allocation) and, through
:class:`~cuprims.algorithms.call_memo.CallMemo`, the memo of the last call's bound arrays.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from threading import get_ident
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

# a Description subclass is a frozen dataclass with a cached hash
from cuprims._base.frozen import frozen as description
from cuprims._build.results import OpInput
from cuprims._compile.source import Source
from cuprims._compile.targets import parse_compute_capability, targets
from cuprims._runtime import devices as _devices
from cuprims._runtime import driver
from cuprims._runtime.devices import several as several_devices
from cuprims._runtime.streams import stream_handle
from cuprims.algorithms.arguments import ArgKind, linked_objects, signature
from cuprims.algorithms.call_memo import CallMemo, weak
from cuprims.algorithms.common import Builds, CompiledAlgorithm, Loaded, PerThreadCache, temp_storage_info
from cuprims.algorithms import scratch
from cuprims.algorithms.operators import combiner_ops, combiner_spec, functor_size, functor_state  # noqa: F401 (re-exported)
from cuprims.config import settings
from cuprims.errors import ArgumentError, CudaError
from cuprims.op import OpSpec

if TYPE_CHECKING:
    from typing_extensions import Self

_D = TypeVar("_D", bound="Description")

# Descriptions remembered per algorithm class (by argument signatures) before starting afresh.
_MAX_DESCRIPTIONS = 512


class Description:
    """Base of every algorithm's description (subclasses are made with :func:`description`)."""

    def source(self, arch: int) -> Source:
        """The generated translation unit for ``sm_<arch>``."""
        raise NotImplementedError

    def linked_ops(self) -> tuple[OpInput, ...]:
        """Operators linked beside the kernel (Python callables, RawOps), in a fixed order
        (computed once per description by :meth:`_link`)."""
        ops = self.__dict__.get("_linked")
        if ops is None:
            ops = self._link()
            object.__setattr__(self, "_linked", ops)
        return ops

    def _link(self) -> tuple[OpInput, ...]:
        return ()

    def kernel_params(self) -> tuple[tuple[Any, ...], ...]:
        """Parameter kinds of each kernel, in the code generator's order (the CPU tests
        check them against the parameter sizes recorded in the cubin)."""
        raise NotImplementedError

    @property
    def operator(self) -> OpSpec | None:
        """The algorithm's own operator (``op``; a search's ``comp``), if it has one."""
        return getattr(self, "op", None)

    def variant(self, index: int) -> Self:
        """Build variant ``index``'s description: 0 this one; 1 ``wide_offsets`` flipped, where it is a field."""
        if index == 1 and hasattr(self, "wide_offsets"):
            return dataclasses.replace(self, wide_offsets=not self.wide_offsets)  # type: ignore[type-var]
        if index:
            raise IndexError(index)
        return self

    @cached_property
    def persistent(self) -> bool:
        """Whether the build may be cached (in memory by description, and on disk): false
        when an operator's key holds an object identity."""
        return all(op.spec.persistent for op in self.linked_ops())


@description
class CombinerDescription(Description):
    """An algorithm that combines the items of ``d_in`` with ``op`` in the type of ``d_out``
    (reduce, scan): its linked operators are ``op`` and those inside the iterators."""

    d_in: ArgKind
    d_out: ArgKind
    op: OpSpec

    def _link(self) -> tuple[OpInput, ...]:
        return combiner_ops(self.op, self.d_out.value) + self.d_in.linked_ops() + self.d_out.linked_ops()


class Plan:
    """Launch facts of one build on one device. ``temp_align``: the address alignment a
    caller's temporary storage must have; ``pdl_capable`` (a plan of several kernels whose
    device takes programmatic dependent launch): :meth:`Algorithm._launcher` uses it."""

    temp_align = 1
    device = -1
    pdl_capable = False
    pdl = False
    pdl_version = -1  # settings.version when ``pdl`` was last decided


# What Algorithm.serialize calls: cuprims.serialize, which lives in the layer above this
# one; the package hands it down (use_serializer) when it loads an algorithm.
_serializer: Callable[[Any], bytes] | None = None


def use_serializer(serializer: Callable[[Any], bytes]) -> None:
    """Make ``serializer`` (``cuprims.serialize``) what :meth:`Algorithm.serialize` calls."""
    global _serializer
    _serializer = serializer


class Algorithm(CallMemo, CompiledAlgorithm):
    """Base of every built algorithm object, made from one :class:`Description` (``desc``).
    Subclasses implement ``_make_plan``, ``_temp_bytes`` and ``_dispatch``."""

    _object_cache: PerThreadCache
    _state = b"\0"  # the functor parameter of an operator without state (with state: packed per call)
    _frozen = False  # made by cuprims.deserialize: it holds the builds it will ever have
    _descriptions: dict[tuple, Any]  # Description subclasses, as describe() made them
    _interned: dict[Any, Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._object_cache = PerThreadCache()
        cls._descriptions = {}
        cls._interned = {}

    def __init__(self, desc: Description, compute_capability: Any, raw: Sequence[Any]):
        self._adopt(desc, {})
        self._builds.build_for(targets(compute_capability), self._objects(*raw))

    def _adopt(self, desc: Description, variant_builds: dict[int, Builds]) -> None:
        """The state of an object for ``desc`` with these builds (a new object's start empty;
        a deserialized one's come from its blob)."""
        self.desc = desc
        self._variant_builds = variant_builds
        self._builds = self._builds_of(0)
        # _plans: the plan of each variant on the device used last. In a process that sees one
        # device, calls read it (through _fast_plans, the same dict; a failed launch calls for a
        # fresh look). In one that sees several, _fast_plans is left an empty dict that nothing
        # writes, and every call finds the current device's plan in _device_plans (see
        # _current_plan), so threads on different devices never take each other's plan.
        self._plans: dict[int, Any] = {}
        self._fast_plans = self._plans
        self._device_plans: dict[tuple[int, int], Any] = {}
        self._packs = tuple(driver.ParamPack(kinds) for kinds in desc.kernel_params())
        self._variant_packs: dict[int, tuple[Any, ...]] = {0: self._packs}
        self._setup()

    def _packs_of(self, variant: int) -> tuple[Any, ...]:
        """Variant ``variant``'s parameter blocks, one per kernel (laid out at their first use)."""
        if variant not in self._variant_packs:
            kinds = self.desc.variant(variant).kernel_params()
            self._variant_packs[variant] = tuple(driver.ParamPack(k) for k in kinds)
        return self._variant_packs[variant]

    def serialize(self) -> bytes:
        """This object as bytes: its description and every cubin it holds, as
        :func:`cuprims.serialize` gives them (:func:`cuprims.deserialize` makes it again).

        Example::

            import numpy as np, cuprims
            r = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32),
                                         op=cuprims.OpKind.PLUS, h_init=cuprims.ProxyValue(np.float32),
                                         compute_capability=90)      # no GPU needed
            again = cuprims.deserialize(r.serialize())
            assert again.cubin(90) == r.cubin(90)
        """
        if _serializer is None:
            raise RuntimeError("cuprims.serialize is not loaded: import cuprims (the package sets it up)")
        return _serializer(self)

    # -- construction ---------------------------------------------------------------
    @classmethod
    def _described(cls, describe: Callable[..., _D], *args: Any) -> _D:
        """``describe(*args)``, remembered by the arguments' signatures: a one-shot call
        with the types of an earlier one skips the checks that call passed. Equal
        descriptions reached from different argument types (arrays, DoubleBuffers,
        placeholders) are one object, so the object cache finds them by identity."""
        key = tuple([signature(a) for a in args])
        desc = cls._descriptions.get(key)
        if desc is not None:
            return desc
        desc = describe(*args)
        if None in key:
            return desc
        if len(cls._descriptions) >= _MAX_DESCRIPTIONS:
            cls._descriptions.clear()
            cls._interned.clear()
        desc = cls._interned.setdefault(desc, desc)
        cls._descriptions[key] = desc
        return desc

    @classmethod
    def _make(cls, desc: Description, compute_capability: Any, raw: Sequence[Any]) -> Self:
        """The object for ``desc`` from this thread's cache, or a new one (built now).

        ``raw``: the call's operator, then its iterator arguments (see :meth:`_objects`)."""
        archs = parse_compute_capability(compute_capability)
        if not desc.persistent:
            return cls(desc, archs, raw)
        key = (desc, None if archs is None else tuple(archs))
        obj = cls._object_cache.get(key)
        if obj is None:
            obj = cls(desc, archs, raw)
            cls._object_cache.put(key, obj)
        return obj

    @classmethod
    def _forget_descriptions(cls) -> None:
        """Drop the remembered descriptions of this class and its subclasses."""
        if "_descriptions" in vars(cls):
            cls._descriptions.clear()
            cls._interned.clear()
        for sub in cls.__subclasses__():
            sub._forget_descriptions()

    def _setup(self) -> None:
        """Per-object constants derived from ``self.desc`` (parameter packs and the like)."""

    def _objects(self, op: Any = None, *iterators: Any) -> list[Any]:
        """The Python objects behind ``desc.linked_ops()``, in order: the algorithm's own
        operator ``op`` (kept in its slot when missing, None, so that a build for another
        device asks for it), then those inside the call's iterator arguments, in the order
        the description lists them. Needed only for a build; never kept."""
        own = self.desc.operator
        return ([op] if own is not None and own.kind != "builtin" else []) + linked_objects(*iterators)

    def _builds_of(self, variant: int) -> Builds:
        builds = self._variant_builds.get(variant)
        if builds is None:
            if self._frozen:
                from cuprims.errors import BlobError

                raise BlobError("the call needs a build variant the blob does not hold (e.g. 64-bit offsets "
                                "past 2^31 - 1 items: run such a call before serializing)",
                                f"variants {sorted(self._variant_builds)}", f"variant {variant}")
            desc = self.desc.variant(variant)
            builds = self._variant_builds[variant] = Builds(desc.source, desc.linked_ops())
        return builds

    # -- what subclasses provide ---------------------------------------------------
    def _make_plan(self, loaded: Loaded, variant: int) -> Plan:
        raise NotImplementedError

    def _temp_bytes(self, plan: Any, args: Any) -> int:
        """Temporary bytes the call with bound arguments ``args`` needs on ``plan`` (0: none)."""
        return 0

    def _dispatch(self, plan: Any, args: Any, temp: int, stream: int) -> None:
        raise NotImplementedError

    def _launcher(self, plan: Plan) -> Callable[[Any, int, int, int, int], None]:
        """How to launch ``plan``'s kernels: with programmatic dependent launch (the next
        kernel's blocks are scheduled while the previous one finishes, as CUB launches
        on sm_90+) where the plan may and ``settings.pdl`` is on (re-read after a setting
        changes in code), else plainly."""
        if plan.pdl_version != settings.version:
            plan.pdl = plan.pdl_capable and settings.pdl
            plan.pdl_version = settings.version
        return self._pdl_or_plain if plan.pdl else driver.launch

    def _pdl_or_plain(self, kernel: Any, grid: int, block: int, stream: int, params: int) -> None:
        if not driver.launch_pdl(kernel, grid, block, stream, params):
            # PDL is unavailable on this device: its plans launch plainly from now on
            device = driver.current_device()
            for plan in (*self._plans.values(), *self._device_plans.values()):
                if plan.device == device:
                    plan.pdl = plan.pdl_capable = False

    # -- per device ----------------------------------------------------------------
    def _device_plan(self, device: int, raw: Sequence[Any], variant: int = 0) -> Any:
        """The plan of ``variant`` on ``device`` (loading the build there first if needed)."""
        if several_devices() and self._fast_plans is self._plans:
            # Calls stop reading the last-used plans (that dict stays empty from now on):
            # each finds its device's plan in _device_plans.
            self._plans = {}
        loaded = self._builds_of(variant).loaded(device, self._objects(*raw))
        plan = loaded.extra.get("plan")
        if plan is None:
            plan = loaded.extra["plan"] = self._make_plan(loaded, variant)
            plan.device = device
        self._device_plans[(device, variant)] = plan
        self._plans[variant] = plan
        return plan

    def _current_plan(self, raw: Sequence[Any], variant: int) -> Any:
        """The plan of ``variant`` on the current device: every call's way in a process with
        several devices, the first call's with one."""
        device = driver.current_device()
        plan = self._device_plans.get((device, variant))
        if plan is None or self._fast_plans is self._plans:
            plan = self._device_plan(device, raw, variant)
        return plan

    # -- a call ----------------------------------------------------------------------
    def _temp_storage(self, temp_storage: Any, needed: int) -> tuple[int, int, Any]:
        """(pointer, bytes, what to remember after the call succeeds) of the caller's buffer:
        read, or the last successful call's very buffer (the memo of :class:`CallMemo`)."""
        last = self._last_temp
        if last is not None and last[0]() is temp_storage and _devices._several is False:
            if last[2] < needed:
                raise ArgumentError("temp_storage", f"at least {needed} bytes", f"{last[2]} bytes")
            return last[1], last[2], None
        temp, available = temp_storage_info(temp_storage, needed)
        ref = weak(temp_storage)
        return temp, available, None if ref is None else (ref, temp, available)

    def _execute(self, temp_storage: Any, stream: Any, one_shot: bool, args: Any, raw: Sequence[Any],
                 variant: int = 0, memo: tuple | None = None) -> int | None:
        """Size temporary storage, or run: the query (``temp_storage=None`` outside a
        one-shot call) returns the bytes needed (at least 1) and launches nothing.

        ``args``: the bound call (whatever ``_temp_bytes``/``_dispatch`` take); ``raw``: the
        call's operator and iterator arguments, for :meth:`_objects` if a build is missing;
        ``memo``: the ``(arrays, counts, bound)`` of freshly bound arrays, remembered
        (:meth:`_remember`) once the call has succeeded."""
        plan = self._fast_plans.get(variant)
        if plan is None:
            plan = self._current_plan(raw, variant)
        needed = self._temp_bytes(plan, args)
        # checked on every call, the size query too: a bad stream fails where it is passed
        s = stream_handle(stream) if stream is not None else 0
        if temp_storage is None and not one_shot:
            if memo is not None:
                self._remember(*memo)
            return needed or 1
        owned = temp = available = 0
        seen = shared = None
        if needed:
            if temp_storage is None and s == 0 and needed <= scratch.MAX_BYTES and scratch.holder != get_ident():
                # a one-shot call on the legacy default stream: the buffer such calls share
                shared = scratch.lock
                shared.acquire()
                scratch.holder = get_ident()
                try:
                    temp = scratch.shared_buffer(needed, plan.device)
                except BaseException:
                    scratch.holder = None
                    shared.release()
                    raise
                available = needed
            elif temp_storage is None:
                owned = temp = driver.alloc_async(needed, s, plan.device)
                available = needed
            else:
                temp, available, seen = self._temp_storage(temp_storage, needed)
                if temp % plan.temp_align:
                    raise ArgumentError("temp_storage", f"an address aligned to {plan.temp_align} bytes", hex(temp))
        try:
            try:
                self._dispatch(plan, args, temp, s)
            except CudaError:
                device = driver.current_device()
                if device == plan.device:
                    raise
                # Another device (possibly of another architecture) is current: use its build,
                # whose tiles (and so its temporary storage) may differ.
                self._plans.clear()
                fresh = self._device_plan(device, raw, variant)
                fresh_needed = self._temp_bytes(fresh, args)
                if shared is not None:   # the new device's own buffer
                    temp = scratch.shared_buffer(fresh_needed, fresh.device) if fresh_needed else 0
                elif fresh_needed > available or (fresh_needed and temp % fresh.temp_align):
                    if not owned:
                        raise ArgumentError("temp_storage", "storage sized on the device it is used with (query "
                                            "the size again after switching devices)", "a stale size") from None
                    driver.free_async(owned, s)
                    owned = temp = driver.alloc_async(fresh_needed, s, fresh.device)
                self._dispatch(fresh, args, temp, s)
        finally:
            if owned:
                driver.free_async(owned, s)
            if shared is not None:
                scratch.holder = None
                shared.release()
        if seen is not None and _devices._several is False:
            self._last_temp = seen
        if memo is not None:
            self._remember(*memo)
        return None
