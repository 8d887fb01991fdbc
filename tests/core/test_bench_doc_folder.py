"""benchmarks/quality/doc_folder.py scores what it claims: copies of an answer file count as it,
questions without an answer file here are skipped and counted, recall and drops add up."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks" / "quality"
MIT = "Quokka is distributed under the MIT license; see the file LICENSE."


@pytest.fixture
def doc_folder() -> Iterator[ModuleType]:
    """benchmarks/quality/doc_folder.py, imported as the benchmarks import their helpers."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("doc_folder")
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Two packages sharing one copyright text, and a README."""
    docs = tmp_path / "doc"
    for path, text in [
        ("quokka/copyright", MIT),
        ("quokka-data/copyright", MIT),
        ("wombat/README", "Wombat is a terminal multiplexer that keeps sessions running."),
    ]:
        (docs / path).parent.mkdir(parents=True, exist_ok=True)
        (docs / path).write_text(text)
    return docs


def test_copies_of_an_answer_file_count_as_that_answer(
    doc_folder: ModuleType, folder: Path
) -> None:
    identities = doc_folder.Identities(folder)
    assert identities.of("quokka/copyright") == identities.of("quokka-data/copyright")
    assert identities.of("quokka/copyright") != identities.of("wombat/README")
    assert identities.of("quokka/LICENSE") == "quokka/LICENSE"


def test_questions_without_an_answer_file_here_are_skipped(
    doc_folder: ModuleType, folder: Path, tmp_path: Path
) -> None:
    records = [
        {"question": "What is wombat?", "answers": ["wombat/README", "wombat/FAQ"]},
        {"question": "What is numbat?", "answers": ["numbat/README"]},
    ]
    path = tmp_path / "questions.json"
    path.write_text(json.dumps([{**record, "folder": str(folder)} for record in records]))
    questions, skipped = doc_folder.load_questions(path)
    assert skipped == 1
    assert [question.answers for question in questions] == [("wombat/README",)]


def test_the_report_adds_up_recall_drops_and_times(
    doc_folder: ModuleType, folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [
        {"question": "Which license covers quokka?", "answers": ["quokka-data/copyright"]},
        {"question": "What is wombat?", "answers": ["wombat/README"]},
    ]
    questions, out = tmp_path / "questions.json", tmp_path / "report.json"
    questions.write_text(json.dumps([{**record, "folder": str(folder)} for record in records]))
    argv = ["--questions", str(questions), "--judges", "fake", "--out", str(out)]
    assert doc_folder.main(argv) == 0
    totals = json.loads(out.read_text())["summary"]
    assert totals["questions"] == 2 and totals["bm25_r10"] == 100.0
    fake = totals["judges"]["fake"]
    assert fake["sag2_r10"] == 100.0 and fake["dropped"] == 0
    assert fake["median_vs_fake"] == 1.0 and fake["median_ms"] > 0
    assert "| fake | 100.0 | 100.0 | 0 (0.0%) |" in capsys.readouterr().out
