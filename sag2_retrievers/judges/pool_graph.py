"""A lexical graph over one judge request's passages, built at query time, and its features.

The nodes are the request's distinct passages (candidates and context). Two passages are
linked when one names the other's title, when they share a name phrase the question does not
contain, or when they share a term rare in the request. Question-anchored random walks over
that graph (personalised PageRank, the idea HippoRAG applies to a knowledge graph, here over
~100-300 passages and no model) and a few path features tell a bridge passage, which links
two pieces of evidence, from a same-topic distractor. Everything is numpy over the request.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import numpy.typing as npt

from ._evidence_features import PassageTerms

Matrix = npt.NDArray[np.float64]
Vector = npt.NDArray[np.float64]

GRAPH_FEATURE_NAMES: tuple[str, ...] = (
    "ppr_question",  # personalised PageRank restarting at question-covering passages (x n)
    "ppr_context",  # the same walk restarting at the context, weighted by its scores (x n)
    "mentioned_by_anchor",  # best anchor weight of a passage naming the candidate's title
    "mentions_anchor",  # best anchor weight of a passage whose title the candidate names
    "anchor_link_first",  # strongest link x anchor weight to another passage
    "anchor_link_second",  # the second strongest, to a different passage (links two)
    "pair_coverage",  # best question idf share covered by the candidate with one linked passage
    "pair_gain",  # what that pair covers beyond the candidate alone
    "coverage_percentile",  # share of pool passages covering less of the question
    "link_degree",  # log(1 + number of linked passages)
    "title_mentions",  # log(1 + passages naming the candidate's title)
    "anchored_pair_coverage",  # best anchor weight x coverage with one linked passage
    "mention_pair_coverage",  # the same over passages that name the candidate's title
)
RESTART = 0.35  # random-walk restart probability (HippoRAG uses a damping of 0.5)
WALK_STEPS = 20
RARE_SHARE = 0.05  # a token in at most this share of the passages (and >= 2) links them
MENTION_WEIGHT = 2.0  # naming another passage's title is the strongest lexical link


@dataclass(frozen=True)
class PoolGraph:
    """The request's passages, their link matrix, title mentions and question coverage."""

    links: Matrix  # symmetric, zero diagonal: summed link strength between two passages
    mentions: Matrix  # mentions[i, j] = 1 when passage i names passage j's title
    coverage: Vector  # question idf share each passage covers
    pair: Matrix  # pair[i, j]: question idf share passages i and j cover together
    pair_coverage: Vector  # per passage: best coverage together with one linked passage


def build_graph(
    passages: Sequence[PassageTerms],
    question: PassageTerms,
    idf: dict[str, float],
    question_idf: dict[str, float],
) -> PoolGraph:
    """Link the passages by title mentions, shared names and shared rare terms."""
    mentions = _title_mentions(passages)
    links = MENTION_WEIGHT * np.maximum(mentions, mentions.T)
    links += _shared_links(passages, question, idf)
    np.fill_diagonal(links, 0.0)
    incidence, weights = _question_incidence(passages, question_idf)
    coverage = incidence @ weights
    pair = np.maximum(incidence[:, None, :], incidence[None, :, :]) @ weights
    linked_pair = np.where(links > 0, pair, 0.0)
    pair_coverage = np.maximum(coverage, linked_pair.max(axis=1, initial=0.0))
    return PoolGraph(links, mentions, coverage, pair, pair_coverage)


def graph_features(graph: PoolGraph, candidates: Sequence[int], anchors: Vector) -> Matrix:
    """One row of GRAPH_FEATURE_NAMES per candidate (an index into the graph's passages).

    ``anchors`` weighs each passage as known evidence: the larger of its question coverage
    and its previous score (a context passage's score, or the candidate's own).
    """
    n = len(graph.coverage)
    rows = np.zeros((len(candidates), len(GRAPH_FEATURE_NAMES)))
    if n == 0 or not candidates:
        return rows
    walk_question = personalised_pagerank(graph.links, graph.coverage**2) * n
    walk_context = personalised_pagerank(graph.links, _context_restart(anchors, graph)) * n
    index = np.asarray(candidates)
    anchor_links = (graph.links / max(graph.links.max(), 1e-12)) * anchors[None, :]
    np.fill_diagonal(anchor_links, 0.0)
    top_two = -np.sort(-anchor_links, axis=1)[:, :2] if n > 1 else np.zeros((n, 2))
    below = (graph.coverage[None, :] < graph.coverage[:, None]).sum(axis=1) / max(n - 1, 1)
    rows[:, 0] = walk_question[index]
    rows[:, 1] = walk_context[index]
    rows[:, 2] = _masked_max(graph.mentions.T, anchors)[index]
    rows[:, 3] = _masked_max(graph.mentions, anchors)[index]
    rows[:, 4] = top_two[index, 0]
    rows[:, 5] = top_two[index, 1] if n > 1 else 0.0
    rows[:, 6] = graph.pair_coverage[index]
    rows[:, 7] = (graph.pair_coverage - graph.coverage)[index]
    rows[:, 8] = below[index]
    rows[:, 9] = np.log1p((graph.links > 0).sum(axis=1))[index]
    rows[:, 10] = np.log1p(graph.mentions.sum(axis=0))[index]
    anchored_pair = graph.pair * anchors[None, :]
    np.fill_diagonal(anchored_pair, 0.0)
    rows[:, 11] = np.where(graph.links > 0, anchored_pair, 0.0).max(axis=1)[index]
    rows[:, 12] = np.where(graph.mentions.T > 0, anchored_pair, 0.0).max(axis=1)[index]
    return rows


def personalised_pagerank(links: Matrix, restart: Vector) -> Vector:
    """Stationary visit shares of a walk that follows links and restarts by ``restart``.

    Passages without links send their mass back to the restart distribution, so the
    result always sums to 1; an all-zero restart vector means a uniform one.
    """
    n = len(restart)
    total = float(restart.sum())
    start = restart / total if total > 0 else np.full(n, 1.0 / n)
    out_degree = links.sum(axis=1)
    transition = np.divide(
        links, out_degree[:, None], out=np.zeros_like(links), where=out_degree[:, None] > 0
    )
    dangling = out_degree <= 0
    visits = start.copy()
    for _ in range(WALK_STEPS):
        spread = visits @ transition + visits[dangling].sum() * start
        visits = RESTART * start + (1.0 - RESTART) * spread
    return np.asarray(visits, dtype=np.float64)


def _context_restart(anchors: Vector, graph: PoolGraph) -> Vector:
    """Restart weights for the context walk: anchor weight beyond question coverage alone."""
    return np.clip(anchors - graph.coverage, 0.0, None) + 1e-3 * anchors


def _masked_max(mask: Matrix, weights: Vector) -> Vector:
    """Per row i: the largest weights[j] over the j with mask[i, j] set (0 when none)."""
    return np.asarray((mask * weights[None, :]).max(axis=1, initial=0.0), dtype=np.float64)


def _title_mentions(passages: Sequence[PassageTerms]) -> Matrix:
    """mentions[i, j] = 1 when passage i's text contains passage j's title as a phrase."""
    n = len(passages)
    mentions = np.zeros((n, n))
    holders: dict[str, list[int]] = defaultdict(list)
    for i, passage in enumerate(passages):
        for token in passage.tokens:
            holders[token].append(i)
    for j, target in enumerate(passages):
        words = target.title.split()
        if not words or any(w not in holders for w in words):
            continue
        phrase = f" {target.title} "
        rarest = min((holders[w] for w in words), key=len)
        for i in rarest:
            if i != j and phrase in passages[i].padded_text:
                mentions[i, j] = 1.0
    return mentions


def _shared_links(
    passages: Sequence[PassageTerms], question: PassageTerms, idf: dict[str, float]
) -> Matrix:
    """Summed idf of the name phrases and rare tokens two passages share, question excluded.

    A name counts at the request's top idf wherever it is shared; a token only while it is
    rare in the request (at most RARE_SHARE of the passages), at its own idf.
    """
    n = len(passages)
    top = max(idf.values(), default=1.0)
    rare_limit = max(2, int(RARE_SHARE * n))
    names: dict[str, list[int]] = defaultdict(list)
    tokens: dict[str, list[int]] = defaultdict(list)
    for i, passage in enumerate(passages):
        for name in passage.names:
            names[name].append(i)
        for token in passage.tokens - question.tokens:
            tokens[token].append(i)
    columns = [
        (members, 1.0)
        for name, members in names.items()
        if len(members) >= 2 and f" {name} " not in question.padded_text
    ]
    columns += [
        (members, idf.get(token, 0.0) / top)
        for token, members in tokens.items()
        if 2 <= len(members) <= rare_limit
    ]
    pairs = [(i, j, w) for members, w in columns for i, j in combinations(members, 2)]
    links = np.zeros((n, n))
    if pairs:
        first, second, weights = zip(*pairs, strict=True)
        np.add.at(links, (np.array(first), np.array(second)), np.array(weights))
    symmetric: Matrix = links + links.T
    return symmetric


def _question_incidence(
    passages: Sequence[PassageTerms], question_idf: dict[str, float]
) -> tuple[Matrix, Vector]:
    """Which question terms each passage holds, and each term's share of the question's idf."""
    terms = sorted(question_idf)
    total = sum(question_idf.values()) or 1.0
    incidence = np.array(
        [[float(t in p.tokens) for t in terms] for p in passages], dtype=np.float64
    ).reshape(len(passages), len(terms))
    return incidence, np.array([question_idf[t] / total for t in terms], dtype=np.float64)
