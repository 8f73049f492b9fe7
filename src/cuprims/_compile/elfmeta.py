"""Read the initial value of a ``__device__`` global out of a cubin (an ELF file), and
what its ``.nv.info`` records say of its kernels (parameters, local memory).

Generated code exports the compile-time values the host needs (tile sizes, sizes of
types) as an initialised ``__device__`` array; reading it back from the ELF needs no GPU.
"""

from __future__ import annotations

import struct
from typing import Iterator

_SHT_SYMTAB = 2
_SHT_NOBITS = 8


def _section_headers(elf: bytes) -> list[tuple]:
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise ValueError("not a 64-bit ELF image")
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, _ = struct.unpack_from("<HHH", elf, 0x3A)
    return [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]


def sections(elf: bytes) -> dict[str, bytes]:
    """Every section of an ELF image by name (NOBITS sections map to b"")."""
    headers = _section_headers(elf)
    (shstrndx,) = struct.unpack_from("<H", elf, 0x3E)
    names = headers[shstrndx]
    out = {}
    for sec in headers:
        start = names[4] + sec[0]
        name = elf[start:elf.index(b"\0", start)].decode()
        out[name] = b"" if sec[1] == _SHT_NOBITS else elf[sec[4]:sec[4] + sec[5]]
    return out


_EM_CUDA = 190
# e_ident[EI_ABIVERSION] of a CUDA image: the first ABI keeps the SM in e_flags' low byte,
# the second (CUDA 12.8 on) in its second byte (LLVM's EF_CUDA_SM and EF_CUDA_SM_MASK)
_CUDA_ABI_V1, _CUDA_ABI_V2 = 7, 8


def cuda_arch(elf: bytes) -> int:
    """The SM a cubin was compiled for (90 for sm_90), from its ELF header; ValueError
    when ``elf`` is not a 64-bit little-endian CUDA image."""
    if len(elf) < 0x40 or elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF image")
    (machine,) = struct.unpack_from("<H", elf, 0x12)
    if machine != _EM_CUDA:
        raise ValueError(f"an ELF image for machine {machine}, not CUDA ({_EM_CUDA})")
    (flags,) = struct.unpack_from("<I", elf, 0x30)
    abi = elf[8]
    if abi == _CUDA_ABI_V1:
        return flags & 0xFF
    if abi == _CUDA_ABI_V2:
        return (flags >> 8) & 0xFF
    raise ValueError(f"a CUDA ELF image of unknown ABI version {abi}")


_EIATTR_KPARAM_INFO = 0x17
_EIFMT_SVAL = 4


def kernel_param_layout(cubin: bytes, lowered: str) -> list[tuple[int, int]]:
    """(offset, size) of each parameter of kernel ``lowered``, in order, from the
    EIATTR_KPARAM_INFO records of its ``.nv.info.<name>`` section."""
    return param_layout(sections(cubin)[".nv.info." + lowered])


# a function's stack frame and stack sizes (bytes of local memory): SVAL records of the
# cubin's ``.nv.info`` section, each (function symbol index, value)
_EIATTR_FRAME_SIZE, _EIATTR_MIN_STACK_SIZE, _EIATTR_MAX_STACK_SIZE = 0x11, 0x12, 0x23


def _sval_records(info: bytes) -> Iterator[tuple[int, int]]:
    """(attribute, payload offset) of each SVAL record of an ``.nv.info`` section. Records
    are four-byte aligned: format, attribute, then a 16-bit value or (for SVAL) a length
    and payload."""
    i = 0
    while i + 4 <= len(info):
        fmt, attr = info[i], info[i + 1]
        if fmt != _EIFMT_SVAL:
            i += 4
            continue
        (length,) = struct.unpack_from("<H", info, i + 2)
        yield attr, i + 4
        i += 4 + length


def local_memory_bytes(cubin: bytes) -> int:
    """The largest stack frame of the cubin's functions: 0 when no function reads or
    writes local memory (its SASS has no ``LDL``/``STL``: spills and arrays left in
    memory need a frame)."""
    info = sections(cubin).get(".nv.info", b"")
    sizes = [struct.unpack_from("<I", info, at + 4)[0] for attr, at in _sval_records(info)
             if attr in (_EIATTR_FRAME_SIZE, _EIATTR_MIN_STACK_SIZE, _EIATTR_MAX_STACK_SIZE)]
    return max(sizes, default=0)


_EIATTR_REGCOUNT = 0x2F


def register_count(cubin: bytes) -> int:
    """The most registers a thread of any of the cubin's functions uses: a block of ``n``
    threads launches only if ``n`` times this fits the SM's 64 Ki registers."""
    info = sections(cubin).get(".nv.info", b"")
    counts = [struct.unpack_from("<I", info, at + 4)[0] for attr, at in _sval_records(info)
              if attr == _EIATTR_REGCOUNT]
    return max(counts, default=0)


def param_layout(info: bytes) -> list[tuple[int, int]]:
    """(offset, size) of each parameter a kernel's ``.nv.info.<name>`` section records."""
    params: dict[int, tuple[int, int]] = {}
    for attr, at in _sval_records(info):
        if attr == _EIATTR_KPARAM_INFO:
            _index, ordinal, offset, flags = struct.unpack_from("<IHHI", info, at)
            params[ordinal] = (offset, (flags >> 18) & 0x3FFF)
    return [params[k] for k in sorted(params)]


def read_symbol(elf: bytes, symbol: str) -> bytes:
    headers = _section_headers(elf)
    target = symbol.encode()
    for sec in headers:
        if sec[1] != _SHT_SYMTAB:
            continue
        strtab = headers[sec[6]]
        sym_off, sym_size = sec[4], sec[5]
        for j in range(sym_size // 24):
            st_name, _info, _other, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", elf, sym_off + j * 24)
            start = strtab[4] + st_name
            end = elf.index(b"\0", start)
            if elf[start:end] != target:
                continue
            holder = headers[st_shndx]
            if holder[1] == _SHT_NOBITS:
                raise ValueError(f"symbol {symbol} has no initial value in the image")
            off = holder[4] + st_value
            return elf[off:off + st_size]
    raise KeyError(symbol)


def read_meta(elf: bytes, symbol: str, fields: tuple[str, ...]) -> dict[str, int]:
    raw = read_symbol(elf, symbol)
    values = struct.unpack(f"<{len(raw) // 8}q", raw)
    if len(values) != len(fields):
        raise ValueError(f"{symbol}: expected {len(fields)} values, found {len(values)}")
    return dict(zip(fields, values))
