"""Features of a whole judge request for the pool judge: lexical evidence plus the pool graph.

The columns of `_evidence_features` are reused with TF-IDF cosines over the request in place
of sentence-embedding cosines, so no model reads any passage; `pool_graph` adds the features
of the graph that the request's passages form. All of it is a pure function of the request.
"""

from __future__ import annotations

import numpy as np

from ._evidence_features import (
    FEATURE_NAMES as EVIDENCE_FEATURE_NAMES,
)
from ._evidence_features import (
    Matrix,
    PassageTerms,
    context_weights,
    inverse_document_frequencies,
    passage_terms,
    request_features,
)
from .base import JudgeRequest
from .pool_graph import GRAPH_FEATURE_NAMES, build_graph, graph_features

POOL_FEATURE_NAMES: tuple[str, ...] = EVIDENCE_FEATURE_NAMES + GRAPH_FEATURE_NAMES


def pool_features(request: JudgeRequest) -> Matrix:
    """One row of POOL_FEATURE_NAMES per candidate of the request."""
    candidates = [passage_terms(c.title, c.text) for c in request.candidates]
    context = [passage_terms(c.title, c.text) for c in request.context]
    question = passage_terms("", request.question)
    passages, positions = _distinct([*candidates, *context])
    idf = inverse_document_frequencies(passages)
    vectors = _tfidf(passages, idf)
    query = _tfidf([question], idf)[0]
    found = [positions[id(p)] for p in candidates]
    in_context = [positions[id(p)] for p in context]
    question_cos = vectors[found] @ query
    context_cos = vectors[found] @ vectors[in_context].T
    lexical = request_features(request, question_cos, context_cos)
    top = max(idf.values(), default=1.0)
    question_idf = {t: idf.get(t, top) for t in question.tokens}
    graph = build_graph(passages, question, idf, question_idf)
    anchors = graph.coverage.copy()
    for position, weight in zip(in_context, context_weights(request), strict=True):
        anchors[position] = max(anchors[position], weight)
    for position, candidate in zip(found, request.candidates, strict=True):
        if candidate.previous_score is not None:
            anchors[position] = max(anchors[position], candidate.previous_score)
    return np.hstack([lexical, graph_features(graph, found, anchors)])


def _distinct(passages: list[PassageTerms]) -> tuple[list[PassageTerms], dict[int, int]]:
    """The distinct passages (a candidate repeated in the context is one node) and positions."""
    position: dict[tuple[str, str, int], int] = {}
    distinct: list[PassageTerms] = []
    by_object: dict[int, int] = {}
    for passage in passages:
        key = (passage.title, passage.padded_text, passage.length)
        if key not in position:
            position[key] = len(distinct)
            distinct.append(passage)
        by_object[id(passage)] = position[key]
    return distinct, by_object


def _tfidf(passages: list[PassageTerms], idf: dict[str, float]) -> Matrix:
    """L2-normalised binary TF-IDF rows over the request's vocabulary (unknown terms drop)."""
    vocabulary = {t: i for i, t in enumerate(idf)}
    matrix = np.zeros((len(passages), len(vocabulary)))
    for row, passage in enumerate(passages):
        known = [t for t in passage.tokens if t in vocabulary]
        matrix[row, [vocabulary[t] for t in known]] = [idf[t] for t in known]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: Matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return unit
