"""The one module that runs the stages: codegen output -> NVRTC -> numba ops -> link -> cache.

A build request is a generated :class:`Source`, a target arch and the operators that
must be linked beside it. Keys:

* ``kernel`` entries (NVRTC output) are keyed by the source text, arch, options and
  toolchain: a Python operator is referenced only as an external symbol, so one kernel
  LTO-IR serves every Python operator over the same types.
* ``cubin`` entries (final linked code plus metadata) add each operator's recipe.
* a unit with no operator to link (built-in operators only) skips both the ``kernel``
  entry and nvJitLink: NVRTC compiles it straight to its ``cubin`` entry
  (:func:`.nvrtc.compile_to_cubin`, the same machine code).

A Python operator that is a small expression (``OpSpec.expr``, translated for its types
by :func:`.functors.direct_expr`) is C++ inside the source: nothing is compiled or linked
for it, and numba is not imported.

Operators whose recipe is not persistent (it names an object identity) are built
without any caching.

Entries read from disk are checked against what this build expects (the readers below)
before they are used. Each kind has its own per-key lock; a ``kernel`` lock is taken
while the ``cubin`` lock is held, never the other way round.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Sequence

from cuprims import config
from cuprims._base.schema import Fields, Same, SchemaError, shown, validate
from cuprims.op import RawOp
from cuprims._base import stats
from cuprims._cache.memory import SingleFlightLRU
from cuprims._compile.source import META_SYMBOL, Source
from cuprims._cache.disk import DiskCache, configured_cache
from cuprims._compile.elfmeta import read_meta
from cuprims._codegen.functors import is_direct
from cuprims._base.log import logger
from cuprims._compile.nvrtc import BASE_OPTIONS, DIRECT_BASE_OPTIONS, compile_to_cubin, compile_to_ltoir, write_source
from cuprims._build.results import KERNELS, META, BuildResult, OpInput, checked_result  # noqa: F401 (re-exported)
from cuprims._compile.toolchain import toolchain_fingerprint

_memory = SingleFlightLRU(config.memory_cache_size())
_kernel_memory = SingleFlightLRU(64)


def memory_cache() -> SingleFlightLRU:
    return _memory


def disk_cache() -> DiskCache | None:
    return configured_cache()


def digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()


def _unit_key(kind: str, options: Sequence[str], source: Source, arch: int) -> str:
    return digest(kind, toolchain_fingerprint(), f"sm_{arch}", " ".join(options),
                   repr(source.compile_options), source.text, "\n".join(source.name_expressions))


def kernel_key(source: Source, arch: int) -> str:
    return _unit_key("kernel", BASE_OPTIONS, source, arch)


def _numba_ops(ops: Sequence[OpInput]) -> bool:
    """Whether numba compiles any of ``ops`` (a Python operator the unit does not compute itself)."""
    return any(op.spec.kind == "python" and not is_direct(op) for op in ops)


def links_nothing(source: Source, ops: Sequence[OpInput]) -> bool:
    """A unit whose operators are all in its own C++ (built-in ones, and Python ones
    translated to C++): NVRTC compiles it straight to the cubin, with no LTO link
    (``settings.direct_cubin``, on by default)."""
    return (config.settings.direct_cubin and not source.extern_symbols
            and all(op.spec.kind == "python" and is_direct(op) for op in ops))


def build_key(source: Source, arch: int, ops: Sequence[OpInput]) -> str:
    if links_nothing(source, ops):   # compiled by other options, to another output: its own key
        parts = [_unit_key("direct", DIRECT_BASE_OPTIONS, source, arch)]
    else:
        parts = [kernel_key(source, arch)]
    for op in ops:
        # a direct operator is C++ in the source (so in the kernel key); marked here all the same
        kind = "python-direct" if op.spec.kind == "python" and is_direct(op) else op.spec.kind
        parts.append(f"{op.symbol}|{kind}|{op.spec.key}|"
                     + ",".join(vt.code for vt in op.arg_types) + "->"
                     + ("ignored" if op.ignores_result else op.result_type.code if op.result_type else "flag"))
    if _numba_ops(ops):
        from cuprims._operators.numba_ops import numba_version

        parts.append("numba-cuda=" + numba_version())
    return digest("cubin", *parts)


# The metadata of a kernel entry (LTO-IR) and of a cubin entry, read back from disk; the
# kernels and metadata are then checked against the unit they are read for (and a cubin
# against itself: results.checked_result). Anything that does not fit raises, so the disk
# cache drops the entry and it is rebuilt.
_KERNEL_ENTRY = Fields({"symbols": KERNELS}, "a kernel entry's metadata")
_CUBIN_ENTRY = Fields({"arch": Same("arch", "the architecture it is read for"), "kernels": KERNELS, "meta": META},
                      "a cubin entry's metadata")


def _blob_names(blobs: dict[str, bytes], name: str) -> None:
    if set(blobs) != {name} or not blobs[name]:
        raise SchemaError("blobs", f"one non-empty blob, {name}", shown(sorted(blobs)))


def _kernel_entry_reader(source: Source):
    """Checks a ``kernel`` entry's metadata against what ``source`` must give; returns
    (LTO-IR, symbols). Any mismatch raises, so the disk cache drops the entry."""
    expected = set(source.name_expressions)

    def read(meta: dict[str, Any], blobs: dict[str, bytes]) -> tuple[bytes, dict[str, str]]:
        symbols = validate(_KERNEL_ENTRY, meta, "meta")["symbols"]
        if set(symbols) != expected:
            raise SchemaError("meta.symbols", f"the kernels {', '.join(sorted(expected))}", shown(sorted(symbols)))
        _blob_names(blobs, "ltoir")
        return blobs["ltoir"], dict(symbols)

    return read


def _cubin_entry_reader(source: Source, arch: int):
    """Checks a ``cubin`` entry (arch, kernels, meta, blob ``cubin``) against ``source``
    and ``arch``, and its cubin against them; returns a BuildResult."""

    def read(meta: dict[str, Any], blobs: dict[str, bytes]) -> BuildResult:
        checked = validate(_CUBIN_ENTRY, meta, "meta", arch=arch)
        _blob_names(blobs, "cubin")
        return checked_result(arch, bytes(blobs["cubin"]), checked["kernels"], checked["meta"], source, "meta")

    return read


def _kernel_ltoir(source: Source, arch: int, disk: DiskCache | None) -> tuple[bytes, dict[str, str]]:
    key = kernel_key(source, arch)

    def compile_and_keep() -> tuple[bytes, dict[str, str]]:
        with stats.stage("nvrtc", f"sm_{arch}"):
            ltoir, symbols = compile_to_ltoir(source, arch)
        if disk is not None:
            disk.put("kernel", key, {"symbols": symbols}, {"ltoir": ltoir})
        return ltoir, symbols

    def build() -> tuple[bytes, dict[str, str]]:
        if disk is None:
            return compile_and_keep()
        # The caller may hold this build's cubin lock; a kernel lock is only ever taken
        # inside a cubin lock (never the reverse), so processes cannot deadlock.
        return disk.get_or_build("kernel", key, _kernel_entry_reader(source), compile_and_keep)

    return _kernel_memory.get_or_build(key, build)


def _op_ltoir(op: OpInput, obj: Any, arch: int) -> list[bytes]:
    if op.spec.kind == "raw":
        assert isinstance(obj, RawOp)
        return [obj.ltoir, *obj.extra_ltoirs]
    if is_direct(op):
        return []   # computed by the generated unit itself (see functors.direct_expr)
    from cuprims._operators.numba_ops import compile_python_op, import_numba

    import_numba()  # timed as its own stage ("numba import") on the first compile
    stats.bump("numba_compiles")
    with stats.stage("numba compile", op.spec.name):
        return compile_python_op(obj, op.arg_types, op.result_type, op.symbol, (arch // 10, arch % 10),
                                 ignores_result=op.ignores_result, op_name=op.spec.name, captures=op.spec.captures, argument=op.spec.argument,
                                 context=op.spec.context)


def _compile_and_link(source: Source, arch: int, ops: Sequence[OpInput], objs: Sequence[Any],
                      disk: DiskCache | None) -> BuildResult:
    from cuprims._compile.link import link_cubin
    from cuprims._operators.raw_probe import check_arity
    from cuprims._compile.toolchain import check_deferred_arch

    check_deferred_arch(arch)   # before numba and NVRTC: an arch this NVRTC cannot build is an argument error

    for op, obj in zip(ops, objs):
        if op.spec.kind == "raw":
            # before NVRTC and numba: a RawOp of the wrong arity is an argument error, not a wrong answer
            check_arity(obj, len(op.arg_types) + 1 + bool(op.spec.state_size), arch, op.spec.argument,
                        op.spec.context)
    started = time.perf_counter()
    if links_nothing(source, ops):
        with stats.stage("nvrtc", f"sm_{arch} (to cubin)"):
            cubin, symbols = compile_to_cubin(source, arch)
        meta = read_meta(cubin, META_SYMBOL, source.meta_fields)
        logger.info("cuprims: compiled %s for sm_%d in %.2f s", _unit_name(source), arch, time.perf_counter() - started)
        return BuildResult(arch=arch, cubin=cubin, kernels=dict(symbols), meta=meta)
    needs_numba = _numba_ops(ops)
    if needs_numba:
        # NVRTC (native, releases the GIL) runs beside numba's Python-heavy compile.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cuprims-nvrtc") as pool:
            kernel_future = pool.submit(_kernel_ltoir, source, arch, disk)
            op_codes = [code for op, obj in zip(ops, objs) for code in _op_ltoir(op, obj, arch)]
            kernel_ltoir, symbols = kernel_future.result()
    else:
        kernel_ltoir, symbols = _kernel_ltoir(source, arch, disk)
        op_codes = [code for op, obj in zip(ops, objs) for code in _op_ltoir(op, obj, arch)]
    source_path = write_source(source.text) if config.dump_dir() is not None else None
    with stats.stage("link", f"sm_{arch}"):
        cubin = link_cubin(kernel_ltoir, op_codes, arch, source_path=source_path)
    meta = read_meta(cubin, META_SYMBOL, source.meta_fields)
    logger.info("cuprims: compiled %s for sm_%d in %.2f s (%d operator%s)", _unit_name(source), arch,
                time.perf_counter() - started, len(ops), "" if len(ops) == 1 else "s")
    return BuildResult(arch=arch, cubin=cubin, kernels=dict(symbols), meta=meta)


def _unit_name(source: Source) -> str:
    """The unit's last kernel template without its arguments: what a log line can name."""
    name = source.name_expressions[-1] if source.name_expressions else "a unit"
    return name.split("<", 1)[0].rsplit("::", 1)[-1]


def build(source: Source, arch: int, ops: Sequence[OpInput] = (), objs: Sequence[Any] = ()) -> BuildResult:
    """Compiled code for ``source`` on ``sm_<arch>`` with ``ops`` linked in, from cache if possible."""
    if config.dump_dir() is not None:
        write_source(source.text)  # every generated unit lands there, cache hit or not (never raises)
    persistent = all(op.spec.persistent for op in ops)
    if not persistent:
        return _compile_and_link(source, arch, ops, objs, None)
    with stats.stage("key"):
        key = build_key(source, arch, ops)
    disk = disk_cache()

    def from_disk_or_compile() -> BuildResult:
        if disk is None:
            return _compile_and_link(source, arch, ops, objs, None)

        def compile_and_keep() -> BuildResult:
            result = _compile_and_link(source, arch, ops, objs, disk)
            disk.put("cubin", key, {"arch": arch, "kernels": result.kernels, "meta": result.meta},
                     {"cubin": result.cubin})
            return result

        return disk.get_or_build("cubin", key, _cubin_entry_reader(source, arch), compile_and_keep)

    _memory.max_entries = config.memory_cache_size()  # read when asked for, like every setting
    return _memory.get_or_build(("cubin", key), from_disk_or_compile)


def clear_memory() -> None:
    _memory.clear()
    _kernel_memory.clear()
