"""Deprecated: moved to `sag2_retrievers.analysis.paper.diversity` (kept for one release)."""

import warnings

from .analysis.paper.diversity import (
    diversity_words as diversity_words,
)
from .analysis.paper.diversity import (
    paper_dpp_order as paper_dpp_order,
)
from .analysis.paper.diversity import (
    word_document_frequencies as word_document_frequencies,
)
from .analysis.paper.diversity import (
    word_vectors as word_vectors,
)

warnings.warn(
    "sag2_retrievers.paper_diversity is deprecated; import from "
    "sag2_retrievers.analysis.paper.diversity",
    DeprecationWarning,
    stacklevel=2,
)
