"""Helpers shared by the CPU tests (plain functions; the fixtures live in conftest.py)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np

import cuprims
from cuprims._base import stats

ARCH = 90  # every AOT build here names its target explicitly


def counters() -> dict:
    return stats.snapshot()


def delta(before: dict, keys=("numba_compiles", "nvrtc_compiles", "links")) -> dict:
    now = stats.snapshot()
    return {k: now[k] - before.get(k, 0) for k in keys}


def make_f4(op, *, cc=ARCH, h_init=True, dtype=np.float32, out_dtype=None, **kwargs):
    """make_reduce_into over ProxyArray placeholders (ahead of time, no GPU)."""
    out_dtype = dtype if out_dtype is None else out_dtype
    return cuprims.make_reduce_into(
        d_in=cuprims.ProxyArray(dtype), d_out=cuprims.ProxyArray(out_dtype), op=op,
        h_init=cuprims.ProxyValue(out_dtype) if h_init else None, compute_capability=cc, **kwargs)


def bad_source():
    """A generated reduction with a syntax error appended: NVRTC rejects it."""
    from cuprims._compile.source import Source
    from cuprims.algorithms.reduce.source import reduce_source

    good = reduce_source(in_type=cuprims._value_types.value_type(np.float32),
                         accum=cuprims._value_types.value_type(np.float32),
                         op=cuprims.op.op_spec(cuprims.OpKind.PLUS), has_init=True,
                         deterministic_across_gpus=False, arch=ARCH)
    text = good.text + "\nthis is not valid C++ at all ;;; int x = ;\n"
    return Source(text=text, name_expressions=(), extern_symbols=(), meta_fields=good.meta_fields)


def run_python(code: str, *, env: dict | None = None, timeout: float = 300,
               prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (started through ``prefix``, e.g. a privilege
    dropper); raise with its output if it fails."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run([*prefix, sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def last_json(stdout: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no JSON line in output:\n{stdout}"
    return json.loads(lines[-1])


# Python source for a builder script (see spawn_builders): announce this process, then
# wait until all n have started, so that their builds race.
WAIT_FOR_ALL = """
import os, sys, time
ready_dir, n = sys.argv[1], int(sys.argv[2])
open(os.path.join(ready_dir, str(os.getpid())), "w").close()
deadline = time.time() + 120
while len(os.listdir(ready_dir)) < n and time.time() < deadline:
    time.sleep(0.002)
"""


def spawn_builders(tmp_path: Path, cache_dir: Path, script_text: str, n: int, tag: str, *,
                   args=lambda i: (), env: dict | None = None, timeout: float = 300,
                   replace_env: bool = False) -> list[dict]:
    """Start ``n`` interpreters on ``script_text`` at once and return each one's last JSON line.

    The script gets ``argv[1]`` = a "ready" directory and ``argv[2]`` = n (for
    :data:`WAIT_FOR_ALL`, to wait until every process has started before it builds), then
    ``args(i)`` for process i."""
    script = tmp_path / f"builder-{tag}.py"
    script.write_text(script_text)
    ready = tmp_path / f"ready-{tag}"
    ready.mkdir()
    # replace_env: ``env`` is the whole environment (to leave a variable out), not additions
    full_env = dict(env or {}) if replace_env else dict(os.environ)
    full_env["CUPRIMS_CACHE_DIR"] = str(cache_dir)
    if not replace_env:
        full_env.update(env or {})
    procs = [subprocess.Popen([sys.executable, str(script), str(ready), str(n), *map(str, args(i))], env=full_env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(n)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            assert p.returncode == 0, f"builder process failed:\n{out}\n{err}"
            outs.append(last_json(out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return outs


# ------------------------------------------------------------------ golden sources and cubin layouts

GOLDENS = Path(__file__).parent / "goldens"


def render_source(src) -> str:
    """A generated unit as golden text: the source, then its name expressions, external
    symbols and exported metadata fields as comments."""
    parts = [src.text.rstrip("\n"), "", "// ---- name_expressions ----"]
    parts += [f"// {n}" for n in src.name_expressions]
    parts += ["// ---- extern_symbols ----"] + [f"// {s}" for s in src.extern_symbols]
    parts += ["// ---- meta_fields ----"] + [f"// {m}" for m in src.meta_fields]
    return "\n".join(parts) + "\n"


def check_golden(name: str, text: str) -> None:
    """Compare ``text`` with goldens/<name>.cu (CUPRIMS_UPDATE_GOLDENS=1 rewrites it)."""
    import difflib

    import pytest

    path = GOLDENS / f"{name}.cu"
    if os.environ.get("CUPRIMS_UPDATE_GOLDENS") == "1":
        GOLDENS.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; run with CUPRIMS_UPDATE_GOLDENS=1 to create it"
    expected = path.read_text()
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                            "golden/" + path.name, "generated"))
        pytest.fail(f"generated source differs from {path.name} (CUPRIMS_UPDATE_GOLDENS=1 regenerates it):\n{diff}")


def kernel_param_sizes(cubin: bytes, lowered: str) -> list[int]:
    """Byte size of each parameter of kernel ``lowered``, in order, read from the cubin."""
    from cuprims._compile.elfmeta import kernel_param_layout

    return [size for _, size in kernel_param_layout(cubin, lowered)]


def pack_sizes(kinds) -> list[int]:
    """The parameter sizes a cuprims ParamPack with these kinds writes."""
    return [8 if k in ("ptr", "i64") else 4 if k == "i32" else max(int(k), 1) for k in kinds]


def check_kernel_params(obj, arch: int = ARCH) -> None:
    """Assert that each kernel of built object ``obj`` takes, in the cubin for ``sm_<arch>``,
    the parameters its description's ``kernel_params()`` lays out (what the host packs)."""
    source, result = obj._builds.source(arch), obj._builds.result(arch)
    kinds_per_kernel = obj.desc.kernel_params()
    assert len(source.name_expressions) == len(kinds_per_kernel)
    for expr, kinds in zip(source.name_expressions, kinds_per_kernel):
        sizes = kernel_param_sizes(result.cubin, result.kernels[expr])
        assert sizes == pack_sizes(kinds), (expr, sizes, kinds)


def check_variant_params(obj, variant: int, raw=(None,), arch: int = ARCH):
    """Build variant ``variant`` of ``obj`` for ``sm_<arch>`` (``raw``: the call's operators,
    then its iterators, as ``obj._objects`` takes them) and assert its kernels' parameter
    sizes in the cubin against what the host packs for that variant; returns (source, result)."""
    builds = obj._builds_of(variant)
    builds.build_for([arch], obj._objects(*raw))
    source, result = builds.source(arch), builds.result(arch)
    kinds_per_kernel = obj.desc.variant(variant).kernel_params()
    assert len(source.name_expressions) == len(kinds_per_kernel)
    for expr, kinds in zip(source.name_expressions, kinds_per_kernel):
        assert kernel_param_sizes(result.cubin, result.kernels[expr]) == pack_sizes(kinds), expr
    return source, result


# ------------------------------------------------------------------ a fake device's memory
#
# Host dispatch tests run against fake devices: device memory is numpy bytes at made-up
# addresses (every access is bounds- and alignment-checked against one allocation), and
# each kernel is emulated by what it computes (see test_radix_sort.py, test_histogram.py).

class FakeMemory:
    # device memory is shared by every host thread: the fake's bookkeeping takes a lock, so
    # threads allocating, freeing and reading at once see whole allocations
    def __init__(self):
        self.blocks: dict[int, np.ndarray] = {}
        self.next = 1 << 36
        self.freed: list[int] = []
        self.lock = threading.Lock()

    def alloc(self, nbytes: int, skew: int = 0) -> int:
        with self.lock:
            base = self.next + skew
            self.blocks[base] = np.full(max(nbytes, 1), 0xCD, np.uint8)  # garbage, like fresh device memory
            self.next = (base + nbytes + 8192) // 4096 * 4096
            return base

    def free(self, ptr: int) -> None:
        with self.lock:
            assert ptr in self.blocks, hex(ptr)
            self.freed.append(ptr)
            del self.blocks[ptr]

    def view(self, ptr: int, dtype, count: int) -> np.ndarray:
        dtype = np.dtype(dtype)
        nbytes = count * dtype.itemsize
        assert ptr % max(dtype.alignment, 1) == 0 or dtype.names is not None, f"misaligned {dtype} at {hex(ptr)}"
        with self.lock:
            blocks = list(self.blocks.items())
        for base, block in blocks:
            if base <= ptr and ptr + nbytes <= base + block.size:
                return block[ptr - base:ptr - base + nbytes].view(dtype)
        if nbytes == 0:
            return np.zeros(0, dtype)
        raise AssertionError(f"access of {nbytes} bytes at {hex(ptr)} outside every allocation")


class FakeArray:
    """A device array in fake memory, read through the CUDA Array Interface."""

    def __init__(self, mem: FakeMemory, host: np.ndarray, skew: int = 0):
        self.mem, self.dtype, self.size = mem, host.dtype, host.size
        self.ptr = mem.alloc(host.nbytes, skew)
        mem.view(self.ptr, np.uint8, host.nbytes)[:] = host.view(np.uint8).reshape(-1)

    @property
    def __cuda_array_interface__(self):
        iface = {"shape": (self.size,), "typestr": self.dtype.str, "data": (self.ptr, False), "version": 3,
                 "strides": None}
        if self.dtype.names is not None:
            iface["descr"] = self.dtype.descr
        return iface

    def get(self) -> np.ndarray:
        return self.mem.view(self.ptr, np.uint8, self.size * self.dtype.itemsize).copy().view(self.dtype)

    @classmethod
    def empty(cls, mem, n, dtype):
        return cls(mem, np.zeros(n, dtype))


class _FakeMemoryPointer:
    __slots__ = ("ptr", "device_id")

    def __init__(self, ptr: int, device_id: int):
        self.ptr, self.device_id = ptr, device_id


class _FakeCupyBase:
    """What cuprims reads of a CuPy ndarray (``data.ptr``, ``data.device_id``, ``dtype``,
    ``size``, ``_c_contiguous``), over fake memory; weakly referenceable, as CuPy's is.
    ``reads`` counts the reads of ``data`` (each array read of a call reads it once)."""

    __slots__ = ("_data", "dtype", "size", "_c_contiguous", "mem", "__weakref__")
    reads = 0

    @property
    def data(self) -> _FakeMemoryPointer:
        _FakeCupyBase.reads += 1
        return self._data

    def get(self) -> np.ndarray:
        return self.mem.view(self._data.ptr, np.uint8, self.size * self.dtype.itemsize).copy().view(self.dtype)

    def view(self, start: int, n: int):
        """Items ``start`` to ``start + n`` (a new object, as CuPy's slicing makes)."""
        v = object.__new__(type(self))
        v.mem, v.dtype, v.size, v._c_contiguous = self.mem, self.dtype, n, True
        v._data = _FakeMemoryPointer(self._data.ptr + start * self.dtype.itemsize, self._data.device_id)
        return v


def fake_cupy_array(mem: FakeMemory, host: np.ndarray, device: int = 0):
    """A fake CuPy ndarray (its type is named ``ndarray`` in a ``cupy`` module, so cuprims
    reads it as CuPy's) holding ``host``'s items in fake memory."""
    arr = object.__new__(FakeCupyNdarray)
    arr.mem, arr.dtype, arr.size, arr._c_contiguous = mem, host.dtype, host.size, True
    ptr = mem.alloc(host.nbytes)
    mem.view(ptr, np.uint8, host.nbytes)[:] = host.view(np.uint8).reshape(-1)
    arr._data = _FakeMemoryPointer(ptr, device)
    return arr


FakeCupyNdarray = type("ndarray", (_FakeCupyBase,), {"__module__": "cupy._core.core", "__slots__": ()})


def fake_driver_memory(monkeypatch, skew: int = 0) -> FakeMemory:
    """A FakeMemory that the driver's stream-ordered allocations come from (each ``skew``
    bytes past an aligned address) and return to, and FakePack for its parameter packs:
    what a test of an algorithm's host dispatch on a fake device sets up first."""
    from cuprims._runtime import driver

    mem = FakeMemory()
    monkeypatch.setattr(driver, "ParamPack", FakePack)
    monkeypatch.setattr(driver, "alloc_async", lambda nbytes, stream, device=-1: mem.alloc(nbytes, skew=skew))
    monkeypatch.setattr(driver, "free_async", lambda ptr, stream: mem.free(ptr))
    return mem


class FakeDeviceArray:
    """The CUDA Array Interface of ``n`` items at a made-up address, and nothing else: an
    argument's checks read it, nothing is ever read or written through it."""

    def __init__(self, n, typestr="<f4", ptr=0x7F0000000000):
        self._iface = {"data": (ptr, False), "shape": (n,), "typestr": typestr, "version": 3, "strides": None}

    @property
    def __cuda_array_interface__(self):
        return self._iface


class FakePack:
    def __init__(self, kinds):
        self.kinds = tuple(kinds)

    def pack(self, *values):
        assert len(values) == len(self.kinds), (self.kinds, values)
        for kind, v in zip(self.kinds, values):
            if kind == "ptr":
                assert isinstance(v, int) and 0 <= v < 1 << 64, v
            elif kind == "i64":
                assert isinstance(v, int) and -(1 << 63) <= v < 1 << 63, v
            elif kind == "i32":
                assert isinstance(v, int) and -(1 << 31) <= v < 1 << 31, v
            else:
                assert isinstance(v, bytes) and len(v) == kind, (kind, v)
        return values


@functools.lru_cache(maxsize=None)
def stub_ltoir(name: str, n_pointers: int = 3) -> bytes:
    """Real LTO-IR (from NVRTC) of an ``extern "C" __device__`` function ``name`` that takes
    ``n_pointers`` pointers and does nothing: for tests of a RawOp's state and packing
    (RawOp reads its LTO-IR through nvJitLink when it is made)."""
    from cuda.core import Program, ProgramOptions

    params = ", ".join(f"void* p{i}" for i in range(n_pointers))
    options = ProgramOptions(arch=f"sm_{ARCH}", std="c++17", relocatable_device_code=True,
                             link_time_optimization=True)
    return bytes(Program(f'extern "C" __device__ void {name}({params}) {{}}', "c++", options).compile("ltoir").code)
