"""The package's version, in one place: ``cuprims.__version__`` and the stages that record it
(blob headers, the command line's ``--version``) read it from here."""

VERSION = "0.1.0"
