"""Deprecated: the analyzer moved to `sag2_retrievers.analysis` (this alias stays one release)."""

import warnings

from .analysis import *  # noqa: F403 - the old module's names, re-exported
from .analysis import __all__ as __all__
from .analysis.sag2.analyzer import ANALYZER_VERSION as ANALYZER_VERSION

warnings.warn(
    "sag2_retrievers.text is deprecated; import from sag2_retrievers.analysis",
    DeprecationWarning,
    stacklevel=2,
)
