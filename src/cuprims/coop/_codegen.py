"""ProviderSpec -> CUDA C++ text of its ``extern "C"`` wrappers around CUB. Pure strings.

The provider ABI (every argument a pointer or an ``int``, so numba's C ABI passes them
unchanged; see docs/design/coop.md):

* ``load``:   ``SYM(const T* src, T* items)``, ``SYM_valid(const T* src, T* items, int valid, const T* oob)``
* ``store``:  ``SYM(T* dst, const T* items)``, ``SYM_valid(T* dst, const T* items, int valid)``
* ``reduce``, ``warp_reduce``: ``SYM(const T* items, T* out)``; with one item per thread
  also ``SYM_valid(const T* items, T* out, int valid)``
* ``scan``:   ``SYM(const T* in, T* out)`` (``in`` may be ``out``); with a block prefix
  callback ``SYM(const T* in, T* out, void* state, long long state_len)`` (the callback's
  state array: its data and length, handed to the callback ``SYM_prefix``)
* ``warp_scan``: ``SYM(const T* in, T* out)`` (one item per thread)
* ``radix_sort``: ``SYM(T* keys, int begin_bit, int end_bit)`` (in place; ``end_bit < 0``: all bits)
* ``exchange``, ``warp_exchange``: ``SYM(const T* in, T* out)`` (``in`` may be ``out``)
* ``merge_sort``, ``warp_merge_sort``: ``SYM(T* keys)``, ``SYM_valid(T* keys, int valid, const T* oob)``
  (in place, by the comparator functor)
* pairs (``spec.values`` set, radix and merge sorts): ``V* values`` follows ``keys``, e.g.
  ``SYM(T* keys, V* values, int begin_bit, int end_bit)``
* ``warp_load``, ``warp_store``: as ``load`` and ``store``, over the logical warp's tile

Each function also has a ``_ts`` twin taking the caller's temporary storage as a last
``void*`` argument. Without it the provider uses its own ``__shared__`` TempStorage
(static shared memory of the calling kernel; a warp primitive has one per logical
warp). Items are ``T[items]`` in the calling thread's memory, passed by address.

numba's local arrays may be less aligned than the C++ type: a struct's are byte arrays
(alignment 1), a complex's are aligned to its parts (``cuda::std::complex<float>`` wants
8 bytes, numba's complex64 has 4). For such types (:func:`under_aligned`) the thread's
values arrive as ``void*`` and are copied (``memcpy``) into aligned locals and back, which
LTO turns into register moves; other types' entry points read the caller's memory directly.
A sort's ``values`` are copied the same way when their own type is under-aligned.

Every unit exports the size and alignment of each provider's TempStorage in an
initialised ``__device__`` array named after the unit (:func:`meta_symbol`), read back
from a probe link's cubin; a unit-specific name lets one kernel link many units.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

from cuprims._codegen.common import preamble
from cuprims._codegen.functors import binary_functor, comparator_functor
from cuprims._compile.source import Source
from cuprims.coop._spec import (
    LOAD_ALGORITHMS,
    REDUCE_ALGORITHMS,
    SCAN_ALGORITHMS,
    STORE_ALGORITHMS,
    WARP_LOAD_ALGORITHMS,
    WARP_STORE_ALGORITHMS,
    ProviderSpec,
)

_HEADERS = {
    "load": "#include <cub/block/block_load.cuh>",
    "store": "#include <cub/block/block_store.cuh>",
    "reduce": "#include <cub/block/block_reduce.cuh>",
    "scan": "#include <cub/block/block_scan.cuh>",
    "warp_reduce": "#include <cub/warp/warp_reduce.cuh>",
    "warp_scan": "#include <cub/warp/warp_scan.cuh>",
    "radix_sort": "#include <cub/block/block_radix_sort.cuh>",
    "exchange": "#include <cub/block/block_exchange.cuh>",
    "merge_sort": "#include <cub/block/block_merge_sort.cuh>",
    "warp_merge_sort": "#include <cub/warp/warp_merge_sort.cuh>",
    "warp_load": "#include <cub/warp/warp_load.cuh>",
    "warp_store": "#include <cub/warp/warp_store.cuh>",
    "warp_exchange": "#include <cub/warp/warp_exchange.cuh>",
}
WARP_KINDS = ("warp_reduce", "warp_scan", "warp_merge_sort", "warp_load", "warp_store", "warp_exchange")
# warp primitives whose TempStorage holds a whole tile: their own storage has as many
# slots as their budget holds (storage_budget; see _storage)
TILE_WARP_KINDS = ("warp_merge_sort", "warp_load", "warp_store", "warp_exchange")
SORT_KINDS = ("merge_sort", "warp_merge_sort")   # their operator is a comparator
# shared memory the implicit storage of a warp merge sort may take (its slots hold a
# whole tile each, so one per logical warp of a 1024-thread block would pass the 48 KiB
# of static shared memory a kernel may have)
WARP_SORT_STORAGE_BUDGET = 32 * 1024
# a warp load's or store's (transpose): less, so that a kernel's load and store fit together
WARP_MOVE_STORAGE_BUDGET = 16 * 1024


def storage_budget(kind: str) -> int:
    return WARP_SORT_STORAGE_BUDGET if kind == "warp_merge_sort" else WARP_MOVE_STORAGE_BUDGET


def warp_sort_slots(lanes: int, storage_bytes: int, kind: str = "warp_merge_sort") -> int:
    """How many logical warps the implicit storage of a warp primitive whose TempStorage
    holds a tile (``TILE_WARP_KINDS``) serves (the provider's C++ computes the same from
    ``sizeof(TempStorage)``)."""
    return min(1024 // lanes, max(1, storage_budget(kind) // storage_bytes))


def under_aligned(vt) -> bool:
    """Whether numba's local arrays of ``vt`` may be less aligned than its C++ type (see the module)."""
    return vt.alignment > (1 if vt.is_struct else vt.dtype.alignment)


# the parameters of an entry point that point at the calling thread's values
_THREAD_VALUES = ("items", "in", "out", "oob", "keys")


def _realigned(spec: ProviderSpec, params: str) -> tuple[str, list[str], list[str]]:
    """``params`` with each pointer to the thread's values of an under-aligned type (the
    element type's, or a sort's ``values`` of :attr:`ProviderSpec.values`) as ``void*
    NAME_raw``, and the statements copying them into aligned locals named as before
    (inputs) and back (outputs)."""
    t = spec.vt.cpp
    keys_too = under_aligned(spec.vt)
    v = spec.values.cpp if spec.values is not None and under_aligned(spec.values) else None
    new, before, after = [], [], []
    for param in params.split(", "):
        kind, _, name = param.rpartition(" ")
        if name == "values" and v is not None and kind == v + "*":
            elem = v
        elif keys_too and name in _THREAD_VALUES and kind in (t + "*", f"const {t}*"):
            elem = t
        else:
            new.append(param)
            continue
        const = kind.startswith("const ")
        single = name == "oob" or (name == "out" and spec.kind in ("reduce", "warp_reduce"))
        new.append(f"{'const ' if const else ''}void* {name}_raw")
        before.append(f"{elem} {name}[{1 if single else spec.items}];")
        if const or name in ("keys", "values"):   # read (keys, values: sorted in place)
            before.append(f"memcpy({name}, {name}_raw, sizeof({name}));")
        if not const:                          # written
            after.append(f"memcpy({name}_raw, {name}, sizeof({name}));")
    return ", ".join(new), before, after


def _prefix_functor(spec: ProviderSpec, s: str) -> str:
    """CUB's ``BlockPrefixCallbackOp``: ``T operator()(T block_aggregate)``, calling the
    Python callback ``SYM_prefix(void* view, T* aggregate, T* prefix)``; ``view`` is the
    state array as (data, length), which numba's wrapper rebuilds as a 1-D array."""
    t = spec.vt.cpp
    return (f'extern "C" __device__ void {spec.prefix_symbol}(void*, void*, void*);\n'
            f"struct {s}_prefix_functor\n{{\n  void* state;\n  long long state_len;\n"
            f"  __device__ __forceinline__ {t} operator()(const {t}& block_aggregate)\n  {{\n"
            "    struct { void* data; long long len; } view = {state, state_len};\n"
            f"    {t} aggregate = block_aggregate;\n    {t} prefix;\n"
            f"    {spec.prefix_symbol}(&view, &aggregate, &prefix);\n    return prefix;\n  }}\n}};\n")


def _cub_type(spec: ProviderSpec) -> str:
    t, (x, y, z), n = spec.vt.cpp, spec.dims, spec.items
    v = spec.values.cpp if spec.values is not None else "cub::NullType"   # a sort's values
    if spec.kind == "load":
        return f"cub::BlockLoad<{t}, {x}, {n}, {LOAD_ALGORITHMS[spec.algorithm]}, {y}, {z}>"
    if spec.kind == "store":
        return f"cub::BlockStore<{t}, {x}, {n}, {STORE_ALGORITHMS[spec.algorithm]}, {y}, {z}>"
    if spec.kind == "reduce":
        return f"cub::BlockReduce<{t}, {x}, {REDUCE_ALGORITHMS[spec.algorithm]}, {y}, {z}>"
    if spec.kind == "scan":
        return f"cub::BlockScan<{t}, {x}, {SCAN_ALGORITHMS[spec.algorithm]}, {y}, {z}>"
    if spec.kind == "warp_reduce":
        return f"cub::WarpReduce<{t}, {x}>"
    if spec.kind == "warp_scan":
        return f"cub::WarpScan<{t}, {x}>"
    if spec.kind == "radix_sort":
        # CUB's defaults (4-bit digits, memoized warp-scan ranking) up to the block's y and z
        return (f"cub::BlockRadixSort<{t}, {x}, {n}, {v}, 4, true, cub::BLOCK_SCAN_WARP_SCANS, "
                f"cudaSharedMemBankSizeFourByte, {y}, {z}>")
    if spec.kind == "exchange":
        sliced = "true" if spec.algorithm == "timesliced" else "false"
        return f"cub::BlockExchange<{t}, {x}, {n}, {sliced}, {y}, {z}>"
    if spec.kind == "merge_sort":
        return f"cub::BlockMergeSort<{t}, {x}, {n}, {v}, {y}, {z}>"
    if spec.kind == "warp_merge_sort":
        return f"cub::WarpMergeSort<{t}, {n}, {x}, {v}>"
    if spec.kind == "warp_load":
        return f"cub::WarpLoad<{t}, {n}, {WARP_LOAD_ALGORITHMS[spec.algorithm]}, {x}>"
    if spec.kind == "warp_store":
        return f"cub::WarpStore<{t}, {n}, {WARP_STORE_ALGORITHMS[spec.algorithm]}, {x}>"
    if spec.kind == "warp_exchange":
        return f"cub::WarpExchange<{t}, {n}, {x}>"    # CUB's shared-memory algorithm
    raise ValueError(f"unknown provider kind {spec.kind!r}")


def _is_plus(spec: ProviderSpec) -> bool:
    return spec.op is not None and spec.op.kind == "builtin" and spec.op.builtin.name == "PLUS"


def _is_sum(spec: ProviderSpec) -> bool:
    """Whether CUB's Sum entry points serve ``spec``. Not for bool: CUB's warp scans derive a
    sum's exclusive prefix as ``inclusive - input``, which a saturating bool sum (a logical
    or) breaks, so bool sums go through the functor, ``bool(a + b)``."""
    return _is_plus(spec) and spec.vt.cpp != "bool"


# the calling thread's index in its block, as CUB counts it (x fastest)
_LINEAR_TID = "threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)"


def _storage(spec: ProviderSpec, s: str) -> str:
    """The TempStorage type, the provider's own shared instance and its accessor."""
    if spec.kind in TILE_WARP_KINDS:
        # as many slots as the budget holds (warp_sort_slots); a logical warp past them
        # traps rather than sharing a slot with another warp (a silent race)
        lanes = spec.dims[0]
        return (f"__device__ __forceinline__ {s}_prim::TempStorage& {s}_storage()\n{{\n"
                f"  constexpr unsigned bytes = sizeof({s}_prim::TempStorage);\n"
                f"  constexpr unsigned fit = {storage_budget(spec.kind)} / bytes;\n"
                f"  constexpr unsigned slots = fit < 1 ? 1 : (fit > {1024 // lanes} ? {1024 // lanes} : fit);\n"
                f"  __shared__ {s}_prim::TempStorage storage[slots];\n"
                f"  const unsigned tid = {_LINEAR_TID};\n"
                f"  if (tid / {lanes} >= slots) {{ __trap(); }}\n"
                f"  return storage[tid / {lanes}];\n}}\n")
    if spec.kind in WARP_KINDS:
        # one TempStorage per logical warp of the largest block
        per_block = 1024 // spec.dims[0] + (1024 % spec.dims[0] != 0)
        return (f"__device__ __forceinline__ {s}_prim::TempStorage& {s}_storage()\n{{\n"
                f"  __shared__ {s}_prim::TempStorage storage[{per_block}];\n"
                f"  const unsigned tid = {_LINEAR_TID};\n"
                f"  return storage[tid / {spec.dims[0]}];\n}}\n")
    return (f"__device__ __forceinline__ {s}_prim::TempStorage& {s}_storage()\n{{\n"
            f"  __shared__ {s}_prim::TempStorage storage;\n  return storage;\n}}\n")


def _barrier(spec: ProviderSpec, s: str) -> str:
    """Our own storage is reused by every call of the provider: wait until the previous
    call's readers are done (CUB leaves that barrier to the caller). Storage-free
    primitives (direct loads, shuffle-based warp reductions: a 1-byte NullType) skip it,
    and so do merge sorts: each of CUB's merge passes starts with a barrier before it
    writes the storage, so the previous call's reads are over by then."""
    if spec.kind in SORT_KINDS:
        return ""
    if spec.kind not in WARP_KINDS:
        return f"if constexpr (sizeof({s}_prim::TempStorage) > 1) {{ __syncthreads(); }}"
    # a warp waits for its own logical warp's lanes only, and only for lanes that exist:
    # in a block whose size is not a multiple of 32 the last physical warp is partial, and
    # __syncwarp() over absent lanes is undefined
    lanes = spec.dims[0]
    logical = "0xffffffffu" if lanes == 32 else f"(((1u << {lanes}) - 1u) << ({lanes} * ((tid & 31u) / {lanes})))"
    return (f"if constexpr (sizeof({s}_prim::TempStorage) > 1) {{\n"
            f"    const unsigned tid = {_LINEAR_TID};\n"
            "    const unsigned left = blockDim.x * blockDim.y * blockDim.z - (tid & ~31u);\n"
            "    const unsigned live = left >= 32u ? 0xffffffffu : (1u << left) - 1u;\n"
            f"    __syncwarp(live & {logical});\n  }}")


def _scan_init(spec: ProviderSpec, s: str) -> str:
    """The initial-value argument of a scan through the functor: the user's, or for an
    exclusive bool sum (not served by CUB's Sum, see _is_sum) the sum's ``false``."""
    if spec.init is not None:
        return f"{s}_init(), "
    return "false, " if _is_plus(spec) and spec.mode == "exclusive" else ""


def _store_transposes(spec: ProviderSpec) -> bool:
    """Whether CUB's store of ``spec`` exchanges the items through shared memory first."""
    return "transpose" in spec.algorithm


def _bodies(spec: ProviderSpec, s: str) -> list[tuple[str, str, str]]:
    """(name suffix, parameters, body using ``prim``) of each entry point."""
    t, n = spec.vt.cpp, spec.items
    arr = f"{t} (&)[{n}]"
    # a sort of pairs: the values' parameter and argument after the keys'
    vparam = f", {spec.values.cpp}* values" if spec.values is not None else ""
    vals = (f", reinterpret_cast<{spec.values.cpp} (&)[{n}]>(*values)" if spec.values is not None else "")
    if spec.kind in ("load", "warp_load"):
        return [("", f"const {t}* src, {t}* items", f"prim.Load(src, reinterpret_cast<{arr}>(*items));"),
                ("_valid", f"const {t}* src, {t}* items, int valid, const {t}* oob",
                 f"prim.Load(src, reinterpret_cast<{arr}>(*items), valid, *oob);")]
    if spec.kind in ("store", "warp_store"):
        if _store_transposes(spec):
            # CUB's transposing stores exchange the items in place before writing them: a
            # store must leave the caller's items as they were, so it stores a copy
            # (registers, after LTO)
            copy = f"{t} tmp[{n}];\n  for (int i = 0; i < {n}; ++i) tmp[i] = items[i];\n  "
            return [("", f"{t}* dst, const {t}* items", f"{copy}prim.Store(dst, tmp);"),
                    ("_valid", f"{t}* dst, const {t}* items, int valid", f"{copy}prim.Store(dst, tmp, valid);")]
        return [("", f"{t}* dst, const {t}* items",
                 f"prim.Store(dst, reinterpret_cast<{arr}>(*const_cast<{t}*>(items)));"),
                ("_valid", f"{t}* dst, const {t}* items, int valid",
                 f"prim.Store(dst, reinterpret_cast<{arr}>(*const_cast<{t}*>(items)), valid);")]
    if spec.kind in ("reduce", "warp_reduce"):
        call = "Sum(" if _is_sum(spec) else "Reduce("
        op = "" if _is_sum(spec) else f", {s}_functor{{}}"
        value = "items[0]" if n == 1 else f"reinterpret_cast<{arr}>(*const_cast<{t}*>(items))"
        entries = [("", f"const {t}* items, {t}* out", f"*out = prim.{call}{value}{op});")]
        if n == 1:
            entries.append(("_valid", f"const {t}* items, {t}* out, int valid",
                            f"*out = prim.{call}items[0]{op}, valid);"))
        return entries
    if spec.kind == "scan":
        io = f"reinterpret_cast<{arr}>(*const_cast<{t}*>(in)), reinterpret_cast<{arr}>(*out)"
        if spec.prefix is not None:
            # CUB's overloads taking a BlockPrefixCallbackOp& (no initial value: the prefix is one)
            op = "" if _is_sum(spec) else f"{s}_functor{{}}, "
            call = f"{spec.mode.capitalize()}{'Sum' if _is_sum(spec) else 'Scan'}({io}, {op}prefix)"
            return [("", f"const {t}* in, {t}* out, void* state, long long state_len",
                     f"{s}_prefix_functor prefix{{state, state_len}};\n  prim.{call};")]
        if _is_sum(spec) and spec.init is None:
            body = f"prim.{spec.mode.capitalize()}Sum({io});"
        else:
            body = f"prim.{spec.mode.capitalize()}Scan({io}, {_scan_init(spec, s)}{s}_functor{{}});"
        return [("", f"const {t}* in, {t}* out", body)]
    if spec.kind == "warp_scan":
        if _is_sum(spec) and spec.init is None:
            body = f"prim.{spec.mode.capitalize()}Sum(in[0], out[0]);"
        else:
            body = f"prim.{spec.mode.capitalize()}Scan(in[0], out[0], {_scan_init(spec, s)}{s}_functor{{}});"
        return [("", f"const {t}* in, {t}* out", body)]
    if spec.kind == "radix_sort":
        # end < 0: every bit of the key (the Python default, so it never restates sizeof)
        call = "SortDescending" if spec.mode == "descending" else "Sort"
        return [("", f"{t}* keys{vparam}, int begin, int end",
                 f"prim.{call}(reinterpret_cast<{arr}>(*keys){vals}, begin, end < 0 ? int(sizeof({t}) * 8) : end);")]
    if spec.kind == "warp_exchange":
        # CUB reads all of a lane's input into shared memory before it writes any output,
        # so ``in`` may be ``out``
        return [("", f"const {t}* in, {t}* out",
                 f"prim.{spec.mode}(reinterpret_cast<{arr}>(*const_cast<{t}*>(in)), reinterpret_cast<{arr}>(*out));")]
    if spec.kind == "exchange":
        # CUB's time-sliced exchanges write part of the output before all of the input is
        # read: copy the input first so that in == out (an in-place exchange) stays correct
        copy = (f"{t} tmp[{n}];\n  for (int i = 0; i < {n}; ++i) tmp[i] = in[i];\n  "
                if spec.algorithm == "timesliced" else "")
        src = "tmp" if copy else f"reinterpret_cast<{arr}>(*const_cast<{t}*>(in))"
        return [("", f"const {t}* in, {t}* out",
                 f"{copy}prim.{spec.mode}({src}, reinterpret_cast<{arr}>(*out));")]
    if spec.kind in SORT_KINDS:
        # StableSort: CUB documents Sort as not necessarily stable, StableSort as stable.
        # A partial tile's merges in CUB 3.5 may leave copies of other keys past `valid`
        # (its docs promise oob_default there): the tail is written here, in registers.
        keys = f"reinterpret_cast<{arr}>(*keys)"
        tail = (f"const int first = int(prim.get_linear_tid()) * {n};\n"
                f"  for (int i = 0; i < {n}; ++i) {{ if (first + i >= valid) {{ keys[i] = *oob; }} }}")
        # (a sort of pairs leaves the values past `valid` as CUB's merges left them)
        return [("", f"{t}* keys{vparam}", f"prim.StableSort({keys}{vals}, {s}_functor{{}});"),
                ("_valid", f"{t}* keys{vparam}, int valid, const {t}* oob",
                 f"prim.StableSort({keys}{vals}, {s}_functor{{}}, valid, *oob);\n  {tail}")]
    raise ValueError(f"unknown provider kind {spec.kind!r}")


def provider_text(spec: ProviderSpec) -> tuple[str, tuple[str, ...]]:
    """C++ of one provider; returns (text, operator symbols it expects to be linked)."""
    s = spec.symbol
    parts = [f"// cuprims coop provider: {spec.key}", f"using {s}_prim = {_cub_type(spec)};"]
    externs: tuple[str, ...] = ()
    if spec.kind in SORT_KINDS:
        functor, externs = comparator_functor(f"{s}_functor", spec.op, spec.vt, spec.op_symbol)
        parts.append(functor)
    elif spec.op is not None and not _is_sum(spec):
        functor, externs = binary_functor(f"{s}_functor", spec.op, spec.vt, spec.op_symbol)
        parts.append(functor)
    if spec.prefix is not None:
        parts.append(_prefix_functor(spec, s))
        externs += (spec.prefix_symbol,)
    if spec.init is not None:
        parts.append(f"__device__ __forceinline__ {spec.vt.cpp} {s}_init()\n{{\n  {spec.vt.cpp} value;\n"
                     f"  const unsigned char bytes[] = {{{spec.init}}};\n"
                     "  memcpy(&value, bytes, sizeof(value));\n  return value;\n}")
    parts.append(_storage(spec, s))
    realign = under_aligned(spec.vt) or (spec.values is not None and under_aligned(spec.values))
    for suffix, params, body in _bodies(spec, s):
        barrier = f"  {_barrier(spec, s)}\n" if _barrier(spec, s) else ""
        if realign:
            params, before, after = _realigned(spec, params)
            body = "\n  ".join(before + [body] + after)
        parts.append(f'extern "C" __device__ __attribute__((weak)) void {s}{suffix}({params})\n{{\n'
                     f"{barrier}  {s}_prim prim({s}_storage());\n  {body}\n}}")
        parts.append(f'extern "C" __device__ __attribute__((weak)) void {s}{suffix}_ts({params}, void* temp)\n{{\n'
                     f"  {s}_prim prim(*static_cast<{s}_prim::TempStorage*>(temp));\n  {body}\n}}")
    return "\n".join(parts) + "\n", externs


def entry_points(spec: ProviderSpec) -> tuple[str, ...]:
    """Every ``extern "C"`` function ``spec``'s provider defines."""
    return tuple(f"{spec.symbol}{suffix}{ts}" for suffix, _, _ in _bodies(spec, spec.symbol) for ts in ("", "_ts"))


def meta_symbol(specs: Sequence[ProviderSpec]) -> str:
    digest = hashlib.sha256("\n".join(sp.key for sp in specs).encode()).hexdigest()[:16]
    return f"cuprims_coop_meta_{digest}"


def meta_fields(specs: Sequence[ProviderSpec]) -> tuple[str, ...]:
    return tuple(f"{sp.symbol}_{what}" for sp in specs for what in ("bytes", "align"))


def unit_source(specs: Sequence[ProviderSpec], arch: int) -> Source:
    """One NVRTC unit holding every provider of ``specs`` (one kernel's, say).

    Example::

        src = unit_source([ProviderSpec("reduce", value_type("f4"), (128, 1, 1), 1,
                                        "warp_reductions", op_spec(OpKind.PLUS))], 90)
    """
    specs = list(dict.fromkeys(specs))
    head = preamble(tuple(v for sp in specs for v in (sp.vt, sp.values) if v is not None), arch)
    head += "\n".join(dict.fromkeys(_HEADERS[sp.kind] for sp in specs)) + "\n"
    body, externs = [], ()
    for sp in specs:
        text, ext = provider_text(sp)
        body.append(text)
        externs += ext
    values = ",\n  ".join(f"(long long)sizeof({sp.symbol}_prim::TempStorage), "
                          f"(long long)alignof({sp.symbol}_prim::TempStorage)" for sp in specs)
    body.append(f'extern "C" __device__ __attribute__((used, weak)) const long long '
                f"{meta_symbol(specs)}[{2 * len(specs)}] = {{\n  {values}}};")
    return Source(text=head + "\n".join(body) + "\n", name_expressions=(), extern_symbols=externs,
                  meta_fields=())
