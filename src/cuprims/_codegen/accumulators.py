"""How the generated units hold struct values in CUB's collectives (reductions, scans).

CUB moves a value through registers, shuffles and shared memory in words no wider than
its C++ type's alignment, unrolled at every place the algorithm combines two values (a
block reduction has some thirty), and the combining operator, inlined at each of them,
copies a struct result field by field. Held as itself, a struct of 300 ``int8`` fields
(alignment 1) is moved as 300 single bytes at each place and copied as 300 bytes by each
inlined operator: NVVM and ptxas, whose time grows faster than the code they are given,
take about two minutes over one reduction kernel. For a struct value of more than
:data:`LARGE_STRUCT_BYTES` bytes that the operator copies in more pieces than it has
32-bit words:

* **called operator**: the combiner calls the linked operator through a ``__noinline__``
  function instead of inlining it at every combining place: the operator's field by
  field code is compiled once, and each place passes the two values and reads the result
  through memory, a word at a time. Next to moving that many bytes a call costs little;
* **word form**: the value is held as an array of 32-bit words (its bytes, padded to 16
  bytes, aligned to 16), converted from and to the struct where items are read and
  results written. CUB then shuffles it a word at a time (a struct aligned to less than
  4 bytes it would shuffle in bytes or halfwords), every copy moves words (a byte array
  field, such as ``(np.int8, 296)``, NVVM would copy byte by byte), and the values a
  call passes through memory are stored and read 16 bytes at a time. The struct's own
  layout, the alignment asked of arrays and what the operator sees (pointers to the
  struct's bytes) stay as they are.

Smaller structs, and structs whose fields are words or wider (the operator then copies
no more pieces than CUB moves, and inlined it compiles faster than called), are held as
themselves with the operator inlined.

Pure strings: no CUDA, no numba.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cuprims._value_types import ValueType, struct_fields

# Struct values larger than this are held as described above. nvJitLink's CPU time for
# a reduction over int8 fields (sm_90, ahead of time, the 2-core CPU machine with other
# work running), held as themselves with the operator inlined against in word form with
# it called: 16 bytes 0.67 s / 0.29 s, 32 bytes 1.3 s / 0.41 s, 64 bytes 4.0 s / 0.66 s,
# 300 bytes 145 s / 2.1-4.7 s. Values up to this size keep the inlined operator: their
# builds are quick either way, and inlined code is the faster code for small values.
LARGE_STRUCT_BYTES = 32

_WORD_BYTES = 4
_WORD_FORM_ALIGN = 16


@dataclass(frozen=True)
class Accumulator:
    """The C++ type a unit's CUB collectives hold values of ``value`` in."""

    value: ValueType
    cpp: str              # the accumulator's C++ type
    decl: str = ""        # its declaration, where it is not ``value``'s own type
    called: bool = False  # a linked combining operator is called, not inlined


def _pieces(dt: np.dtype) -> int:
    """How many scalars a struct of ``dt`` holds (each element of an array field counts)."""
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        return _pieces(base) * int(np.prod(shape))
    if dt.names is None:
        return 1
    return sum(_pieces(field) for _, field, _ in struct_fields(dt))


def accumulator(vt: ValueType) -> Accumulator:
    """How CUB's collectives hold ``vt`` values (see the module docstring)."""
    words = -(-vt.size // _WORD_BYTES)
    if not vt.is_struct or vt.size <= LARGE_STRUCT_BYTES or _pieces(vt.dtype) <= words:
        return Accumulator(vt, vt.cpp)
    name = f"{vt.cpp}_words"
    padded = -(-vt.size // _WORD_FORM_ALIGN) * _WORD_FORM_ALIGN
    decl = (f"// {vt.cpp} as CUB moves it: in 32-bit words, not byte by byte (cuprims._codegen.accumulators)\n"
            f"struct __align__({_WORD_FORM_ALIGN}) {name}\n{{\n"
            f"  unsigned int words[{padded // _WORD_BYTES}];\n"
            f"  {name}() = default;\n"
            f"  __device__ {name}(const {vt.cpp}& value) {{ memcpy(words, &value, {vt.size}); }}\n"
            f"  __device__ operator {vt.cpp}() const\n  {{\n"
            f"    {vt.cpp} value;\n    memcpy(&value, words, {vt.size});\n    return value;\n  }}\n}};\n")
    return Accumulator(vt, name, decl, called=True)


__all__ = ["Accumulator", "LARGE_STRUCT_BYTES", "accumulator"]
