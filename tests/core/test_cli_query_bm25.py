"""`sag2 query --method bm25`: the index's own BM25 ranking of unique source documents, in the
same output shapes as SAG2's, with no judge built or claimed (issue 30)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sag2_retrievers import Document, SQLiteIndex
from sag2_retrievers.cli import main
from sag2_retrievers.cli import query as query_command

QUESTION = "Which license covers the quokka daemon?"
# Long enough to be cut into several units, so one source document holds several matches.
MANUAL = " ".join(
    f"Section {n}: the quokka daemon reads quokka.conf and logs to syslog." for n in range(120)
)


@pytest.fixture
def db(tmp_path: Path) -> str:
    """Packages whose files match the question to different degrees, one of them long."""
    path = str(tmp_path / "docs.sqlite")
    documents = [
        Document("quokka/copyright", "The quokka daemon is free software under the MIT license."),
        Document("quokka/manual", MANUAL),
        Document("wombat/copyright", "The wombat tools are distributed under the GPL license."),
        Document("numbat/README", "Numbat counts termites; see the license file."),
        Document("echidna/README", "Echidna has no daemon and no configuration."),
    ]
    with SQLiteIndex(path) as index:
        index.add_documents(documents, parallel=False)
    return path


@pytest.fixture(autouse=True)
def _no_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building a judge fails the test: BM25 needs none."""

    def refuse(*_: Any) -> None:
        raise AssertionError("sag2 query --method bm25 built a judge")

    monkeypatch.setattr(query_command, "chosen_judge", refuse)


def bm25_json(db: str, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    """The --json output of one BM25 query."""
    assert main(["query", "--db", db, QUESTION, "--method", "bm25", "--json", *extra]) == 0
    payload: dict[str, Any] = json.loads(capsys.readouterr().out)
    return payload


def index_order(db: str, top_k: int) -> list[str]:
    """The index's own BM25 ranking, reduced to each source document's first unit."""
    with SQLiteIndex(db, create=False) as index:
        hits = index.search(QUESTION)
    return list(dict.fromkeys(hit.doc_id for hit in hits))[:top_k]


def test_the_order_is_the_index_bm25_ranking_of_unique_sources(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    doc_ids = [hit["doc_id"] for hit in bm25_json(db, capsys)["hits"]]
    assert doc_ids == index_order(db, 10)
    assert len(doc_ids) == len(set(doc_ids)) and "quokka/manual" in doc_ids


def test_top_k_cuts_the_same_ranking(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    hits = bm25_json(db, capsys, "--top-k", "2")["hits"]
    assert [hit["doc_id"] for hit in hits] == index_order(db, 2)
    assert [hit["rank"] for hit in hits] == [1, 2]


def test_json_names_the_method_and_no_judge_or_rounds(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    payload = bm25_json(db, capsys)
    assert payload["method"] == "bm25" and payload["judge"] is None
    assert payload["judgments"] == 0 and payload["trace"] == []
    first = payload["hits"][0]
    assert {"rank", "score", "round_found", "title", "doc_id", "text", "metadata"} <= set(first)
    assert first["round_found"] == 0 and first["score"] > 0


def test_text_output_claims_no_judge(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "--db", db, QUESTION, "--method", "bm25"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("method: bm25, the index's BM25 ranking alone (no judge")
    assert "judge:" not in out and "judgments" not in out
    assert "1. [" in out and "BM25 score" in out


def test_a_question_without_a_match_is_explained(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["query", "--db", db, "platypus", "--method", "bm25"]) == 0
    assert "no evidence found: no indexed passage shares a term" in capsys.readouterr().out


@pytest.mark.parametrize("option", [["--trace"], ["--trace-html", "trace.html"]])
def test_a_trace_with_bm25_is_a_usage_error(
    db: str, option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["query", "--db", db, QUESTION, "--method", "bm25", *option]) == 2
    err = capsys.readouterr().err
    assert "usage" in err and "need --method sag2" in err
