"""Text analysis: two sibling profiles ("sag2", "paper") behind one interface (`profiles`).

``sag2/`` and ``paper/`` mirror each other (``analyzer.py``, ``diversity.py``); what both use
sits beside them (``common.py``: normalisation and stopwords; ``fts5.py``: tokens as the FTS5
tokenizers index them). Callers import from here.
"""

from .common import (
    CHINESE_STOPWORDS,
    ENGLISH_STOPWORDS,
    STOPWORDS,
    Profile,
    UnitAnalysis,
    normalize,
)
from .fts5 import PAPER_FTS_TOKENIZER, SAG2_FTS_TOKENIZER, final_tokens, fts5_terms
from .profiles import (
    ANALYZER_VERSIONS,
    DEFAULT_PROFILE,
    FTS_TOKENIZERS,
    PROFILES,
    ProfileRules,
    analyze_body,
    body_tokens,
    distinct_tokens,
    question_words,
    tokenize,
    tokenize_normalized,
)
from .sag2.analyzer import (
    expansion_units,
    fold_accents,
    is_latin_only,
    name_runs,
    split_sentences,
)

__all__ = [
    "ANALYZER_VERSIONS",
    "CHINESE_STOPWORDS",
    "DEFAULT_PROFILE",
    "ENGLISH_STOPWORDS",
    "FTS_TOKENIZERS",
    "PAPER_FTS_TOKENIZER",
    "PROFILES",
    "SAG2_FTS_TOKENIZER",
    "STOPWORDS",
    "Profile",
    "ProfileRules",
    "UnitAnalysis",
    "analyze_body",
    "body_tokens",
    "distinct_tokens",
    "expansion_units",
    "final_tokens",
    "fold_accents",
    "fts5_terms",
    "is_latin_only",
    "name_runs",
    "normalize",
    "question_words",
    "split_sentences",
    "tokenize",
    "tokenize_normalized",
]
