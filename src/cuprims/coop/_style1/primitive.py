"""What a Style 1 factory returns: a :class:`Primitive`, wrapping a numba-cuda device
function (exec'd from its record's text, as :mod:`cuprims._operators.numba_ops` builds
its wrappers) that calls the provider; numba inlines it into the user's kernel.

The link inputs are *not* given to ``declare_device``: they travel as the primitive's
``files`` for ``@cuda.jit(link=...)`` (:func:`~cuprims.coop._numba.link_files`; a
provider still building is a :func:`pending_files` input, read when numba links).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from cuprims._operators.numba_ops import import_numba
from cuprims.coop._numba import addr, link_files, state_pointer
from cuprims.coop._style1.intrinsics import full_tile_only, oob_check, span, storage_bytes

_pending: dict[int, list] = {}


def pending_files(symbol: str, unit: Future) -> list:
    """The link input of a unit still being built: a ``numba.cuda.LTOIR`` whose bytes are
    the unit's LTO-IR, waited for when numba reads them (at the kernel's link). The same
    object for the same build, as :func:`link_files` gives."""
    files = _pending.get(id(unit))
    if files is None:
        cuda, _, _ = import_numba()

        class PendingLTOIR(cuda.LTOIR):
            @property
            def data(self) -> bytes:
                from cuprims.coop._build import result_of

                return result_of(unit).ltoir

        if len(_pending) >= 4096:
            _pending.clear()
        files = _pending[id(unit)] = [PendingLTOIR(b"", name=f"{symbol}_0.ltoir")]
    return list(files)


def device_function(name: str, source: str, namespace: dict[str, Any]):
    """Exec ``source`` (defining ``name``) and make it a numba device function."""
    cuda, _, _ = import_numba()
    ns = {"cuda": cuda, "__addr": addr(), "__span": span(), "__oob_given": oob_check(),
          "__full_tile": full_tile_only(), "__state": state_pointer(), **namespace}
    exec(compile(source, f"<cuprims coop {name}>", "exec"), ns)
    from numba import types

    if isinstance(namespace.get("T"), types.Record):
        # a record is returned as a pointer to its bytes, which would live in this function's
        # local array: once LLVM inlines the function that slot is dead after the call and is
        # reused by the next one. Inlined at numba's IR level instead, the array is the
        # caller's own, alive as long as the caller's frame.
        return cuda.jit(device=True, inline="always")(ns[name])
    return cuda.jit(device=True, forceinline=True)(ns[name])


class Primitive:
    """A cooperative primitive, called inside a ``@cuda.jit`` kernel.

    ``files`` are its link inputs (``@cuda.jit(link=prim.files)``); ``temp_storage_bytes``
    is the size of the storage a caller may pass instead of the primitive's own shared
    memory (CUB's TempStorage, with room to align it: any ``cuda.shared.array(
    prim.temp_storage_bytes, numba.uint8)`` serves), first or as ``temp_storage=``;
    ``temp_storage_alignment`` (CUB's, at least 8 as numba requires) is the alignment that
    makes that room unused.
    """

    def __init__(self, name: str, device: Any, unit: Any, spec: Any, raw_files: list | None = None):
        self.name = name
        self.spec = spec
        self._device = device
        self._unit = unit          # a coop._build.UnitBuild, or a Future of one (build_unit_soon)
        self._raw_files = list(raw_files or ())   # a RawOp's LTO-IR, linked beside the unit

    def add_method(self, name: str, method: "Primitive") -> None:
        """``self.<name>`` is ``method``, a primitive of the same provider (a histogram's
        ``init``); a kernel calls it as ``prim.<name>(...)`` too."""
        self.__dict__.setdefault("_methods", {})[name] = method
        setattr(self, name, method)

    def _built(self) -> Any:
        unit = self._unit
        if isinstance(unit, Future):
            from cuprims.coop._build import result_of

            unit = self._unit = result_of(unit)    # a failed build raises its error here
        return unit

    @property
    def files(self) -> list:
        unit = self._unit
        if isinstance(unit, Future) and not unit.done():
            # one LTO-IR (the providers: no Python functions), read when numba links
            return pending_files(self.spec.symbol, unit)
        return link_files(self.spec.symbol, self._built().codes) + self._raw_files

    @property
    def temp_storage_layout(self) -> tuple[int, int]:
        """(bytes, alignment) of the provider's TempStorage itself (CUB's)."""
        return self._built().temp[self.spec.symbol]

    @property
    def temp_storage_bytes(self) -> int:
        # with room to align: a ``cuda.shared.array(n, numba.uint8)`` is only byte-aligned
        return storage_bytes(*self.temp_storage_layout)

    @property
    def temp_storage_alignment(self) -> int:
        # numba's shared arrays take alignments that are multiples of the pointer size only
        return max(8, self._built().temp[self.spec.symbol][1])

    @property
    def _numba_type_(self):
        # numba types a global by this attribute: the kernel's calls go through the call
        # forms' overload (storage first or by keyword), which calls our device function
        front = self.__dict__.get("_front")
        if front is None:
            from cuprims.coop._style1.call_forms import add_method, front_type

            inline = self._device.targetoptions.get("inline") == "always"
            front = self._front = front_type(self.name, self._device, inline)
            methods = self.__dict__.get("_methods", {})
            for name, method in methods.items():
                add_method(front, name, method, inline)
            if methods:      # the methods' templates join numba's typing context
                from numba.cuda.descriptor import cuda_target

                cuda_target.typing_context.refresh()
        return front

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{self.name} is a cooperative primitive: call it inside a @cuda.jit kernel "
                        "linked with its .files")

    def __repr__(self) -> str:
        """The primitive, its item type, block or warp shape, items per thread and choices:
        ``<cuprims.coop block.sum: float32, block (128, 1, 1), 1 item per thread,
        algorithm=warp_reductions, op=OpKind.PLUS>``."""
        from cuprims.op import shown_operator
        from cuprims._value_types import shown_dtype

        def shown(vt: Any) -> str:     # a numba extension type by its own name
            return str(vt.numba) if vt.numba is not None else shown_dtype(vt.dtype)

        spec = self.spec
        shape = f"warp of {spec.dims[0]}" if self.name.startswith("warp.") else f"block {spec.dims}"
        parts = [shown(spec.vt), shape, f"{spec.items} item{'s' if spec.items != 1 else ''} per thread"]
        if spec.bins:
            parts.append(f"bins {spec.bins}")
        if spec.runs:
            parts.append(f"{spec.runs} run{'s' if spec.runs != 1 else ''} per thread")
        if spec.values is not None:
            label = "counters" if spec.bins else "lengths" if spec.runs else "values"
            parts.append(f"{label} {shown(spec.values)}")
        parts += [f"{label}={value}" for label, value in (("algorithm", spec.algorithm), ("mode", spec.mode))
                  if value]
        for label, op in (("op", spec.op), ("prefix_op", spec.prefix)):
            if op is not None:
                parts.append(f"{label}={shown_operator(op)}")
        return f"<cuprims.coop {self.name}: {', '.join(parts)}>"
