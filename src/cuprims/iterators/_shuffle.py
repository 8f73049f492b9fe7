"""ShuffleIterator: a deterministic pseudo-random permutation of [0, num_items)."""

from __future__ import annotations

import operator
import struct

import numpy as np

from cuprims._value_types import ValueType, value_type
from cuprims.errors import ArgumentError
from cuprims.iterators.base import IteratorBase, IteratorCode, Member, StateWriter

# Feistel rounds: each mixes one half of the index with a keyed hash of the other half.
_ROUNDS = 6
_STATE = struct.Struct("<qQQI4x")


class ShuffleIterator(IteratorBase):
    """Item i is ``p(start + i)`` for a bijection ``p`` of ``[0, num_items)`` chosen by
    ``seed`` (int64 values): the same seed gives the same permutation on every GPU, and
    another seed another one. Nothing is stored; each item costs a few dozen integer
    operations.

    ``p`` is a balanced Feistel network over the smallest even number of bits that covers
    ``num_items``, walked in cycles until it lands inside ``[0, num_items)`` (on average
    fewer than four steps), so every index maps to a distinct index. ``_current_index``
    (``start``) shifts where the sequence begins.

    Example::

        import numpy as np, cuprims
        it = cuprims.ShuffleIterator(1000, seed=7)   # a permutation of 0..999
    """

    __slots__ = ("_n", "_seed", "_start")

    def __init__(self, num_items: int, seed: int = 0, *, _current_index: int = 0):
        super().__init__()
        self._n = _integer(num_items, "num_items", 1, (1 << 62))
        self._seed = _integer(seed, "seed", 0, (1 << 64) - 1)
        self._start = _integer(_current_index, "_current_index", -(1 << 62), 1 << 62)

    @property
    def value_type(self) -> ValueType:
        return value_type(np.int64)

    def _shown(self) -> list[str]:
        return [f"num_items={self._n}", f"seed={self._seed}"]

    def _kind_key(self) -> str:
        return f"shuffle(i8,{_ROUNDS})"

    def _emit(self, code: IteratorCode) -> tuple[str, list[Member]]:
        name = code.new_name()
        members = [Member("start", "long long", 8, 8), Member("num_items", "unsigned long long", 8, 8),
                   Member("seed", "unsigned long long", 8, 8), Member("half_bits", "unsigned int", 4, 4)]
        helpers = f"""  __device__ __forceinline__ unsigned long long round_key(unsigned int r) const
  {{
    unsigned long long z = seed + 0x9e3779b97f4a7c15ull * (r + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }}
  __device__ __forceinline__ unsigned long long permute(unsigned long long x) const
  {{
    const unsigned long long mask = (1ull << half_bits) - 1;
    unsigned long long left = x >> half_bits, right = x & mask;
    for (unsigned int r = 0; r < {_ROUNDS}; ++r)
    {{
      unsigned long long h = (right ^ round_key(r)) * 0xd6e8feb86659fd93ull;
      h ^= h >> 32;
      const unsigned long long next = left ^ (h & mask);
      left = right;
      right = next;
    }}
    return (left << half_bits) | right;
  }}
"""
        body = ("unsigned long long x = static_cast<unsigned long long>(start + i);\n"
                "    do { x = permute(x); } while (x >= num_items);  // cycle walking: stays a bijection\n"
                "    return static_cast<long long>(x);")
        code.define(name, members, self.value_type, body, extra=helpers)
        return name, members

    def _pack(self, state: StateWriter, count: int | None, argument: str) -> None:
        if count is not None and self._start + count > self._n:
            raise ArgumentError(argument, f"a ShuffleIterator of at least {count} items from its start",
                                f"num_items={self._n}, start={self._start}")
        bits = max(2, (self._n - 1).bit_length())
        half = (bits + 1) // 2
        state.raw(_STATE.pack(self._start, self._n, self._seed, half), 8)


def _integer(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool):
        raise ArgumentError(name, "an integer", value)
    try:
        v = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ArgumentError(name, "an integer", value) from None
    if not low <= v <= high:
        raise ArgumentError(name, f"an integer in [{low}, {high}]", value)
    return v
