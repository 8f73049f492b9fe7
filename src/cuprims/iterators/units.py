"""C++ for the iterators an algorithm reads from (pure strings, like every codegen module).

:func:`iterator_unit` walks an iterator tree once and returns everything a generator
needs to splice it in: the top struct's name, the definitions (headers first, then the
structs innermost first, operator functors beside them), the value types the preamble
must declare, and the operators to link.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from cuprims._value_types import ValueType
from cuprims.iterators.base import IteratorBase, IteratorCode, LinkedOp


@dataclass(frozen=True)
class IteratorUnit:
    type_name: str
    text: str
    value_types: tuple[ValueType, ...]
    ops: tuple[LinkedOp, ...]
    state_size: int
    state_alignment: int

    def without_objects(self) -> "IteratorUnit":
        """This unit with the operators' Python objects dropped (symbols and types kept)."""
        return dataclasses.replace(self, ops=tuple(dataclasses.replace(o, obj=None) for o in self.ops))


def iterator_unit(it: IteratorBase, prefix: str, output: bool = False, argument: str | None = None) -> IteratorUnit:
    """Everything the generated source needs for iterator ``it``; names start with ``prefix``.
    With ``output`` the structs can also be written through (``write(i, v)``). ``argument``:
    the algorithm's argument ``it`` was given as, which errors about its operators name."""
    code = IteratorCode(prefix, output, argument=argument)
    name, _ = it._emit(code)
    size, align = it._struct_layout()
    text = "".join(line + "\n" for line in code.includes) + "\n".join(code.definitions)
    return IteratorUnit(type_name=name, text=text, value_types=tuple(code.value_types), ops=tuple(code.ops),
                        state_size=size, state_alignment=align)
