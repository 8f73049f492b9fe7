"""cuprims on Dask arrays whose chunks are device arrays (``pip install cuprims[dask]``).

Each function takes a ``dask.array.Array`` of CuPy chunks and returns one, building a task
graph that runs cuprims on each chunk inside the workers; nothing is computed until the
result is (``.compute()``, ``dask.compute``). The operators travel to the workers by value
(pickled as Python functions, OpKinds or RawOps) and are compiled there, from the disk
cache the workers of a machine share. An operator that captures device arrays is refused:
those arrays live on one device, and the chunks on others.

* :func:`reduce`, :func:`sum`, :func:`min`, :func:`max`: each chunk reduced alone, then the
  partial results combined in a tree (``split_every`` of them a task), then ``h_init``.
  Communication: one item per chunk.
* :func:`inclusive_scan`, :func:`exclusive_scan`: each chunk's total, one task scanning the
  totals into each chunk's carry (one item per chunk there and back), then each chunk
  scanned from its carry.
* :func:`histogram_even`: each chunk's counts, added in a tree (the bins travel).
* :func:`top_k`: each chunk's best ``k`` (and their positions), selected again from
  ``split_every`` chunks' candidates up a tree, sorted at the root (``k`` items a chunk
  travel).
* :func:`sort`: a sample sort: each chunk sorted, splitters from samples of every sorted
  chunk (``samples_per_chunk`` keys each travel to one task), each chunk cut at them, and
  each output chunk gathered from one piece of every chunk and the pieces merged: every
  item crosses the cluster once.
* :func:`reduce_by_key`, :func:`unique_by_key`: each chunk's runs of equal consecutive
  keys, then one task given each chunk's first and last keys (and, to reduce, its first and
  last runs' values) that finds the runs crossing chunk boundaries and folds them; each
  chunk gets back whether to drop its first run and, to reduce, its last run's fold (at
  most one item), and trims its runs where they are.

``import cuprims`` never imports Dask; ``import cuprims.dask`` does.
"""

from cuprims.dask.by_key import reduce_by_key, unique_by_key
from cuprims.dask.reduce import max, min, reduce, sum
from cuprims.dask.scan import exclusive_scan, inclusive_scan
from cuprims.dask.select import histogram_even, top_k
from cuprims.dask.sort import sort

__all__ = ["reduce", "sum", "min", "max", "inclusive_scan", "exclusive_scan", "histogram_even", "top_k", "sort",
           "reduce_by_key", "unique_by_key"]
