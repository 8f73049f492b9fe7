"""``python -m cuprims``: the command line (see :mod:`cuprims._cache.cli`)."""

from cuprims._cache.cli import main

raise SystemExit(main())
