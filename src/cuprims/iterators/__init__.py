"""Iterators: sequences computed or gathered on the fly, usable where an algorithm reads an
array, and outputs (arrays reversed or permuted, TransformOutputIterator, DiscardIterator)
where it writes one.

An iterator's kind and value types decide the generated code; its state (start values,
pointers, operator state) is passed at each launch, so ``CountingIterator(np.int32(0))``
and ``CountingIterator(np.int32(5))`` share one build.
"""

from cuprims.iterators import base as _base
from cuprims.iterators._advanced import advanced as _advanced
from cuprims.iterators._cache_modified import CacheModifiedInputIterator
from cuprims.iterators._constant import ConstantIterator
from cuprims.iterators._counting import CountingIterator
from cuprims.iterators._discard import DiscardIterator
from cuprims.iterators._permutation import PermutationIterator
from cuprims.iterators._reverse import ReverseIterator
from cuprims.iterators._shuffle import ShuffleIterator
from cuprims.iterators._transform import TransformIterator, TransformOutputIterator
from cuprims.iterators._zip import ZipIterator
from cuprims.iterators.base import IteratorBase

_base._advance = _advanced      # ``it + n`` for every iterator

__all__ = ["IteratorBase", "CacheModifiedInputIterator", "ConstantIterator", "CountingIterator", "DiscardIterator",
           "PermutationIterator", "ReverseIterator", "ShuffleIterator", "TransformIterator",
           "TransformOutputIterator", "ZipIterator"]
