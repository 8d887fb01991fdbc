"""One retrieval drawn as a self-contained HTML page: question, rounds, seeds, terms, ranking.

The page shows the chain SAG2 followed: the round-0 BM25 candidates and their judge scores,
then for each expansion round the seeds, the expansion terms chosen from them, the passages
each term brought in (drawn as an inline SVG: seed -> term -> passage), every judged unit's
score, and finally the ranking. Gold passages are marked when known. Everything is inline
(CSS and SVG, no script, no external resource), and every piece of text is HTML-escaped.
"""

from __future__ import annotations

import html
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from .backends.base import LexicalBackend
from .documents import Unit
from .output_files import write_html_atomically
from .results import RetrievalResult, RoundTrace

SNIPPET_CHARS = 160
SHOWN_ROWS = 10  # judged rows shown per round before the rest is folded
ROW_HEIGHT = 22
# Chain picture: three columns of labels, each cut to LABEL_CHARS (about LABEL_WIDTH pixels).
COLUMN_X = (8, 300, 600)
LABEL_CHARS = 34
LABEL_WIDTH = 225
PICTURE_WIDTH = 900

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5rem; color: #1d2330; }
h1 { font-size: 1.3rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
.question { font-size: 1.15rem; background: #eef3fb; padding: .6rem .9rem; border-radius: 6px; }
.meta { color: #5a6475; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0; }
th, td { text-align: left; padding: .2rem .5rem; border-bottom: 1px solid #e3e7ee; }
td { vertical-align: top; }
.score { width: 9rem; white-space: nowrap; }
.bar { display: inline-block; height: .7rem; background: #4c7bd9; margin-right: .4rem; }
.seed { font-weight: 600; }
.gold td:first-child::before, li.gold::before { content: "\\2605 "; color: #c98a00; }
.gold { background: #fff7df; }
.terms li { margin: .15rem 0; }
.term-name { font-family: ui-monospace, monospace; background: #f1f1f6; padding: 0 .25rem; }
svg.chain { border: 1px solid #e3e7ee; border-radius: 6px; background: #fbfcfe; }
svg.chain text { font: 12px system-ui, sans-serif; }
svg.chain .link { stroke: #9fb4dd; stroke-width: 1.2; }
svg.chain .gold-node { fill: #c98a00; font-weight: 600; }
details summary { cursor: pointer; }
"""


@dataclass(frozen=True)
class TracePage:
    """What a trace page draws: the result, its units' text and terms, and the gold units."""

    result: RetrievalResult
    units: Mapping[int, Unit]
    unit_terms: Mapping[int, Collection[str]]
    gold_units: frozenset[int] = frozenset()
    judge: str = ""


def write_trace_html(
    path: str | os.PathLike[str],
    result: RetrievalResult,
    index: LexicalBackend,
    *,
    gold: Collection[str] = (),
    judge: str = "",
) -> None:
    """Render ``result`` against ``index`` and write the page to ``path`` whole, refusing to
    replace a file that is not an HTML page (the index named by mistake).

    ``gold`` holds gold passage identities (``title + "\\n" + text``, as in evaluation) or
    gold document ids; units matching either are marked.
    """
    write_html_atomically(path, render_trace_html(trace_page(result, index, gold, judge)))


def trace_page(
    result: RetrievalResult, index: LexicalBackend, gold: Collection[str] = (), judge: str = ""
) -> TracePage:
    """Read from the index the units every round of the result names, and their terms."""
    unit_ids = {u for trace in result.trace for u in (*trace.pool, *trace.new_candidates)}
    unit_ids.update(hit.unit_id for hit in result.units)
    units = index.units(unit_ids)
    sentences = index.expansion_units(list(units))
    unit_terms = {u: {t for sentence in sentences.get(u, []) for t in sentence} for u in units}
    gold_set = set(gold)
    gold_units = frozenset(
        u
        for u, unit in units.items()
        if unit.doc_id in gold_set or f"{unit.title}\n{unit.body}" in gold_set
    )
    return TracePage(result, units, unit_terms, gold_units, judge)


def render_trace_html(page: TracePage) -> str:
    """The whole HTML document of one retrieval's trace."""
    result = page.result
    sections = [_round_section(page, trace) for trace in result.trace]
    body = [
        "<h1>SAG2 retrieval trace</h1>",
        f'<p class="question" id="question">{_e(result.question)}</p>',
        f'<p class="meta" id="summary">{_e(_summary(page))}</p>',
        _contents(result.trace),
        _final_section(page),
        *sections,
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>SAG2 trace: {_e(result.question[:80])}</title>"
        f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _contents(traces: Sequence[RoundTrace]) -> str:
    """Links to the final ranking and to each round, so a long page is one click deep."""
    links = ['<a href="#final">Final ranking</a>'] + [
        f'<a href="#round-{trace.round}">Round {trace.round}</a>' for trace in traces
    ]
    return f'<nav id="contents">{" &middot; ".join(links)}</nav>'


def _summary(page: TracePage) -> str:
    """One line: judge, rounds, judgments and why the retrieval stopped."""
    result = page.result
    judge = f"judge {page.judge}; " if page.judge else ""
    return (
        f"{judge}{len(result.trace)} rounds, {result.judgments} judgments, "
        f"stopped: {result.stop_reason}"
        + ("; the judge failed, lexical order shown" if result.degraded else "")
    )


def _round_section(page: TracePage, trace: RoundTrace) -> str:
    """A round: (for expansions) seeds, terms and the chain picture, then the judged pool."""
    parts = [
        f'<section class="round" id="round-{trace.round}" data-round="{trace.round}">',
        f"<h2>Round {trace.round}: {_e(_round_title(trace))}</h2>",
    ]
    if trace.seeds:
        parts.append(_seeds_list(page, trace))
        parts.append(_terms_list(page, trace))
        parts.append(_chain_svg(page, trace))
    parts.append(_pool_table(page, trace))
    parts.append("</section>")
    return "\n".join(parts)


def _round_title(trace: RoundTrace) -> str:
    """What the round judged, in words."""
    if not trace.seeds:
        return f"{trace.judgments} BM25 candidates judged without context"
    return (
        f"{len(trace.seeds)} seeds, {len(trace.terms)} terms, "
        f"{len(trace.new_candidates)} new passages; {trace.judgments} judged with "
        f"{trace.context_size} in context"
    )


def _seeds_list(page: TracePage, trace: RoundTrace) -> str:
    """The round's seeds, by title."""
    items = [
        f'<li class="seed{_gold_class(page, u)}" data-unit="{u}">{_e(_title(page, u))}</li>'
        for u in trace.seeds
    ]
    return f'<h3>Seeds</h3><ol class="seeds">{"".join(items)}</ol>'


def _terms_list(page: TracePage, trace: RoundTrace) -> str:
    """Each expansion term with its priority and the new passages it links to."""
    items = []
    for term, priority in trace.terms:
        brought = [_e(_title(page, u)) for u in _linked(page, term, trace.new_candidates)]
        items.append(
            f'<li class="term" data-term="{_e(term)}"><span class="term-name">{_e(term)}</span> '
            f"({priority:.2f}) &rarr; {', '.join(brought) if brought else 'no new passage'}</li>"
        )
    return f'<h3>Expansion terms</h3><ul class="terms">{"".join(items)}</ul>'


def _linked(page: TracePage, term: str, unit_ids: Sequence[int]) -> list[int]:
    """The units whose stored terms contain ``term`` (as a whole term or inside a name)."""
    padded = f" {term} "
    return [
        u for u in unit_ids if any(padded in f" {stored} " for stored in page.unit_terms.get(u, ()))
    ]


def _chain_svg(page: TracePage, trace: RoundTrace) -> str:
    """Seeds (left) -> terms (middle) -> new passages (right), a line for every link."""
    terms = [term for term, _ in trace.terms]
    new = list(trace.new_candidates)
    seeds = list(trace.seeds)
    height = ROW_HEIGHT * (max(len(seeds), len(terms), len(new), 1) + 1)
    columns: tuple[Sequence[int | str], ...] = (seeds, terms, new)
    lines = [
        _svg_label(page, column, row, label)
        for column, labels in enumerate(columns)
        for row, label in enumerate(labels)
    ]
    for t_row, term in enumerate(terms):
        for s_row in _rows(_linked(page, term, seeds), seeds):
            lines.append(_svg_link(0, s_row, 1, t_row))
        for n_row in _rows(_linked(page, term, new), new):
            lines.append(_svg_link(1, t_row, 2, n_row))
    return (
        '<svg class="chain" xmlns="http://www.w3.org/2000/svg" '
        f'width="{PICTURE_WIDTH}" height="{height}" '
        f'role="img" aria-label="seeds, terms and new passages of round {trace.round}">'
        + "".join(lines)
        + "</svg>"
    )


def _rows(linked: Sequence[int], column: Sequence[int]) -> list[int]:
    """The row numbers of the linked units in a column."""
    positions = {unit: row for row, unit in enumerate(column)}
    return [positions[u] for u in linked]


def _svg_label(page: TracePage, column: int, row: int, label: int | str) -> str:
    """One node of the chain picture: a unit's title or a term."""
    y = ROW_HEIGHT * (row + 1)
    if isinstance(label, str):
        text, css, kind = label, "term-node", "term"
    else:
        text, kind = _title(page, label), "unit"
        css = "gold-node" if label in page.gold_units else "unit-node"
    shown = text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "\u2026"
    return (
        f'<text x="{COLUMN_X[column]}" y="{y}" class="{css}" data-kind="{kind}">'
        f"<title>{_e(text)}</title>{_e(shown)}</text>"
    )


def _svg_link(from_column: int, from_row: int, to_column: int, to_row: int) -> str:
    """A line from the end of one node's label to the start of the next column's node."""
    x1 = COLUMN_X[from_column] + LABEL_WIDTH
    x2 = COLUMN_X[to_column] - 8
    y1 = ROW_HEIGHT * (from_row + 1) - 4
    y2 = ROW_HEIGHT * (to_row + 1) - 4
    return f'<line class="link" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}"/>'


def _pool_table(page: TracePage, trace: RoundTrace) -> str:
    """Every unit judged this round, best first, with its score as a number and a bar."""
    scored = sorted(zip(trace.pool, trace.scores, strict=True), key=lambda p: (-p[1], p[0]))
    new = set(trace.new_candidates)
    rows = [
        f'<tr class="judged{_gold_class(page, u)}" data-unit="{u}" data-score="{score:.4f}">'
        f'<td>{rank}</td><td class="score">{_bar(score)}{score:.3f}</td>'
        f"<td>{'new' if u in new else 'again'}</td><td>{_passage(page, u)}</td></tr>"
        for rank, (u, score) in enumerate(scored, start=1)
    ]
    head = "<thead><tr><th>#</th><th>score</th><th></th><th>passage</th></tr></thead>"
    table = f'<h3>Judge scores</h3><table class="pool">{head}<tbody>{"".join(rows[:SHOWN_ROWS])}'
    if len(rows) <= SHOWN_ROWS:
        return table + "</tbody></table>"
    # The long tail is folded: one row per judged passage stays, for search and for counts.
    return (
        f'{table}</tbody></table><details class="tail"><summary>{len(rows) - SHOWN_ROWS} '
        f'more judged passages</summary><table class="pool">{head}<tbody>'
        f"{''.join(rows[SHOWN_ROWS:])}</tbody></table></details>"
    )


def _final_section(page: TracePage) -> str:
    """The final ranking of source documents."""
    items = [
        f'<li class="hit{_gold_class(page, hit.unit_id)}" data-unit="{hit.unit_id}" '
        f'data-doc="{_e(hit.doc_id)}">{hit.score:.3f} &middot; round {hit.round_found} &middot; '
        f"{_passage(page, hit.unit_id)}</li>"
        for hit in page.result.hits
    ]
    return (
        '<section id="final"><h2>Final ranking</h2>'
        f'<ol class="final">{"".join(items) or "<li>nothing retrieved</li>"}</ol></section>'
    )


def _passage(page: TracePage, unit_id: int) -> str:
    """A unit's title and a snippet, the full text folded away."""
    unit = page.units.get(unit_id)
    if unit is None:
        return f"<em>unit {unit_id} (deleted)</em>"
    snippet = unit.body if len(unit.body) <= SNIPPET_CHARS else unit.body[:SNIPPET_CHARS] + "..."
    where = unit.heading or f"characters {unit.char_start:,}-{unit.char_end:,}"
    return (
        f"<details><summary><strong>{_e(unit.title or unit.doc_id)}</strong> "
        f'<span class="where">({_e(where)})</span> {_e(snippet)}</summary>{_e(unit.body)}'
        "</details>"
    )


def _title(page: TracePage, unit_id: int) -> str:
    """A unit's title, else its document id, else its number."""
    unit = page.units.get(unit_id)
    return (unit.title or unit.doc_id) if unit is not None else f"unit {unit_id}"


def _gold_class(page: TracePage, unit_id: int) -> str:
    """`` gold`` for a gold unit's class attribute."""
    return " gold" if unit_id in page.gold_units else ""


def _bar(score: float) -> str:
    """A score bar, 0-5rem wide."""
    return f'<span class="bar" style="width:{5 * score:.2f}rem"></span>'


def _e(text: str) -> str:
    """HTML-escape text for element content and quoted attributes."""
    return html.escape(text, quote=True)
