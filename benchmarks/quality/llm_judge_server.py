"""The LLM judges end to end against a running OpenAI-compatible server, on the demo questions.

Run from the repository root, with a server already listening, for example:

    python benchmarks/quality/llm_judge_server.py --base-url http://127.0.0.1:8080 --model gemma \\
        --template gemma --questions 1 --budget 10 --concurrency 1

Each mode runs SAG2 over the bundled demo corpus with one judge configuration and prints a
row: whether the run finished (works), HTTP calls, input and output tokens, the cached share
(or "not reported"), candidates left unscored after unreadable answers, seconds and R@10.
Modes: ``chat`` (one chat call per candidate, P(yes) from log-probabilities),
``completions`` (prompts rendered with ``--template`` and sent to ``/v1/completions``),
``grouped`` (``--group`` candidates per chat call) and ``graded`` (a chat-model judge that
asks for no log-probabilities and reads a 0-4 grade, as the LlamaIndex and LangChain judges
do for such models).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import _here  # noqa: F401 - puts benchmarks/ on the import path
import httpx
from _common import git_revision, machine

from sag2_retrievers import SAG2Config, SQLiteIndex
from sag2_retrievers.corpus_io import add_in_batches, read_corpus
from sag2_retrievers.errors import SAG2Error
from sag2_retrievers.eval.datasets import load_questions
from sag2_retrievers.eval.runner import EvalOptions, evaluate
from sag2_retrievers.judges.base import Judge
from sag2_retrievers.judges.llm.chat import ChatAnswer, ChatMessages, ChatModelJudge
from sag2_retrievers.judges.llm.endpoints import chat_completions_url
from sag2_retrievers.judges.llm.openai_compat import OpenAICompatJudge
from sag2_retrievers.judges.llm.tokens import read_token_counts
from sag2_retrievers.judges.llm.transports import chat_template

MODES = ("chat", "completions", "grouped", "graded")
GRADE_TOKENS = 4


class PlainChatJudge(ChatModelJudge):
    """A chat-model judge over plain chat completions without log-probabilities: it reads a
    0-4 grade, the path the framework judges take with such a model."""

    def __init__(self, base_url: str, model: str, timeout: float, **options: Any) -> None:
        super().__init__(graded=True, **options)
        self._url = chat_completions_url(base_url)
        self._model = model
        self._client = httpx.AsyncClient(timeout=timeout, trust_env=False)

    @property
    def identity(self) -> str:
        """``plain-chat:<model>``."""
        return f"plain-chat:{self._model}"

    async def _ask(self, messages: ChatMessages) -> ChatAnswer:
        """One chat completion, its text and token counts."""
        payload = {
            "model": self._model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": GRADE_TOKENS,
            "max_completion_tokens": GRADE_TOKENS,
            "stop": ["\n"],
        }
        response = await self._client.post(self._url, json=payload)
        response.raise_for_status()
        reply = response.json()
        counts = read_token_counts(reply.get("usage") or {})
        text = str(reply["choices"][0]["message"].get("content") or "")
        return ChatAnswer(
            text, None, counts.input_tokens, counts.output_tokens, counts.cached_input_tokens
        )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()


@dataclass(frozen=True)
class Row:
    """One mode's outcome."""

    mode: str
    works: str
    calls: int
    input_tokens: int
    output_tokens: int
    cached: str
    unscored: int
    seconds: float
    recall_at_10: float | None


def make_judge(mode: str, args: argparse.Namespace) -> Judge:
    """The judge of one mode, talking to the server under test."""
    options: dict[str, Any] = {
        "max_concurrency": args.concurrency,
        "timeout": args.timeout,
    }
    if mode == "graded":
        return PlainChatJudge(args.base_url, args.model, args.timeout, max_concurrency=1)
    if mode == "completions":
        options |= {"transport": "completions", "chat_template": chat_template(args.template)}
    if mode == "grouped":
        options["group_size"] = args.group
    return OpenAICompatJudge(args.base_url, args.model, **options)


async def run_mode(mode: str, index: SQLiteIndex, args: argparse.Namespace) -> Row:
    """SAG2 on the demo questions with one mode's judge."""
    data = resources.files("sag2_retrievers") / "data"
    with resources.as_file(data / "demo_questions.json") as path:
        questions = load_questions(path)[: args.questions]
    judge = make_judge(mode, args)
    config = SAG2Config(hops=args.hops, deadline_seconds=args.deadline, one_shot_budget=args.budget)
    started = time.perf_counter()
    try:
        run = await evaluate(index, questions, judge, EvalOptions("sag2", config, None, 1))
    except SAG2Error as error:
        usage = judge.usage.snapshot()
        reason = str(error).splitlines()[0][:160]
        return Row(
            mode,
            f"no: {reason}",
            usage.http_calls,
            usage.input_tokens,
            usage.output_tokens,
            _cached(usage),
            usage.degraded,
            time.perf_counter() - started,
            None,
        )
    finally:
        await judge.aclose()
    usage = run.usage
    recall = run.summary()["recall_at"]["10"]
    return Row(
        mode,
        "yes",
        usage.http_calls,
        usage.input_tokens,
        usage.output_tokens,
        _cached(usage),
        usage.degraded,
        run.wall_seconds,
        recall,
    )


def _cached(usage: Any) -> str:
    """The cached share of input tokens, or "not reported"."""
    if not usage.cache_reports:
        return "not reported"
    return f"{usage.cached_input_tokens / max(1, usage.input_tokens):.0%}"


def build_demo_index(path: Path) -> None:
    """Index the bundled demo corpus at ``path``."""
    data = resources.files("sag2_retrievers") / "data"
    with resources.as_file(data / "demo_corpus.json") as corpus, SQLiteIndex(str(path)) as index:
        add_in_batches(index, read_corpus(corpus))


def print_table(rows: list[Row], args: argparse.Namespace) -> None:
    """The rows as a markdown table, with what was run."""
    shape = f"one round of {args.budget} candidates" if args.budget else f"hops {args.hops}"
    print(
        f"server {args.base_url}, model {args.model}, template {args.template}, "
        f"{args.questions} demo questions, {shape}, concurrency {args.concurrency}; "
        f"commit {git_revision()}; {machine()}"
    )
    print(
        "| mode | works | calls | input tokens | output tokens | cached | unscored "
        "| seconds | R@10 |"
    )
    print("|---|---|---:|---:|---:|---|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row.mode} | {row.works} | {row.calls} | {row.input_tokens:,} | "
            f"{row.output_tokens:,} | {row.cached} | {row.unscored} | {row.seconds:.1f} | "
            f"{_shown(row.recall_at_10)} |"
        )


def _shown(value: float | None) -> str:
    """A table cell for a number that may be missing."""
    return "-" if value is None else f"{value:.1f}"


def main() -> None:
    """Parse the options, run every mode asked for, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--template", default="chatml", help="completions mode's chat template")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--questions", type=int, default=2)
    parser.add_argument("--hops", type=int, default=2)
    parser.add_argument("--group", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--deadline", type=float, default=None)
    parser.add_argument(
        "--budget",
        type=int,
        default=None,
        help="judge only the first N BM25 candidates, in one round (a short run on a CPU)",
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="sag2-llm-server-") as scratch:
        db = Path(scratch) / "demo.db"
        build_demo_index(db)
        with SQLiteIndex(str(db)) as index:
            for mode in args.modes.split(","):
                rows.append(asyncio.run(run_mode(mode, index, args)))
                print(f"{mode}: {rows[-1]}", flush=True)
    print_table(rows, args)


if __name__ == "__main__":
    main()
