"""Providers -> LTO-IR (plus their TempStorage layouts), cached in memory and on disk.

One call builds one NVRTC unit holding any number of providers (:func:`build_unit`);
the factories build one provider each today, a future single-phase front end can pass
all of a kernel's at once. The steps, and why:

* NVRTC compiles the unit to LTO-IR for an explicit ``sm_<arch>`` (no GPU needed).
* A probe link of that LTO-IR alone (nvJitLink, ~0.1 s) gives a cubin whose
  ``.nv.global.init`` holds each TempStorage's size and alignment: the host never
  restates CUB's layouts. The probe also proves that the unit links on its own.
* A Python operator is compiled by numba-cuda to LTO-IR of our pointer ABI under the
  symbol the provider calls (``<provider>_op``).

A ``coop`` disk entry (kind of its own, beside ``kernel`` and ``cubin``) keeps the
provider LTO-IR, the operators' LTO-IR and the layouts. Its key is the unit's source
text (which quotes every ProviderSpec key, operator recipes included), the arch, NVRTC
options, the toolchain fingerprint (CCCL, NVRTC, nvJitLink versions...) and, where a
Python operator is compiled, numba-cuda's version.
"""

from __future__ import annotations

import functools
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Sequence

from cuprims import config
from cuprims._base import stats
from cuprims._base.schema import IDENTIFIER, Fields, Int, MapOf, Pair, Same, SchemaError, Str, shown, validate
from cuprims._build.build import digest, disk_cache
from cuprims._cache.entries import MAX_BLOBS
from cuprims._cache.memory import SingleFlightLRU
from cuprims._compile.nvrtc import BASE_OPTIONS, compile_to_ltoir, write_source
from cuprims._compile.toolchain import toolchain_fingerprint
from cuprims.coop._codegen import meta_fields, meta_symbol, unit_source
from cuprims.coop._records import record
from cuprims.coop._spec import ProviderSpec

ENTRY_KIND = "coop"


@dataclass(frozen=True)
class UnitBuild:
    """A compiled provider unit: link inputs and each provider's TempStorage layout."""

    arch: int
    ltoir: bytes
    op_ltoirs: tuple[bytes, ...]
    temp: dict[str, tuple[int, int]]   # provider symbol -> (bytes, alignment)

    @property
    def codes(self) -> tuple[bytes, ...]:
        """Every LTO-IR a kernel calling these providers must link."""
        return (self.ltoir,) + self.op_ltoirs


_memory = SingleFlightLRU(256)


def unit_key(specs: Sequence[ProviderSpec], arch: int) -> str:
    source = unit_source(specs, arch)
    parts = ["coop", toolchain_fingerprint(), f"sm_{arch}", " ".join(BASE_OPTIONS), source.text]
    if any(sp.python_ops for sp in specs):
        from cuprims._operators.numba_ops import numba_version

        parts.append("numba-cuda=" + numba_version())
    return digest(*parts)


# A coop entry's metadata read back from disk (the checksum finds damage, not forgery):
# TempStorage layouts within what a block's shared memory can hold, and as many operator
# LTO-IRs as an entry may hold blobs.
_ENTRY = Fields({
    "arch": Same("arch", "the architecture it is read for"),
    "temp": MapOf(Str(256, IDENTIFIER, "a provider symbol"),
                  Pair(Int(1, 1 << 20, "TempStorage bytes"), Int(1, 4096, "an alignment"),
                       what="[bytes, alignment] of a TempStorage"), 0, 4096, "TempStorage layouts"),
    "ops": Int(0, MAX_BLOBS - 1, "a count of operator LTO-IRs"),
}, "a coop entry's metadata")


def _reader(specs: Sequence[ProviderSpec], arch: int):
    """Checks a ``coop`` entry against what ``specs`` need; any mismatch raises, and the
    disk cache drops the entry and rebuilds."""
    symbols = {sp.symbol for sp in specs}
    n_ops = sum(len(sp.python_ops) for sp in specs)

    def read(meta: dict[str, Any], blobs: dict[str, bytes]) -> UnitBuild:
        checked = validate(_ENTRY, meta, "meta", arch=arch)
        temp, ops = checked["temp"], checked["ops"]
        if set(temp) != symbols:
            raise SchemaError("meta.temp", f"the providers {', '.join(sorted(symbols))}", shown(sorted(temp)))
        if ops < n_ops:
            raise SchemaError("meta.ops", f"at least {n_ops} (one per Python operator)", shown(ops))
        names = {"ltoir"} | {f"op{i}" for i in range(ops)}
        if set(blobs) != names or not all(blobs.values()):
            raise SchemaError("blobs", f"the non-empty blobs {', '.join(sorted(names))}", shown(sorted(blobs)))
        return UnitBuild(arch, blobs["ltoir"], tuple(blobs[f"op{i}"] for i in range(ops)),
                         {k: (v[0], v[1]) for k, v in temp.items()})

    return read


def _operator_ltoirs(specs: Sequence[ProviderSpec], arch: int, objs: dict[str, Any]) -> list[bytes]:
    """LTO-IR of every Python function the providers call, in :attr:`ProviderSpec.python_ops`
    order; ``objs`` maps each one's symbol to the function."""
    from cuprims._operators.numba_ops import compile_python_op, compile_state_op, import_numba

    codes: list[bytes] = []
    for sp in specs:
        for symbol, op in sp.python_ops:
            import_numba()
            stats.bump("numba_compiles")
            with stats.stage("numba compile", op.name):
                if symbol == sp.prefix_symbol:
                    # the block prefix callback: prefix(state array, aggregate) -> T
                    codes += compile_state_op(objs[symbol], sp.prefix_state, (sp.vt,), sp.vt, symbol,
                                              (arch // 10, arch % 10), op_name=op.name)
                else:
                    # a comparator writes a flag byte (result type None), a combiner a value
                    result = None if record(sp.kind).compares else sp.vt
                    codes += compile_python_op(objs[symbol], (sp.vt, sp.vt), result, symbol,
                                               (arch // 10, arch % 10), op_name=op.name)
    return codes


def _raw_codes(specs: Sequence[ProviderSpec], objs: dict[str, Any]) -> list[tuple[str, tuple[bytes, ...]]]:
    """(link name, LTO-IRs) of each RawOp ``specs`` call (``objs``: symbol -> RawOp): its
    own LTO-IR and the extra ones it needs."""
    return [(f"cuprims_raw_{op.key[:16]}_{symbol}", (objs[symbol].ltoir, *objs[symbol].extra_ltoirs))
            for sp in specs for symbol, op in sp.raw_ops]


def raw_link_files(specs: Sequence[ProviderSpec], objs: dict[str, Any]) -> list:
    """The link inputs of the RawOps ``specs`` call: the same objects for the same RawOp, so
    that a kernel whose primitives share one links it once (its symbol is defined strongly)."""
    from cuprims.coop._numba import link_files

    return [f for name, codes in _raw_codes(specs, objs) for f in link_files(name, codes)]


def _compile(specs: Sequence[ProviderSpec], arch: int, objs: dict[str, Any]) -> UnitBuild:
    from cuprims._compile.elfmeta import read_meta
    from cuprims._compile.link import link_cubin

    source = unit_source(specs, arch)

    def providers() -> bytes:
        with stats.stage("nvrtc", f"sm_{arch}"):
            return compile_to_ltoir(source, arch)[0]

    if any(sp.python_ops for sp in specs):
        # NVRTC (native, releases the GIL) runs beside numba's Python-heavy compile of the
        # operators, as the device-wide builds do
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cuprims-coop-nvrtc") as pool:
            pending = pool.submit(providers)
            op_codes = _operator_ltoirs(specs, arch, objs)
            ltoir = pending.result()
    else:
        ltoir, op_codes = providers(), []
    # a RawOp's LTO-IR is the user's, linked beside the unit (raw_link_files), not part of it
    raw = [code for _, codes in _raw_codes(specs, objs) for code in codes]
    with stats.stage("link", "coop probe"):
        cubin = link_cubin(ltoir, op_codes + raw, arch)
    values = read_meta(cubin, meta_symbol(specs), meta_fields(specs))
    temp = {sp.symbol: (values[f"{sp.symbol}_bytes"], values[f"{sp.symbol}_align"]) for sp in specs}
    return UnitBuild(arch, ltoir, tuple(op_codes), temp)


def build_unit(specs: Sequence[ProviderSpec], arch: int, objs: dict[str, Any] | None = None) -> UnitBuild:
    """LTO-IR of one unit holding ``specs``' providers for ``sm_<arch>``, from cache if possible.

    ``objs`` maps the symbol of each Python function a provider calls
    (:attr:`ProviderSpec.python_ops`: its ``op_symbol``, ``prefix_symbol``) to the callable,
    and of each RawOp (:attr:`ProviderSpec.raw_ops`) to the RawOp.

    Example::

        unit = build_unit([spec], 90)
        unit.temp[spec.symbol]      # (TempStorage bytes, alignment)
    """
    specs = list(dict.fromkeys(specs))
    objs = objs or {}
    if config.dump_dir() is not None:
        write_source(unit_source(specs, arch).text)   # dumped on a cache hit too, as device-wide units are
    if not all(op.persistent for sp in specs for _, op in sp.python_ops):
        return _compile(specs, arch, objs)   # an operator keyed by identity: never cached
    key = unit_key(specs, arch)
    disk = disk_cache()

    def from_disk_or_compile() -> UnitBuild:
        if disk is None:
            return _compile(specs, arch, objs)

        def compile_and_keep() -> UnitBuild:
            unit = _compile(specs, arch, objs)
            blobs = {"ltoir": unit.ltoir, **{f"op{i}": c for i, c in enumerate(unit.op_ltoirs)}}
            disk.put(ENTRY_KIND, key, {"arch": arch, "temp": {k: list(v) for k, v in unit.temp.items()},
                                       "ops": len(unit.op_ltoirs)}, blobs)
            return unit

        return disk.get_or_build(ENTRY_KIND, key, _reader(specs, arch), compile_and_keep)

    return _memory.get_or_build(key, from_disk_or_compile)


_background: ThreadPoolExecutor | None = None
_background_lock = threading.Lock()
_soon: dict[str, Future] = {}
# builds running on the pool, and in a forked child those whose thread stayed in the parent
_in_flight: dict[int, tuple] = {}
_orphans: dict[int, tuple] = {}


def build_unit_soon(specs: Sequence[ProviderSpec], arch: int) -> Future:
    """:func:`build_unit` of providers that call no Python function, on a worker thread:
    NVRTC (native, it releases the GIL) then runs while numba compiles the user's kernel,
    which needs the providers' LTO-IR only when it links. The future's result is the
    :class:`UnitBuild`; cuprims' counters wait for it (``stats.track``)."""
    global _background
    assert not any(sp.python_ops for sp in specs), "Python functions are compiled by numba, on the caller's thread"
    specs = list(dict.fromkeys(specs))
    if config.dump_dir() is not None:
        # dumping (debugging): built here, so the source is in the dump directory when the
        # factory returns
        done: Future = Future()
        done.set_result(build_unit(specs, arch))
        return done
    _import_build_modules()
    key = unit_key(specs, arch)
    with _background_lock:
        future = _soon.get(key)
        if future is not None:          # the same providers asked for again: the same build
            return future
        if _background is None:
            # a pool's threads are joined at interpreter exit, so NVRTC is never cut off there
            _background = ThreadPoolExecutor(max_workers=2, thread_name_prefix=stats.BACKGROUND_THREADS)
        if len(_soon) >= 1024:
            _soon.clear()
        future = _soon[key] = _background.submit(build_unit, specs, arch)
        _in_flight[id(future)] = (future, specs, arch)
    future.add_done_callback(lambda f: _landed(key, f))
    stats.track(future)
    return future


def result_of(future: Future) -> UnitBuild:
    """``future.result()``; in a child of a fork made while the build ran (its thread
    stayed in the parent), the build runs here instead."""
    if id(future) in _orphans and not future.done():
        _, specs, arch = _orphans.pop(id(future))
        try:
            future.set_result(build_unit(specs, arch))
        except BaseException as exc:   # noqa: BLE001 - kept for whoever waits, as the thread would
            future.set_exception(exc)
    return future.result()


def _landed(key: str, future: Future) -> None:
    with _background_lock:
        _in_flight.pop(id(future), None)
        if future.exception() is not None and _soon.get(key) is future:
            del _soon[key]                     # a failure is not kept: asked again, built again


def _after_fork_in_child() -> None:
    # the pool's threads, and the builds they were running, stayed in the parent
    global _background, _background_lock
    _background, _background_lock = None, threading.Lock()
    _orphans.update((k, v) for k, v in _in_flight.items() if not v[0].done())
    _in_flight.clear()
    _soon.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


@functools.lru_cache(maxsize=None)
def _import_build_modules() -> None:
    """Import here, on the caller's thread, what a build imports lazily: a package that a
    worker is importing while numba (on the caller's thread) imports it too is seen half
    initialised (ImportError from inside numba's typing)."""
    from cuprims._base import lazy
    from cuprims._compile import elfmeta, link  # noqa: F401

    lazy.cuda_core()
    import cuda.bindings.nvrtc  # noqa: F401  (the PCH path's)


def clear_memory() -> None:
    stats.settle()
    with _background_lock:
        _soon.clear()
    _memory.clear()
