"""Compile a user's @cuda.jit kernel for sm_90 with no GPU and link it with the
primitives' files into a real cubin (what numba-cuda does at launch, minus the load)."""

from __future__ import annotations

from typing import Any, Sequence

ARCH = 90


def link_kernel(kernel: Any, argtypes: Sequence[Any], prims: Sequence[Any], *, with_files: bool = True) -> bytes:
    from numba import cuda, types

    from cuprims._compile.link import link_cubin
    from cuprims._operators.numba_device import target_capability

    with target_capability((9, 0)):   # callees are compiled for the target, not a device
        codes, _ = cuda.compile_all(kernel.py_func, types.void(*argtypes), device=False, cc=(9, 0),
                                    output="ltoir", abi="numba",
                                    launch_bounds=getattr(kernel, "targetoptions", {}).get("launch_bounds"))
    # numba's own link inputs: LTO-IR as bytes, an LTOIR file, or (float16's shim) a cuda.core ObjectCode
    extra = [bytes(c) if isinstance(c, bytes) else bytes(c.data) if hasattr(c, "data") else bytes(c.code)
             for c in codes[1:]]
    if with_files:
        # numba keeps link inputs in a set: one object listed twice is linked once
        extra += [bytes(f.data) for f in {id(f): f for p in prims for f in p.files}.values()]
    return link_cubin(bytes(codes[0]), extra, ARCH)


def kernel_sections(cubin: bytes) -> dict[str, bytes]:
    from cuprims._compile.elfmeta import sections

    return sections(cubin)


def shared_bytes(cubin: bytes) -> int:
    """Static shared memory of the cubin's one kernel (its ``.nv.shared.<kernel>`` section)."""
    from cuprims._compile.elfmeta import _section_headers

    import struct

    elf = cubin
    headers = _section_headers(elf)
    (shstrndx,) = struct.unpack_from("<H", elf, 0x3E)
    names = headers[shstrndx]
    total = 0
    for sec in headers:
        start = names[4] + sec[0]
        name = elf[start:elf.index(b"\0", start)].decode()
        if name.startswith(".nv.shared.") and name != ".nv.shared.reserved.0":
            total += sec[5]
    return total


def linked_ptx(kernel: Any, argtypes: Sequence[Any], prims: Sequence[Any]) -> str:
    """The LTO-linked PTX of ``kernel`` with the primitives' files (to look for calls)."""
    from cuda.core import Linker, LinkerOptions, ObjectCode
    from numba import cuda, types

    from cuprims._operators.numba_device import target_capability

    with target_capability((9, 0)):
        codes, _ = cuda.compile_all(kernel.py_func, types.void(*argtypes), device=False, cc=(9, 0),
                                    output="ltoir", abi="numba",
                                    launch_bounds=getattr(kernel, "targetoptions", {}).get("launch_bounds"))
    objs = [ObjectCode.from_ltoir(bytes(codes[0]), name="kernel")]
    files = {id(f): f for p in prims for f in p.files}.values()
    objs += [ObjectCode.from_ltoir(bytes(f.data), name=f.name) for f in files]
    linker = Linker(*objs, options=LinkerOptions(arch=f"sm_{ARCH}", link_time_optimization=True, ptx=True))
    try:
        code = linker.link("ptx").code
    finally:
        linker.close()
    return code.decode() if isinstance(code, bytes) else code


def style2_ptx(kernel: Any, argtypes: Sequence[Any]) -> str:
    """The LTO-linked PTX of a Style 2 kernel: its link inputs are those numba's own
    compilation collected (the providers' units), no ``.files``."""
    from cuda.core import Linker, LinkerOptions, ObjectCode
    from numba import cuda, types

    from cuprims._operators.numba_device import target_capability

    with target_capability((9, 0)):
        codes, _ = cuda.compile_all(kernel.py_func, types.void(*argtypes), device=False, cc=(9, 0),
                                    output="ltoir", abi="numba",
                                    launch_bounds=getattr(kernel, "targetoptions", {}).get("launch_bounds"))
    objs = [ObjectCode.from_ltoir(bytes(codes[0]), name="kernel")]
    objs += [ObjectCode.from_ltoir(bytes(c.data), name=f"input{i}") for i, c in enumerate(codes[1:])]
    linker = Linker(*objs, options=LinkerOptions(arch=f"sm_{ARCH}", link_time_optimization=True, ptx=True))
    try:
        code = linker.link("ptx").code
    finally:
        linker.close()
    return code.decode() if isinstance(code, bytes) else code
