"""A question checked, cut, analysed into query terms and repaired by title aliases (§4.2).

Backend-neutral: every lexical backend answers the same questions with these functions, so
the query terms, and with them the rankings, are the same on each; `QuestionIndex` names the
reads they make, so this module needs no backend.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from .analysis import Profile, distinct_tokens, fold_accents, tokenize
from .analysis.paper import analyzer as paper_analyzer
from .analysis.paper.analyzer import match_phrase, paper_words
from .documents import Unit
from .errors import InvalidInputError
from .filters import Filters
from .index_reads import SearchHit
from .settings import IndexSettings

MAX_QUESTION_CHARS = 100_000
ANALYSED_QUESTION_CHARS = 4_000
MAX_COUNT = 2**63 - 1  # SQLite binds integers as signed 64-bit


class QuestionIndex(Protocol):
    """The reads a question's analysis and search make (every `LexicalBackend` has them)."""

    # The settings the stored units were analysed with (the analyzer profile among them).
    settings: IndexSettings

    def snapshot(self) -> AbstractContextManager[None]:
        """Reads inside the block see one consistent state."""
        ...

    def rank_expression(
        self, terms: Sequence[str], limit: int, *, filters: Filters | None = None
    ) -> list[tuple[int, float]]:
        """Top ``limit`` (unit id, BM25 of the OR of the distinct terms), best first."""
        ...

    def units(self, unit_ids: Iterable[int]) -> dict[int, Unit]:
        """The units with these ids (missing ids are absent)."""
        ...

    def title_aliases(self, folded: Collection[str]) -> dict[str, str]:
        """For each accent-folded title key that is one title's alias, that title's phrase."""
        ...

    def document_frequencies_any(self, terms: Iterable[str]) -> dict[str, int]:
        """Units matching each token or phrase in any field."""
        ...


def check_question(question: object) -> None:
    """Reject a question that is not a string, is too long, or cannot be encoded as UTF-8."""
    if not isinstance(question, str):
        raise InvalidInputError(f"question must be a string, got {type(question).__name__}")
    if len(question) > MAX_QUESTION_CHARS:
        raise InvalidInputError(
            f"question has {len(question):,} characters, more than the limit of "
            f"{MAX_QUESTION_CHARS:,}; ask a shorter question"
        )
    try:
        question.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidInputError(
            f"question holds a character that is not valid Unicode text (a lone surrogate at "
            f"position {error.start})"
        ) from None


def analysed_question(question: str) -> str:
    """The part of a checked question the analyzer sees: its first `ANALYSED_QUESTION_CHARS`
    characters, NUL read as a space.

    Analysis (jieba for Han text) costs time in proportion to the text, while only the first
    80 distinct tokens are used; cutting first keeps a huge question from costing seconds.
    """
    check_question(question)
    return question[:ANALYSED_QUESTION_CHARS].replace("\x00", " ")


def check_limit(limit: object, name: str = "limit") -> None:
    """Reject a negative, non-integer or beyond-64-bit count (limit, top_k, max_tokens)."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 0 <= limit <= MAX_COUNT:
        raise InvalidInputError(
            f"{name} must be an integer between 0 and {MAX_COUNT:,}, got {limit!r}"
        )


def search_hits(
    backend: QuestionIndex,
    question: str,
    limit: int,
    *,
    max_tokens: int,
    filters: Filters | None,
) -> list[SearchHit]:
    """BM25 top ``limit`` units for a question's first ``max_tokens`` distinct tokens, read in
    one snapshot (units a concurrent writer removed are left out)."""
    check_limit(limit)
    check_limit(max_tokens, "max_tokens")
    with backend.snapshot():
        terms = query_terms(backend, question, max_tokens)
        ranked = backend.rank_expression(terms, limit, filters=filters)
        units = backend.units(unit_id for unit_id, _ in ranked)
    return [
        SearchHit(
            unit_id, unit.doc_id, unit.title, unit.body, score, unit.char_start, unit.char_end
        )
        for unit_id, score in ranked
        if (unit := units.get(unit_id)) is not None
    ]


def alias_key(term: str, profile: Profile = "sag2") -> str:
    """The accent-folded form of a term under which a title alias is stored ("paper": the
    port's key, "" for a title without Latin accents)."""
    if profile == "paper":
        return paper_analyzer.alias_key(term)
    return " ".join(tokenize(fold_accents(term), profile=profile))


def query_terms(backend: QuestionIndex, question: str, max_tokens: int) -> list[str]:
    """The first distinct tokens of a checked question's analysed part, repaired by title
    aliases when unmatched: single tokens ("sag2"), or any span that is a title's alias
    ("paper", whose terms are the words' phrases, `analysis.paper.analyzer.match_phrase`)."""
    profile = backend.settings.analyzer_profile
    text = analysed_question(question)
    if profile == "paper":
        words = list(dict.fromkeys(repair_alias_spans(backend, text)))[:max_tokens]
        return [phrase for phrase in map(match_phrase, words) if phrase]
    tokens = distinct_tokens(text, max_tokens, profile=profile)
    return list(dict.fromkeys(repair_terms(backend, tokens)))


def repair_terms(backend: QuestionIndex, terms: Sequence[str]) -> list[str]:
    """Replace each term that matches nothing by the title it is an accent alias of (§3.2)."""
    profile = backend.settings.analyzer_profile
    keys = {term: alias_key(term, profile) for term in terms}
    aliases = backend.title_aliases(set(keys.values()))
    candidates = {term: aliases[key] for term, key in keys.items() if key in aliases}
    if not candidates:
        return list(terms)
    # Only terms that have an alias can change, so only they need a match count.
    counts = backend.document_frequencies_any([*candidates, *candidates.values()])
    return [
        candidates[term]
        if term in candidates and counts[term] == 0 and counts[candidates[term]] > 0
        else term
        for term in terms
    ]


def repair_alias_spans(backend: QuestionIndex, question: str) -> list[str]:
    """The question's words after the port's repair: scanning left to right, the longest
    span that is a title's alias (casefolded) and whose words match nothing becomes that
    title's words when the title matches ("Jose Cancela" -> those of "José Cancela")."""
    spans = paper_analyzer.alias_spans(question)
    aliases = backend.title_aliases({question[s:e].casefold() for s, e in spans})
    chosen = _leftmost_longest(question, spans, aliases)
    if not chosen:
        return paper_words(question)
    sources = {
        span: match_phrase(" ".join(paper_words(question[span[0] : span[1]]))) for span in chosen
    }
    titles = {span: aliases[question[span[0] : span[1]].casefold()] for span in chosen}
    counts = backend.document_frequencies_any(
        [p for p in (*sources.values(), *titles.values()) if p]
    )
    words: list[str] = []
    position = 0
    for span in chosen:
        words += paper_words(question[position : span[0]])
        if counts.get(sources[span], 0) == 0 and counts.get(titles[span], 0) > 0:
            words += titles[span].split(" ")
        else:
            words += paper_words(question[span[0] : span[1]])
        position = span[1]
    return words + paper_words(question[position:])


def _leftmost_longest(
    question: str, spans: Sequence[tuple[int, int]], aliases: Collection[str]
) -> list[tuple[int, int]]:
    """Scanning left to right, the longest alias span at each start, never overlapping (the
    port's alternation of alias keys, longest first)."""
    longest: dict[int, int] = {}
    for start, end in spans:
        if question[start:end].casefold() in aliases:
            longest[start] = max(end, longest.get(start, 0))
    chosen: list[tuple[int, int]] = []
    for start in sorted(longest):
        if not chosen or start >= chosen[-1][1]:
            chosen.append((start, longest[start]))
    return chosen
