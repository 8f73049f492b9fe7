"""``python -m cuprims``: the command line (see :mod:`cuprims._cache_cli`)."""

from ._cache_cli import main

raise SystemExit(main())
