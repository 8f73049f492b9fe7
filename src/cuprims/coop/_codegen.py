"""ProviderSpec -> CUDA C++ text of its ``extern "C"`` wrappers around CUB. Pure strings.

What is particular to a primitive (its CUB type, entry points and their bodies) is its
record's (:mod:`._records`); this module puts a provider together the same way for
every kind. The provider ABI (see docs/design/coop.md): every argument is a pointer or
an integer (:class:`~._records.Param`), so numba's C ABI passes them unchanged; each
record module lists its entry points. A sort of pairs (``spec.values`` set) takes ``V*
values`` after ``keys``.

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
from cuprims.coop._records import Entry, Param, Record, is_sum, record
from cuprims.coop._spec import ProviderSpec


# how every definition of a unit is made: C++ inline (LLVM's linkonce_odr), kept by `used`, so
# that a kernel linking the same provider twice (from two units) links one. A weak
# definition would not do: nvJitLink 13.0 reports two weak definitions as multiply defined.
MERGEABLE = "inline __attribute__((used))"


def own_storage_warps(lanes: int, storage_bytes: int, budget: int) -> int:
    """How many logical warps the implicit storage of a warp primitive whose TempStorage
    holds a tile (a record's ``tile_budget``) serves (the provider's C++ computes the same
    from ``sizeof(TempStorage)``)."""
    return min(1024 // lanes, max(1, budget // storage_bytes))


def under_aligned(vt) -> bool:
    """Whether numba's local arrays of ``vt`` may be less aligned than its C++ type (see the module)."""
    return vt.alignment > (1 if vt.is_struct else vt.dtype.alignment)


def entries(spec: ProviderSpec) -> list[Entry]:
    """The entry points of ``spec``'s provider (each also has a ``_ts`` twin)."""
    return record(spec.kind).entries(spec, spec.symbol)


def _realigned(spec: ProviderSpec, params: tuple[Param, ...]) -> tuple[str, list[str], list[str]]:
    """``params`` as C++ text, each pointer to the thread's values of an under-aligned type
    (the element type's, or a sort's ``values`` of :attr:`ProviderSpec.values`) as ``void*
    NAME_raw``, and the statements copying them into aligned locals named as before
    (inputs) and back (outputs)."""
    keys_too = under_aligned(spec.vt)
    v = spec.values.cpp if spec.values is not None and under_aligned(spec.values) else None
    new, before, after = [], [], []
    for p in params:
        if p.abi == "vptr" and v is not None:
            elem = v
        elif keys_too and p.thread and p.abi == "ptr":
            elem = spec.vt.cpp
        else:
            new.append(p.text)
            continue
        new.append(f"{'const ' if p.const else ''}void* {p.name}_raw")
        before.append(f"{elem} {p.name}[{1 if p.one else spec.items}];")
        if p.const or p.inout:
            before.append(f"memcpy({p.name}, {p.name}_raw, sizeof({p.name}));")
        if not p.const:
            after.append(f"memcpy({p.name}_raw, {p.name}, sizeof({p.name}));")
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


def cub_type(spec: ProviderSpec) -> str:
    """The CUB specialization of ``spec`` (its record's template, filled in)."""
    rec = record(spec.kind)
    x, y, z = spec.dims
    algorithm = rec.algorithms[spec.algorithm] if rec.algorithms is not None else spec.algorithm
    v = spec.values.cpp if spec.values is not None else "cub::NullType"   # a sort's values
    return rec.cub_type.format(t=spec.vt.cpp, x=x, y=y, z=z, n=spec.items, v=v, algorithm=algorithm,
                                bins=spec.bins, runs=spec.runs)


# the calling thread's index in its block, as CUB counts it (x fastest)
_LINEAR_TID = "threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)"


def _storage(spec: ProviderSpec, rec: Record, s: str) -> str:
    """The TempStorage type, the provider's own shared instance and its accessor."""
    if rec.tile_budget:
        # as many slots as the budget holds (own_storage_warps); a logical warp past them
        # traps rather than sharing a slot with another warp (a silent race)
        lanes = spec.dims[0]
        return (f"__device__ __forceinline__ {s}_prim::TempStorage& {s}_storage()\n{{\n"
                f"  constexpr unsigned bytes = sizeof({s}_prim::TempStorage);\n"
                f"  constexpr unsigned fit = {rec.tile_budget} / bytes;\n"
                f"  constexpr unsigned slots = fit < 1 ? 1 : (fit > {1024 // lanes} ? {1024 // lanes} : fit);\n"
                f"  __shared__ {s}_prim::TempStorage storage[slots];\n"
                f"  const unsigned tid = {_LINEAR_TID};\n"
                f"  if (tid / {lanes} >= slots) {{ __trap(); }}\n"
                f"  return storage[tid / {lanes}];\n}}\n")
    if rec.warp:
        # one TempStorage per logical warp of the largest block
        lanes = spec.dims[0]
        if lanes & (lanes - 1) == 0:
            slot, per_block = f"tid / {lanes}", 1024 // lanes
        else:
            # CUB starts the logical warps afresh in each hardware warp (12 lanes: 12 + 12 + 8),
            # so a warp of 32 holds ceil(32 / lanes) of them, the last one partial
            per_warp = -(-32 // lanes)
            slot, per_block = f"(tid / 32u) * {per_warp}u + (tid % 32u) / {lanes}u", 32 * per_warp
        return (f"__device__ __forceinline__ {s}_prim::TempStorage& {s}_storage()\n{{\n"
                f"  __shared__ {s}_prim::TempStorage storage[{per_block}];\n"
                f"  const unsigned tid = {_LINEAR_TID};\n"
                f"  return storage[{slot}];\n}}\n")
    return (f"__device__ __forceinline__ {s}_prim::TempStorage& {s}_storage()\n{{\n"
            f"  __shared__ {s}_prim::TempStorage storage;\n  return storage;\n}}\n")


def _barrier(spec: ProviderSpec, rec: Record, s: str) -> str:
    """Our own storage is reused by every call of the provider: wait until the previous
    call's readers are done (CUB leaves that barrier to the caller). Storage-free
    primitives (direct loads, shuffle-based warp reductions: a 1-byte NullType) skip it,
    and so do records without a barrier (CUB's own precedes its writes)."""
    if not rec.barrier:
        return ""
    if not rec.warp:
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


def _declarations(spec: ProviderSpec, rec: Record, s: str) -> tuple[list[str], tuple[str, ...]]:
    """What the entry points use besides CUB: the operator's functor, the block prefix
    callback's, the initial value; and the operator symbols they expect to be linked."""
    parts: list[str] = []
    externs: tuple[str, ...] = ()
    if rec.functor is not None and spec.op is not None:
        functor, externs = rec.functor(f"{s}_functor", spec.op, spec.vt, spec.op_symbol)
        parts.append(functor)
    elif rec.compares:
        functor, externs = comparator_functor(f"{s}_functor", spec.op, spec.vt, spec.op_symbol)
        parts.append(functor)
    elif spec.op is not None and not (is_sum(spec) and spec.init is None):
        # CUB's Sum entry points take no initial value: a sum seeded by one goes through the functor
        functor, externs = binary_functor(f"{s}_functor", spec.op, spec.vt, spec.op_symbol)
        parts.append(functor)
    if spec.prefix is not None:
        parts.append(_prefix_functor(spec, s))
        externs += (spec.prefix_symbol,)
    if spec.init is not None:
        parts.append(f"__device__ __forceinline__ {spec.vt.cpp} {s}_init()\n{{\n  {spec.vt.cpp} value;\n"
                     f"  const unsigned char bytes[] = {{{spec.init}}};\n"
                     "  memcpy(&value, bytes, sizeof(value));\n  return value;\n}")
    return parts, externs


def provider_text(spec: ProviderSpec) -> tuple[str, tuple[str, ...]]:
    """C++ of one provider; returns (text, operator symbols it expects to be linked)."""
    s, rec = spec.symbol, record(spec.kind)
    parts = [f"// cuprims coop provider: {spec.key}", f"using {s}_prim = {cub_type(spec)};"]
    declarations, externs = _declarations(spec, rec, s)
    parts += declarations
    parts.append(_storage(spec, rec, s))
    realign = under_aligned(spec.vt) or (spec.values is not None and under_aligned(spec.values))
    barrier = f"  {_barrier(spec, rec, s)}\n" if _barrier(spec, rec, s) else ""
    for entry in rec.entries(spec, s):
        body = entry.body
        if realign:
            params, before, after = _realigned(spec, entry.params)
            body = "\n  ".join(before + [body] + after)
        else:
            params = ", ".join(p.text for p in entry.params)
        # a record whose CUB object is made by the body (its constructor takes more than the
        # storage) gets the storage as ``storage``
        own, given = f"{s}_storage()", f"*static_cast<{s}_prim::TempStorage*>(temp)"
        make = ("{s}_prim::TempStorage& storage = {src};" if rec.constructs else "{s}_prim prim({src});")
        parts.append(f'extern "C" __device__ {MERGEABLE} void {s}{entry.suffix}({params})\n{{\n'
                     f"{barrier}  {make.format(s=s, src=own)}\n  {body}\n}}")
        parts.append(f'extern "C" __device__ {MERGEABLE} void {s}{entry.suffix}_ts({params}, void* temp)\n'
                     f"{{\n  {make.format(s=s, src=given)}\n  {body}\n}}")
    return "\n".join(parts) + "\n", externs


def entry_points(spec: ProviderSpec) -> tuple[str, ...]:
    """Every ``extern "C"`` function ``spec``'s provider defines."""
    return tuple(f"{spec.symbol}{e.suffix}{ts}" for e in entries(spec) for ts in ("", "_ts"))


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
    head += "\n".join(dict.fromkeys(record(sp.kind).header for sp in specs)) + "\n"
    body, externs = [], ()
    for sp in specs:
        text, ext = provider_text(sp)
        body.append(text)
        externs += ext
    values = ",\n  ".join(f"(long long)sizeof({sp.symbol}_prim::TempStorage), "
                          f"(long long)alignof({sp.symbol}_prim::TempStorage)" for sp in specs)
    body.append(f'extern "C" __device__ {MERGEABLE} const long long '
                f"{meta_symbol(specs)}[{2 * len(specs)}] = {{\n  {values}}};")
    return Source(text=head + "\n".join(body) + "\n", name_expressions=(), extern_symbols=externs,
                  meta_fields=())
