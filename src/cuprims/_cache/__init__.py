"""Caching: the in-memory cache of loaded builds (``memory``), the on-disk cache (``disk``), its
entry format (``entries``), its size limit and pruning (``lifecycle``), the walk over its
folders (``walk``), private file handling (``files``), and the ``python -m cuprims cache``
command line (``cli``).

May import: ``cuprims.errors``, ``cuprims.config``, ``cuprims._base``, ``cuprims._runtime``.
"""
