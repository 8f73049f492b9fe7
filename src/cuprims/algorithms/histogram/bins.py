"""The arithmetic of CUB's even-bin scale (``Transforms<...>::ScaleTransform`` in
``kernel_histogram.cuh``), redone on the host to check a histogram's levels before any
kernel computes with them.

CUB bins a sample in ``CommonT = cuda::std::common_type_t<LevelT, SampleT>`` (the C++
usual arithmetic conversions, except that two equal types stay themselves: int8 with
int8 is int8, int8 with uint8 is int; ``__half`` with anything else is float, or double
beside a double):

* floating point: ``bin = int((sample - lower) * reciprocal)`` with
  ``reciprocal = CommonT(bins) / CommonT(upper - lower)``, every step in CommonT;
* integers: ``bin = IntArithmeticT(sample - lower) * bins / range`` with ``bins`` and
  ``range = upper - lower`` held as CommonT values and ``IntArithmeticT`` uint32 when
  ``sizeof(SampleT) + sizeof(CommonT) <= 4``, else uint64.

CUB reports only a product that overflows ``IntArithmeticT`` (as cudaErrorInvalidValue),
with the range computed in the level type (so an int32 range that overflows int32 is
refused although int64 samples would bin it exactly). A range or bin count that does not
fit CommonT goes through unchecked and every sample lands in bin 0
(NVIDIA/cccl#10975). :func:`check_levels` refuses all of these with an ArgumentError
naming the argument, and levels that are not finite, not ordered, or not values of
CommonT (a negative level beside unsigned samples).

CUB's sweep hands each privatized bin index to the output transform cast to SampleT
(``AgentHistogram::StoreOutput``): an int8 bin 200 arrives as -56, a float16 bin 2049 as
2048. The output transform of cuprims gives an integer back its unsigned bits, which is
exact while the bins fit the sample's width; :func:`widened_samples` says when they do
not (the samples are then read as int), and :func:`check_levels` refuses more float16 or
float32 bins than those types count exactly.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from cuprims.errors import ArgumentError

# (sample dtype, bins, level dtypes, lower, upper) of levels found good; bounded, emptied when full
_checked: dict[tuple, bool] = {}
_MAX_CHECKED = 256
_MAX_LEVELS = (1 << 31) - 1  # the kernels count bins in int
_EXACT_FLOAT_BINS = {2: 1 << 11, 4: 1 << 24}  # the integers float16 / float32 hold exactly, from 0


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
        x = np.int64(x) if -(1 << 63) <= x < 1 << 63 else x
    elif type(x) is float:
        x = np.float64(x)
    if not isinstance(x, np.generic) or x.dtype.kind not in "iuf":
        raise ArgumentError(name, "an integer or floating-point level (a numpy scalar or host array)", value)
    return x


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
    type and back through its unsigned type (int8 beyond 256 bins, int16 beyond 65536):
    the kernel then reads the samples as int."""
    return sample.kind in "iu" and sample.itemsize < 4 and bins > 1 << (8 * sample.itemsize)


def check_levels(sample: np.dtype, bins: int, lower: np.generic, upper: np.generic, names: tuple[str, str, str]) -> None:
    """Raise ArgumentError (naming ``names``: levels, lower, upper) unless CUB's scale bins
    ``sample`` values into ``bins`` even bins over ``[lower, upper)`` exactly as written."""
    key = (sample.char, bins, lower.dtype.char, upper.dtype.char, lower.item(), upper.item())
    if key in _checked:
        return
    levels_name, lower_name, upper_name = names
    if upper.dtype != lower.dtype:
        raise ArgumentError(upper_name, f"a level of {lower_name}'s dtype {lower.dtype}", upper.dtype)
    common = common_dtype(sample, lower.dtype)
    where = f"in {common} (the common type of {lower.dtype} levels and {sample} samples, which CUB bins in)"
    exact = _EXACT_FLOAT_BINS.get(sample.itemsize) if sample.kind == "f" else None
    if exact is not None and bins > exact:
        raise ArgumentError(levels_name, f"at most {exact + 1} levels for {sample} samples (CUB passes each bin "
                            f"index through a {sample} value, which counts exactly only to {exact})", bins + 1)
    if common.kind == "f":
        with np.errstate(all="ignore"):
            lo, hi = common.type(lower), common.type(upper)
            width = hi - lo
            reciprocal = common.type(bins) / width
        for v, name in ((lo, lower_name), (hi, upper_name)):
            if not np.isfinite(v):
                raise ArgumentError(name, f"a finite level {where}", v)
        if not lo < hi:
            raise ArgumentError(lower_name, f"a level below {upper_name}={upper!r} {where}", lower)
        if not (np.isfinite(width) and np.isfinite(reciprocal) and reciprocal > 0):
            raise ArgumentError(upper_name, f"levels whose width and bins / width are finite {where}", upper)
    else:
        info = np.iinfo(common)
        lo, hi = int(lower), int(upper)
        for v, name in ((lo, lower_name), (hi, upper_name)):
            if not info.min <= v <= info.max:
                raise ArgumentError(name, f"a level that is a value {where}", v)
        if lo >= hi:
            raise ArgumentError(lower_name, f"a level below {upper_name}={hi}", lo)
        hint = "; pass levels of a wider integer type"
        if hi - lo > info.max:
            raise ArgumentError(upper_name, f"a level range upper - lower that fits {where}{hint}", hi - lo)
        if bins > info.max:
            raise ArgumentError(levels_name, f"a bin count that fits {where}{hint}", bins)
        arith = 32 if sample.itemsize + common.itemsize <= 4 else 64
        if (hi - lo) * bins >= 1 << arith:
            raise ArgumentError(upper_name, f"(upper - lower) * bins below 2^{arith} (CUB's bin arithmetic for "
                                f"{sample} samples and {lower.dtype} levels){hint}", (hi - lo) * bins)
    if len(_checked) >= _MAX_CHECKED:
        _checked.clear()
    _checked[key] = True
