"""The kernels bench_coop.py measures: numba-cuda kernels built from cuprims.coop's
factories, and their CUDA C++ twins (the same CUB classes, data layout and launch
geometry) compiled by NVRTC and launched through cuda.core.

Importable without numba, CUDA or a GPU: numba and cuda.core are imported inside the
functions. Each numba kernel is a *variant* in a table (``SUM_VARIANTS``,
``TILE_VARIANTS``): a later front end (the single-phase ``coop.inclusive_sum(block,
items)`` style) is one more entry there, and the bench gives it its own row.

Shapes (the issue's targets):

* block sum: 256 threads x 16 float32 per tile; grid-stride over tiles, one
  ``cuda.atomic.add`` per block (or one tile per block, the same kernel on a grid of one
  block per tile);
* block radix sort: 256 threads x 4 int32 keys, one 1024-key tile per block, blocked
  arrangement in and out;
* block scan: 128 threads x 8 int32, an inclusive sum of each 1024-item tile.

Tile kernels read ``x`` and write ``y`` (out of place, so a timed loop sorts the same
input every time).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Callable

SUM_THREADS, SUM_ITEMS = 256, 16
SORT_THREADS, SORT_ITEMS = 256, 4
SCAN_THREADS, SCAN_ITEMS = 128, 8

# CUB's BlockLoad/BlockStore algorithms that use no shared memory (their TempStorage is
# NullType): nothing to wait for before the next phase reuses a shared buffer
STORAGE_FREE = frozenset({"direct", "striped", "vectorize"})

SUM_LOADS = ("vectorize", "striped")
SORT_LOADS = ("direct", "warp_transpose")
SCAN_LOADS = ("direct", "vectorize", "warp_transpose")

_CUB_LOAD = {"direct": "BLOCK_LOAD_DIRECT", "striped": "BLOCK_LOAD_STRIPED", "vectorize": "BLOCK_LOAD_VECTORIZE",
             "transpose": "BLOCK_LOAD_TRANSPOSE", "warp_transpose": "BLOCK_LOAD_WARP_TRANSPOSE"}
_CUB_STORE = {k: v.replace("LOAD", "STORE") for k, v in _CUB_LOAD.items()}


@dataclass
class NumbaKernel:
    """One numba-cuda kernel and what compiling it ahead of time needs."""

    label: str
    kernel: Any                     # the @cuda.jit dispatcher
    prims: list                     # the coop primitives it links
    argtypes: tuple                 # numba argument types (for an AOT compile without a GPU)
    notes: dict = field(default_factory=dict)


def _numba():
    import numba
    from numba import cuda

    from cuprims import coop

    return numba, cuda, coop


def _files(*prims) -> list:
    """The primitives' link inputs, each object once (numba keeps them in a set anyway)."""
    seen: dict[int, Any] = {}
    for p in prims:
        for f in p.files:
            seen.setdefault(id(f), f)
    return list(seen.values())


# ------------------------------------------------------------------ block sum (float32)

def _sum_factories(load_alg: str) -> NumbaKernel:
    """``make_load`` + ``make_sum``: each thread adds its items of every tile it visits,
    then one block sum and one atomic per block."""
    if load_alg not in STORAGE_FREE:
        raise ValueError("the block-sum loop reuses no shared memory: a storage-free load only")
    numba, cuda, coop = _numba()
    f4, i64 = numba.float32, numba.int64
    threads, items = SUM_THREADS, SUM_ITEMS
    tile = threads * items
    load = coop.block.make_load(f4, threads, items, load_alg)
    block_sum = coop.block.make_sum(f4, threads, items)

    @cuda.jit(link=_files(load, block_sum))
    def coop_block_sum(x, out, ntiles):
        acc = cuda.local.array(items, f4)
        buf = cuda.local.array(items, f4)
        for i in range(items):
            acc[i] = 0
        t = i64(cuda.blockIdx.x)
        step = i64(cuda.gridDim.x)
        while t < ntiles:
            load(x[t * tile:], buf)
            for i in range(items):
                acc[i] += buf[i]
            t += step
        s = block_sum(acc)
        if cuda.threadIdx.x == 0:
            cuda.atomic.add(out, 0, s)

    f4a = numba.types.Array(f4, 1, "C")
    return NumbaKernel("cuprims coop make_load + make_sum", coop_block_sum, [load, block_sum],
                       (f4a, f4a, numba.types.int64))


# name -> builder(load algorithm) -> NumbaKernel; one row per entry
SUM_VARIANTS: dict[str, Callable[[str], NumbaKernel]] = {
    "factories": _sum_factories,
}


# ------------------------------------------------- tiles: radix sort and inclusive sum (int32)

def _tile_prims(op: str, load_alg: str):
    numba, cuda, coop = _numba()
    i4 = numba.int32
    if op == "radix_sort":
        threads, items = SORT_THREADS, SORT_ITEMS
        mid = coop.block.make_radix_sort_keys(i4, threads, items)
    elif op == "inclusive_sum":
        threads, items = SCAN_THREADS, SCAN_ITEMS
        mid = coop.block.make_inclusive_sum(i4, threads, items)
    else:
        raise ValueError(op)
    load = coop.block.make_load(i4, threads, items, load_alg)
    store = coop.block.make_store(i4, threads, items, load_alg)
    return load, mid, store, threads, items


def _tile_own_storage(op: str, load_alg: str) -> NumbaKernel:
    """Each primitive with its own shared memory (the factories' default): no barriers in
    the kernel; a provider with storage waits for the block itself."""
    numba, cuda, coop = _numba()
    i4 = numba.int32
    load, mid, store, threads, items = _tile_prims(op, load_alg)
    tile = threads * items
    files = _files(load, mid, store)

    if op == "radix_sort":
        sort = mid

        @cuda.jit(link=files)
        def coop_tile_sort(x, y):
            base = cuda.blockIdx.x * tile
            keys = cuda.local.array(items, i4)
            load(x[base:], keys)
            sort(keys)
            store(y[base:], keys)

        kernel = coop_tile_sort
    else:
        scan = mid

        @cuda.jit(link=files)
        def coop_tile_scan(x, y):
            base = cuda.blockIdx.x * tile
            vals = cuda.local.array(items, i4)
            load(x[base:], vals)
            scan(vals, vals)
            store(y[base:], vals)

        kernel = coop_tile_scan
    i4a = numba.types.Array(i4, 1, "C")
    return NumbaKernel("cuprims coop factories, own storage", kernel, [load, mid, store], (i4a, i4a),
                       {"storage": "own"})


def _tile_shared_temp(op: str, load_alg: str) -> NumbaKernel:
    """One shared ``uint8`` buffer passed as ``temp_storage=`` to every primitive, with
    ``cuda.syncthreads()`` where a phase reuses what the previous one used: the
    ``__shared__ union`` of TempStorages a CUB C++ kernel declares."""
    numba, cuda, coop = _numba()
    i4 = numba.int32
    load, mid, store, threads, items = _tile_prims(op, load_alg)
    tile = threads * items
    files = _files(load, mid, store)
    nbytes = max(p.temp_storage_bytes for p in (load, mid, store))
    align = max(p.temp_storage_alignment for p in (load, mid, store))
    wait_after_load = load_alg not in STORAGE_FREE
    wait_before_store = load_alg not in STORAGE_FREE

    if op == "radix_sort":
        sort = mid

        @cuda.jit(link=files)
        def coop_tile_sort_temp(x, y):
            temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
            base = cuda.blockIdx.x * tile
            keys = cuda.local.array(items, i4)
            load(x[base:], keys, temp_storage=temp)
            if wait_after_load:
                cuda.syncthreads()
            sort(keys, temp_storage=temp)
            if wait_before_store:
                cuda.syncthreads()
            store(y[base:], keys, temp_storage=temp)

        kernel = coop_tile_sort_temp
    else:
        scan = mid

        @cuda.jit(link=files)
        def coop_tile_scan_temp(x, y):
            temp = cuda.shared.array(nbytes, numba.uint8, alignment=align)
            base = cuda.blockIdx.x * tile
            vals = cuda.local.array(items, i4)
            load(x[base:], vals, temp_storage=temp)
            if wait_after_load:
                cuda.syncthreads()
            scan(vals, vals, temp_storage=temp)
            if wait_before_store:
                cuda.syncthreads()
            store(y[base:], vals, temp_storage=temp)

        kernel = coop_tile_scan_temp
    i4a = numba.types.Array(i4, 1, "C")
    return NumbaKernel("cuprims coop factories, temp_storage= one buffer", kernel, [load, mid, store], (i4a, i4a),
                       {"storage": f"{nbytes} B shared buffer"})


def _tile_single_phase(op: str, load_alg: str) -> NumbaKernel:
    """Style 2: ``coop.this_block()`` and single-phase calls; the block shape comes from the
    launch, the element type of ``ThreadData`` from the load, and the providers are linked
    without ``link=`` (each primitive with its own shared memory, as the factories' default)."""
    numba, cuda, coop = _numba()
    i4 = numba.int32
    threads, items = (SORT_THREADS, SORT_ITEMS) if op == "radix_sort" else (SCAN_THREADS, SCAN_ITEMS)
    tile = threads * items

    if op == "radix_sort":
        @cuda.jit
        def coop_tile_sort_single_phase(x, y):
            block = coop.this_block()
            keys = coop.ThreadData(items)
            base = cuda.blockIdx.x * tile
            coop.load(block, x[base:], keys, algorithm=load_alg)
            coop.radix_sort_keys(block, keys)
            coop.store(block, y[base:], keys, algorithm=load_alg)

        kernel = coop_tile_sort_single_phase
    elif op == "inclusive_sum":
        @cuda.jit
        def coop_tile_scan_single_phase(x, y):
            block = coop.this_block()
            vals = coop.ThreadData(items)
            base = cuda.blockIdx.x * tile
            coop.load(block, x[base:], vals, algorithm=load_alg)
            coop.inclusive_sum(block, vals)
            coop.store(block, y[base:], vals, algorithm=load_alg)

        kernel = coop_tile_scan_single_phase
    else:
        raise ValueError(op)
    i4a = numba.types.Array(i4, 1, "C")
    return NumbaKernel("cuprims coop single-phase (coop.this_block())", kernel, [], (i4a, i4a),
                       {"storage": "own", "block": (threads,)})


# name -> builder(op, load algorithm) -> NumbaKernel; one row per entry
TILE_VARIANTS: dict[str, Callable[[str, str], NumbaKernel]] = {
    "own storage": _tile_own_storage,
    "temp_storage": _tile_shared_temp,
    "single-phase": _tile_single_phase,
}


# ------------------------------------------------------------------ CUDA C++ twins

_TWIN_HEAD = """\
// bench_coop twin: {what}
#define CCCL_DISABLE_BF16_SUPPORT
#define CCCL_DISABLE_FP16_SUPPORT
#define _CCCL_META_UNROLL_LIMIT 10
#include <cub/block/block_load.cuh>
#include <cub/block/block_store.cuh>
#include <cub/block/{header}>
"""


@dataclass(frozen=True)
class Twin:
    """A CUDA C++ kernel (``extern "C"`` name ``name``) and its source."""

    label: str
    name: str
    source: str


def sum_twin(load_alg: str) -> Twin:
    """The block-sum kernel in CUB C++: BlockLoad + BlockReduce(WARP_REDUCTIONS)::Sum over
    the same grid-stride loop, one atomicAdd per block."""
    if load_alg not in STORAGE_FREE:
        raise ValueError("the block-sum loop reuses no shared memory: a storage-free load only")
    t, n = SUM_THREADS, SUM_ITEMS
    body = f"""
using Load = cub::BlockLoad<float, {t}, {n}, cub::{_CUB_LOAD[load_alg]}>;
using Reduce = cub::BlockReduce<float, {t}, cub::BLOCK_REDUCE_WARP_REDUCTIONS>;

extern "C" __global__ void twin_block_sum(const float* x, float* out, long long ntiles)
{{
  __shared__ union {{
    Load::TempStorage load;
    Reduce::TempStorage reduce;
  }} temp;
  float acc[{n}];
  float buf[{n}];
  for (int i = 0; i < {n}; ++i) acc[i] = 0.0f;
  for (long long tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {{
    Load(temp.load).Load(x + tile * {t * n}, buf);
    for (int i = 0; i < {n}; ++i) acc[i] += buf[i];
  }}
  const float s = Reduce(temp.reduce).Sum(acc);
  if (threadIdx.x == 0) atomicAdd(out, s);
}}
"""
    head = _TWIN_HEAD.format(what=f"block sum, {load_alg} load", header="block_reduce.cuh")
    return Twin("CUB C++ twin (NVRTC)", "twin_block_sum", head + body)


def tile_twin(op: str, load_alg: str) -> Twin:
    """The tile kernel in CUB C++: BlockLoad, BlockRadixSort::Sort or BlockScan::InclusiveSum,
    BlockStore over one ``__shared__`` union, a barrier where a phase reuses the storage
    the previous one used (CUB's rule)."""
    if op == "radix_sort":
        t, n = SORT_THREADS, SORT_ITEMS
        mid_type = f"cub::BlockRadixSort<int, {t}, {n}>"
        call, header = "Sort(items)", "block_radix_sort.cuh"
    else:
        t, n = SCAN_THREADS, SCAN_ITEMS
        mid_type = f"cub::BlockScan<int, {t}, cub::BLOCK_SCAN_RAKING>"
        call, header = "InclusiveSum(items, items)", "block_scan.cuh"
    wait = "" if load_alg in STORAGE_FREE else "  __syncthreads();\n"
    name = f"twin_tile_{op}"
    body = f"""
using Load = cub::BlockLoad<int, {t}, {n}, cub::{_CUB_LOAD[load_alg]}>;
using Mid = {mid_type};
using Store = cub::BlockStore<int, {t}, {n}, cub::{_CUB_STORE[load_alg]}>;

extern "C" __global__ void {name}(const int* x, int* y)
{{
  __shared__ union {{
    Load::TempStorage load;
    Mid::TempStorage mid;
    Store::TempStorage store;
  }} temp;
  const long long base = (long long)blockIdx.x * {t * n};
  int items[{n}];
  Load(temp.load).Load(x + base, items);
{wait}  Mid(temp.mid).{call};
{wait}  Store(temp.store).Store(y + base, items);
}}
"""
    head = _TWIN_HEAD.format(what=f"{op}, {load_alg} load/store", header=header)
    return Twin("CUB C++ twin (NVRTC)", name, head + body)


def compile_twin(twin: Twin, arch: int) -> bytes:
    """NVRTC (through cuda.core's Program) -> cubin for ``sm_<arch>``, with the pinned CCCL
    wheel's headers (the ones cuprims compiles its providers with). No GPU needed."""
    from cuda.core import Program, ProgramOptions

    from cuprims._compile.toolchain import cccl_include_dir, cuda_include_dir

    include = [cccl_include_dir()] + ([cuda_include_dir()] if cuda_include_dir() else [])
    options = ProgramOptions(arch=f"sm_{arch}", std="c++17", include_path=include)
    obj = Program(twin.source, "c++", options).compile("cubin")
    return bytes(obj.code)


class LoadedTwin:
    """A twin's cubin loaded in the current context; ``launch(grid, block, *args)`` on the
    legacy default stream (where CuPy's events and numba's launches go too)."""

    def __init__(self, twin: Twin, cubin: bytes):
        from cuda.core import Device, ObjectCode

        self.twin = twin
        self.device = Device()
        self.device.set_current()
        self.kernel = ObjectCode.from_cubin(cubin, name=twin.name).get_kernel(twin.name)
        self.stream = self.device.default_stream

    def launch(self, grid: int, block: int, *args: Any) -> None:
        from cuda.core import LaunchConfig, launch

        launch(self.stream, LaunchConfig(grid=grid, block=block), self.kernel, *args)

    def blocks_per_sm(self, block: int) -> int:
        return int(self.kernel.occupancy.max_active_blocks_per_multiprocessor(block, 0))

    def resources(self) -> dict[str, int]:
        a = self.kernel.attributes
        return {"regs": int(a.num_regs), "shared": int(a.shared_size_bytes), "local": int(a.local_size_bytes)}


# ------------------------------------------------------------------ ahead of time (no GPU)

def aot_link(nk: NumbaKernel, arch: int = 90) -> bytes:
    """What numba-cuda does at the first launch, minus the load: the kernel to LTO-IR for
    ``sm_<arch>`` and an nvJitLink LTO link with the primitives' files, into a cubin."""
    from numba import cuda, types

    from cuprims._compile.link import link_cubin
    from cuprims._operators.numba_device import target_capability

    from cuprims import coop

    cc = (arch // 10, arch % 10)
    # callees are compiled for the target, not for a device; a single-phase kernel takes its
    # block shape from the target, there being no launch
    with target_capability(cc), coop.target(cc, block=nk.notes.get("block")):
        codes, _ = cuda.compile_all(nk.kernel.py_func, types.void(*nk.argtypes), device=False, cc=cc,
                                    output="ltoir", abi="numba")
    extra = [bytes(c) if isinstance(c, bytes) else bytes(c.data) for c in codes[1:]]
    extra += [bytes(f.data) for f in _files(*nk.prims)]
    return link_cubin(bytes(codes[0]), extra, arch)


_EIATTR_FRAME_SIZE, _EIATTR_REGCOUNT = 0x11, 0x2F
_EIFMT_SVAL = 4


def cubin_resources(cubin: bytes) -> dict[str, Any]:
    """Per-thread registers, stack frame (local memory), static shared memory and the
    functions of a cubin, read from its ELF sections (what cuobjdump reports; no GPU).

    ``functions`` counts ``.text.*`` sections: 1 when every device function was inlined
    into the kernel."""
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx][4]

    def name_of(h):
        start = strtab + h[0]
        return cubin[start:cubin.index(b"\0", start)].decode()

    named = {name_of(h): h for h in heads}
    texts = [n for n in named if n.startswith(".text.")]
    shared = sum(h[5] for n, h in named.items() if n.startswith(".nv.shared.") and n != ".nv.shared.reserved.0")
    regs, frame = {}, {}
    info = named.get(".nv.info")
    if info is not None:
        blob = cubin[info[4]:info[4] + info[5]]
        i = 0
        while i + 4 <= len(blob):
            fmt, attr = blob[i], blob[i + 1]
            if fmt != _EIFMT_SVAL:
                i += 4
                continue
            (length,) = struct.unpack_from("<H", blob, i + 2)
            if attr in (_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE) and length >= 8:
                sym, value = struct.unpack_from("<II", blob, i + 4)
                (regs if attr == _EIATTR_REGCOUNT else frame)[sym] = value
            i += 4 + length
    return {"functions": len(texts), "regs": max(regs.values(), default=-1), "frame": max(frame.values(), default=-1),
            "shared": shared}
