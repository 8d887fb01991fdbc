"""The HTML trace page: its structure, its escaping, the CLI options, and a headless render."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sag2_retrievers import Document, RetrievalResult, SAG2Engine, SQLiteIndex
from sag2_retrievers.cli import main
from sag2_retrievers.eval.datasets import EvalQuestion
from sag2_retrievers.eval.runner import EvalOptions, evaluate
from sag2_retrievers.judges.base import Candidate, JudgeRequest
from sag2_retrievers.judges.fakes import ScriptedJudge
from sag2_retrievers.trace_html import render_trace_html, trace_page, write_trace_html

QUESTION = "In which country was the composer of Moonlight Waltz born?"
CORPUS = [
    Document(
        "waltz", "Moonlight Waltz is a piece composed by Arvid Lind in 1901.", "Moonlight Waltz"
    ),
    Document("lind", "Arvid Lind was a composer born in Uppsala.", "Arvid Lind"),
    Document("uppsala", "Uppsala is a city in Sweden with an old cathedral.", "Uppsala"),
    Document("march", "Sunrise March is a piece composed by Clara Holm.", "Sunrise March"),
    Document("hostile", 'A piece <script>alert(1)</script> & "quotes".', "<b>Tag</b> title"),
]


class Element:
    """One parsed element: its tag, attributes, text inside it and children."""

    def __init__(self, tag: str, attributes: dict[str, str | None]) -> None:
        self.tag = tag
        self.attributes = attributes
        self.text = ""
        self.children: list[Element] = []

    @property
    def classes(self) -> set[str]:
        """The element's CSS classes."""
        return set((self.attributes.get("class") or "").split())

    def find_all(self, tag: str, css_class: str | None = None) -> list[Element]:
        """Every descendant with the tag (and class, when given), in document order."""
        found = []
        for child in self.children:
            if child.tag == tag and (css_class is None or css_class in child.classes):
                found.append(child)
            found.extend(child.find_all(tag, css_class))
        return found


class TreeBuilder(HTMLParser):
    """A small DOM from the standard library's HTML parser (void elements closed at once)."""

    VOID = frozenset({"meta", "br", "img", "link", "input", "hr", "line"})

    def __init__(self) -> None:
        super().__init__()
        self.root = Element("#document", {})
        self.stack = [self.root]
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs))
        self.tags.append(tag)
        self.stack[-1].children.append(element)
        if tag not in self.VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.stack[-1].children.append(Element(tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID:
            return
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        for element in self.stack:
            element.text += data


def parse(page: str) -> TreeBuilder:
    """Parse a page, checking that every element is closed."""
    builder = TreeBuilder()
    builder.feed(page)
    builder.close()
    assert [e.tag for e in builder.stack] == ["#document"]
    return builder


def lind_first(request: JudgeRequest, candidate: Candidate) -> float:
    """A judge that follows the composer chain and dislikes the rest."""
    chain = {"Moonlight Waltz": 0.95, "Arvid Lind": 0.9, "Uppsala": 0.8}
    return chain.get(candidate.title, 0.1)


@pytest.fixture
def index(tmp_path: Path) -> SQLiteIndex:
    """The composer corpus plus a passage with markup in its title and text."""
    opened = SQLiteIndex(tmp_path / "trace.db")
    opened.add_documents(CORPUS)
    return opened


@pytest.fixture
def result(index: SQLiteIndex) -> RetrievalResult:
    """A two-hop retrieval over the corpus."""
    engine = SAG2Engine(index, ScriptedJudge(lind_first))
    retrieved = engine.retrieve(QUESTION, top_k=5)
    engine.close()
    return retrieved


def test_page_draws_every_round_with_its_seeds_terms_and_scores(
    index: SQLiteIndex, result: RetrievalResult
) -> None:
    """One section per round; expansion rounds list seeds, terms and a chain picture."""
    tree = parse(render_trace_html(trace_page(result, index))).root
    sections = tree.find_all("section", "round")
    assert [s.attributes["data-round"] for s in sections] == [str(t.round) for t in result.trace]
    assert len(sections) >= 2
    for section, trace in zip(sections, result.trace, strict=True):
        rows = section.find_all("tr", "judged")
        assert len(rows) == trace.judgments
        scores = [float(row.attributes["data-score"] or "nan") for row in rows]
        assert scores == sorted(scores, reverse=True)
    expansion = sections[1]
    seeds = expansion.find_all("li", "seed")
    assert [int(s.attributes["data-unit"] or 0) for s in seeds] == list(result.trace[1].seeds)
    terms = [t.attributes["data-term"] for t in expansion.find_all("li", "term")]
    assert terms == [term for term, _ in result.trace[1].terms]
    assert expansion.find_all("svg", "chain") and expansion.find_all("line", "link")


def test_terms_show_the_passages_they_brought_in(
    index: SQLiteIndex, result: RetrievalResult
) -> None:
    """A term names the new passages whose text contains it."""
    tree = parse(render_trace_html(trace_page(result, index))).root
    terms = {t.attributes["data-term"]: t.text for t in tree.find_all("li", "term") if t.attributes}
    linked = {term: text for term, text in terms.items() if "no new passage" not in text}
    assert linked, terms
    for term, text in linked.items():
        assert term is not None and any(word in text for word in ("Uppsala", "Lind", "Sunrise"))


def test_final_ranking_lists_the_hits_and_marks_gold(
    index: SQLiteIndex, result: RetrievalResult
) -> None:
    """Gold given by identity or by document id is marked wherever the unit appears."""
    gold = ["Uppsala\nUppsala is a city in Sweden with an old cathedral.", "lind"]
    tree = parse(render_trace_html(trace_page(result, index, gold))).root
    hits = tree.find_all("li", "hit")
    assert [h.attributes["data-doc"] for h in hits] == [hit.doc_id for hit in result.hits]
    gold_docs = {h.attributes["data-doc"] for h in hits if "gold" in h.classes}
    assert gold_docs == {"uppsala", "lind"} & {hit.doc_id for hit in result.hits}
    assert gold_docs
    assert all("gold" not in h.classes for h in hits if h.attributes["data-doc"] == "waltz")


def test_all_text_is_escaped_and_the_page_is_self_contained(
    index: SQLiteIndex, result: RetrievalResult
) -> None:
    """Markup in passages stays text; there is no script, stylesheet link or remote URL."""
    hostile = result.question + " <img src=x onerror=alert(1)>"
    page = render_trace_html(
        trace_page(RetrievalResult(hostile, *_rest(result)), index, judge="<judge>")
    )
    builder = parse(page)
    assert "script" not in builder.tags and "img" not in builder.tags and "b" not in builder.tags
    assert "link" not in builder.tags and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page or "hostile" not in {
        hit.doc_id for hit in result.units
    }
    question = next(e for e in builder.root.find_all("p") if e.attributes.get("id") == "question")
    assert question.text == hostile


def _rest(result: RetrievalResult) -> tuple[object, ...]:
    """A result's fields after the question, to rebuild it with another question."""
    return (
        result.hits,
        result.units,
        result.trace,
        result.usage,
        result.stop_reason,
        result.degraded,
    )


def test_write_trace_html_writes_utf8(
    tmp_path: Path, index: SQLiteIndex, result: RetrievalResult
) -> None:
    """The file is the rendered page in UTF-8."""
    path = tmp_path / "trace.html"
    write_trace_html(path, result, index, judge="scripted")
    text = path.read_text("utf-8")
    assert text.startswith("<!DOCTYPE html>") and "judge scripted" in text


# -- the command line ------------------------------------------------------------------------


def test_query_trace_html_option_writes_the_page(tmp_path: Path, index: SQLiteIndex) -> None:
    """`sag2 query --trace-html FILE` writes the page next to its usual output."""
    out = tmp_path / "pages" / "q.html"
    argv = ["query", QUESTION, "--db", str(index.path), "--judge", "fake", "--quiet"]
    assert main([*argv, "--trace-html", str(out)]) == 0
    tree = parse(out.read_text("utf-8")).root
    assert tree.find_all("section", "round") and tree.find_all("ol", "final")


def test_eval_trace_html_writes_one_page_per_question_with_gold(tmp_path: Path) -> None:
    """`sag2 eval --trace-html DIR` writes a page per question, its gold passages marked."""
    paragraphs = [
        {"idx": n, "title": d.title, "paragraph_text": d.text, "is_supporting": n < 3}
        for n, d in enumerate(CORPUS[:4])
    ]
    questions = tmp_path / "questions.json"
    questions.write_text(
        json.dumps([{"id": "2hop/a b", "question": QUESTION, "paragraphs": paragraphs}])
    )
    traces = tmp_path / "traces"
    argv = ["eval", str(questions), "--db", str(tmp_path / "pool.db"), "--method", "sag2"]
    assert main([*argv, "--judge", "fake", "--quiet", "--trace-html", str(traces)]) == 0
    pages = sorted(traces.iterdir())
    assert [p.name for p in pages] == ["0001-2hop_a_b.html"]
    tree = parse(pages[0].read_text("utf-8")).root
    gold_rows = [row for row in tree.find_all("tr") if "gold" in row.classes]
    assert gold_rows


def test_eval_trace_html_needs_the_sag2_method(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """BM25 has no rounds to draw: a usage error."""
    argv = ["eval", str(tmp_path / "q.json"), "--db", str(tmp_path / "x.db"), "--method", "bm25"]
    assert main([*argv, "--trace-html", str(tmp_path / "t")]) == 2
    assert "--trace-html needs --method sag2" in capsys.readouterr().err


# -- a real browser ----------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BROWSER_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_headless_chromium_renders_the_chain(
    tmp_path: Path, index: SQLiteIndex, result: RetrievalResult
) -> None:
    """Chromium loads the page offline: its DOM has every round, and it screenshots it."""
    assert CHROMIUM is not None
    page = tmp_path / "trace.html"
    write_trace_html(page, result, index, gold=["lind"])
    profile = ["--user-data-dir=" + str(tmp_path / "profile")]
    dom = subprocess.run(
        [CHROMIUM, *BROWSER_FLAGS, *profile, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    tree = parse(dom).root
    assert len(tree.find_all("section", "round")) == len(result.trace)
    assert tree.find_all("svg", "chain") and tree.find_all("li", "hit")
    shot = tmp_path / "trace.png"
    window = ["--window-size=1000,1400", f"--screenshot={shot}"]
    subprocess.run(
        [CHROMIUM, *BROWSER_FLAGS, *profile, *window, page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    _keep_artifacts(page, shot)


def _keep_artifacts(*files: Path) -> None:
    """Copy files to $SAG2_ARTIFACT_DIR when CI sets it, so a person can look at the page."""
    directory = os.environ.get("SAG2_ARTIFACT_DIR")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        for file in files:
            shutil.copy(file, Path(directory) / file.name)


def test_eval_keeps_retrievals_only_when_asked(tmp_path: Path, index: SQLiteIndex) -> None:
    """Without keep_retrievals an evaluation holds no full results (memory on big runs)."""
    question = EvalQuestion("q1", QUESTION, ("lind",), 2, ())
    judge = ScriptedJudge(lind_first)
    kept, dropped = (
        asyncio.run(evaluate(index, [question], judge, EvalOptions(keep_retrievals=keep)))
        for keep in (True, False)
    )
    assert kept.runs[0].retrieval is not None and kept.runs[0].retrieval.trace
    assert dropped.runs[0].retrieval is None


# -- a page that reads from the top (issue 23, item 9) ----------------------------------------


def test_the_final_ranking_comes_first_with_links_to_every_round(
    index: SQLiteIndex, result: RetrievalResult
) -> None:
    page = render_trace_html(trace_page(result, index))
    assert page.index('id="final"') < page.index('id="round-0"')
    links = [a.attributes["href"] for a in parse(page).root.find_all("a")]
    assert links == ["#final", *(f"#round-{trace.round}" for trace in result.trace)]


def test_a_long_round_shows_ten_rows_and_folds_the_rest(tmp_path: Path) -> None:
    with SQLiteIndex(tmp_path / "long.db") as index:
        index.add_documents(
            [Document(f"d{n}", f"Quokka note number {n} on islands.") for n in range(25)],
            parallel=False,
        )
        engine = SAG2Engine(index, ScriptedJudge(lambda request, candidate: 0.5))
        result = engine.retrieve("quokka islands", top_k=5)
        engine.close()
        tree = parse(render_trace_html(trace_page(result, index))).root
    first = tree.find_all("section", "round")[0]
    (tail,) = [d for d in first.find_all("details") if "tail" in d.classes]
    folded = tail.find_all("tr", "judged")
    assert len(first.find_all("tr", "judged")) == result.trace[0].judgments == 10 + len(folded)
    assert f"{len(folded)} more judged passages" in tail.text


def test_each_passage_is_labelled_by_its_heading_or_its_offsets(tmp_path: Path) -> None:
    with SQLiteIndex(tmp_path / "h.db") as index:
        index.add_documents(
            [
                Document("guide", "# Pumps\n\n## Wiring\n\nConnect the red pump wire.", "Guide"),
                Document("plain", "A plain pump note without headings.", "Plain"),
            ],
            parallel=False,
        )
        engine = SAG2Engine(index, ScriptedJudge(lambda request, candidate: 0.5))
        result = engine.retrieve("pump wire", top_k=2)
        engine.close()
        wheres = {
            span.text
            for span in parse(render_trace_html(trace_page(result, index))).root.find_all(
                "span", "where"
            )
        }
    assert "(Pumps > Wiring)" in wheres and "(characters 0-35)" in wheres
