"""The level type a histogram's kernel bins in, and the checks of its levels against that
kernel's arithmetic, done on the host before any kernel computes with them.

Integer samples between levels of integral values (integers of any dtype, or floats that
are whole numbers: int32 0 and 256, int64, float32 0.0 and 256.0, a Python int) are
binned exactly, ``floor((s - lower) * bins / (upper - lower))``, by cuprims' own
``exact_scale`` (``cuprims_histogram.cuh``), whatever the levels' dtypes: the levels travel
as int64 (uint64 past int64's range) and the kernel computes in 32-bit arithmetic wherever
``(upper - lower - 1) * bins`` fits 32 bits, else in 64-bit (:func:`exact_level_dtype`).
Equal levels of different dtypes so make one build, and narrow samples never pay for a
wide level type. Levels whose ``(upper - lower) * bins`` reaches 2^64, or that are not
whole numbers, and every floating-point sample, take CUB's scale as follows.

CUB's scale (``Transforms<...>::ScaleTransform`` in ``kernel_histogram.cuh``) bins a
sample in ``CommonT = cuda::std::common_type_t<LevelT, SampleT>`` (the C++ usual
arithmetic conversions, except that two equal types stay themselves: int8 with int8 is
int8, int8 with uint8 is int; ``__half`` with anything else is float, or double beside a
double):

* floating point: ``bin = int((sample - lower) * reciprocal)`` with
  ``reciprocal = CommonT(bins) / CommonT(upper - lower)``, every step in CommonT;
* integers: ``bin = IntArithmeticT(sample - lower) * bins / range`` with ``bins`` and
  ``range = upper - lower`` held as CommonT values and ``IntArithmeticT`` uint32 when
  ``sizeof(SampleT) + sizeof(CommonT) <= 4``, else uint64.

CUB reports only a product that overflows ``IntArithmeticT`` (as cudaErrorInvalidValue),
with the range computed in the level type. A range or bin count that does not fit CommonT
goes through unchecked and every sample lands in bin 0 (NVIDIA/cccl#10975).
:func:`level_dtype` therefore chooses, where the exact bins do not apply, the level type
the kernel is built for: the levels' common type (numpy's ``result_type``; two integer
levels stay integers where one of int64 and uint64 holds both), or where CommonT of that
type cannot hold the levels, their range, the bin count or the product, the narrowest
wider type whose CommonT can, ending with double (the samples are then binned in double,
as numpy's ``histogram`` bins every sample type). :func:`check_levels` refuses, with an
ArgumentError naming the argument, what no level type makes right: levels that are not
finite or not ordered.

CUB's sweep hands each privatized bin index to the output transform cast to SampleT
(``AgentHistogram::StoreOutput``): an int16 bin 40000 arrives as -25536, a float16 bin
2049 as 2048. The output transform of cuprims gives an integer back its unsigned bits,
which is exact while the bins fit the sample's width; :func:`widened_samples` says when
they do not (the samples are then read as int), and :func:`check_sample_bins` refuses
more float16 or float32 bins than those types count exactly. (8-bit samples privatize
their 256 bit patterns instead, and the cast hands the output transform the sample.)
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from cuprims.errors import ArgumentError

# (sample dtype, bins, build level type or None, level dtypes, lower, upper) -> the level type found good;
# bounded, emptied when full
_checked: dict[tuple, np.dtype] = {}
_MAX_CHECKED = 256
_MAX_LEVELS = (1 << 31) - 1  # the kernels count bins in int
_EXACT_FLOAT_BINS = {2: 1 << 11, 4: 1 << 24}  # the integers float16 / float32 hold exactly, from 0
_WIDER_INTS = tuple(np.dtype(c) for c in ("i2", "u2", "i4", "u4", "i8", "u8"))
_WIDE_INTS = (np.dtype(np.int64), np.dtype(np.uint64))
_EXACT_PRODUCT = 1 << 64  # exact_scale's widest arithmetic: (upper - lower) * bins stays below
_FLOATS = tuple(np.dtype(c) for c in ("f4", "f8"))


def common_dtype(sample: np.dtype, level: np.dtype) -> np.dtype:
    """``cuda::std::common_type_t`` of the C++ types of two numeric dtypes."""
    if sample == level:
        return sample
    if "f" in (sample.kind, level.kind):
        return np.dtype(f"f{max(4, *(d.itemsize for d in (sample, level) if d.kind == 'f'))}")
    a, b = (d if d.itemsize >= 4 else np.dtype(np.int32) for d in (sample, level))  # integral promotion
    if a == b:
        return a
    if a.kind == b.kind:
        return max(a, b, key=lambda d: d.itemsize)
    unsigned, signed = (a, b) if a.kind == "u" else (b, a)
    return unsigned if unsigned.itemsize >= signed.itemsize else signed


def level_scalar(value: Any, name: str) -> np.generic:
    """A level as a numpy scalar of its own dtype: a numpy scalar, the first item of a host
    numpy array, or a Python int/float (numpy's int64/float64)."""
    x = value
    if isinstance(x, np.ndarray):
        if x.size == 0:
            raise ArgumentError(name, "a level (a numpy scalar or a host array of one)", "an empty array")
        x = x.reshape(-1)[0]
    elif type(x) is int:
        x = np.int64(x) if -(1 << 63) <= x < 1 << 63 else np.uint64(x) if 0 <= x < 1 << 64 else x
    elif type(x) is float:
        x = np.float64(x)
    if not isinstance(x, np.generic) or x.dtype.kind not in "iuf":
        raise ArgumentError(name, "an integer or floating-point level (a numpy scalar or host array)", value)
    return x


_SCALARS = frozenset(t for t in np.sctypeDict.values() if issubclass(t, (np.integer, np.floating)))


def level_key(value: Any) -> tuple | None:
    """A cheap, hashable stand-in for a level argument (levels, lower or upper) that equal
    arguments share: its value, with its Python or numpy scalar type, or an array's dtype
    character code; None for anything else (an empty array, a bool, another object), which
    is then checked afresh. Per call, so it reads only what it must."""
    tp = type(value)
    if tp is int or tp is float:
        return (tp, value)
    if tp in _SCALARS:
        return (tp, value.item())
    if tp is np.ndarray:
        return (value.dtype.char, value.item(0)) if value.size else None
    return None


def bin_count(levels: Any, name: str) -> int:
    """The number of bins of ``levels`` levels (an integer, or the first item of a host
    numpy array of integers, as cuda.compute passes it): at least 1."""
    x = levels
    if isinstance(x, np.ndarray) and x.size:
        x = x.reshape(-1)[0]
    if isinstance(x, (bool, np.bool_)):
        raise ArgumentError(name, "an integer number of levels", levels)
    try:
        n = operator.index(x)
    except TypeError:
        raise ArgumentError(name, "an integer number of levels (or a host array holding one)", levels) from None
    if not 2 <= n <= _MAX_LEVELS:
        raise ArgumentError(name, f"between 2 (one bin) and {_MAX_LEVELS} levels", n)
    return n - 1


def widened_samples(sample: np.dtype, bins: int) -> bool:
    """Whether ``bins`` privatized bins do not survive a cast to the integer ``sample``
    type and back through its unsigned type (int16 or uint16 beyond 65536 bins; int8
    beyond 256, though 8-bit samples privatize their bit patterns and never ask): the
    kernel then reads the samples as int."""
    return sample.kind in "iu" and sample.itemsize < 4 and bins > 1 << (8 * sample.itemsize)


def given_level_dtype(lower: np.generic, upper: np.generic) -> np.dtype:
    """The common type of two levels: numpy's ``result_type``, except that two integers stay
    integers (int64 or uint64, whichever holds both) where numpy gives float64."""
    given = np.result_type(lower.dtype, upper.dtype)
    if given.kind == "f" and lower.dtype.kind in "iu" and upper.dtype.kind in "iu":
        lo, hi = sorted((int(lower), int(upper)))
        for wide in _WIDE_INTS:
            if np.iinfo(wide).min <= lo and hi <= np.iinfo(wide).max:
                return wide
    return given


def _wider(given: np.dtype) -> tuple[np.dtype, ...]:
    """The level types tried after ``given``, narrowest first: wider floats for a float, for
    an integer the integers at least as wide and then double."""
    if given.kind == "f":
        return tuple(f for f in _FLOATS if f.itemsize > given.itemsize)
    return tuple(t for t in _WIDER_INTS if t.itemsize >= given.itemsize and t != given) + (_FLOATS[1],)


def as_level(value: np.generic, level: np.dtype) -> np.generic:
    """``value`` as a ``level`` value (what the kernel is passed)."""
    if value.dtype == level:
        return value
    return level.type(int(value) if level.kind in "iu" else value.item())


def exact_bins(sample: np.dtype, level: np.dtype) -> bool:
    """Whether a kernel for ``sample`` values and ``level`` levels bins with ``exact_scale``
    (integer samples, an integer level type) rather than CUB's scale."""
    return sample.kind in "iu" and level.kind in "iu"


def integral_value(value: np.generic) -> int | None:
    """The integer a level holds: an integer's value or a whole float's, else None."""
    if value.dtype.kind in "iu":
        return int(value)
    f = float(value)  # exact: float16/32/64 values are doubles
    return int(f) if math.isfinite(f) and f.is_integer() else None


def exact_level_dtype(sample: np.dtype, bins: int, lower: np.generic, upper: np.generic) -> np.dtype | None:
    """The level type ``exact_scale`` bins ``sample`` values between these levels in: int64
    (uint64 for levels past int64 that uint64 holds), for integer samples between ordered
    levels of integral values whose ``(upper - lower) * bins`` stays below 2^64; else None
    (CUB's scale decides, :func:`level_dtype`)."""
    if sample.kind not in "iu":
        return None
    lo, hi = integral_value(lower), integral_value(upper)
    if lo is None or hi is None or not lo < hi or (hi - lo) * bins >= _EXACT_PRODUCT:
        return None
    for wide in _WIDE_INTS:
        info = np.iinfo(wide)
        if info.min <= lo and hi <= info.max:
            return wide
    return None


def level_dtype(sample: np.dtype, bins: int, lower: np.generic, upper: np.generic,
                names: tuple[str, str, str]) -> np.dtype:
    """The level type the kernel bins ``sample`` values in (its LevelT): the exact integer
    one where :func:`exact_level_dtype` gives one; else, for CUB's scale, the levels' common
    type, or the first of the wider ones (:func:`_wider`) in which CUB's scale bins them
    exactly as written. Raises the common type's ArgumentError when none does."""
    key = (sample.char, bins, None, lower.dtype.char, upper.dtype.char, lower.item(), upper.item())
    level = _checked.get(key)
    if level is not None:
        return level
    check_sample_bins(sample, bins, names[0])
    exact = exact_level_dtype(sample, bins, lower, upper)
    if exact is not None:
        _remember(key, exact)
        return exact
    given = given_level_dtype(lower, upper)
    first: ArgumentError | None = None
    for level in (given, *_wider(given)):
        try:
            check_levels(sample, bins, level, lower, upper, names)
        except ArgumentError as exc:
            first = first or exc
            continue
        _remember(key, level)
        return level
    assert first is not None
    raise first


def build_levels(sample: np.dtype, bins: int, level: np.dtype, lower: np.generic, upper: np.generic,
                 names: tuple[str, str, str]) -> tuple[np.generic, np.generic]:
    """A built histogram's call: levels of types that ``level`` (its level type) holds,
    checked in it; returns them as ``level`` values."""
    key = (sample.char, bins, level.char, lower.dtype.char, upper.dtype.char, lower.item(), upper.item())
    if key in _checked:
        pass
    elif exact_bins(sample, level):
        check_exact(bins, level, lower, upper, names)
        _remember(key, level)
    else:
        for value, name in ((lower, names[1]), (upper, names[2])):
            if not np.can_cast(value.dtype, level, "safe"):
                raise ArgumentError(name, f"a level of a type that {level} holds (the level type this histogram "
                                    "bins in)", value.dtype)
        check_sample_bins(sample, bins, names[0])
        check_levels(sample, bins, level, lower, upper, names,
                     "; make_histogram_even with these levels builds for a level type that holds them")
        _remember(key, level)
    return as_level(lower, level), as_level(upper, level)


def _remember(key: tuple, level: np.dtype) -> None:
    if len(_checked) >= _MAX_CHECKED:
        _checked.clear()
    _checked[key] = level


def check_exact(bins: int, level: np.dtype, lower: np.generic, upper: np.generic, names: tuple[str, str, str]) -> None:
    """Raise ArgumentError (naming ``names``: levels, lower, upper) unless ``exact_scale``,
    built for ``level`` (int64 or uint64) levels, bins between these: ordered levels of
    integral values that ``level`` holds, ``(upper - lower) * bins`` below 2^64."""
    _, lower_name, upper_name = names
    hint = "; make_histogram_even with these levels builds for a level type that bins them"
    info = np.iinfo(level)
    values = []
    for v, name in ((lower, lower_name), (upper, upper_name)):
        whole = integral_value(v)
        if whole is None:
            raise ArgumentError(name, "a level of integral value (this histogram bins integer samples between "
                                f"integer levels exactly){hint}", v)
        if not info.min <= whole <= info.max:
            raise ArgumentError(name, f"a level that {level} holds (the level type this histogram bins in){hint}", v)
        values.append(whole)
    lo, hi = values
    if lo >= hi:
        raise ArgumentError(lower_name, f"a level below {upper_name}={hi}", lo)
    if (hi - lo) * bins >= _EXACT_PRODUCT:
        raise ArgumentError(upper_name, f"(upper - lower) * bins below 2^64 (exact integer bins){hint}",
                            (hi - lo) * bins)


def check_sample_bins(sample: np.dtype, bins: int, levels_name: str) -> None:
    """Refuse more bins than a float16 or float32 sample counts exactly (CUB passes each bin
    index through a sample value)."""
    exact = _EXACT_FLOAT_BINS.get(sample.itemsize) if sample.kind == "f" else None
    if exact is not None and bins > exact:
        raise ArgumentError(levels_name, f"at most {exact + 1} levels for {sample} samples (CUB passes each bin "
                            f"index through a {sample} value, which counts exactly only to {exact})", bins + 1)


def check_levels(sample: np.dtype, bins: int, level: np.dtype, lower: np.generic, upper: np.generic,
                 names: tuple[str, str, str], hint: str = "") -> None:
    """Raise ArgumentError (naming ``names``: levels, lower, upper) unless CUB's scale, built
    for ``level`` levels, bins ``sample`` values into ``bins`` even bins over
    ``[lower, upper)`` exactly as written (``hint`` ends the message of a bound that a wider
    level type would lift)."""
    _, lower_name, upper_name = names
    common = common_dtype(sample, level)
    where = f"in {common} (the common type of {level} levels and {sample} samples, which CUB bins in)"
    if level.kind in "iu":
        info = np.iinfo(level)
        for v, name in ((lower, lower_name), (upper, upper_name)):
            if not info.min <= int(v) <= info.max:
                raise ArgumentError(name, f"a level that {level} holds", v)
    if common.kind == "f":
        _check_float(common, bins, level, lower, upper, names, where, hint)
    else:
        _check_int(sample, common, bins, level, int(lower), int(upper), names, where, hint)


def _check_float(common: np.dtype, bins: int, level: np.dtype, lower: np.generic, upper: np.generic,
                 names: tuple[str, str, str], where: str, hint: str) -> None:
    """check_levels in a floating-point CommonT: CUB's reciprocal multiply."""
    _, lower_name, upper_name = names
    with np.errstate(all="ignore"):
        lo, hi = (common.type(as_level(v, level)) for v in (lower, upper))
        width = hi - lo
        reciprocal = common.type(bins) / width
    for v, name in ((lo, lower_name), (hi, upper_name)):
        if not np.isfinite(v):
            raise ArgumentError(name, f"a finite level {where}", v)
    if not lo < hi:
        raise ArgumentError(lower_name, f"a level below {upper_name}={upper!r} {where}", lower)
    if not (np.isfinite(width) and np.isfinite(reciprocal) and reciprocal > 0):
        raise ArgumentError(upper_name, f"levels whose width and bins / width are finite {where}{hint}", upper)


def _check_int(sample: np.dtype, common: np.dtype, bins: int, level: np.dtype, lo: int, hi: int,
               names: tuple[str, str, str], where: str, hint: str) -> None:
    """check_levels in an integer CommonT: CUB's exact multiply-divide in IntArithmeticT."""
    levels_name, lower_name, upper_name = names
    info = np.iinfo(common)
    for v, name in ((lo, lower_name), (hi, upper_name)):
        if not info.min <= v <= info.max:
            raise ArgumentError(name, f"a level that is a value {where}{hint}", v)
    if lo >= hi:
        raise ArgumentError(lower_name, f"a level below {upper_name}={hi}", lo)
    if hi - lo > info.max:
        raise ArgumentError(upper_name, f"a level range upper - lower that fits {where}{hint}", hi - lo)
    if bins > info.max:
        raise ArgumentError(levels_name, f"a bin count that fits {where}{hint}", bins)
    arith = 32 if sample.itemsize + common.itemsize <= 4 else 64
    if (hi - lo) * bins >= 1 << arith:
        raise ArgumentError(upper_name, f"(upper - lower) * bins below 2^{arith} (CUB's bin arithmetic for "
                            f"{sample} samples and {level} levels){hint}", (hi - lo) * bins)
