"""Evidence features of a judge request, as pure functions of its text and similarities.

The learned judge scores each candidate from these features. Everything here is computed from
the request alone (its candidates and context stand in for the corpus when counting document
frequencies), so the features, and the judge, do not depend on which index asked. Embedding
similarities are passed in, which keeps this module free of any model.
"""

from __future__ import annotations

import math
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from ...analysis import STOPWORDS, name_runs, tokenize
from ..base import JudgeRequest

Matrix = npt.NDArray[np.float64]

FEATURE_NAMES: tuple[str, ...] = (
    "question_cos",  # embedding cosine of candidate and question
    "question_cos_z",  # the same, standardised over the request's candidates
    "context_cos_max",  # max over context passages of score-weight x cosine
    "context_cos_mean",  # score-weighted mean cosine to the context passages
    "question_idf_coverage",  # idf share of the question's terms the candidate contains
    "bridge_idf_max",  # max over context of weight x idf of shared non-question terms
    "bridge_idf_mean",  # score-weighted mean of the same
    "shared_names_max",  # max over context of weight x name phrases shared (not in question)
    "title_in_context",  # weight of the best context passage that mentions the candidate title
    "context_title_in_candidate",  # weight of the best context passage named by the candidate
    "title_in_question",  # the candidate's title occurs in the question
    "complementarity",  # idf share of the question covered by the candidate but not the context
    "lexical_rank",  # 1 / log2(2 + rank) by the candidate's BM25 score against the question
    "pool_position",  # log(1 + position in the pool) / log(1 + pool size)
    "found_round_0",  # found by the initial BM25 query
    "found_round_1",  # found by the first expansion
    "found_round_2",  # found by the second expansion
    "previous_score",  # the score this candidate received in an earlier round (0 if none)
    "has_previous_score",  # whether it was judged before
    "in_context",  # the candidate is itself one of the context passages
    "round_expansion",  # the request has context but no reassess note (first expansion)
    "round_reassess",  # the request carries a note (the final, reassessing round)
    "log_length",  # log(1 + number of tokens) of the candidate
)
MAX_SHARED_NAMES = 3  # more shared names than this adds no evidence, only length


@dataclass(frozen=True)
class PassageTerms:
    """What the lexical features need from a passage: its terms, names and title phrase."""

    tokens: frozenset[str]
    names: frozenset[str]
    title: str
    padded_text: str
    length: int


@lru_cache(maxsize=8_192)  # a 2,000-passage index fits; about 6 KB each
def passage_terms(title: str, text: str) -> PassageTerms:
    """Analyse a passage once: content tokens, name phrases (title included), padded text."""
    body_tokens = tokenize(text)
    tokens = frozenset(t for t in [*tokenize(title), *body_tokens] if t not in STOPWORDS)
    title_phrase = " ".join(tokenize(title))
    nfkc = unicodedata.normalize("NFKC", text)
    names = {" ".join(tokenize(nfkc[start:end])) for start, end in name_runs(nfkc)}
    if title_phrase:
        names.add(title_phrase)
    names.discard("")
    return PassageTerms(
        tokens, frozenset(names), title_phrase, f" {' '.join(body_tokens)} ", len(body_tokens)
    )


def inverse_document_frequencies(passages: Sequence[PassageTerms]) -> dict[str, float]:
    """BM25-style idf of every token, counting each distinct passage of the request once."""
    distinct = list({id(p): p for p in passages}.values())
    counts: Counter[str] = Counter()
    for passage in distinct:
        counts.update(passage.tokens)
    n = len(distinct)
    return {t: math.log(1.0 + (n - df + 0.5) / (df + 0.5)) for t, df in counts.items()}


def context_weights(request: JudgeRequest) -> list[float]:
    """Each context passage's weight: its previous score, or 1 when it has not been judged."""
    return [1.0 if p.previous_score is None else float(p.previous_score) for p in request.context]


def request_features(
    request: JudgeRequest,
    question_cos: Sequence[float],
    context_cos: Matrix,
    terms: Callable[[str, str], PassageTerms] = passage_terms,
) -> Matrix:
    """One row of FEATURE_NAMES per candidate.

    ``question_cos[i]`` is cos(question, candidate i) and ``context_cos[i, j]`` is
    cos(candidate i, context passage j), both from the same sentence encoder.
    """
    candidates = [terms(c.title, c.text) for c in request.candidates]
    context = [terms(c.title, c.text) for c in request.context]
    question = terms("", request.question)
    idf = inverse_document_frequencies([*candidates, *context])
    shared = _RequestFacts(request, question, context, idf, np.asarray(question_cos, float))
    rows = [
        shared.row(position, passage, context_cos[position] if context else np.zeros(0))
        for position, passage in enumerate(candidates)
    ]
    return np.array(rows, dtype=np.float64).reshape(len(candidates), len(FEATURE_NAMES))


class _RequestFacts:
    """Request-level facts shared by every candidate's row (idf, weights, BM25 ranks)."""

    def __init__(
        self,
        request: JudgeRequest,
        question: PassageTerms,
        context: list[PassageTerms],
        idf: dict[str, float],
        question_cos: npt.NDArray[np.float64],
    ) -> None:
        self.request = request
        self.question = question
        self.context = context
        self.idf = idf
        self.weights = context_weights(request)
        self.question_cos = question_cos
        spread = float(question_cos.std()) if len(question_cos) > 1 else 0.0
        self.cos_z = (
            (question_cos - question_cos.mean()) / spread if spread > 0 else question_cos * 0
        )
        # A question term that no passage contains still counts, at the highest idf seen.
        top = max(idf.values(), default=1.0)
        self.question_idf = {t: idf.get(t, top) for t in question.tokens}
        self.question_total = sum(self.question_idf.values()) or 1.0
        self.context_identities = {(p.title, p.text) for p in request.context}
        self.lexical_ranks = _lexical_ranks(request)

    def row(
        self, position: int, passage: PassageTerms, cosines: npt.NDArray[np.float64]
    ) -> list[float]:
        """The feature row of one candidate."""
        candidate = self.request.candidates[position]
        others = [
            j
            for j, c in enumerate(self.request.context)
            if (c.title, c.text) != (candidate.title, candidate.text)
        ]
        found = candidate.round_found
        n = len(self.request.candidates)
        return [
            float(self.question_cos[position]),
            float(self.cos_z[position]),
            *self._weighted([float(cosines[j]) for j in others], others),
            self._coverage(passage.tokens),
            *self._weighted([self._bridge(passage, self.context[j]) for j in others], others),
            self._max_weight(
                [_shared_names(passage, self.context[j], self.question) for j in others], others
            ),
            self._max_weight([_mentions(self.context[j], passage.title) for j in others], others),
            self._max_weight([_mentions(passage, self.context[j].title) for j in others], others),
            _mentions(self.question, passage.title),
            self._complement(passage, others),
            self.lexical_ranks[position],
            math.log1p(position) / math.log1p(n) if n > 1 else 0.0,
            float(found == 0),
            float(found == 1),
            float(found == 2),
            candidate.previous_score or 0.0,
            float(candidate.previous_score is not None),
            float((candidate.title, candidate.text) in self.context_identities),
            float(bool(self.request.context) and self.request.note is None),
            float(self.request.note is not None),
            math.log1p(passage.length),
        ]

    def _weighted(self, values: list[float], others: list[int]) -> tuple[float, float]:
        """(max of weight x value, weighted mean of value) over the given context passages."""
        if not others:
            return 0.0, 0.0
        weights = [self.weights[j] for j in others]
        total = sum(weights)
        mean = sum(w * v for w, v in zip(weights, values, strict=True)) / total if total else 0.0
        return max(w * v for w, v in zip(weights, values, strict=True)), mean

    def _max_weight(self, values: list[float], others: list[int]) -> float:
        """Max of weight x value over the given context passages (0 without context)."""
        return max((self.weights[j] * v for j, v in zip(others, values, strict=True)), default=0.0)

    def _coverage(self, tokens: frozenset[str]) -> float:
        """The idf share of the question's terms found among ``tokens``."""
        return sum(v for t, v in self.question_idf.items() if t in tokens) / self.question_total

    def _bridge(self, passage: PassageTerms, other: PassageTerms) -> float:
        """log(1 + idf mass of the terms two passages share that the question does not name)."""
        shared = (passage.tokens & other.tokens) - self.question.tokens
        return math.log1p(sum(self.idf.get(t, 0.0) for t in shared))

    def _complement(self, passage: PassageTerms, others: list[int]) -> float:
        """The question's idf share the candidate covers and no other context passage does."""
        covered: set[str] = set()
        for j in others:
            covered |= self.context[j].tokens
        missing = {t: v for t, v in self.question_idf.items() if t not in covered}
        return sum(v for t, v in missing.items() if t in passage.tokens) / self.question_total


def _lexical_ranks(request: JudgeRequest) -> list[float]:
    """1 / log2(2 + rank) of each candidate by BM25 against the question; 0 when unknown."""
    known = [
        (position, c.question_bm25)
        for position, c in enumerate(request.candidates)
        if c.question_bm25 is not None
    ]
    ranks = [0.0] * len(request.candidates)
    for rank, (position, _) in enumerate(sorted(known, key=lambda item: (-item[1], item[0]))):
        ranks[position] = 1.0 / math.log2(2 + rank)
    return ranks


def _shared_names(passage: PassageTerms, other: PassageTerms, question: PassageTerms) -> float:
    """How many name phrases two passages share that the question does not contain, capped."""
    shared = [n for n in passage.names & other.names if f" {n} " not in question.padded_text]
    return min(len(shared), MAX_SHARED_NAMES) / MAX_SHARED_NAMES


def _mentions(passage: PassageTerms, phrase: str) -> float:
    """1 when the token phrase occurs in the passage's text, else 0."""
    return float(bool(phrase) and f" {phrase} " in passage.padded_text)
