"""Iterators: sequences computed or gathered on the fly, usable where an algorithm reads an
array, and outputs (arrays reversed or permuted, TransformOutputIterator, DiscardIterator)
where it writes one.

An iterator's kind and value types decide the generated code; its state (start values,
pointers, operator state) is passed at each launch, so ``CountingIterator(np.int32(0))``
and ``CountingIterator(np.int32(5))`` share one build.
"""

from ._base import IteratorBase
from ._cache_modified import CacheModifiedInputIterator
from ._constant import ConstantIterator
from ._counting import CountingIterator
from ._discard import DiscardIterator
from ._permutation import PermutationIterator
from ._reverse import ReverseIterator
from ._shuffle import ShuffleIterator
from ._transform import TransformIterator, TransformOutputIterator
from ._zip import ZipIterator

__all__ = ["IteratorBase", "CacheModifiedInputIterator", "ConstantIterator", "CountingIterator", "DiscardIterator",
           "PermutationIterator", "ReverseIterator", "ShuffleIterator", "TransformIterator",
           "TransformOutputIterator", "ZipIterator"]
