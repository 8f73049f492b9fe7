"""A block's histogram of its tile: CUB's BlockHistogram, counting each item, a bin index,
into a ``bins``-long array of counters the caller holds (shared memory, usually).

The counter type is the spec's ``values``. Entry points:

* ``SYM(const T* in, C* histogram)``: zero the counters, then count the tile (CUB's
  ``Histogram``, which has a barrier between the two);
* ``SYM_init(C* histogram)``: zero the counters (``InitHistogram``);
* ``SYM_composite(const T* in, C* histogram)``: add the tile's counts (``Composite``).

CUB indexes the counters with each item as it is, so an item outside ``[0, bins)`` would
be counted outside the array: the entry points trap on one instead. CUB's sorting
algorithm sorts the items it is given, so they are counted from a copy.
"""

from __future__ import annotations

from typing import Any

from cuprims.coop._records._abi import Entry, Param, copied, thread_in
from cuprims.coop._records._base import Call, Record, roles
from cuprims.coop._records._texts import dispatch
from cuprims.coop._spec import HISTOGRAM_ALGORITHMS, ProviderSpec, algorithm_of
from cuprims.errors import ArgumentError

# the counter types both of CUB's algorithms count in (the atomic one needs atomicAdd of the type)
COUNTERS = ("int32", "uint32", "uint64", "float32", "float64")
MAX_BINS = 1 << 30


def _entries(spec: ProviderSpec, s: str) -> list[Entry]:
    t = spec.vt.cpp
    assert spec.values is not None and spec.bins > 0, "a histogram's counter type is its spec's values"
    counters = Param(f"{spec.values.cpp}*", "histogram", "vptr")
    # every item a bin: the unsigned view of a negative one is past the bins too
    check = (f"for (int i = 0; i < {spec.items}; ++i) {{\n"
             f"    if (static_cast<unsigned long long>(in[i]) >= {spec.bins}ull) {{ __trap(); }}\n  }}\n  ")
    items = (thread_in(t, "in"), counters)
    return [Entry("", items, check + copied(spec, "in") + "prim.Histogram(tmp, histogram);"),
            Entry("_init", (counters,), "prim.InitHistogram(histogram);"),
            Entry("_composite", items, check + copied(spec, "in") + "prim.Composite(tmp, histogram);")]


def _style1(spec: ProviderSpec) -> str:
    """``prim(items, histogram, temp_storage=None)`` (zero, then count),
    ``prim_init(histogram, temp_storage=None)`` and ``prim_composite(items, histogram,
    temp_storage=None)``; the histogram holds at least ``BINS`` counters."""
    counted = "__span(items, ITEMS), __span(histogram, BINS)"
    return ("def prim(items, histogram, temp_storage=None):\n" + dispatch("ext", counted, None)
            + "def prim_init(histogram, temp_storage=None):\n" + dispatch("ext_init", "__span(histogram, BINS)", None)
            + "def prim_composite(items, histogram, temp_storage=None):\n"
            + dispatch("ext_composite", counted, None))


def check_bins(bins: Any) -> int:
    if not isinstance(bins, int) or isinstance(bins, bool) or not 1 <= bins <= MAX_BINS:
        raise ArgumentError("bins", "a positive int (at most 2**30)", bins)
    return bins


def _plan(record: Record, o: Any, group: Any, items: Any, counters: Any, *_: Any) -> Any:
    from numba import types

    from cuprims.coop._style2 import operands as s2

    vt, n = s2.items_of(items, "items")
    if vt.is_struct or vt.dtype.kind not in "iu":
        raise ArgumentError("items", "a coop.ThreadData of integers (each item is a bin index)", items)
    if not (isinstance(counters, types.Array) and counters.ndim == 1 and counters.mutable
            and str(counters.dtype) in COUNTERS):
        raise ArgumentError("histogram", "a writable 1-D array of " + ", ".join(COUNTERS), counters)
    bins = check_bins(o.options["bins"])
    spec = ProviderSpec(record.kind, vt, s2.dims(group), n, algorithm_of(record.algorithms, o.options["algorithm"]),
                        values=s2.vt_of(counters.dtype, "histogram"), bins=bins)
    variant = "histogram_composite" if o.options["accumulate"] else "histogram"
    return s2.Plan(spec, None, s2.NONE, variant, (0, 1), bins, counters.layout != "C")


HISTOGRAM = Record("histogram", "#include <cub/block/block_histogram.cuh>",
                   "cub::BlockHistogram<{t}, {x}, {n}, {bins}, {algorithm}, {y}, {z}>", _entries, _style1,
                   (Call("histogram", roles(("items", "histogram"), ("bins", "algorithm", "accumulate")), _plan),),
                   algorithms=HISTOGRAM_ALGORITHMS, methods=("init", "composite"))
