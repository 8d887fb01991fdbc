"""The ``sag2`` command line, one module per subcommand (`app` parses and dispatches)."""

from .app import main

__all__ = ["main"]
