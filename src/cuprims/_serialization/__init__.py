"""Serialized builds: blobs that carry an algorithm's description and its cubins (``blobs``),
the description codec (``codec``), and the objects rebuilt from a blob (``frozen``).

May import everything below it, ``cuprims.algorithms`` included: it sits above the
algorithms it serializes.
"""

from cuprims._serialization.blobs import deserialize, serialize

__all__ = ["deserialize", "serialize"]
