"""The `sag2` command line, run in-process with the fake judge on tiny files."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from sag2_retrievers import SQLiteIndex
from sag2_retrievers.cli import main
from sag2_retrievers.errors import InvalidInputError, JudgeConfigurationError
from sag2_retrievers.eval import Passage
from sag2_retrievers.judges import CachedJudge, JEVJudge, OpenAICompatJudge, OverlapJudge
from sag2_retrievers.judges.factory import default_judge_name, make_judge

PARAGRAPHS = [
    ("Moonlight Waltz", "Moonlight Waltz is a piece composed by Arvid Lind in 1901.", True),
    ("Arvid Lind", "Arvid Lind was a composer born in Uppsala.", True),
    ("Uppsala", "Uppsala is a city in Sweden with an old cathedral.", True),
    ("Sunrise March", "Sunrise March is a piece composed by Clara Holm.", False),
    ("Clara Holm", "Clara Holm was a pianist born in Bergen.", False),
]
RIVER_PARAGRAPHS = [
    ("Zembla", "The capital of Zembla is Onhava.", True),
    ("Onhava", "The Kalix river flows through Onhava.", True),
    ("Kalix", "Kalix is a town with a long river history.", False),
]
COMPOSER_QUESTION = "In which country was the composer of Moonlight Waltz born?"


@pytest.fixture(autouse=True)
def _no_judge_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands never see a real API key, so no test can reach the network."""
    for name in (
        "OPENROUTER_API_KEY",
        "TYPESAFE_API_KEY",
        "SAG2_OPENAI_BASE_URL",
        "SAG2_OPENAI_MODEL",
    ):
        monkeypatch.delenv(name, raising=False)


def _musique(question_id: str, question: str, paragraphs: list[tuple[str, str, bool]]) -> Any:
    """A MuSiQue-shaped question record."""
    return {
        "id": question_id,
        "question": question,
        "paragraphs": [
            {"idx": n, "title": t, "paragraph_text": x, "is_supporting": s}
            for n, (t, x, s) in enumerate(paragraphs)
        ],
    }


@pytest.fixture()
def questions_file(tmp_path: Path) -> Path:
    """Two MuSiQue questions whose pooled paragraphs form the corpus."""
    path = tmp_path / "questions.json"
    records = [
        _musique("3hop1__1_2_3", COMPOSER_QUESTION, PARAGRAPHS),
        _musique("2hop__4_5", "Which river flows through the capital of Zembla?", RIVER_PARAGRAPHS),
    ]
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


@pytest.fixture()
def corpus_file(tmp_path: Path) -> Path:
    """The composer paragraphs as a HippoRAG corpus (a JSON list of {title, text})."""
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps([{"title": t, "text": x} for t, x, _ in PARAGRAPHS]))
    return path


@pytest.fixture()
def db(tmp_path: Path, corpus_file: Path) -> Path:
    """An index built by `sag2 index` from the corpus file."""
    path = tmp_path / "index.db"
    assert main(["index", str(corpus_file), "--db", str(path), "--quiet"]) == 0
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the command and return its exit code, stdout and stderr."""
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- sag2 index


def test_index_json_list_prints_summary(
    tmp_path: Path, corpus_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Indexing reports records, documents, units and bytes, and uses content ids."""
    db = tmp_path / "i.db"
    code, out, _ = _run(["index", str(corpus_file), "--db", str(db)], capsys)
    assert code == 0
    assert "5 records" in out and "5 documents" in out and "5 units" in out and "bytes" in out
    with SQLiteIndex(db) as index:
        assert index.document(Passage("Uppsala", PARAGRAPHS[2][1]).doc_id) is not None


def test_index_title_to_sentences_dict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The HotpotQA corpus shape is accepted."""
    corpus = tmp_path / "hotpot.json"
    corpus.write_text(json.dumps({"Tiber": ["A river.", " It flows."], "Rome": ["A city."]}))
    code, out, _ = _run(["index", str(corpus), "--db", str(tmp_path / "i.db")], capsys)
    assert code == 0 and "2 documents" in out


def test_index_jsonl_keeps_ids_and_metadata_across_batches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """JSONL ids and metadata are stored; small batches commit everything."""
    corpus = tmp_path / "docs.jsonl"
    rows = [
        {"id": f"d{n}", "text": f"Document number {n}.", "metadata": {"n": n}} for n in range(5)
    ]
    corpus.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    db = tmp_path / "i.db"
    code, out, _ = _run(["index", str(corpus), "--db", str(db), "--batch-size", "2"], capsys)
    assert code == 0 and "5 documents" in out
    with SQLiteIndex(db) as index:
        stored = index.document("d3")
        assert stored is not None and stored.metadata == {"n": 3}


def test_index_bad_record_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad line fails with exit 1 and a one-line message naming it, without a traceback."""
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text('{"id": "a", "text": "Fine."}\n{"id": "b", "title": "No text"}\n')
    code, _, err = _run(["index", str(corpus), "--db", str(tmp_path / "i.db")], capsys)
    assert code == 1
    assert "line 2" in err and "text" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_index_chunk_chars_mismatch_is_an_error(
    db: Path, corpus_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Re-opening an index with another unit size fails clearly."""
    code, _, err = _run(
        ["index", str(corpus_file), "--db", str(db), "--chunk-chars", "500"], capsys
    )
    assert code == 1 and "chunk_chars" in err


# -- sag2 query


def test_query_prints_ranked_evidence(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The judge is named; each hit shows its rank, score, round, title and doc id, then a
    text preview."""
    code, out, _ = _run(["query", "--db", str(db), COMPOSER_QUESTION, "--judge", "fake"], capsys)
    assert code == 0
    judge, first = out.splitlines()[:2]
    assert judge.startswith("judge: fake, ")
    assert first.lstrip().startswith("1. [") and "round 0" in first
    assert Passage("Moonlight Waltz", PARAGRAPHS[0][1]).doc_id in out
    assert "judgments" in out


def test_query_trace_shows_seeds_and_terms(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The trace lists every round, and expansion rounds their seeds and terms."""
    argv = ["query", "--db", str(db), COMPOSER_QUESTION, "--judge", "fake", "--trace"]
    code, out, _ = _run(argv, capsys)
    assert code == 0
    assert "round 0:" in out and "round 1:" in out
    assert "seeds:" in out and "terms:" in out and "new passages" in out


def test_query_json_is_machine_readable(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints one object with hits and the trace."""
    argv = [
        "query",
        "--db",
        str(db),
        COMPOSER_QUESTION,
        "--judge",
        "fake",
        "--json",
        "--top-k",
        "3",
    ]
    code, out, _ = _run(argv, capsys)
    assert code == 0
    payload = json.loads(out)
    assert payload["judge"].startswith("fake")
    assert 1 <= len(payload["hits"]) <= 3
    assert {"rank", "score", "round_found", "title", "doc_id", "text"} <= set(payload["hits"][0])
    assert payload["trace"][0]["round"] == 0
    assert payload["judgments"] == sum(r["judgments"] for r in payload["trace"])


def test_query_hops_zero_judges_once(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--hops 0 stops after the initial round."""
    argv = ["query", "--db", str(db), COMPOSER_QUESTION, "--judge", "fake", "--json", "--hops", "0"]
    code, out, _ = _run(argv, capsys)
    assert code == 0 and len(json.loads(out)["trace"]) == 1


def test_query_missing_db_fails_without_creating_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing index is a clear error, and no empty file is left behind."""
    db = tmp_path / "absent.db"
    code, _, err = _run(["query", "--db", str(db), "anything", "--judge", "fake"], capsys)
    assert code == 1
    assert "does not exist" in err and "sag2 index" in err
    assert not db.exists()


def test_query_on_a_file_that_is_not_an_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A non-database file is reported in one line, not with a traceback."""
    db = tmp_path / "notes.db"
    db.write_text("not a database")
    code, _, err = _run(["query", "--db", str(db), "question", "--judge", "fake"], capsys)
    assert code == 1 and "SAG2 index" in err and "Traceback" not in err


def test_query_jev_without_key_names_the_variables(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Asking for JEV without a key says which variables to set."""
    code, _, err = _run(["query", "--db", str(db), "question", "--judge", "jev"], capsys)
    assert code == 1 and "OPENROUTER_API_KEY" in err and "TYPESAFE_API_KEY" in err


# -- sag2 eval


def _eval(
    tmp_path: Path, questions: Path, method: str, name: str, *extra: str
) -> tuple[list[str], Path]:
    """Arguments of an eval run writing its report to tmp_path/name."""
    out = tmp_path / name
    argv = ["eval", str(questions), "--db", str(tmp_path / "pooled.db"), "--method", method]
    return [*argv, "--judge", "fake", "--out", str(out), "--quiet", *extra], out


def _check_report(report: dict[str, Any], method: str) -> None:
    """Every documented key is present and every metric is a percentage."""
    expected = {
        "n_questions", "method", "judge", "config", "recall_at", "ae_at", "index_seconds",
        "index_bytes", "judgments_per_question", "http_calls_per_question", "input_tokens",
        "output_tokens", "cost_usd", "seconds_per_question", "per_question",
    }  # fmt: skip
    assert expected <= set(report)
    assert report["method"] == method and report["n_questions"] == 2
    assert set(report["recall_at"]) == {"1", "2", "5", "10"} and set(report["ae_at"]) == {"10"}
    assert all(0.0 <= v <= 100.0 for v in [*report["recall_at"].values(), report["ae_at"]["10"]])
    assert report["index_bytes"] > 0
    for row in report["per_question"]:
        assert {"id", "hops", "gold_count", "judgments", "R@1", "R@10", "AE@10"} <= set(row)
        assert 0.0 <= row["R@10"] <= 1.0 and len(row["retrieved"]) <= 10


def test_eval_bm25_builds_the_pooled_index(
    tmp_path: Path, questions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a db, eval indexes the pooled paragraphs, times it, and reports BM25."""
    argv, out = _eval(tmp_path, questions_file, "bm25", "bm25.json")
    code, stdout, _ = _run(argv, capsys)
    assert code == 0 and "R@10" in stdout and "AE@10" in stdout
    report = json.loads(out.read_text())
    _check_report(report, "bm25")
    assert report["index_seconds"] > 0 and report["judge"] is None
    assert report["judgments_per_question"] == 0
    with SQLiteIndex(tmp_path / "pooled.db") as index:
        assert index.document_count() == len(PARAGRAPHS) + len(RIVER_PARAGRAPHS)


def test_eval_sag2_reuses_an_existing_index(
    tmp_path: Path, questions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second run reports the existing index's size and no build time."""
    assert main(_eval(tmp_path, questions_file, "bm25", "bm25.json")[0]) == 0
    argv, out = _eval(tmp_path, questions_file, "sag2", "sag2.json", "--hops", "1")
    code, stdout, _ = _run(argv, capsys)
    assert code == 0 and "existing index" in stdout
    report = json.loads(out.read_text())
    _check_report(report, "sag2")
    assert report["index_seconds"] is None
    assert report["config"]["hops"] == 1 and report["judge"].startswith("fake")
    assert report["judgments_per_question"] > 0


def test_eval_no_context_and_limit(
    tmp_path: Path, questions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--no-context turns shared context off; --limit keeps the first questions."""
    argv, out = _eval(tmp_path, questions_file, "sag2", "s.json", "--no-context", "--limit", "1")
    code, _, _ = _run(argv, capsys)
    report = json.loads(out.read_text())
    assert code == 0 and report["n_questions"] == 1
    assert report["config"]["shared_context"] is False


def test_eval_from_a_corpus_file(
    tmp_path: Path, questions_file: Path, corpus_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--corpus indexes that file instead of the pooled paragraphs."""
    argv, _ = _eval(tmp_path, questions_file, "bm25", "b.json", "--corpus", str(corpus_file))
    code, _, _ = _run(argv, capsys)
    assert code == 0
    with SQLiteIndex(tmp_path / "pooled.db") as index:
        assert index.document_count() == len(PARAGRAPHS)


def test_eval_failed_build_leaves_no_index(
    tmp_path: Path, questions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A corpus error while building removes the half-built file, so no later run reuses it."""
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text('{"text": "Fine."}\n{"title": "No text"}\n')
    argv, _ = _eval(tmp_path, questions_file, "bm25", "b.json", "--corpus", str(corpus))
    code, _, err = _run(argv, capsys)
    assert code == 1 and "line 2" in err
    assert not (tmp_path / "pooled.db").exists()


def test_eval_budget_matched_follows_a_previous_run(
    tmp_path: Path, questions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The matched-budget run judges at most each question's earlier SAG2 count."""
    argv, sag2_out = _eval(tmp_path, questions_file, "sag2", "sag2.json")
    assert main(argv) == 0
    argv, out = _eval(
        tmp_path, questions_file, "sag2", "matched.json", "--budget-matched", str(sag2_out)
    )
    code, _, _ = _run(argv, capsys)
    assert code == 0
    earlier = {
        row["id"]: row["judgments"] for row in json.loads(sag2_out.read_text())["per_question"]
    }
    report = json.loads(out.read_text())
    assert report["method"] == "bm25+judge-matched-budget"
    for row in report["per_question"]:
        assert row["budget"] == earlier[row["id"]]
        assert 0 < row["judgments"] <= row["budget"]


def test_eval_budget_matched_with_bm25_is_a_usage_error(
    tmp_path: Path, questions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A matched budget needs the judged method."""
    argv, _ = _eval(tmp_path, questions_file, "bm25", "x.json", "--budget-matched", "a.json")
    code, _, err = _run(argv, capsys)
    assert code == 2 and "--budget-matched" in err


def test_eval_cache_replays_judgments(
    tmp_path: Path, questions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cached re-run gives the same retrieval."""
    cache = str(tmp_path / "cache.db")
    first_argv, first = _eval(tmp_path, questions_file, "sag2", "1.json", "--cache", cache)
    second_argv, second = _eval(tmp_path, questions_file, "sag2", "2.json", "--cache", cache)
    assert main(first_argv) == 0 and main(second_argv) == 0
    rows = [json.loads(path.read_text())["per_question"] for path in (first, second)]
    assert [r["retrieved"] for r in rows[0]] == [r["retrieved"] for r in rows[1]]


# -- sag2 compare


def test_compare_prints_the_paired_interval(
    tmp_path: Path, questions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Comparing BM25 with SAG2 gives means, B - A and an interval containing it."""
    bm25_argv, bm25 = _eval(tmp_path, questions_file, "bm25", "bm25.json")
    sag2_argv, sag2 = _eval(tmp_path, questions_file, "sag2", "sag2.json")
    assert main(bm25_argv) == 0 and main(sag2_argv) == 0
    capsys.readouterr()
    code, out, _ = _run(["compare", str(bm25), str(sag2), "--json"], capsys)
    assert code == 0
    payload = json.loads(out)
    assert payload["n_questions"] == 2 and set(payload["metrics"]) == {"R@5", "R@10", "AE@10"}
    for values in payload["metrics"].values():
        low, high = values["ci95"]
        assert low <= values["difference"] <= high
        assert values["difference"] == pytest.approx(values["mean_b"] - values["mean_a"])
    code, out, _ = _run(["compare", str(bm25), str(sag2)], capsys)
    assert code == 0 and "R@10" in out and "95% CI" in out


def test_compare_shows_where_each_runs_gold_went(
    tmp_path: Path, questions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """BM25 has one lexical round; SAG2 one per scoring round; both in text and JSON."""
    bm25_argv, bm25 = _eval(tmp_path, questions_file, "bm25", "bm25.json")
    sag2_argv, sag2 = _eval(tmp_path, questions_file, "sag2", "sag2.json")
    assert main(bm25_argv) == 0 and main(sag2_argv) == 0
    capsys.readouterr()
    code, out, _ = _run(["compare", str(bm25), str(sag2), "--json"], capsys)
    pools = json.loads(out)["pool"]
    assert code == 0 and len(pools["a"]["rounds"]) == 1 and len(pools["b"]["rounds"]) >= 1
    last = pools["b"]["rounds"][-1]
    assert last["in_pool_not_top_10"] == pytest.approx(
        last["gold_in_pool"] - last["gold_in_top_10"]
    )
    code, out, _ = _run(["compare", str(bm25), str(sag2)], capsys)
    assert "in pool, not top 10" in out and "A round 0" in out and "B round 0" in out


def test_compare_without_per_question_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Summary-only files cannot be paired."""
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"recall_at": {"10": 50.0}}))
    code, _, err = _run(["compare", str(summary), str(summary)], capsys)
    assert code == 1 and "per_question" in err


# -- sag2 demo and usage


def test_demo_with_the_fake_judge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo indexes the bundled corpus, shows evidence chains and the recall averages."""
    db = tmp_path / "demo.db"
    argv = ["demo", "--judge", "fake", "--questions", "2", "--db", str(db), "--quiet"]
    code, out, _ = _run(argv, capsys)
    assert code == 0
    assert out.count("R@5 ") == 3 and "average over 2 questions" in out
    assert "gold" in out and "round" in out
    assert db.exists()


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["query"],
        ["index", "corpus.json"],
        ["eval", "q.json", "--db", "x.db", "--method", "dense"],
        ["query", "--db", "x.db", "q", "--top-k", "0"],
        ["query", "--db", "x.db", "q", "--hops", "3"],
    ],
)
def test_bad_usage_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Malformed command lines exit with status 2 and a usage message."""
    code, _, err = _run(argv, capsys)
    assert code == 2 and "usage" in err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    """--help is not an error."""
    code, out, _ = _run(["--help"], capsys)
    assert code == 0 and "demo" in out


# -- judge factory (what --judge, --model, --base-url and --cache build)


def test_factory_builds_the_fake_and_wraps_a_cache(tmp_path: Path) -> None:
    """`fake` is the overlap judge; a cache path wraps it without changing its identity."""
    assert isinstance(make_judge("fake"), OverlapJudge)
    cached = make_judge("fake", cache_path=str(tmp_path / "cache.db"))
    assert isinstance(cached, CachedJudge) and cached.identity == OverlapJudge().identity
    cached.close()


def test_factory_jev_uses_the_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a TypeSafe key set, `jev` talks to TypeSafe and never shows the key."""
    monkeypatch.setenv("TYPESAFE_API_KEY", "sk-test-secret")
    judge = make_judge("jev", model="jev-test")
    assert isinstance(judge, JEVJudge) and "jev-test" in judge.identity
    assert "sk-test-secret" not in repr(judge)
    assert default_judge_name() == "jev"


def test_factory_default_is_local_without_keys() -> None:
    """No JEV key means the offline judge."""
    assert default_judge_name() == "local"


def test_factory_openai_reads_url_and_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The OpenAI-compatible judge takes its server and model from the environment."""
    monkeypatch.setenv("SAG2_OPENAI_BASE_URL", "http://127.0.0.1:8000")
    monkeypatch.setenv("SAG2_OPENAI_MODEL", "qwen-test")
    judge = make_judge("openai")
    assert isinstance(judge, OpenAICompatJudge) and "qwen-test" in judge.identity
    assert not judge.sends_data_off_machine


def test_factory_openai_without_settings_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing server or model names the options and variables."""
    monkeypatch.delenv("SAG2_OPENAI_MODEL", raising=False)
    with pytest.raises(JudgeConfigurationError, match="SAG2_OPENAI_MODEL"):
        make_judge("openai", base_url="http://127.0.0.1:8000")


@pytest.mark.parametrize("name", ["local-learned", "local-similarity"])
def test_a_retired_judge_says_it_was_retired_and_what_to_use(
    name: str, capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    """The MiniLM judges are gone (issue 34): their names say so, in Python and the CLI."""
    with pytest.raises(JudgeConfigurationError, match=r"retired.*use --judge local"):
        make_judge(name)
    code, _, err = _run(["query", "--db", str(db), "question", "--judge", name], capsys)
    assert code == 2 and f"judge {name!r}: the MiniLM judges were retired" in err


def test_the_default_local_judge_needs_no_onnxruntime(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    """The pool judge is numpy only: without the ``local`` extra, ``--judge local`` answers."""
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    code, out, _ = _run(["query", "--db", str(db), "question", "--judge", "local"], capsys)
    assert code == 0 and out


def test_factory_rejects_unknown_names() -> None:
    """An unknown judge name lists the choices."""
    with pytest.raises(
        InvalidInputError,
        match="local, local-pool, jev, openai, fake",
    ):
        make_judge("oracle")
