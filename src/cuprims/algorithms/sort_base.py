"""The base both sort objects share: their description's common part (64-bit offsets as
build variant 1) and one object per distinct description, one call's bound arguments, the
checks of keys and values (arrays, DoubleBuffers, or input iterators where the sort takes
them) at build time and per call, and a radix sort's bit range."""

from __future__ import annotations

import dataclasses
import operator
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from cuprims._runtime import arrays as _arrays
from cuprims._runtime import driver
from cuprims._value_types import ValueType, same_layout, value_type
from cuprims.algorithms.arguments import ArgKind, describe
from cuprims.algorithms.common import Loaded, check_num_items
from cuprims.algorithms.skeleton import Algorithm, Description, Plan, description
from cuprims.algorithms.sort_common import DoubleBuffer, opaque_value_type, overlaps
from cuprims.algorithms.sort_source import carrier_alignment
from cuprims.errors import ArgumentError, ArgumentTypeError
from cuprims.iterators.base import IteratorBase, check_direction

if TYPE_CHECKING:
    from typing_extensions import Self

# Problems up to this many items run on kernels built with 32-bit offsets (faster index
# arithmetic, and CUB's tunings for 4-byte offsets); larger ones on build variant 1 with
# 64-bit offsets, made the first time such a problem comes.
NARROW_MAX_ITEMS = (1 << 31) - 1


@description
class SortDescription(Description):
    """What both sorts' descriptions share: the kinds of keys and values (the values' None
    for keys only; an input may be an iterator kind where the sort takes iterators);
    subclasses add their options and ``wide_offsets`` (variant 1)."""

    d_in_keys: ArgKind
    d_out_keys: ArgKind
    d_in_values: ArgKind | None
    d_out_values: ArgKind | None

    @property
    def key(self) -> ValueType:
        return self.d_in_keys.value

    @property
    def value(self) -> ValueType | None:
        """The values' type as the sort moves them (opaque bytes, of the output's dtype)."""
        return None if self.d_out_values is None else self.d_out_values.value

    @property
    def offset_kind(self) -> str:
        return "i64" if self.wide_offsets else "i32"  # type: ignore[attr-defined]

    def variant(self, index: int) -> Self:
        if index == 1:
            return dataclasses.replace(self, wide_offsets=True)  # type: ignore[call-arg]  # a subclass's field
        return super().variant(index)


class SortCall:
    """One call's bound arguments: checked pointers (an input iterator's packed state),
    item count, and what the dispatch leaves for the caller (the temporary layout, a
    DoubleBuffer's selector flips). ``begin``/``end``: a radix sort's bit range, a
    segmented sort's offset parameters (``segments`` of them)."""

    __slots__ = ("k_in", "k_out", "v_in", "v_out", "n", "overwrite", "begin", "end", "state", "layout", "flips",
                 "segments")
    # set by the sort that needs them
    begin: Any
    end: Any
    state: Any
    layout: Any
    segments: int

    def __init__(self, k_in: Any, k_out: int, v_in: Any, v_out: int, n: int, overwrite: bool):
        self.k_in, self.k_out, self.v_in, self.v_out, self.n, self.overwrite = k_in, k_out, v_in, v_out, n, overwrite
        self.flips = 0


_KEYS, _VALUES = ("keys", "d_in_keys", "d_out_keys"), ("values", "d_in_values", "d_out_values")


def _array(x: Any) -> Any:
    return x.current() if isinstance(x, DoubleBuffer) else x


class SortPlan(Plan):
    """Launch facts of one sort build on one device: a parameter pack per kernel (in the
    code generator's order) and the offset width; subclasses add their kernels' facts."""

    __slots__ = ("packs", "offset_size", "device")

    def __init__(self, loaded: Loaded, kernel_params: tuple[tuple[Any, ...], ...]):
        self.packs = tuple(driver.ParamPack(kinds) for kinds in kernel_params)
        self.offset_size = loaded.meta["offset_size"]


class SortAlgorithm(Algorithm):
    """What both sort objects share: their arguments, checked at build time (:meth:`_dtypes`,
    :meth:`_kinds`) and bound per call (:meth:`_bind`), and a plan per offset width.
    ``_double_buffers``: keys (and values) may come as DoubleBuffers; ``_in_place``: the
    output may be the input itself; ``_iterators``: the inputs may be iterators (the
    outputs are arrays).

    ``sorter(temp_storage=None, ...)`` returns the temporary bytes needed and launches
    nothing; ``sorter(temp_storage=buf, ...)`` sorts on ``stream``.
    """

    desc: SortDescription
    _plan_class: Callable[[Loaded, tuple], SortPlan]
    _double_buffers = False
    _in_place = False
    _iterators = False

    def _setup(self) -> None:
        self._key = self.desc.key
        self._key_size = self._key.size
        self._value_size = 0 if self.desc.value is None else self.desc.value.size

    def _make_plan(self, loaded: Loaded, variant: int) -> SortPlan:
        return self._plan_class(loaded, self.desc.variant(variant).kernel_params())

    # -- build time ----------------------------------------------------------------
    @classmethod
    def _dtypes(cls, d_in_keys: Any, d_out_keys: Any, d_in_values: Any, d_out_values: Any) -> tuple:
        """Check the build arguments' forms and dtypes; return the dtypes (keys, values or None)."""
        if d_in_keys is None:
            raise ArgumentError("d_in_keys", "a device array or a DoubleBuffer" if cls._double_buffers
                                else "a device array of keys or an iterator" if cls._iterators
                                else "a device array of keys", None)
        db = cls._double_buffers and isinstance(d_in_keys, DoubleBuffer)
        key_dt = cls._pair_dtype(d_in_keys, d_out_keys, _KEYS, db)
        if d_in_values is None:
            if d_out_values is not None:
                raise ArgumentError("d_out_values", "None (no d_in_values were given)", d_out_values)
            return key_dt, None
        return key_dt, cls._pair_dtype(d_in_values, d_out_values, _VALUES, db)

    @classmethod
    def _kinds(cls, d_in_keys: Any, d_out_keys: Any, d_in_values: Any, d_out_values: Any,
               value_dt: np.dtype | None) -> tuple[ArgKind, ArgKind, ArgKind | None, ArgKind | None]:
        """The argument kinds of checked build arguments; values are opaque bytes aligned as
        their carrier needs (``value_dt``: the output values' dtype)."""
        keys = describe(_array(d_in_keys), "d_in_keys", iterators=cls._iterators)
        if keys.is_pointer:
            out = describe(_array(d_in_keys) if d_out_keys is None else d_out_keys, "d_out_keys", output=True,
                           vt=keys.value)
        else:
            out = describe(d_out_keys, "d_out_keys", output=True)
            if keys.value.code != out.value.code:
                keys = keys.viewed_as(out.value)  # e.g. a ZipIterator's (v0, v1) read as the output's struct
        if value_dt is None:
            return keys, out, None, None
        vt = opaque_value_type(value_dt, argument="d_in_values")
        align = carrier_alignment(vt)
        v_out = _array(d_in_values) if d_out_values is None else d_out_values
        return (keys, out, describe(_array(d_in_values), "d_in_values", iterators=cls._iterators, vt=vt,
                                    alignment=align),
                describe(v_out, "d_out_values", output=True, vt=vt, alignment=align))

    @classmethod
    def _check_value_form(cls, d_in_values: Any, db: bool) -> None:
        if db and not isinstance(d_in_values, DoubleBuffer):
            raise ArgumentError("d_in_values", "a DoubleBuffer (as d_in_keys is one)", d_in_values)
        if cls._double_buffers and not db and isinstance(d_in_values, DoubleBuffer):
            raise ArgumentError("d_in_values", "a device array (a DoubleBuffer only together with a DoubleBuffer "
                                "for d_in_keys)", d_in_values)

    @classmethod
    def _out_hint(cls, what: str) -> str:
        if cls._in_place:
            return f"a device array for the sorted {what} (it may be d_in_{what} itself)"
        return f"a device array for the sorted {what} (or pass a DoubleBuffer as d_in_{what})"

    @classmethod
    def _pair_dtype(cls, d_in: Any, d_out: Any, names: tuple[str, str, str], db: bool) -> np.dtype:
        """The dtype of checked keys (or values): the input's, or an iterator's output's."""
        what, name_in, name_out = names
        if isinstance(d_out, IteratorBase):
            raise ArgumentTypeError(name_out, f"a device array for the sorted {what} (a sort writes arrays, "
                                    "not iterators)", d_out)
        if isinstance(d_in, IteratorBase):
            if not cls._iterators:
                raise ArgumentTypeError(name_in, "a device array (this sort takes no iterators)", d_in)
            return cls._iterator_dtype(d_in, d_out, names)
        dt = _arrays.array_dtype(d_in.current() if isinstance(d_in, DoubleBuffer) else d_in, name_in)
        # the input's own type first: a bad one is named as the input's, not as a mismatch
        (value_type if what == "keys" else opaque_value_type)(dt, argument=name_in)
        if what == "values":
            cls._check_value_form(d_in, db)
        if db:
            alt = _arrays.array_dtype(d_in.alternate(), name_in)
            if alt != dt:
                raise ArgumentError(name_in, f"a DoubleBuffer of two {dt} arrays", f"one of {alt}")
            if d_out is not None:
                raise ArgumentError(name_out, f"None when {name_in} is a DoubleBuffer", d_out)
            return dt
        if d_out is None:
            raise ArgumentError(name_out, cls._out_hint(what), None)
        out_dt = _arrays.array_dtype(d_out.current() if isinstance(d_out, DoubleBuffer) else d_out, name_out)
        if out_dt != dt:
            raise ArgumentError(name_out, f"an array of the {what}' dtype {dt}", f"an array of {out_dt}")
        return dt

    @staticmethod
    def _iterator_dtype(d_in: IteratorBase, d_out: Any, names: tuple[str, str, str]) -> np.dtype:
        """The output's dtype for an input iterator: the iterator's items' own, one numpy's
        ``same_kind`` rule casts them to (the items are converted as they are read, and
        sorted in the output's type, as CUB sorts in its output's value type), or a struct
        of their layout (a ZipIterator's items into an array of gpu_structs)."""
        what, name_in, name_out = names
        check_direction(d_in, name_in, output=False)  # before its dtype is compared with the output's
        dt = d_in.dtype
        if d_out is None:
            raise ArgumentError(name_out, f"a device array for the sorted {what} (an iterator cannot be sorted in "
                                "place)", None)
        out_dt = _arrays.array_dtype(d_out, name_out)
        if out_dt == dt:
            return out_dt
        if dt.names is not None or out_dt.names is not None:
            if dt.names is None or out_dt.names is None or not same_layout(dt, out_dt):
                raise ArgumentError(name_out, f"an array of the {what}' dtype {dt} (the items of {name_in}) or of a "
                                    "struct of its layout", f"an array of {out_dt}")
        elif not np.can_cast(dt, out_dt, "same_kind"):
            raise ArgumentError(name_out, f"an array of a dtype that the {what}' {dt} (the items of {name_in}) cast to "
                                "under numpy's same_kind rule", f"an array of {out_dt}")
        return out_dt

    # -- call time -------------------------------------------------------------------
    def _bound_call(self, d_in_keys: Any, d_out_keys: Any, d_in_values: Any, d_out_values: Any, num_items: Any,
                    extra: tuple = ()) -> tuple[SortCall, Any]:
        """A fresh SortCall of checked arguments: bound now, or taken from the memo of the
        last call (:meth:`Algorithm._recall`) when it passed these very arrays, count and
        ``extra`` counts. The second item is the ``memo`` to give :meth:`_execute`, which
        remembers it once the call succeeds (None: nothing new to remember)."""
        arrays, counts = (d_in_keys, d_out_keys, d_in_values, d_out_values), (num_items, *extra)
        bound = self._recall(arrays, counts)
        if bound is not None:
            return SortCall(*bound), None
        call = self._bind(d_in_keys, d_out_keys, d_in_values, d_out_values, check_num_items(num_items))
        return call, (arrays, counts, (call.k_in, call.k_out, call.v_in, call.v_out, call.n, call.overwrite))

    def _bind(self, d_in_keys: Any, d_out_keys: Any, d_in_values: Any, d_out_values: Any, n: int) -> SortCall:
        """The call's checked pointers (a DoubleBuffer gives its current and alternate arrays)."""
        desc = self.desc
        has_values = d_in_values is not None
        if has_values != (desc.d_in_values is not None):
            if has_values:
                raise ArgumentError("d_in_values", "None (this sorter was built for keys only)", d_in_values)
            raise ArgumentError("d_in_values",
                                f"values of {desc.value.dtype} "  # type: ignore[union-attr]  # built with values
                                "(this sorter was built for key-value pairs)", None)
        db = self._double_buffers and isinstance(d_in_keys, DoubleBuffer)
        k_in, k_out = self._pair(desc.d_in_keys, desc.d_out_keys, d_in_keys, d_out_keys, n, "keys", db)
        call = SortCall(k_in, k_out, 0, 0, n, db)
        if has_values:
            if self._double_buffers:
                self._check_value_form(d_in_values, db)
            call.v_in, call.v_out = self._pair(desc.d_in_values, desc.d_out_values,  # type: ignore[arg-type]
                                               d_in_values, d_out_values, n, "values", db)
            key_bytes, value_bytes = n * self._key_size, n * self._value_size
            for a, b in ((k_in, call.v_out), (k_out, call.v_in), (k_out, call.v_out)):
                # (an input iterator's state is no memory range)
                if type(a) is int and type(b) is int and overlaps(a, key_bytes, b, value_bytes):
                    raise ArgumentError("d_out_values", "memory apart from the keys", "an array overlapping them")
        elif d_out_values is not None:
            raise ArgumentError("d_out_values", "None (no d_in_values were given)", d_out_values)
        return call

    def _pair(self, kind_in: ArgKind, kind_out: ArgKind, d_in: Any, d_out: Any, n: int, what: str,
              db: bool) -> tuple[Any, int]:
        """The input's kernel parameter (a pointer, or an iterator's state) and the output's pointer."""
        if db:
            if d_out is not None:
                raise ArgumentError(kind_out.name, f"None when {kind_in.name} is a DoubleBuffer (the result lands "
                                    f"in {kind_in.name}.current())", d_out)
            p_in, p_out = kind_in.pointer(d_in.current(), n), kind_in.pointer(d_in.alternate(), n)
        else:
            if d_out is None:
                raise ArgumentError(kind_out.name, self._out_hint(what), None)
            if self._double_buffers and isinstance(d_out, DoubleBuffer):
                raise ArgumentError(kind_out.name, f"a device array (DoubleBuffers go in {kind_in.name})", d_out)
            p_in, p_out = kind_in.bind(d_in, n), kind_out.pointer(d_out, n)
            if not kind_in.is_pointer:
                return p_in, p_out  # an iterator (which must not read the output's memory)
        nbytes = n * kind_in.value.size
        if (p_in != p_out or not self._in_place) and overlaps(p_in, nbytes, p_out, nbytes):
            if self._in_place:
                raise ArgumentError(kind_out.name, f"{kind_in.name} itself (in place) or memory apart from it",
                                    "a partly overlapping array")
            raise ArgumentError(kind_out.name, f"memory apart from {kind_in.name} (to sort in place, pass "
                                f"DoubleBuffer({what}, scratch) as {kind_in.name})", "an overlapping array")
        return p_in, p_out

    @staticmethod
    def _follow_flips(call: SortCall, d_in_keys: Any, d_in_values: Any) -> None:
        """After a sort that ended in the alternate buffers, point the caller's DoubleBuffers there."""
        if call.flips & 1 and isinstance(d_in_keys, DoubleBuffer):
            d_in_keys.selector ^= 1
            if isinstance(d_in_values, DoubleBuffer):
                d_in_values.selector ^= 1


def bit_range(begin_bit: Any, end_bit: Any, key: ValueType) -> tuple[int, int]:
    """The key bits a radix sort compares, ``[begin_bit, end_bit)`` (None: from 0, to the end)."""
    nbits = 8 * key.size
    if begin_bit is None and end_bit is None:  # the whole key
        return 0, nbits
    b = _bit("begin_bit", 0 if begin_bit is None else begin_bit, nbits, key)
    e = _bit("end_bit", nbits if end_bit is None else end_bit, nbits, key)
    if b > e:
        raise ArgumentError("end_bit", f"a bit index >= begin_bit={b}", e)
    return b, e


def _bit(name: str, v: Any, nbits: int, key: ValueType) -> int:
    if type(v) is not int:
        try:
            v = operator.index(v)
        except TypeError:
            raise ArgumentError(name, f"an integer bit index in [0, {nbits}]", v) from None
    if not 0 <= v <= nbits:
        raise ArgumentError(name, f"a bit index in [0, {nbits}] for {key.dtype} keys", v)
    return v
