"""Style 1, two-phase factories: ``coop.block.make_sum(...)`` builds a provider on the
host and returns a :class:`~.primitive.Primitive` whose ``files`` the user's kernel
links. The factories (re-exported by :mod:`cuprims.coop.block` and
:mod:`cuprims.coop.warp`) check their arguments and describe the primitive as a
``ProviderSpec``; :mod:`.factory` does the rest from the primitive's record.
"""
