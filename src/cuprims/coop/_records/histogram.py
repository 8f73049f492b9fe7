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

from cuprims.coop._records._abi import Entry, Param, copied, thread_in
from cuprims.coop._records._base import Record
from cuprims.coop._records._texts import dispatch
from cuprims.coop._spec import HISTOGRAM_ALGORITHMS, ProviderSpec


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


HISTOGRAM = Record("histogram", "#include <cub/block/block_histogram.cuh>",
                   "cub::BlockHistogram<{t}, {x}, {n}, {bins}, {algorithm}, {y}, {z}>", _entries, _style1,
                   algorithms=HISTOGRAM_ALGORITHMS, methods=("init", "composite"))
