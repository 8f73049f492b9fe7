"""The one argument layer: every ``d_*`` argument, input or output, goes through here.

At build time :func:`describe` turns an argument into an :class:`ArgKind`: a device array
(or ``ProxyArray``) is the ``pointer`` kind of its value type; an iterator is taken as it
is, described by its own code key, with the C++ of its state struct
(:class:`~cuprims.iterators.units.IteratorUnit`) for the code generator. At call
time :meth:`ArgKind.bind` checks the argument against that description and returns the
kernel parameter: a pointer for an array (checked for device memory, contiguity, length
and the alignment its C++ type needs), or the iterator's packed state with position 0
(the layout of ``cuprims::input_iterator``/``output_iterator`` in
``iterators/cuprims_iterator.cuh``).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import re
import sys
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from cuprims._base.frozen import frozen
from cuprims._runtime import arrays as _arrays
from cuprims._value_types import ValueType, value_type
from cuprims.errors import ArgumentError, ArgumentTypeError
from cuprims.iterators.base import IteratorBase, adapted_layout, check_direction
from cuprims.op import op_spec

POINTER = "pointer"

if TYPE_CHECKING:
    from typing import ParamSpec, Protocol, TypeVar

    _P = ParamSpec("_P")
    _R = TypeVar("_R", covariant=True)

    class KeywordChecked(Protocol[_P, _R]):
        """A :func:`keyword_checked` function: called as the function it wraps, which it
        keeps as ``__wrapped__`` (what a one-shot function calls, its keywords checked)."""

        @property
        def __wrapped__(self) -> Callable[_P, _R]: ...

        def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...


@frozen
class ArgKind:
    """What a build knows of one ``d_*`` argument (hashable, no user objects).

    ``key`` is ``"pointer"`` for a device array, else the iterator's code key;
    ``alignment`` is what the kernel's loads and stores need of an array's address;
    ``output`` whether the kernel writes through it. ``state_size`` and
    ``state_alignment`` are the layout of the kernel parameter (an iterator's state struct
    followed by its position), ``unit_state_size`` and ``unit_state_alignment`` that of
    the iterator's own state struct (what a kernel that takes the bare state is passed;
    0 and 1 for an array). ``unit`` (an iterator's generated C++, fixed by its key) is not
    part of the identity.
    """

    name: str
    key: str
    value: ValueType
    alignment: int
    output: bool = False
    state_size: int = 8
    state_alignment: int = 8
    unit_state_size: int = 0
    unit_state_alignment: int = 1
    unit: Any = dataclasses.field(default=None, compare=False, repr=False)
    if TYPE_CHECKING:  # set by __post_init__, not fields
        _dtype: np.dtype = dataclasses.field(init=False, compare=False, repr=False)
        _mask: int = dataclasses.field(init=False, compare=False, repr=False)
        _is_pointer: bool = dataclasses.field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # read on every call: kept as plain attributes
        object.__setattr__(self, "_dtype", self.value.dtype)
        object.__setattr__(self, "_mask", self.alignment - 1)
        object.__setattr__(self, "_is_pointer", self.key == POINTER)

    def cpp(self) -> str:
        """The C++ type of the kernel parameter."""
        if self.key == POINTER:
            return f"{self.value.cpp}*" if self.output else f"const {self.value.cpp}*"
        template = "output_iterator" if self.output else "input_iterator"
        return f"cuprims::{template}<{self.unit.type_name}, {self.value.cpp}>"

    def cpp_text(self) -> str:
        """Definitions the kernel parameter's type needs (an iterator's structs and asserts)."""
        if self.key == POINTER:
            return ""
        return (self.unit.text + f"\nstatic_assert(sizeof({self.cpp()}) == {self.state_size} && "
                f"alignof({self.cpp()}) == {self.state_alignment}, \"iterator layout differs from cuprims' "
                "packing\");\n")

    def viewed_as(self, vt: ValueType) -> "ArgKind":
        """This iterator read as items of ``vt`` (a struct of the same layout, converted
        bytewise by ``cuprims::input_iterator``)."""
        return dataclasses.replace(self, value=vt)

    def linked_ops(self) -> tuple[Any, ...]:
        """OpInputs of the operators inside an iterator (none for an array)."""
        if self.unit is None:
            return ()
        from cuprims._build.results import OpInput

        return tuple(OpInput(o.symbol, o.spec, o.arg_types, o.result_type) for o in self.unit.ops)

    @property
    def is_pointer(self) -> bool:
        return self.key == POINTER

    @property
    def param(self) -> Any:
        """This argument's kernel parameter kind, as :class:`driver.ParamPack` takes it."""
        return "ptr" if self.key == POINTER else self.state_size

    def bind(self, x: Any, count: int, count_name: str | None = "num_items") -> Any:
        """The kernel parameter for ``x`` reading or writing ``count`` items."""
        if self._is_pointer:
            reader = _arrays.readers.get(type(x))
            if reader is not None:  # the common case, checked inline; anything off is reported below
                ptr, dt, size = reader(x, self.name)
                if (dt is self._dtype or dt == self._dtype) and size >= count and not ptr & self._mask:
                    return ptr
            try:
                return _arrays.checked_array(x, self.name, self._dtype, count, self._mask, count_name)[0]
            except ArgumentTypeError:
                if isinstance(x, IteratorBase):
                    raise ArgumentError(self.name, "a device array (as at build time)", x) from None
                raise
        if not isinstance(x, IteratorBase) or x._key() != self.key:
            raise ArgumentError(self.name, _iterator_expected(self.key, x), x)
        return x._state(count, self.name).ljust(self.state_size, b"\0")

    def pointer(self, x: Any, count: int, count_name: str | None = "num_items") -> int:
        """``x``'s checked device pointer (for arguments that take arrays only)."""
        return _arrays.checked_pointer(x, self.name, self.value.dtype, count, self.alignment - 1, count_name)


_PYTHON_OP = re.compile(r"python:[0-9a-f]{64}")


def _iterator_expected(key: str, x: Any) -> str:
    """What a call expected where an iterator of another kind came. When only the Python
    operators' identities differ, says why that happens across Python versions."""
    expected = f"an iterator of the kind this object was built for ({key})"
    if isinstance(x, IteratorBase) and _PYTHON_OP.search(key):
        given = x._key()
        if given != key and _PYTHON_OP.sub("python", given) == _PYTHON_OP.sub("python", key):
            expected += (f" with the same Python operators (a Python operator is known by its bytecode, which "
                         f"differs between Python versions: an object deserialized from a blob made under another "
                         f"Python than {sys.version_info[0]}.{sys.version_info[1]} cannot match its iterators' "
                         f"operators; make the blob under this Python)")
    return expected


def describe(x: Any, name: str, *, iterators: bool = False, output: bool = False, vt: ValueType | None = None,
             alignment: int | None = None) -> ArgKind:
    """The build-time description of argument ``name``.

    An input takes device arrays (or ProxyArray placeholders) and, with ``iterators``,
    iterators with items to read; an output takes device arrays and, with ``iterators``,
    writable iterators (:func:`check_direction`). Anything else raises ArgumentError (or
    ArgumentTypeError) naming ``name``, before anything is compiled.

    ``iterators`` says whether this argument may be an iterator, ``output`` whether the
    kernel writes through it; ``vt`` overrides the value type read from the array's dtype
    (e.g. opaque sort values), ``alignment`` the address alignment the kernel needs
    (default: the C++ type's)."""
    if isinstance(x, IteratorBase):
        if not iterators:
            raise ArgumentTypeError(name, "a device array (this argument does not take iterators yet)", x)
        key = x._key()
        memo_key = (name, key, output)
        kind = _iterator_kinds.get(memo_key)
        if kind is None:
            kind = _iterator_kinds[memo_key] = _describe_iterator(x, name, key, output)
        return kind
    if x is None:
        raise ArgumentError(name, "a device array", None)
    if vt is not None:
        return ArgKind(name, POINTER, vt, vt.alignment if alignment is None else alignment, output)
    dt = _arrays.array_dtype(x, name)
    memo = (name, dt, output)
    kind = _array_kinds.get(memo)
    if kind is None:
        vt = value_type(dt, argument=name)
        kind = _array_kinds[memo] = ArgKind(name, POINTER, vt, vt.alignment, output)
    return kind


def _describe_iterator(it: IteratorBase, name: str, key: str, output: bool) -> ArgKind:
    from cuprims.iterators.units import iterator_unit

    check_direction(it, name, output)
    # the unit keeps the operators' symbols and types, not the callables (no user objects)
    unit = iterator_unit(it, f"cuprims_{name.removeprefix('d_')}_it", output, argument=name).without_objects()
    size, align = adapted_layout(unit.state_size, unit.state_alignment)
    return ArgKind(name, key, it.value_type, 1, output, state_size=size, state_alignment=align,
                   unit_state_size=unit.state_size, unit_state_alignment=unit.state_alignment, unit=unit)


# One ArgKind object per (argument name, dtype or iterator key, direction): their hashes
# are computed once, and iterator C++ is generated once per kind.
_array_kinds: dict[tuple[str, np.dtype, bool], ArgKind] = {}
_iterator_kinds: dict[tuple[str, str, bool], ArgKind] = {}


def linked_objects(*args: Any) -> list[Any]:
    """The Python objects behind the operators inside the iterators among ``args``, in
    order (arrays contribute none)."""
    return [obj for x in args if isinstance(x, IteratorBase) for obj in x._linked_objects()]


_PLAIN = (bool, int, float, complex, str, bytes, type(None))


def _plain(x: Any) -> Any:
    return (type(x), x)


def _typed(x: Any) -> Any:
    return (type(x), x.dtype)


def _iterator(x: Any) -> Any:
    return (IteratorBase, x._key())


def _struct_value(x: Any) -> Any:
    return (type(x), type(x)._cuprims_dtype)


def _operator(x: Any) -> Any:
    try:
        return ("op", op_spec(x, bind_captures=True))
    except Exception:  # noqa: BLE001 - the description reports it, naming the argument
        return None


def _own(x: Any) -> Any:
    return x._cuprims_signature()


def _unknown(x: Any) -> Any:
    dt = getattr(x, "dtype", None)
    if isinstance(dt, np.dtype):
        return (type(x), dt)
    if dt is not None and type(dt).__module__.startswith("torch"):
        return (type(x), str(dt))
    return None


def _signer_for(x: Any) -> Any:
    tp = type(x)
    if tp in _PLAIN or isinstance(x, enum.Enum):
        return _plain
    if isinstance(x, IteratorBase):
        return _iterator
    if hasattr(tp, "_cuprims_signature"):
        return _own
    if isinstance(getattr(x, "dtype", None), np.dtype):
        return _typed
    if getattr(tp, "_cuprims_dtype", None) is not None:
        return _struct_value
    if callable(x) or hasattr(x, "ltoir"):
        return _operator
    return _unknown


_signers: dict[type, Any] = {}


def signature(x: Any) -> Any:
    """A cheap, hashable stand-in for everything a build-time description reads of ``x``
    (dtype and kind of an array or host value, an iterator's key, an operator's spec), or
    None where there is none (then the description is made afresh). How to read one is
    chosen once per Python type."""
    signer = _signers.get(type(x))
    if signer is None:
        signer = _signers[type(x)] = _signer_for(x)
    return signer(x)


def keyword_checked(fn: Callable[_P, _R]) -> KeywordChecked[_P, _R]:
    """``fn`` with call-binding mistakes (an unknown or missing keyword, positional
    arguments) raised as ArgumentTypeError naming the argument, instead of a bare TypeError;
    an unknown keyword is reported before a missing one (``d_inn=`` names ``d_inn`` and
    suggests ``d_in``, rather than reporting ``d_in`` missing). Costs nothing on a correct
    call beyond the wrapper's frame (~0.2 us: the make_* and one-shot functions have it,
    a built object's call, the per-call fast path, does not)."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return fn(*args, **kwargs)
        except TypeError as exc:
            tb = exc.__traceback__
            if tb is None or tb.tb_next is not None:  # raised inside fn: not a binding mistake
                raise
            raise _binding_error(fn.__name__, sig, args, kwargs) from None

    return wrapper


def unknown_keyword(function: str, key: str, known: Sequence[str]) -> ArgumentTypeError:
    """The error for keyword ``key``, which ``function`` does not take: it lists the
    keywords ``function`` takes and suggests the closest one."""
    import difflib

    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}=?)" if close else ""
    return ArgumentTypeError(key, f"a keyword of {function}{hint}: " + ", ".join(known), "an unknown keyword")


def _binding_error(name: str, sig: inspect.Signature, args: tuple, kwargs: dict) -> ArgumentTypeError:
    params = sig.parameters
    if args:
        return ArgumentTypeError(f"{name}(...)", "keyword arguments only", f"{len(args)} positional")
    for key in kwargs:
        if key not in params:
            return unknown_keyword(name, key, list(params))
    for pname, p in params.items():
        if p.default is p.empty and p.kind is p.KEYWORD_ONLY and pname not in kwargs:
            return ArgumentTypeError(pname, f"a value (a required keyword of {name})", "nothing")
    return ArgumentTypeError(f"{name}(...)", "arguments matching its signature", f"{sorted(kwargs)}")


def segment_offsets(start_offsets_in: Any, end_offsets_in: Any) -> tuple[ArgKind, ArgKind]:
    """The kinds of a segmented algorithm's start and end offsets: arrays or iterators of
    one 32- or 64-bit integer type."""
    begin = describe(start_offsets_in, "start_offsets_in", iterators=True)
    end = describe(end_offsets_in, "end_offsets_in", iterators=True)
    for arg in (begin, end):
        if arg.value.kind not in "iu" or arg.value.size not in (4, 8):
            raise ArgumentError(arg.name, "offsets of a 32- or 64-bit integer type", arg.value.dtype)
    if end.value.code != begin.value.code:
        raise ArgumentError("end_offsets_in", f"offsets of the start offsets' type {begin.value.dtype}",
                            end.value.dtype)
    return begin, end
