"""The eval command's cost controls: --estimate, --max-input-tokens, --judge-transport,
--judge-group, and the per-question token fields of its report."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from sag2_retrievers.cli import main

PARAGRAPHS = [
    ("Moonlight Waltz", "Moonlight Waltz is a piece by the composer Anna Berg.", True),
    ("Anna Berg", "Anna Berg was born in Norway and wrote waltzes.", True),
    ("Norway", "Norway is a country in northern Europe.", False),
    ("Waltz", "The waltz is a dance in triple time.", False),
]


class CountingHandler(BaseHTTPRequestHandler):
    """Answers chat and completions requests with P(yes) = 0.8 and records their paths."""

    paths: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.paths.append(self.path)
        top = {"Yes": -0.2231, "No": -1.6094}
        if self.path.endswith("/chat/completions"):
            alternatives = [{"token": t, "logprob": lp} for t, lp in top.items()]
            record = {"token": "Yes", "logprob": -0.2231, "top_logprobs": alternatives}
            choices = [
                {"index": 0, "message": {"content": "Yes"}, "logprobs": {"content": [record]}}
            ]
            prompts = 1
        else:
            prompts = len(body["prompt"])
            logprobs = {"tokens": ["Yes"], "top_logprobs": [top]}
            choices = [{"index": i, "text": "Yes", "logprobs": logprobs} for i in range(prompts)]
        usage = {
            "prompt_tokens": 100 * prompts,
            "completion_tokens": prompts,
            "prompt_tokens_details": {"cached_tokens": 60 * prompts},
        }
        data = json.dumps({"choices": choices, "usage": usage}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def server() -> Iterator[tuple[str, list[str]]]:
    """A judge server on 127.0.0.1 and the request paths it received."""
    paths: ClassVar[list[str]] = []
    handler = type("Handler", (CountingHandler,), {"paths": paths})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", paths
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture()
def questions_file(tmp_path: Path) -> Path:
    """One MuSiQue question whose paragraphs form the corpus."""
    record = {
        "id": "2hop__1_2",
        "question": "In which country was the composer of Moonlight Waltz born?",
        "paragraphs": [
            {"idx": n, "title": t, "paragraph_text": x, "is_supporting": s}
            for n, (t, x, s) in enumerate(PARAGRAPHS)
        ],
    }
    path = tmp_path / "questions.json"
    path.write_text(json.dumps([record]), encoding="utf-8")
    return path


class Run:
    """An eval of SAG2 with the openai judge at the test server, reporting to report.json."""

    def __init__(self, tmp_path: Path, questions: Path, server: tuple[str, list[str]]) -> None:
        self.report = tmp_path / "report.json"
        self.base_url, self.paths = server
        self.argv = [
            "eval", str(questions), "--db", str(tmp_path / "pooled.db"), "--method", "sag2",
            "--judge", "openai", "--base-url", self.base_url, "--model", "sim", "--quiet",
            "--out", str(self.report),
        ]  # fmt: skip

    def __call__(self, *extra: str) -> int:
        """Run with the extra options; the exit code."""
        return main([*self.argv, *extra])

    def read_report(self) -> dict[str, Any]:
        """The report the run wrote."""
        return dict(json.loads(self.report.read_text()))


@pytest.fixture()
def run(tmp_path: Path, questions_file: Path, server: tuple[str, list[str]]) -> Run:
    """An eval against the test server."""
    return Run(tmp_path, questions_file, server)


def test_estimate_prints_calls_and_tokens_without_calling_the_model(
    run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    """--estimate prints the expected spend, sends nothing and writes no report."""
    assert run("--estimate") == 0
    out = capsys.readouterr().out
    assert "estimate for 1 questions" in out and "judge calls" in out and "input tokens" in out
    assert run.paths == []
    assert not run.report.exists()


def test_max_input_tokens_refuses_a_run_over_budget(
    run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    """An estimate above the budget stops the run before any model call."""
    assert run("--max-input-tokens", "10") == 1
    assert "over --max-input-tokens 10" in capsys.readouterr().err
    assert run.paths == []


def test_a_run_within_budget_reports_tokens_per_question(run: Run) -> None:
    """Within budget the run starts, and the report carries input, cached and output tokens."""
    assert run("--max-input-tokens", "10000000") == 0
    report, calls = run.read_report(), len(run.paths)
    assert report["http_calls_per_question"] == calls > 0
    assert report["input_tokens_per_question"] == 100 * calls
    assert report["cached_input_tokens_per_question"] == 60 * calls
    assert report["output_tokens_per_question"] == calls


def test_judge_transport_completions_sends_batches(run: Run) -> None:
    """Every request goes to /v1/completions, far fewer than the judgments."""
    assert run("--judge-transport", "completions") == 0
    assert set(run.paths) == {"/v1/completions"}
    assert len(run.paths) < run.read_report()["judgments_per_question"]


def test_judge_group_is_refused_for_judges_other_than_openai(
    tmp_path: Path, questions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Grouping is an option of the openai judge only; elsewhere it is an error, not ignored."""
    argv = [
        "eval", str(questions_file), "--db", str(tmp_path / "pooled.db"), "--method", "sag2",
        "--judge", "fake", "--judge-group", "4", "--quiet",
    ]  # fmt: skip
    assert main(argv) == 1
    assert "apply to the openai judge" in capsys.readouterr().err


def test_estimate_needs_a_judged_method(
    tmp_path: Path, questions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """BM25 calls no judge, so an estimate of it is a usage error."""
    argv = [
        "eval", str(questions_file), "--db", str(tmp_path / "pooled.db"), "--method", "bm25",
        "--estimate", "--quiet",
    ]  # fmt: skip
    assert main(argv) == 2


def test_judge_server_options_reach_the_openai_judge(run: Run) -> None:
    """Template, concurrency, timeout and deadline are accepted; the report says what the
    server reported about cached tokens."""
    argv = ["--judge-transport", "completions", "--judge-template", "gemma"]
    argv += ["--judge-concurrency", "1", "--judge-timeout", "30", "--deadline", "60"]
    assert run(*argv) == 0
    report = run.read_report()
    assert report["cached_input_tokens_reported"] is True
    assert report["unscored_candidates"] == 0


def test_judge_template_needs_the_completions_transport(
    tmp_path: Path,
    questions_file: Path,
    server: tuple[str, list[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The chat transport leaves the template to the server, so naming one is an error."""
    argv = [
        "eval", str(questions_file), "--db", str(tmp_path / "pooled.db"), "--method", "sag2",
        "--judge", "openai", "--base-url", server[0], "--model", "m",
        "--judge-template", "gemma", "--quiet",
    ]  # fmt: skip
    assert main(argv) == 1
    assert "--judge-transport completions" in capsys.readouterr().err


def test_judge_server_options_are_refused_for_other_judges(
    tmp_path: Path, questions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--judge-timeout is an option of the openai judge only."""
    argv = [
        "eval", str(questions_file), "--db", str(tmp_path / "pooled.db"), "--method", "sag2",
        "--judge", "fake", "--judge-timeout", "5", "--quiet",
    ]  # fmt: skip
    assert main(argv) == 1
    assert "apply to the openai judge" in capsys.readouterr().err
