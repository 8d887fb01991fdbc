"""The pool judge's features of a judge request: the question's evidence, then the context's.

Each candidate gets one row. The question columns say how well the candidate matches the
question on its own (idf share of the question's terms, title match, BM25 rank in the
request). The context columns read the shared retrieved context the way the method means
it: which question terms the context already covers and which ones the candidate adds, whether
a context passage names the candidate (or the candidate names it), the names and rare terms
they share beyond the question, and how much of the question the candidate and one context
passage cover together. Each context passage counts with its previous score (1 when it has
none), so well-judged context speaks louder. Without context the context columns are zero. A
candidate's own previous score is not a column: facts in the context are not the candidate's,
and a judge that reads its own last verdict only repeats it (held-out MuSiQue, §17).

Everything is arrays over the request: token ids in one vocabulary (`pool_terms`), products
of small 0/1 matrices (candidates x question terms, candidates x the context's terms).
Memory and time are linear in the number of candidates; nothing is cubic, and a question
contributes at most `pool_terms.MAX_QUESTION_TERMS` terms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from ...errors import InvalidInputError
from ..base import JudgeRequest
from .pool_terms import AnalysisCache, PassageTerms, QuestionTerms

Matrix = npt.NDArray[np.float64]
Vector = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]

QUESTION_FEATURES: tuple[str, ...] = (
    "question_coverage",  # idf share of the question's terms the candidate holds
    "question_reachable",  # idf share of the question's terms some passage of the request holds
    "coverage_to_best",  # that share over the request's best candidate's
    "coverage_percentile",  # share of the other candidates covering less of the question
    "title_coverage",  # idf share of the question's terms in the candidate's title
    "title_in_question",  # the candidate's title occurs in the question
    "question_cosine",  # TF-IDF cosine (request idf) of candidate and question
    "holds_rarest_term",  # the candidate holds the question's rarest term in the request
    "bm25_rank",  # 1 / log2(2 + rank) by BM25 against the question, 0 when unknown
    "bm25_to_best",  # BM25 against the question over the request's best
    "round_found",  # 0 = initial BM25 list, 1-2 = expansion, -1 unknown
    "log_length",  # log(1 + tokens)
)
# Against a set of other passages, each with a weight: the best weight x value over them.
LINK_FEATURES: tuple[str, ...] = (
    "chain_coverage",  # question idf share covered by the candidate and the passage together
    "named_by",  # the passage names the candidate's title
    "names",  # the candidate names the passage's title
    "shared_names",  # name phrases both hold beyond the question's (capped)
    "bridge_terms",  # log(1 + idf of the terms both hold beyond the question's)
    "cosine",  # TF-IDF cosine of the two
)
# The request's own best question matches (its BM25 top ANCHORS), weighted by their coverage:
# a candidate linked to them may be the next hop, even before any context exists.
POOL_FEATURES: tuple[str, ...] = tuple(f"pool_{name}" for name in LINK_FEATURES)
CONTEXT_FEATURES: tuple[str, ...] = (
    "context_size",  # log(1 + context passages)
    "context_coverage",  # weighted idf share of the question the context covers
    "novel_coverage",  # question idf share the candidate covers that the context does not
    *(f"context_{name}" for name in LINK_FEATURES),  # weights: the context's previous scores
    "reassess",  # the request asks to reassess earlier judgments (the final round)
    "context_weight",  # mean weight of the context passages
)
FEATURE_NAMES: tuple[str, ...] = QUESTION_FEATURES + POOL_FEATURES + CONTEXT_FEATURES
ANCHORS = 5
MAX_SHARED_NAMES = 3  # more shared names than this adds no evidence


@dataclass(frozen=True)
class _Shared:
    """What every column of one request needs: the passages as arrays, idf and the question."""

    request: JudgeRequest
    passages: list[PassageTerms]  # the request's distinct passages
    candidates: Ints  # each candidate's row among them
    context: Ints  # each context passage's row among them
    question: QuestionTerms
    rows: Ints  # per (passage, term) entry, sorted by passage: the passage's row
    columns: Ints  # per entry: the term's column in the request's vocabulary
    title_rows: Ints  # the same entries for the terms of each passage's title
    title_columns: Ints
    idf: Vector  # per request column
    norms: Vector  # per passage: its binary TF-IDF vector's length
    q_idf: Vector  # per question term (a term no passage holds: the request's top idf)
    q_weight: Vector  # per question term, its share of the question's idf
    q_held: Matrix  # passages x question terms, 0/1
    q_title_held: Matrix  # passages x question terms, 0/1, in the passage's title
    beyond: Vector  # per request column: 1 when the question does not hold the term
    vocabulary: Ints  # per request column: its id in the cache's vocabulary
    specificity: Vector  # per passage: its title's rarest term's idf over the request's top
    name_rows: Ints  # per (passage, name phrase) entry, sorted by passage: the passage's row
    name_columns: Ints  # per entry: the name's column among the request's names
    name_weight: Vector  # per name column: idf over the top, 0 for a name the question holds

    @cached_property
    def held(self) -> Matrix:
        """Candidates x question terms, 0/1."""
        return self.q_held[self.candidates]

    @cached_property
    def coverage(self) -> Vector:
        """Per candidate: the idf share of the question it holds."""
        return np.asarray(self.held @ self.q_weight, dtype=np.float64)


def request_features(request: JudgeRequest, cache: AnalysisCache) -> Matrix:
    """One row of FEATURE_NAMES per candidate of the request."""
    _check_numbers(request)
    rows = np.zeros((len(request.candidates), len(FEATURE_NAMES)))
    if not request.candidates:
        return rows
    shared = _shared(request, cache)
    first, second = len(QUESTION_FEATURES), len(QUESTION_FEATURES) + len(POOL_FEATURES)
    rows[:, :first] = _question_columns(shared)
    rows[:, first:second] = _pool_columns(shared, rows[:, QUESTION_FEATURES.index("bm25_rank")])
    if request.context:
        rows[:, second:] = _context_columns(shared)
    return rows


def _check_numbers(request: JudgeRequest) -> None:
    """Refuse a BM25 score or previous score that is not a finite number, naming it."""
    numbers = [
        (f"candidate {k}: question_bm25", c.question_bm25) for k, c in enumerate(request.candidates)
    ]
    numbers += [
        (f"context passage {k}: previous_score", p.previous_score)
        for k, p in enumerate(request.context)
    ]
    for name, value in numbers:
        if value is not None and not math.isfinite(value):
            raise InvalidInputError(f"{name} must be a finite number, got {value!r}")


def _shared(request: JudgeRequest, cache: AnalysisCache) -> _Shared:
    """Analyse the request's passages once and lay them out as (row, column) entries."""
    keys = [(c.title, c.text) for c in request.candidates]
    keys += [(c.title, c.text) for c in request.context]
    position: dict[tuple[str, str], int] = {}
    for key in keys:
        position.setdefault(key, len(position))
    passages, question = cache.request_terms(list(position), request.question)
    lengths = [len(p.ids) for p in passages]
    vocabulary, columns = np.unique(np.concatenate([p.ids for p in passages]), return_inverse=True)
    rows = np.repeat(np.arange(len(passages)), lengths)
    df = np.bincount(columns, minlength=len(vocabulary)).astype(np.float64)
    idf = np.log1p((len(passages) - df + 0.5) / (df + 0.5))
    norms = np.sqrt(np.bincount(rows, weights=idf[columns] ** 2, minlength=len(passages)))
    q_columns = _columns_of(vocabulary, question.ids)
    q_idf = np.where(q_columns >= 0, idf[np.maximum(q_columns, 0)] if idf.size else 0.0, 0.0)
    q_idf[q_columns < 0] = float(idf.max(initial=1.0))
    q_weight = q_idf / q_idf.sum() if q_idf.size else q_idf
    q_held = np.zeros((len(passages), len(q_columns)))
    which = np.full(len(vocabulary), -1, dtype=np.int64)
    which[q_columns[q_columns >= 0]] = np.flatnonzero(q_columns >= 0)
    hit = which[columns] >= 0
    q_held[rows[hit], which[columns[hit]]] = 1.0
    beyond = (which < 0).astype(np.float64)
    title_rows = np.repeat(np.arange(len(passages)), [len(p.title_ids) for p in passages])
    title_columns = _columns_of(vocabulary, np.concatenate([p.title_ids for p in passages]))
    q_title_held = np.zeros_like(q_held)
    hit = which[title_columns] >= 0
    q_title_held[title_rows[hit], which[title_columns[hit]]] = 1.0
    count = len(request.candidates)
    top = float(idf.max(initial=1.0))
    lowest = np.full(len(passages), np.inf)
    np.minimum.at(lowest, title_rows, idf[title_columns] if len(title_columns) else 0.0)
    specificity = np.where(np.isfinite(lowest), lowest / top, 0.0)
    name_rows = np.repeat(np.arange(len(passages)), [len(p.name_ids) for p in passages])
    names, name_columns = np.unique(
        np.concatenate([p.name_ids for p in passages]), return_inverse=True
    )
    return _Shared(
        request,
        passages,
        np.array([position[k] for k in keys[:count]], dtype=np.int64),
        np.array([position[k] for k in keys[count:]], dtype=np.int64),
        question,
        rows,
        columns.astype(np.int64),
        title_rows,
        title_columns,
        idf,
        norms,
        q_idf,
        q_weight,
        q_held,
        q_title_held,
        beyond,
        vocabulary,
        specificity,
        name_rows,
        name_columns.astype(np.int64),
        _name_weights(names, name_columns, len(passages), question),
    )


def _name_weights(names: Ints, columns: Ints, count: int, question: QuestionTerms) -> Vector:
    """Per name column: the name's idf over the request's top (a name most passages share
    links nothing), 0 when the question contains it."""
    df = np.bincount(columns, minlength=len(names)).astype(np.float64)
    top = math.log1p((count - 0.5) / 1.5) or 1.0
    weight: Vector = np.log1p((count - df + 0.5) / (df + 0.5)) / top
    weight[np.isin(names, question.name_ids)] = 0.0
    return weight


def _columns_of(vocabulary: Ints, ids: Ints) -> Ints:
    """Each id's column in the sorted request vocabulary, -1 when absent."""
    if not len(vocabulary):
        return np.full(len(ids), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(vocabulary, ids), len(vocabulary) - 1)
    return np.where((ids >= 0) & (vocabulary[at] == ids), at, -1).astype(np.int64)


def _question_columns(shared: _Shared) -> Matrix:
    """The QUESTION_FEATURES of every candidate."""
    request, held, coverage = shared.request, shared.held, shared.coverage
    n = len(shared.candidates)
    mine = [shared.passages[i] for i in shared.candidates]
    best = float(coverage.max(initial=0.0))
    below = np.searchsorted(np.sort(coverage), coverage, side="left") / max(n - 1, 1)
    rarest = held[:, int(np.argmax(shared.q_idf))] if shared.q_idf.size else np.zeros(n)
    scale = shared.norms[shared.candidates] * float(np.sqrt((shared.q_idf**2).sum()))
    dot = held @ shared.q_idf**2
    bm25 = np.array([c.question_bm25 or 0.0 for c in request.candidates])
    reachable = float(shared.q_held.max(axis=0, initial=0.0) @ shared.q_weight)
    columns = [
        coverage,
        np.full(n, reachable),
        coverage / best if best > 0 else np.zeros(n),
        below,
        shared.q_title_held[shared.candidates] @ shared.q_weight,
        [float(shared.question.mentions(p.title)) for p in mine],
        np.divide(dot, scale, out=np.zeros(n), where=scale > 0),
        rarest,
        _bm25_ranks(request),
        bm25 / bm25.max() if bm25.max() > 0 else np.zeros(n),
        [-1.0 if c.round_found is None else float(c.round_found) for c in request.candidates],
        [math.log1p(p.length) for p in mine],
    ]
    return np.column_stack(columns).astype(np.float64)


def _pool_columns(shared: _Shared, bm25_rank: Vector) -> Matrix:
    """LINK_FEATURES against the request's ANCHORS best candidates by BM25 (then coverage)."""
    coverage = shared.coverage
    order = np.lexsort((-coverage, -bm25_rank))[:ANCHORS]
    best = float(coverage.max(initial=0.0))
    weights = coverage[order] / best if best > 0 else np.zeros(len(order))
    itself = np.zeros((len(shared.candidates), len(order)), dtype=bool)
    itself[order, np.arange(len(order))] = True
    return _link_columns(shared, shared.candidates[order], weights, itself)


def _context_columns(shared: _Shared) -> Matrix:
    """The CONTEXT_FEATURES of every candidate against the weighted context passages."""
    request = shared.request
    n, m = len(shared.candidates), len(request.context)
    weights = np.array(
        [1.0 if p.previous_score is None else float(p.previous_score) for p in request.context]
    )
    itself = shared.candidates[:, None] == shared.context[None, :]
    covered = (shared.q_held[shared.context] * weights[:, None]).max(axis=0)
    novel = shared.held @ (shared.q_weight * (1.0 - covered))
    columns = [
        np.full((n, 1), math.log1p(m)),
        np.full((n, 1), float(covered @ shared.q_weight)),
        novel[:, None],
        _link_columns(shared, shared.context, weights, itself),
        np.full((n, 1), float(request.note is not None)),
        np.full((n, 1), float(weights.mean())),
    ]
    return np.hstack(columns).astype(np.float64)


def _link_columns(
    shared: _Shared, others: Ints, weights: Vector, itself: npt.NDArray[np.bool_]
) -> Matrix:
    """LINK_FEATURES: per candidate, the best weight x value over the ``others`` passages
    (rows of the request's passages; ``itself`` masks a candidate's own entry among them)."""
    n = len(shared.candidates)
    if len(others) == 0:
        return np.zeros((n, len(LINK_FEATURES)))
    terms = (shared.rows, shared.columns)
    titles = (shared.title_rows, shared.title_columns)
    idf, width = shared.idf, len(shared.idf)
    others_terms = _Incidence.of(shared, terms, others, width)
    bridge, dot = others_terms.sums(shared, terms, [idf * shared.beyond, idf**2])
    (title_held,) = others_terms.sums(shared, titles, [None])
    (holds_title,) = _Incidence.of(shared, titles, others, width).sums(shared, terms, [None])
    phrases = (shared.name_rows, shared.name_columns)
    (shared_names,) = _Incidence.of(shared, phrases, others, len(shared.name_weight)).sums(
        shared, phrases, [shared.name_weight]
    )
    others_held = shared.q_held[others]
    overlap = (shared.held * shared.q_weight) @ others_held.T
    chain = shared.coverage[:, None] + (others_held @ shared.q_weight)[None, :] - overlap
    scale = shared.norms[shared.candidates][:, None] * shared.norms[others][None, :]
    cosine = np.divide(dot, scale, out=np.zeros_like(dot), where=scale > 0)
    named, names = _title_mentions(shared, others, title_held, holds_title)
    capped = np.minimum(shared_names, MAX_SHARED_NAMES) / MAX_SHARED_NAMES
    pairs = (chain, named, names, capped, np.log1p(bridge), cosine)
    weighted = np.where(itself, 0.0, weights[None, :])
    return np.column_stack([(values * weighted).max(axis=1) for values in pairs])


@dataclass(frozen=True)
class _Incidence:
    """Some passages' entries (``others``) as a 0/1 matrix: the columns they hold x the
    passages, and where each request column and each of ``others`` sits in it."""

    held: Matrix  # their columns x distinct others, 0/1
    position: Ints  # per column (term or name): its row in ``held``, -1 when none holds it
    back: Ints  # per entry of ``others``: its column in ``held``
    count: int  # the request's passages

    @classmethod
    def of(cls, shared: _Shared, theirs: tuple[Ints, Ints], others: Ints, width: int) -> _Incidence:
        """The incidence of ``others`` over ``theirs`` entries in a space of ``width`` columns."""
        distinct, back = np.unique(others, return_inverse=True)
        slot = np.full(len(shared.passages), -1, dtype=np.int64)
        slot[distinct] = np.arange(len(distinct))
        rows, columns = theirs
        keep = slot[rows] >= 0
        held_columns, inverse = np.unique(columns[keep], return_inverse=True)
        held = np.zeros((len(held_columns), len(distinct)))
        held[inverse, slot[rows[keep]]] = 1.0
        position = np.full(width, -1, dtype=np.int64)
        position[held_columns] = np.arange(len(held_columns))
        return cls(held, position, back, len(shared.passages))

    def sums(
        self, shared: _Shared, mine: tuple[Ints, Ints], weights: Sequence[Vector | None]
    ) -> list[Matrix]:
        """Candidates x others: for each weight vector (per column; None counts), the sum over
        the columns in both a candidate's ``mine`` entries and another's.

        One gather of the others' 0/1 rows per candidate entry, then a sum per candidate run:
        linear in the entries, with no candidates x vocabulary matrix."""
        rows, columns = mine
        hit = self.position[columns] >= 0
        gathered, owners, terms = self.held[self.position[columns[hit]]], rows[hit], columns[hit]
        starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]]) if len(owners) else owners
        out = []
        for weight in weights:
            values = gathered if weight is None else gathered * weight[terms][:, None]
            total = np.zeros((self.count, self.held.shape[1]))
            if len(owners):
                total[owners[starts]] = np.add.reduceat(values, starts, axis=0)
            out.append(total[shared.candidates][:, self.back])
        return out


def _title_mentions(
    shared: _Shared, others: Ints, title_held: Matrix, holds_title: Matrix
) -> tuple[Matrix, Matrix]:
    """(named, names): candidates x others, when the other passage's text holds the
    candidate's title phrase, and when the candidate's text holds the other's title phrase:
    the mentioned title's specificity (a title most passages share, such as "copyright",
    links little). Only pairs whose title words are all present are tested as phrases."""
    lengths = np.array([len(p.title_ids) for p in shared.passages])
    mine = shared.candidates
    named = np.zeros(title_held.shape)
    possible = (title_held == lengths[mine][:, None]) & (lengths[mine][:, None] > 0)
    for i, j in zip(*np.nonzero(possible), strict=True):
        if shared.passages[others[j]].mentions(shared.passages[mine[i]].title):
            named[i, j] = shared.specificity[mine[i]]
    names = np.zeros(holds_title.shape)
    possible = (holds_title == lengths[others][None, :]) & (lengths[others][None, :] > 0)
    for i, j in zip(*np.nonzero(possible), strict=True):
        if shared.passages[mine[i]].mentions(shared.passages[others[j]].title):
            names[i, j] = shared.specificity[others[j]]
    return named, names


def _bm25_ranks(request: JudgeRequest) -> Vector:
    """1 / log2(2 + rank) of each candidate by BM25 against the question; 0 when unknown."""
    known = [
        (position, c.question_bm25)
        for position, c in enumerate(request.candidates)
        if c.question_bm25 is not None and c.question_bm25 > 0
    ]
    ranks = np.zeros(len(request.candidates))
    for rank, (position, _) in enumerate(sorted(known, key=lambda item: (-item[1], item[0]))):
        ranks[position] = 1.0 / math.log2(2 + rank)
    return ranks
