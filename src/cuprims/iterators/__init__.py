"""Iterators: sequences computed or gathered on the fly, usable where an algorithm reads
an array (so far: the ``d_values`` of ``lower_bound``/``upper_bound``).

An iterator's kind and value types decide the generated code; its state (start values,
pointers, operator state) is passed at each launch, so ``CountingIterator(np.int32(0))``
and ``CountingIterator(np.int32(5))`` share one build.
"""

from ._base import IteratorBase
from ._cache_modified import CacheModifiedInputIterator
from ._constant import ConstantIterator
from ._counting import CountingIterator
from ._permutation import PermutationIterator
from ._reverse import ReverseIterator
from ._transform import TransformIterator

__all__ = ["IteratorBase", "CacheModifiedInputIterator", "ConstantIterator", "CountingIterator",
           "PermutationIterator", "ReverseIterator", "TransformIterator"]
