"""Read the initial value of a ``__device__`` global out of a cubin (an ELF file).

Generated code exports the compile-time values the host needs (tile sizes, sizes of
types) as an initialised ``__device__`` array; reading it back from the ELF needs no GPU.
"""

from __future__ import annotations

import struct

_SHT_SYMTAB = 2
_SHT_NOBITS = 8


def read_symbol(elf: bytes, symbol: str) -> bytes:
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise ValueError("not a 64-bit ELF image")
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    target = symbol.encode()
    for sec in sections:
        if sec[1] != _SHT_SYMTAB:
            continue
        strtab = sections[sec[6]]
        sym_off, sym_size = sec[4], sec[5]
        for j in range(sym_size // 24):
            st_name, _info, _other, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", elf, sym_off + j * 24)
            start = strtab[4] + st_name
            end = elf.index(b"\0", start)
            if elf[start:end] != target:
                continue
            holder = sections[st_shndx]
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
