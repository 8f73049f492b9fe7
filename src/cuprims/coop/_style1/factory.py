"""spec -> :class:`~.primitive.Primitive`: what every Style 1 factory ends with.

A factory checks its arguments and describes its primitive as a :class:`ProviderSpec`;
:func:`make_primitive` builds (or finds) the provider, declares its entry points to
numba-cuda (their ABI is the record's) and wraps the record's device function text.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from cuprims.coop._build import build_unit, build_unit_soon, raw_link_files, result_of
from cuprims.coop._codegen import entries, own_storage_warps
from cuprims.coop._numba import declare, numba_type, state_pointer
from cuprims.coop._records import record
from cuprims.coop._spec import ProviderSpec
from cuprims.coop._style1.intrinsics import temp_storage_pointer
from cuprims.coop._style1.primitive import Primitive, device_function
from cuprims.coop._target import current_arch


def _namespace(spec: ProviderSpec, unit: Any) -> dict[str, Any]:
    """The names a record's device function text uses (see ``_records/_texts.py``): the
    entry points (``ext``, ``ext_valid_ts``...), ``T`` (the element's numba type), ``V``
    (a sort's value type), ``i32``, ``i64``, ``ITEMS`` (items per thread), ``TILE`` (the
    group's items), ``__state`` (a prefix state's data, checked against the state's element
    type) and ``__temp(temp_storage)``, the caller's storage, after a trap unless it holds
    the provider's TempStorage (size and alignment)."""
    from cuprims._operators.numba_ops import import_numba

    types = import_numba()[1]
    namespace: dict[str, Any] = {"T": numba_type(spec.vt), "i32": types.int32, "i64": types.int64}
    if spec.values is not None:
        namespace["V"] = numba_type(spec.values)
    if spec.prefix_state is not None:
        namespace["__state"] = state_pointer(numba_type(spec.prefix_state))
    # what a call touches: each thread's items, and the group's tile (a load's or store's
    # array; the count a num_valid is clamped to)
    namespace["ITEMS"], namespace["TILE"] = spec.items, spec.items * spec.threads
    if spec.bins:
        namespace["BINS"] = spec.bins     # a histogram's counters
    if spec.runs:
        namespace["RUNS"] = spec.runs     # a run-length decode's runs per thread

    def layout() -> tuple[int, int]:     # (TempStorage bytes, alignment): waits for the build
        return (result_of(unit) if isinstance(unit, Future) else unit).temp[spec.symbol]

    namespace["__temp"] = temp_storage_pointer(layout)
    for entry in entries(spec):
        for ts in ("", "_ts"):
            abi = entry.abi + (("void*",) if ts else ())
            namespace["ext" + entry.suffix + ts] = declare(spec.symbol + entry.suffix + ts, abi, spec.vt, spec.values)
    return namespace


def make_primitive(name: str, spec: ProviderSpec, op: Any = None, prefix: Any = None) -> Primitive:
    """Build ``spec``'s provider and return the :class:`Primitive` calling it.

    ``op`` is the Python operator or RawOp (or None), ``prefix`` the Python prefix callback
    (or None).
    A warp primitive whose storage holds a tile says how many logical warps its own
    storage serves (``own_storage_warps``)."""
    functions = {spec.op_symbol: op, spec.prefix_symbol: prefix}
    objs = {symbol: functions[symbol] for symbol, _ in spec.python_ops + spec.raw_ops}
    arch = current_arch()
    # providers calling no Python function build on a worker thread, beside numba's compile
    # of the user's kernel (which reads their LTO-IR only when it links); numba compiles
    # Python functions, so those providers build here (and those calling a RawOp, whose
    # probe link needs it)
    unit = (build_unit([spec], arch, objs) if spec.python_ops or spec.raw_ops
            else build_unit_soon([spec], arch))
    raw = raw_link_files([spec], objs)
    rec = record(spec.kind)
    namespace = _namespace(spec, unit)
    text = rec.style1(spec)
    prim = Primitive(name, device_function("prim", text, namespace), unit, spec, raw)
    for method in rec.methods:      # e.g. a histogram's init and composite, beside the whole
        prim.add_method(method, Primitive(f"{name}.{method}", device_function(f"prim_{method}", text, namespace),
                                          unit, spec, raw))
    if rec.tile_budget:
        prim.own_storage_warps = own_storage_warps(spec.dims[0], prim.temp_storage_layout[0], rec.tile_budget)
    return prim
