"""The analyzer profiles behind one interface, and the calls that pick one by name.

Every function takes the profile explicitly (``IndexSettings.analyzer_profile``), so one
analyzer serves indexing, questions and expansion terms and a term always matches the tokens
it was derived from.
"""

from __future__ import annotations

from typing import Protocol

from .common import Profile, UnitAnalysis, normalize
from .paper import analyzer as paper
from .sag2 import analyzer as sag2


class ProfileRules(Protocol):
    """What a profile provides: its tokens, question words and unit analysis, and the FTS5
    tokenizer and analyzer version an index records for it."""

    @property
    def FTS_TOKENIZER(self) -> str:
        """The FTS5 tokenizer the profile's tokens are final for."""
        ...

    @property
    def ANALYZER_VERSION(self) -> str:
        """The version recorded in meta; an index of another version is refused."""
        ...

    def tokens(self, normalized: str, latin_only: bool | None = None) -> list[str]:
        """Tokens of already-normalised text, stopwords removed."""
        ...

    def question_words(self, text: str) -> list[str]:
        """The words a question's expansion tests compare with."""
        ...

    def analysis(self, body: str, with_sentences: bool) -> UnitAnalysis:
        """A unit body's token stream, and its sentences' expansion units if asked."""
        ...


RULES: dict[Profile, ProfileRules] = {"sag2": sag2, "paper": paper}
PROFILES: tuple[Profile, ...] = tuple(RULES)
DEFAULT_PROFILE: Profile = "sag2"
FTS_TOKENIZERS: dict[str, str] = {name: rules.FTS_TOKENIZER for name, rules in RULES.items()}
ANALYZER_VERSIONS: dict[str, str] = {name: rules.ANALYZER_VERSION for name, rules in RULES.items()}


def tokenize(text: str, *, profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """The analyzer's tokens of ``text`` in order, stopwords removed."""
    return RULES[profile].tokens(normalize(text))


def tokenize_normalized(
    normalized: str, latin_only: bool | None = None, *, profile: Profile = DEFAULT_PROFILE
) -> list[str]:
    """Tokens of already-normalised text (``latin_only``: see `sag2.analyzer.tokens`)."""
    return RULES[profile].tokens(normalized, latin_only)


def distinct_tokens(
    text: str, limit: int | None = None, *, profile: Profile = DEFAULT_PROFILE
) -> list[str]:
    """Distinct tokens in first-occurrence order, optionally the first ``limit`` of them."""
    unique = list(dict.fromkeys(tokenize(text, profile=profile)))
    return unique if limit is None else unique[:limit]


def question_words(text: str, profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """The words a question's expansion tests compare with under the profile."""
    return RULES[profile].question_words(text)


def analyze_body(body: str, profile: Profile = DEFAULT_PROFILE) -> UnitAnalysis:
    """Tokenise a unit's body and derive each sentence's expansion units (names as phrases)."""
    return RULES[profile].analysis(body, True)


def body_tokens(body: str, profile: Profile = DEFAULT_PROFILE) -> tuple[str, ...]:
    """``analyze_body(body, profile).tokens`` without the name and sentence work, which only
    expansion needs (ingest stores tokens; expansion derives its units at query time)."""
    return RULES[profile].analysis(body, False).tokens
