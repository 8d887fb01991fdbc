"""`sag2_retrievers.testing`: a fake JEV over a transport or a 127.0.0.1 server, and the pytest
examples of both integration READMEs run as written (issue 23, item 11)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sag2_retrievers import Document, SAG2Engine, SQLiteIndex
from sag2_retrievers.errors import JudgeError
from sag2_retrievers.testing import FakeJEVServer, NoulQuestion, fake_jev_judge

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {
    "langchain": ROOT / "integrations" / "langchain-sag2" / "README.md",
    "llama-index": ROOT / "integrations" / "llama-index-retrievers-sag2" / "README.md",
}
_TEST_BLOCK = re.compile(r"^```python\n(# test_\w+\.py\n.*?)^```", re.MULTILINE | re.DOTALL)


@pytest.fixture
def index(tmp_path: Path) -> SQLiteIndex:
    """Two passages: one names the province, one only the festival."""
    index = SQLiteIndex(tmp_path / "i.sqlite")
    index.add_documents(
        [
            Document("varna", "Port Varna lies in Ostrel.", "Port Varna"),
            Document("festival", "Port Varna hosts the Lantern Festival.", "Lantern Festival"),
        ],
        parallel=False,
    )
    return index


def by_title(candidate: NoulQuestion) -> float:
    """Prefer the festival, so the ranking differs from BM25's."""
    return 0.9 if candidate.title == "Lantern Festival" else 0.2


def test_the_transport_judge_scores_through_jev_with_the_given_function(
    index: SQLiteIndex,
) -> None:
    judge = fake_jev_judge(by_title)
    result = SAG2Engine(index, judge).retrieve("Which province is Port Varna in?", top_k=2)
    assert result.hits[0].doc_id == "festival"
    assert [round(hit.score, 3) for hit in result.hits] == [0.9, 0.2]
    assert judge.identity.startswith("jev:")


def test_the_server_answers_a_judge_given_only_its_url(index: SQLiteIndex) -> None:
    asked: list[NoulQuestion] = []

    def recording(candidate: NoulQuestion) -> float:
        asked.append(candidate)
        return by_title(candidate)

    with FakeJEVServer(recording) as server:
        assert server.url.startswith("http://127.0.0.1:")
        result = SAG2Engine(index, server.judge()).retrieve(
            "Which province is Port Varna in?", top_k=2
        )
    assert result.hits[0].doc_id == "festival" and server.requests >= 1
    assert {candidate.question for candidate in asked} == {"Which province is Port Varna in?"}


def test_a_score_outside_zero_to_one_fails_the_judgment(index: SQLiteIndex) -> None:
    judge = fake_jev_judge(lambda candidate: 7.0, max_attempts=1)
    with pytest.raises((JudgeError, ValueError)):
        SAG2Engine(index, judge).retrieve("Which province is Port Varna in?", top_k=2)


@pytest.mark.parametrize("framework", sorted(EXAMPLES))
def test_the_readme_pytest_example_runs_and_passes(framework: str) -> None:
    pytest.importorskip("langchain_core" if framework == "langchain" else "llama_index.core")
    (example,) = _TEST_BLOCK.findall(EXAMPLES[framework].read_text())
    namespace: dict[str, Any] = {"__name__": f"readme_{framework}"}
    exec(compile(example, f"{framework} README example", "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert len(tests) == 2
    for test in tests:
        test()
