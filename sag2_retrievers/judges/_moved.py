"""The deprecated module paths of judges that moved into a family package (one release).

An old path becomes the moved module itself, not a copy of its names, so code that patches
an attribute through the old path (``monkeypatch.setattr("...judges.pool.MODEL_FILE", ...)``)
still reaches the module that reads it.
"""

from __future__ import annotations

import importlib
import sys
import warnings


def alias_module(old: str, new: str) -> None:
    """Warn that ``old`` is deprecated and make it name the module ``new``."""
    warnings.warn(f"{old} is deprecated; import from {new}", DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
